// What /proc says of a process, for the bench scripts (Linux only, like the harness).
import { readFileSync } from 'node:fs';

/** Resident memory of a process, in MiB. Throws if the process is gone. */
export function rssMiB(pid) {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) / 1024;
}
