#!/usr/bin/env node
// `npm run bench:extra`: the figures issue 5 asks for beyond req/s.
//   build time (shipped manifest, generated 200-chain manifest), start-up time
//   to the first served request, RSS idle and with 1,000 open keep-alive
//   connections, dispatch cost with 1 vs 200 chains, and memory while a 5 MB
//   request body and a 20 MB answer go through; keys files of 0 to 1,000,000
//   keys (start-up, RSS, a reload of the million under load), and the key store
//   in Redis against the file (wrk, 1,000 and 100,000 keys). Loopback only;
//   bounded loops.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request, Agent } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rssMiB } from './proc.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WORK = join(ROOT, '.tmp', 'bench-extra');
mkdirSync(WORK, { recursive: true });
const KEY = 'extra-bench-key-0123456789abcdef';
writeFileSync(join(WORK, 'keys.yaml'), `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(KEY).digest('hex')}"\n`);
const CLI = join(ROOT, 'bin/gateway.mjs');
const out = [];
const note = (s) => {
  out.push(s);
  console.log(s);
};
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const cpuTicks = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]);
};

function build(manifest, outFile) {
  const t0 = process.hrtime.bigint();
  execFileSync(process.execPath, [CLI, 'build', manifest, '--out', outFile], { cwd: ROOT, stdio: 'ignore' });
  return ms(t0);
}

function upstream(handler) {
  const s = createServer(handler);
  return new Promise((ok) => s.listen(0, '127.0.0.1', () => ok({ s, url: `http://127.0.0.1:${s.address().port}` })));
}

function send(url, body, agent) {
  return new Promise((ok, fail) => {
    const req = request(url, { method: 'POST', agent, headers: { 'x-api-key': KEY, 'content-type': 'application/json' } }, (res) => {
      let n = 0;
      res.on('data', (c) => (n += c.length)).on('end', () => ok({ status: res.statusCode, bytes: n }));
    });
    req.on('error', fail).end(body);
  });
}

function start(bundle, env) {
  const t0 = process.hrtime.bigint();
  // The documented command (docs/operations.md, "Running the file").
  const p = spawn(process.execPath, ['--no-memory-reducer', bundle], { cwd: WORK, env: { PATH: process.env.PATH, GATEWAY_KEYS_FILE: join(WORK, 'keys.yaml'), ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((ok) => {
    let buf = '';
    p.stdout.on('data', (c) => {
      buf += c;
      const m = /"event":"started".*?"listener":"rpc","host":"[^"]+","port":(\d+)/.exec(buf);
      if (m) {
        p.stdout.removeAllListeners('data');
        p.stdout.resume();
        ok({ p, port: Number(m[1]), t0 });
      }
    });
  });
}

const evm = (n) =>
  `version: 1\nlisteners:\n  rpc: { host: 127.0.0.1, port: "0" }\nkeys: ./keys.yaml\nlimits: { maxBodyBytes: 8388608 }\nmethodSets:\n  evm: [eth_blockNumber, eth_sendRawTransaction, eth_getBlockByNumber]\nchains:\n` +
  Array.from({ length: n }, (_, i) => `  - { path: chain-${String(i).padStart(3, '0')}, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["\${UPSTREAM_URL}"] }`).join('\n') +
  '\n';

// --- build time -----------------------------------------------------------
writeFileSync(join(WORK, 'one.yaml'), evm(1));
writeFileSync(join(WORK, 'many.yaml'), evm(200));
const tShipped = [build('gateway.yaml', join(WORK, 'shipped.mjs')), build('gateway.yaml', join(WORK, 'shipped.mjs'))];
const tMany = [build(join(WORK, 'many.yaml'), join(WORK, 'many.mjs')), build(join(WORK, 'many.yaml'), join(WORK, 'many.mjs'))];
build(join(WORK, 'one.yaml'), join(WORK, 'one.mjs'));
note(`build, shipped gateway.yaml (12 chains): ${tShipped.map((t) => t.toFixed(0)).join(' ms, ')} ms`);
note(`build, generated manifest of 200 chains: ${tMany.map((t) => t.toFixed(0)).join(' ms, ')} ms`);

// --- a tiny upstream: small answers, a 20 MB answer, reads 5 MB bodies ----
const SMALL = '{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}';
const BIG = Buffer.alloc(20 * 1024 * 1024, 0x20);
const up = await upstream((req, res) => {
  let n = 0;
  let head = '';
  req.on('data', (c) => {
    n += c.length;
    if (head.length < 200) head += c.toString('latin1', 0, 200);
  });
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    if (head.includes('eth_getBlockByNumber')) {
      res.setHeader('content-length', BIG.length + SMALL.length);
      res.write(BIG);
      return res.end(SMALL);
    }
    res.end(n > 1_000_000 ? `{"jsonrpc":"2.0","id":1,"result":"0x${n.toString(16)}"}` : SMALL);
  });
});

