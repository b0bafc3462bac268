// What bench/ws.mjs (EVM) and bench/ws-blockbook.mjs (Blockbook) share: their
// knobs, the processes they start (each in its own group, killed with the bench
// on exit), and the subscribers (bench/ws-clients.mjs processes) whose every
// notification is checked, with the quantiles of the report.
import { fork, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
/** How long one block may take to reach every subscriber before the run gives up. */
export const BLOCK_TIMEOUT_MS = 20_000;
const t0run = Date.now();
export const elapsedS = () => (Date.now() - t0run) / 1000;
export const log = (msg) => console.error(`[${elapsedS().toFixed(1).padStart(6)} s] ${msg}`);
/** µs, CLOCK_MONOTONIC: process.hrtime on Linux, one clock for every process on the host (the clients' and the upstreams'). */
export const now = () => Number(process.hrtime.bigint() / 1000n);
function die(msg) {
  console.error(`bench:ws: ${msg}`);
  process.exit(1);
}
export const int = (name, dflt) => {
  const v = process.env[name] ?? String(dflt);
  if (!/^[0-9]+$/.test(v) || Number(v) < 1) die(`${name} must be a positive integer, not "${v}"`);
  return Number(v);
};
let WORK = null;
/** The bench's working directory .tmp/<name> (logs, the built gateway, keys), made if need be: start() runs its processes there. */
export function workDir(name) {
  WORK = join(ROOT, '.tmp', name);
  mkdirSync(WORK, { recursive: true });
  return WORK;
}

// ---- processes: each in its own group, killed with it on exit -----------------------------------
const procs = new Set();
export function start(name, argv, { env = process.env, ipc = false } = {}) {
  const out = openSync(join(WORK, `${name}.log`), 'w');
  const full = SETPRIV ? [SETPRIV, '--pdeathsig', 'KILL', '--', ...argv] : argv;
  const child = spawn(full[0], full.slice(1), { cwd: WORK, env, detached: true, stdio: ['ignore', out, out, ...(ipc ? ['ipc'] : [])] });
  closeSync(out);
  const p = { name, child, exited: new Promise((r) => child.once('exit', r)), alive: true };
  p.exited.then(() => ((p.alive = false), procs.delete(p)));
  procs.add(p);
  return p;
}
export async function stop(p) {
  if (!p.alive) return;
  try {
    process.kill(-p.child.pid, 'SIGTERM');
  } catch {
    return;
  }
  if (!(await Promise.race([p.exited.then(() => true), sleep(5000).then(() => false)]))) {
    try {
      process.kill(-p.child.pid, 'SIGKILL');
    } catch {}
    await p.exited;
  }
}
/** The pid whose RSS counts: with setpriv in front, setpriv execs the program (same pid). */
export const pidOf = (p) => p.child.pid;
process.on('exit', () => {
  for (const p of procs) {
    try {
      process.kill(-p.child.pid, 'SIGKILL');
    } catch {}
  }
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => process.exit(130));

export async function until(what, fn, ms = 20_000) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if (await fn()) return;
    } catch {}
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}


// ---- clients ------------------------------------------------------------------------------------
/** Opens `total` subscribed sockets over `nprocs` client processes, the URLs taken in turn; `protocol` as ws-clients.mjs takes it. */
export async function openClients(total, nprocs, urls, protocol = 'evm') {
  const group = { procs: [], blocks: new Map(), waiters: new Set() };
  const per = Array.from({ length: nprocs }, (_, i) => Math.floor(total / nprocs) + (i < total % nprocs ? 1 : 0));
  await Promise.all(
    per.map(async (count, i) => {
      const child = fork(join(ROOT, 'bench/ws-clients.mjs'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      const c = { child, count, exited: new Promise((r) => child.once('exit', r)) };
      group.procs.push(c);
      child.on('message', (m) => {
        if (m.block === undefined) return;
        const b = group.blocks.get(m.block) ?? { procs: 0, first: Infinity, last: 0, hashes: new Set() };
        b.procs++;
        b.first = Math.min(b.first, m.first);
        b.last = Math.max(b.last, m.last);
        b.hashes.add(m.hash);
        group.blocks.set(m.block, b);
        for (const w of group.waiters) w();
      });
      const opened = await ask(child, { open: { url: urls[i % urls.length], count, protocol } }, 'opened');
      if (opened.failed > 0) throw new Error(`${opened.failed} of ${count} sockets failed to open or subscribe (${opened.error})`);
    }),
  );
  return group;
}
/** Sends msg to a child process (a client's, or an upstream's) and resolves with its first message holding `key`. */
export function ask(child, msg, key) {
  return new Promise((resolve, reject) => {
    const exited = (code) => reject(new Error(`a bench process exited (${code})`));
    const on = (m) => {
      if (m[key] === undefined) return;
      child.off('message', on);
      child.off('exit', exited);
      resolve(m);
    };
    child.on('message', on);
    child.once('exit', exited);
    child.send(msg);
  });
}
/** Waits until every client process had block n on all its sockets; its record. */
export function allHave(group, n) {
  return new Promise((resolve, reject) => {
    const check = () => {
      const b = group.blocks.get(n);
      if (b && b.procs === group.procs.length) {
        group.waiters.delete(check);
        clearTimeout(t);
        resolve(b);
      }
    };
    const t = setTimeout(() => (group.waiters.delete(check), reject(new Error(`block ${n} did not reach every subscriber in ${BLOCK_TIMEOUT_MS} ms`))), BLOCK_TIMEOUT_MS);
    group.waiters.add(check);
    check();
  });
}
export async function closeClients(group) {
  let errors = 0;
  const samples = [];
  for (const c of group.procs) {
    const r = await ask(c.child, { close: true }, 'closed');
    errors += r.errors;
    samples.push(...r.samples);
    await c.exited;
  }
  return { errors, samples };
}
/** Mines one block; its number, hash and when anvil_mine answered (µs). */

// ---- the report -----------------------------------------------------------------------------------
/** The p-th percentile (nearest rank) of the numbers in xs, nulls left out. */
export const q = (xs, p) => {
  const s = xs.filter((x) => x !== null).sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
export const ms = (x) => (x === undefined || x === null ? 'n/a' : `${x.toFixed(1)} ms`);

/** The table `npm run bench:ws` ends with, one row per figure: [part, what, figure, target]. */
export const summaryTable = (rows) => ['| part | what | figure | target |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
