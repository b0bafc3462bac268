#!/usr/bin/env node
// `npm run bench:deploy` (issue 47): requests lost per deploy, and how long a
// deploy takes, for today's best restart (SIGTERM, then start the new file)
// against a roll (the new file renamed over the old, then SIGHUP), in the
// same run. GATEWAY_WORKERS=2 on one fixed port, 8 keep-alive clients at
// about 250 requests a second in all, each answer checked; ROUNDS deploys of
// each kind, alternating two builds (the second adds a chain). A client whose
// request failed goes on after its pause, as a client would. Then the same
// with a keys file of SCALE keys (default 1,000,000; 0 skips it): the start of
// both workers, and one roll (each new worker loads the keys before it takes
// traffic). Loopback only.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WORK = join(ROOT, '.tmp', 'bench-deploy');
const CLI = join(ROOT, 'bin/gateway.mjs');
const KEY = 'deploy-bench-key-0123456789abcdef';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SCALE = Number(process.env.SCALE ?? 1_000_000);
const CLIENTS = 8;
/** Each client's pause between two requests: 8 clients at 32 ms, about 250 requests a second. */
const PAUSE_MS = 32;
const REQUEST_TIMEOUT_MS = 5_000;
mkdirSync(WORK, { recursive: true });
writeFileSync(join(WORK, 'keys.yaml'), `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(KEY).digest('hex')}"\n`);

const manifest = (extra) =>
  `version: 1\nlisteners:\n  rpc: { host: 127.0.0.1, port: "\${RPC_PORT}" }\nkeys: ./keys.yaml\nmethodSets:\n  evm: [eth_chainId, eth_blockNumber]\nchains:\n` +
  `  - { path: ethereum, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["\${UPSTREAM_URL}"] }\n${extra}`;
writeFileSync(join(WORK, 'a.yaml'), manifest(''));
writeFileSync(join(WORK, 'b.yaml'), manifest('  - { path: second, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["${UPSTREAM_URL}"] }\n'));
for (const b of ['a', 'b']) execFileSync(process.execPath, [CLI, 'build', join(WORK, `${b}.yaml`), '--out', join(WORK, `${b}.mjs`)], { cwd: ROOT, stdio: 'ignore' });

const up = createServer((req, res) => {
  req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x1"}'));
});
await new Promise((ok) => up.listen(0, '127.0.0.1', ok));
const port = await new Promise((ok) => {
  const s = createNetServer().listen(0, '127.0.0.1', () => {
    const { port: free } = s.address();
    s.close(() => ok(free));
  });
});
const ENV = { PATH: process.env.PATH, GATEWAY_WORKERS: '2', RPC_PORT: String(port), UPSTREAM_URL: `http://127.0.0.1:${up.address().port}` };

