#!/usr/bin/env node
// `npm run bench:redis-faults`: issue 44's figure. Two gateway replicas on one redis-server (keys, rate limits,
// quotas and usage in it; an append-only file, so a restart keeps the keys), a stand-in upstream, and a few
// hundred requests a second from test/support/key-load.mjs (every answer checked: a 200 must be the upstream's
// answer to the byte, a 503 with -32045 is a key the replica could not check, anything else is bad) over 40 keys
// on both replicas, half of them with a rate limit and a quota; keyCache.ttlMs 5 s, so keys are looked up again
// through each fault. Three faults, one after the other, each in a phase of its own:
//
//   stall    DEBUG SLEEP 2 (Redis asleep, its connections open)
//   freeze   SIGSTOP for 10 s, then SIGCONT
//   refusal  Redis shut down (SIGTERM: its file written) for 10 s, then started again on its port and file
//
// Each phase runs the load for FAULT_AT (3) s, the fault, then RECOVER (10) s. Reported per phase: requests, ok,
// refused during the fault and after it (from FAULT_END + 2 s on: a replica that did not come back), bad answers,
// and the usage the replicas wrote to Redis (its calls, once both replicas have sent everything: a drain at the
// end, or settled counts) against the requests answered. Loopback only; everything it starts is stopped on exit.
// Not run by npm test or CI.
//
//   npm run bench:redis-faults            # RPS=300 FAULT_AT=3 RECOVER=10
import { execFile, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as netServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'bin/gateway.mjs');
const LOADER = join(ROOT, 'test/support/key-load.mjs');
const RPS = Number(process.env.RPS ?? 300);
const FAULT_AT = Number(process.env.FAULT_AT ?? 3) * 1000;
const RECOVER = Number(process.env.RECOVER ?? 10) * 1000;
const ANSWER = '{"jsonrpc":"2.0","id":1,"result":"0x10"}';
const CALL = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const KEYS = Array.from({ length: 40 }, (_, i) => ({ id: `k${i}`, key: `redis-faults-bench-key-${String(i).padStart(4, '0')}`, limited: i % 2 === 0 }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), 'redis-faults-'));
const children = new Set();

function track(p) {
  children.add(p);
  p.once('exit', () => children.delete(p));
  return p;
}
function stopAll() {
  // SIGCONT first: a Redis stopped by the freeze could not end otherwise.
  for (const p of children) if (p.exitCode === null) p.kill('SIGCONT') && p.kill('SIGTERM');
}
process.on('exit', () => {
  stopAll();
  rmSync(work, { recursive: true, force: true });
});
process.on('SIGINT', () => process.exit(130));
// A guard: the run takes about a minute and a half.
setTimeout(() => {
  console.error('redis-faults: over 5 minutes, stopping');
  process.exit(1);
}, 300_000).unref();

const freePort = () => new Promise((ok) => { const s = netServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); }); });

async function startRedis(port) {
  const bin = execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
  const p = track(spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--dir', work, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--enable-debug-command', 'local'], { stdio: ['ignore', 'pipe', 'inherit'] }));
  await new Promise((ok, fail) => {
    let out = '';
    p.stdout.on('data', (c) => ((out += c), out.includes('Ready to accept') && ok()));
    p.once('exit', (code) => fail(new Error(`redis-server exited (${code}): ${out}`)));
  });
  p.stdout.resume();
  return p;
}

/** A replica on the port `env.RPC_PORT` names; ready once its /readyz answers 200. */
function startGateway(bundle, env) {
  return track(spawn(process.execPath, ['--no-memory-reducer', bundle], { cwd: work, env: { PATH: process.env.PATH, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'ignore', 'inherit'] }));
}

async function ready(url) {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {}
    await sleep(50);
  }
  throw new Error(`${url} not ready`);
}

function load(targets, ms) {
  const p = track(spawn(process.execPath, [LOADER, JSON.stringify({ targets, body: CALL, answer: ANSWER, rps: RPS, concurrency: 8, durationMs: ms })], { stdio: ['ignore', 'pipe', 'inherit'] }));
  let out = '';
  p.stdout.on('data', (c) => (out += c));
  return new Promise((ok) => p.once('exit', () => ok(JSON.parse(out.trim()))));
}

async function usageCalls(r) {
  let n = 0;
  for (const h of await r.keys('gw:usage:k*')) for (const [f, v] of Object.entries(await r.hgetall(h))) if (f.endsWith(' calls')) n += Number(v);
  return n;
}