// --- start-up, RSS ----------------------------------------------------------
{
  const samples = [];
  for (let i = 0; i < 3; i++) {
    const g = await start(join(WORK, 'one.mjs'), { UPSTREAM_URL: up.url });
    const r = await send(`http://127.0.0.1:${g.port}/chain-000`, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}');
    if (r.status !== 200) throw new Error(`first request: ${r.status}`);
    samples.push(ms(g.t0));
    g.p.kill('SIGTERM');
    await new Promise((r2) => g.p.once('exit', r2));
  }
  note(`start-up to the first served request: ${samples.map((t) => t.toFixed(0)).join(' ms, ')} ms`);
}
{
  const g = await start(join(WORK, 'one.mjs'), { UPSTREAM_URL: up.url });
  await send(`http://127.0.0.1:${g.port}/chain-000`, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}');
  const idle = rssMiB(g.p.pid);
  const agent = new Agent({ keepAlive: true, maxSockets: 1000, maxFreeSockets: 1000 });
  await Promise.all(Array.from({ length: 1000 }, () => send(`http://127.0.0.1:${g.port}/chain-000`, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}', agent)));
  const sockets = Object.values(agent.freeSockets).reduce((a, l) => a + l.length, 0);
  const withConns = rssMiB(g.p.pid);
  note(`RSS idle: ${idle.toFixed(1)} MiB; with ${sockets} open keep-alive client connections: ${withConns.toFixed(1)} MiB`);
  agent.destroy();

  // --- large bodies: 5 MB eth_sendRawTransaction, 20 MB answers -------------
  const before = rssMiB(g.p.pid);
  let peak = before;
  const watch = setInterval(() => (peak = Math.max(peak, rssMiB(g.p.pid))), 20);
  const raw = `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x${'ab'.repeat(2.5 * 1024 * 1024)}"]}`;
  for (let i = 0; i < 5; i++) {
    const r = await send(`http://127.0.0.1:${g.port}/chain-000`, raw);
    if (r.status !== 200) throw new Error(`5 MB body: ${r.status}`);
  }
  const afterBodies = peak;
  for (let i = 0; i < 5; i++) {
    const r = await send(`http://127.0.0.1:${g.port}/chain-000`, '{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",true]}');
    if (r.bytes < 20 * 1024 * 1024) throw new Error(`20 MB answer: got ${r.bytes} bytes`);
  }
  clearInterval(watch);
  note(`5 MB request bodies x5: RSS ${before.toFixed(1)} -> peak ${afterBodies.toFixed(1)} MiB (the body is held once to check it)`);
  note(`20 MB answers x5, streamed: RSS peak ${peak.toFixed(1)} MiB (no answer is held whole)`);
  g.p.kill('SIGTERM');
}

// --- dispatch cost: 1 chain vs 200 chains, CPU time per request -----------
async function cpuPerRequest(bundle, path) {
  const g = await start(bundle, { UPSTREAM_URL: up.url });
  const agent = new Agent({ keepAlive: true, maxSockets: 20 });
  const body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}';
  const url = `http://127.0.0.1:${g.port}${path}`;
  const run = async (n) => {
    let left = n;
    await Promise.all(Array.from({ length: 20 }, async () => {
      while (left-- > 0) await send(url, body, agent);
    }));
  };
  await run(5000);
  const t0 = cpuTicks(g.p.pid);
  await run(20000);
  const us = ((cpuTicks(g.p.pid) - t0) * 10_000) / 20000;
  g.p.kill('SIGTERM');
  agent.destroy();
  return us;
}
const one = [await cpuPerRequest(join(WORK, 'one.mjs'), '/chain-000'), await cpuPerRequest(join(WORK, 'one.mjs'), '/chain-000')];
const many = [await cpuPerRequest(join(WORK, 'many.mjs'), '/chain-199'), await cpuPerRequest(join(WORK, 'many.mjs'), '/chain-199')];
note(`gateway CPU per request, 1-chain build: ${one.map((x) => x.toFixed(1)).join(' µs, ')} µs; 200-chain build (last chain): ${many.map((x) => x.toFixed(1)).join(' µs, ')} µs`);

// --- keys files at scale (issue 22): start-up, RSS, a reload under load ------
const scaleKey = (i) => `scale-bench-key-${String(i).padStart(9, '0')}`;
function keysFile(file, numbers) {
  const lines = [numbers.length === 0 ? 'keys: []' : 'keys:'];
  for (const i of numbers) lines.push(`  - id: k${i}`, `    sha256: "${createHash('sha256').update(scaleKey(i)).digest('hex')}"`);
  writeFileSync(file, lines.join('\n') + '\n');
}
const scaleFile = join(WORK, 'keys-scale.yaml');
for (const n of [0, 10_000, 100_000, 1_000_000]) {
  keysFile(scaleFile, Array.from({ length: n }, (_, i) => i));
  const t0 = process.hrtime.bigint();
  const p = spawn(process.execPath, ['--no-memory-reducer', join(WORK, 'one.mjs')], { cwd: WORK, env: { PATH: process.env.PATH, GATEWAY_KEYS_FILE: scaleFile, UPSTREAM_URL: up.url, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] });
  // Ports are 0 in this manifest: find it from /proc once it listens.
  let port = 0;
  let exited = false;
  p.once('exit', () => (exited = true));
  while (port === 0) {
    if (exited) throw new Error(`the gateway exited before it listened (keys file of ${n} keys)`);
    try {
      const hex = readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1).map((l) => l.trim().split(/\s+/)).filter((f) => f[3] === '0A');
      const inodes = new Set(execFileSync('ls', ['-l', `/proc/${p.pid}/fd`], { encoding: 'utf8' }).split('\n').map((l) => /socket:\[(\d+)\]/.exec(l)?.[1]).filter(Boolean));
      const mine = hex.find((f) => inodes.has(f[9]));
      if (mine) port = Number.parseInt(mine[1].split(':')[1], 16);
    } catch {}
    if (port === 0) await new Promise((r) => setTimeout(r, 10));
  }
  const key = n === 0 ? KEY : scaleKey(0);
  let r;
  for (;;) {
    r = await new Promise((ok) => {
      const req = request(`http://127.0.0.1:${port}/chain-000`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' } }, (res) => (res.resume(), res.on('end', () => ok(res.statusCode))));
      req.on('error', () => ok(0)).end('{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}');
    });
    if (r !== 0) break;
    await new Promise((r2) => setTimeout(r2, 10));
  }
  const first = ms(t0);
  await new Promise((r2) => setTimeout(r2, 1000));
  const rss = rssMiB(p.pid);
  let reload = '';
  if (n === 1_000_000) {
    // A reload of the million under load: 20 keep-alive clients, each on a key in both versions. The new file
    // (one key out, one in) is written first: making it during the load would stall this process's clients.
    keysFile(`${scaleFile}.tmp`, [...Array.from({ length: n - 1 }, (_, i) => i), n]);
    const agent = new Agent({ keepAlive: true, maxSockets: 20 });
    const lat = [];
    let failures = 0;
    let stop = false;
    const one = (k) =>
      new Promise((ok) => {
        const t = performance.now();
        const req = request(`http://127.0.0.1:${port}/chain-000`, { method: 'POST', agent, headers: { 'x-api-key': k, 'content-type': 'application/json' } }, (res) => {
          res.resume();
          res.on('end', () => (lat.push(performance.now() - t), res.statusCode === 200 || failures++, ok()));
        });
        req.on('error', () => (failures++, ok())).end('{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}');
      });
    const loops = Promise.all(Array.from({ length: 20 }, async (_, w) => {
      for (let i = 0; !stop; i++) await one(scaleKey((w * 49_999 + i * 7) % (n - 1)));
    }));
    await new Promise((r2) => setTimeout(r2, 1000));
    const from = lat.length;
    const t1 = process.hrtime.bigint();
    execFileSync('mv', [`${scaleFile}.tmp`, scaleFile]);
    // Reloaded when the new key works.
    while ((await new Promise((ok) => {
      const req = request(`http://127.0.0.1:${port}/chain-000`, { method: 'POST', agent, headers: { 'x-api-key': scaleKey(n), 'content-type': 'application/json' } }, (res) => (res.resume(), res.on('end', () => ok(res.statusCode))));
      req.on('error', () => ok(0)).end('{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}');
    })) !== 200) await new Promise((r2) => setTimeout(r2, 5));
    const took = ms(t1);
    stop = true;
    await loops;
    agent.destroy();
    const during = lat.slice(from).sort((a, b) => a - b);
    reload = `; reload of the file under load (20 clients): ${took.toFixed(0)} ms to the new key, ${during.length} requests meanwhile, p99 ${during[Math.floor(during.length * 0.99)].toFixed(1)} ms, max ${during[during.length - 1].toFixed(1)} ms, ${failures} failed`;
  }
  p.kill('SIGTERM');
  await new Promise((r2) => p.once('exit', r2));
  note(`keys file of ${n.toLocaleString('en')} keys: first answer ${first.toFixed(0)} ms after start, RSS ${rss.toFixed(0)} MiB${reload}`);
}

// --- the key store: the file against Redis (bench/keystore.mjs) ------------
note(await (await import('./keystore.mjs')).keystoreFigures(join(WORK, 'one.mjs'), up.url, WORK));

up.s.closeAllConnections();
up.s.close();
writeFileSync(join(WORK, 'extra.txt'), out.join('\n') + '\n');
