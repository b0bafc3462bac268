// What /proc says of a process, for the bench scripts (Linux only, like the harness).
import { readFileSync } from 'node:fs';

/** Resident memory of a process, in MiB. Throws if the process is gone. */
export function rssMiB(pid) {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) / 1024;
}

/** CPU time a process has used so far (user + system), in ms. Throws if the process is gone. */
export function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1].split(' ');
  // utime and stime are fields 14 and 15 of stat, in clock ticks (USER_HZ, 100 a second on Linux)
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}