/** Starts the served file; resolves once both workers have started. */
function start(file, env = {}) {
  const p = spawn(process.execPath, ['--no-memory-reducer', file], { cwd: WORK, env: { ...ENV, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const waiters = [];
  let buf = '';
  p.stdout.setEncoding('utf8').on('data', (c) => {
    buf += c;
    let nl;
    while ((nl = buf.indexOf('\n')) !== -1) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      for (const w of waiters.splice(0)) if (!w(line)) waiters.push(w);
    }
  });
  const next = (pred) => new Promise((ok) => waiters.push((l) => pred(l) && (ok(l), true)));
  let started = 0;
  const ready = next((l) => l.includes('"event":"started"') && ++started === 2);
  return { p, ready, next, exited: new Promise((ok) => p.once('exit', ok)) };
}

/** The clients: every answer checked; failures by kind. */
function load() {
  const failures = {};
  let ok = 0;
  let stop = false;
  const fail = (kind) => (failures[kind] = (failures[kind] ?? 0) + 1);
  const body = '{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}';
  const one = async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    while (!stop) {
      await new Promise((settle) => {
        let settled = false;
        const done = () => settled || ((settled = true), settle());
        const req = request({ host: '127.0.0.1', port, path: '/ethereum', method: 'POST', agent, timeout: REQUEST_TIMEOUT_MS, headers: { 'content-type': 'application/json', 'x-api-key': KEY } }, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c) => (text += c));
          res.on('end', () => {
            if (settled) return;
            if (res.statusCode === 200 && text.includes('"result":"0x1"')) ok++;
            else fail(res.statusCode >= 500 ? '5xx' : `status ${res.statusCode}`);
            done();
          });
          res.on('error', (e) => settled || (fail(e.code ?? 'error'), done()));
        });
        req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })));
        req.on('error', (e) => settled || (fail(e.code ?? 'error'), done()));
        req.end(body);
      });
      await new Promise((r) => setTimeout(r, PAUSE_MS));
    }
    agent.destroy();
  };
  const all = Promise.all(Array.from({ length: CLIENTS }, one));
  return {
    failures,
    get ok() {
      return ok;
    },
    lost: () => Object.values(failures).reduce((a, b) => a + b, 0),
    async stop() {
      stop = true;
      await all;
    },
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rows = [];

/** Today's best deploy: SIGTERM, wait for the exit, start the new file; timed until both new workers started. */
async function restarts() {
  const served = join(WORK, 'served-restart.mjs');
  copyFileSync(join(WORK, 'a.mjs'), served);
  let gw = start(served);
  await gw.ready;
  const l = load();
  await sleep(2000);
  for (let i = 0; i < ROUNDS; i++) {
    const before = l.lost();
    const t0 = performance.now();
    gw.p.kill('SIGTERM');
    await gw.exited;
    copyFileSync(join(WORK, i % 2 === 0 ? 'b.mjs' : 'a.mjs'), served);
    gw = start(served);
    await gw.ready;
    const ms = performance.now() - t0;
    await sleep(2000);
    rows.push({ kind: 'restart', round: i + 1, ms, lost: l.lost() - before });
  }
  await l.stop();
  gw.p.kill('SIGTERM');
  await gw.exited;
  return { ok: l.ok, failures: l.failures };
}

/** The roll: the new file renamed over the old, SIGHUP; timed until the primary logs `reloaded`. */
async function rolls(rounds = ROUNDS, env = {}, kind = 'roll') {
  const served = join(WORK, 'served-roll.mjs');
  copyFileSync(join(WORK, 'a.mjs'), served);
  const t0 = performance.now();
  const gw = start(served, env);
  await gw.ready;
  const started = performance.now() - t0;
  const l = load();
  await sleep(2000);
  for (let i = 0; i < rounds; i++) {
    const before = l.lost();
    copyFileSync(join(WORK, i % 2 === 0 ? 'b.mjs' : 'a.mjs'), `${served}.new`);
    const t0 = performance.now();
    renameSync(`${served}.new`, served);
    const done = gw.next((line) => line.includes('"event":"reloaded"') || line.includes('"event":"reload_refused"'));
    gw.p.kill('SIGHUP');
    const line = JSON.parse(await done);
    if (line.event !== 'reloaded') throw new Error(`the roll was refused: ${line.reason}`);
    const ms = performance.now() - t0;
    await sleep(2000);
    rows.push({ kind, round: i + 1, ms, lost: l.lost() - before });
  }
  await l.stop();
  gw.p.kill('SIGTERM');
  await gw.exited;
  return { ok: l.ok, failures: l.failures, started };
}

const restart = await restarts();
const roll = await rolls();
let scale = null;
if (SCALE > 0) {
  const file = join(WORK, 'keys-scale.yaml');
  const lines = ['keys:', `  - id: bench\n    sha256: "${createHash('sha256').update(KEY).digest('hex')}"`];
  for (let i = 1; i < SCALE; i++) lines.push(`  - id: k${i}\n    sha256: "${createHash('sha256').update(`scale-${i}`).digest('hex')}"`);
  writeFileSync(file, lines.join('\n') + '\n');
  scale = await rolls(1, { GATEWAY_KEYS_FILE: file }, `roll, ${SCALE.toLocaleString('en')} keys`);
}
up.close();
console.log('| deploy | round | duration | requests lost |');
console.log('|---|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.kind} | ${r.round} | ${r.ms.toFixed(0)} ms | ${r.lost} |`);
console.log(`restart: ${restart.ok} answered, lost by kind ${JSON.stringify(restart.failures)}`);
console.log(`roll: ${roll.ok} answered, lost by kind ${JSON.stringify(roll.failures)}`);
if (scale !== null) console.log(`${SCALE.toLocaleString('en')} keys: both workers started ${scale.started.toFixed(0)} ms after the start; ${scale.ok} answered, lost by kind ${JSON.stringify(scale.failures)}`);