/** The usage total once it has not changed for 3 s (each replica flushes every second, and a probe brings it back within 2 s). */
async function settledUsage(r) {
  let last = -1;
  let same = 0;
  for (let i = 0; i < 60 && same < 6; i++) {
    const n = await usageCalls(r);
    same = n === last ? same + 1 : 0;
    last = n;
    await sleep(500);
  }
  return last;
}

const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': ANSWER.length }).end(ANSWER));
});
await new Promise((ok) => upstream.listen(0, '127.0.0.1', ok));
const ethUrl = `http://127.0.0.1:${upstream.address().port}`;

const redisPort = await freePort();
let redis = await startRedis(redisPort);
const url = `redis://127.0.0.1:${redisPort}`;
writeFileSync(
  join(work, 'gateway.yaml'),
  `version: 1
listeners:
  rpc: { host: 127.0.0.1, port: "\${RPC_PORT}" }
keys: "\${KEYS_URL}"
keyCache: { size: 1000, ttlMs: 5000 }
health: { intervalMs: 60000, timeoutMs: 1000 }
methodSets:
  evm: [eth_blockNumber]
chains:
  - { path: ethereum, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["\${ETH_URL}"] }
`,
);
await run(process.execPath, [CLI, 'build', 'gateway.yaml', '--out', 'gateway.mjs'], { cwd: work });
const sha = (s) => createHash('sha256').update(s).digest('hex');
writeFileSync(join(work, 'keys.yaml'), ['keys:', ...KEYS.map((k) => `  - { id: ${k.id}, sha256: "${sha(k.key)}"${k.limited ? ', rateLimit: 100000/s, quota: 100000000/day' : ''} }`)].join('\n') + '\n');
await run(process.execPath, [CLI, 'keys', 'import', join(work, 'keys.yaml'), '--store', url]);

const ports = [await freePort(), await freePort()];
const gateways = ports.map((p) => startGateway(join(work, 'gateway.mjs'), { RPC_PORT: String(p), KEYS_URL: url, REDIS_URL: url, ETH_URL: ethUrl }));
await Promise.all(ports.map((p) => ready(`http://127.0.0.1:${p}/readyz`)));
const targets = ports.flatMap((p) => KEYS.map((k) => ({ url: `http://127.0.0.1:${p}/ethereum`, key: k.key })));
const reader = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
reader.on('error', () => undefined);
await reader.connect();

const FAULTS = {
  async stall() {
    const c = new Redis(url);
    await c.call('DEBUG', 'SLEEP', '2');
    c.disconnect();
  },
  async freeze() {
    redis.kill('SIGSTOP');
    await sleep(10_000);
    redis.kill('SIGCONT');
  },
  async refusal() {
    reader.disconnect();
    redis.kill('SIGTERM');
    await new Promise((r) => redis.once('exit', r));
    await sleep(10_000);
    redis = await startRedis(redisPort);
    await reader.connect();
  },
};

const rows = [];
const sum = (xs) => xs.reduce((a, b) => a + b, 0);
for (const [name, fault] of Object.entries(FAULTS)) {
  const before = await usageCalls(reader);
  const t0 = Date.now();
  const loading = load(targets, FAULT_AT + (name === 'stall' ? 2000 : 10_000) + RECOVER);
  await sleep(FAULT_AT);
  const start = Date.now();
  await fault();
  const end = Date.now();
  const loaded = await loading;
  const usage = (await settledUsage(reader)) - before;
  const ok = sum(loaded.ok);
  const late = loaded.refusedAt.filter((t) => t > end + 2000).length;
  rows.push({ name, seconds: ((Date.now() - t0) / 1000).toFixed(0), fault: ((end - start) / 1000).toFixed(1), requests: loaded.requests, ok, refusedDuring: sum(loaded.refused) - late, refusedAfter: late, bad: loaded.badCount, usage, miscount: usage - ok });
  console.error(`${name}: ${JSON.stringify(rows.at(-1))}`);
}
// The drain: each replica sends what is left.
for (const g of gateways) g.kill('SIGTERM');
await Promise.all(gateways.map((g) => new Promise((r) => (g.exitCode !== null ? r() : g.once('exit', r)))));
reader.disconnect();
upstream.close();

console.log(`\nTwo replicas, ${RPS} requests/s over ${KEYS.length} keys on both (half with a rate limit and a quota), keyCache.ttlMs 5 s\n`);
console.log('| fault | fault lasted | requests | answered | refused during (503) | refused from 2 s after | bad | usage calls written | usage - answered |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.name} | ${r.fault} s | ${r.requests} | ${r.ok} | ${r.refusedDuring} | ${r.refusedAfter} | ${r.bad} | ${r.usage} | ${r.miscount} |`);
process.exit(0);
