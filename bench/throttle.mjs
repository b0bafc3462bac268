#!/usr/bin/env node
// `npm run bench:throttle`: issue 39's bench. Three upstreams, of which one answers 20 ms slower and one
// throttles 10% of calls, behind the gateway (bench/gateway.throttle.yaml: the three as primaries of one EVM
// chain, a pool) and behind nginx round-robin (as test/support/nginx.ts starts it: one `upstream` block,
// keep-alive), measured side by side in one run, interleaved. Not run by npm test or CI.
//
// The upstreams (bench/throttle-upstream.mjs, one process, each target its own three ports) answer by method
// from memory: `fast`; `slow`, every answer SLOW_MS (20) later; `throttle`, which refuses every
// THROTTLE_EVERY-th (10th) client call as Infura does, alternately HTTP 429 with Retry-After: 1 and a 200 with
// JSON-RPC -32005 "daily request count exceeded, request rate limited". nginx passes those on; the gateway
// sends a throttled read to another upstream and keeps the throttled one out for its Retry-After or a cooldown
// (docs/upstreams.md, "Throttling").
//
// The load is a read mix of seeded bodies (per 100 calls: 20 eth_call, 15 eth_getBalance over 2,000 addresses,
// 15 eth_blockNumber, 15 eth_getBlockByNumber latest and recent, 10 eth_chainId, 10 eth_getTransactionCount,
// 5 eth_getBlockByHash, 5 eth_gasPrice, 5 eth_getCode; ids varying). First one saturation round per target
// (wrk with bench/mix.lua, MAX_DURATION s), which sets the rate: RATE (0.5) times the slower target's ok req/s
// (or RPS req/s); then WARMUP s per target at that rate, unrecorded; then ROUNDS rounds of DURATION s per target
// at that rate, interleaved, sent open-loop by bench/open-loop.mjs (latency from each request's scheduled
// send, so that p99 measures the upstreams, not a queue). Every answer is checked: a non-200 status or an
// "error" member is an error (by kind: HTTP 429, other status, -32005 in a 200, other JSON-RPC error), never
// throughput; socket errors and timeouts are counted apart.
//
// Reported per target: ok req/s, error rate by kind, p50/p95/p99 (medians over rounds), the client calls each
// upstream counted (polls and health checks aside) and their shares, and for the gateway the throttles it saw
// (gateway_upstream_throttled_total); then the issue's targets: gateway error rate 0 (nginx's beside it),
// gateway p99 ÷ nginx p99 ≤ ½ (per round), and the shares of calls sent to the throttled and slow upstreams.
//
//   npm run bench:throttle                          # ROUNDS=3 DURATION=20 WARMUP=5 MAX_DURATION=5 RATE=0.5
//   RPS=1500 ROUNDS=1 DURATION=10 npm run bench:throttle
//   SELECTION=weighted npm run bench:throttle       # `selection: weighted` on the chain (once the schema has it)
//
// Other knobs: CONNS=50 (wrk) RATE_CONNS=256 (open-loop) PIN=1 PROXY_CPU=0 (gateway, nginx) LOAD_CPU=1 (load,
// upstreams, this script) SLOW_MS=20 THROTTLE_EVERY=10 SEED=1 BASE_PORT=19860 OUT_DIR=bench/results/throttle-<ts>.
// Ports: BASE_PORT (the upstreams' counts), +10 gateway, +11 its admin, +12 nginx, +20..+25 the upstreams.
// Loopback only. Everything it starts runs in its own process group and is stopped on exit, error or Ctrl-C;
// a guard ends the run if it outlasts its estimate by two minutes. Results: report.md, rounds.tsv, logs/.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
function die(msg) {
  console.error(`bench:throttle: ${msg}`);
  process.exit(1);
}
const int = (name, dflt) => {
  const v = env[name] ?? String(dflt);
  if (!/^[0-9]+$/.test(v)) die(`${name} must be a non-negative integer, not "${v}"`);
  return Number(v);
};
const ROUNDS = int('ROUNDS', 3);
const DURATION = int('DURATION', 20);
const WARMUP = int('WARMUP', 5);
const MAX_DURATION = int('MAX_DURATION', 5);
const CONNS = int('CONNS', 50);
const RATE_CONNS = int('RATE_CONNS', 256);
const PIN = (env.PIN ?? '1') !== '0';
const PROXY_CPU = int('PROXY_CPU', 0);
const LOAD_CPU = int('LOAD_CPU', 1);
const SLOW_MS = int('SLOW_MS', 20);
const THROTTLE_EVERY = int('THROTTLE_EVERY', 10);
const BASE_PORT = int('BASE_PORT', 19860);
const SEED = env.SEED ?? '1';
const RATE = Number(env.RATE ?? 0.5);
const RPS = env.RPS === undefined ? null : int('RPS', 0);
const SELECTION = env.SELECTION ?? null;
const API_KEY = 'bench-key-5f2c9a7e-0123456789';
if (ROUNDS < 1 || DURATION < 1 || CONNS < 1 || RATE_CONNS < 1 || THROTTLE_EVERY < 2) die('ROUNDS, DURATION, CONNS, RATE_CONNS must be at least 1, THROTTLE_EVERY at least 2');
if (!(RATE > 0 && RATE <= 1)) die('RATE must be in (0, 1]');
if (RPS === 0) die('RPS must be positive');
if (SELECTION !== null && !/^[a-z-]+$/.test(SELECTION)) die(`SELECTION must be a word such as weighted, not "${SELECTION}"`);
const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
const OUT_DIR = resolve(env.OUT_DIR ?? join(ROOT, 'bench', 'results', `throttle-${stamp}`));
const UPSTREAMS = ['fast', 'slow', 'throttle'];
const ENV_OF = { fast: 'UPSTREAM_A', slow: 'UPSTREAM_B', throttle: 'UPSTREAM_C' };
const PORTS = { control: BASE_PORT, gateway: BASE_PORT + 10, admin: BASE_PORT + 11, nginx: BASE_PORT + 12 };
const targets = [
  { name: 'gateway', port: PORTS.gateway, url: `http://127.0.0.1:${PORTS.gateway}/eth/${API_KEY}` },
  { name: 'nginx', port: PORTS.nginx, url: `http://127.0.0.1:${PORTS.nginx}/` },
].map((t, i) => ({ ...t, up: Object.fromEntries(UPSTREAMS.map((u, j) => [u, BASE_PORT + 20 + 3 * i + j])) }));

/** The command that reproduces this run (printed at the start and the end, and in the report). */
const knobs = ['ROUNDS', 'DURATION', 'WARMUP', 'MAX_DURATION', 'RATE', 'RPS', 'SELECTION', 'CONNS', 'RATE_CONNS', 'SLOW_MS', 'THROTTLE_EVERY', 'SEED', 'PIN', 'BASE_PORT'];
const COMMAND = `${knobs.filter((k) => env[k] !== undefined).map((k) => `${k}=${env[k]}`).join(' ')}${knobs.some((k) => env[k] !== undefined) ? ' ' : ''}npm run bench:throttle`;
const log = (msg) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${msg}`);

// ---- processes: each in its own group, stopped on the way out whatever happens ----
let RUN; // the run's scratch directory (bodies, state, nginx, manifest), removed on the way out
const procs = new Map();
function startProc(name, cpu, argv, extraEnv = {}) {
  const full = PIN ? ['taskset', '-c', String(cpu), ...argv] : argv;
  const out = join(OUT_DIR, 'logs', `${name}.log`);
  const child = spawn(full[0], full.slice(1), { detached: true, env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const keep = (c) => {
    text += c;
    if (text.length > 200_000) text = text.slice(-100_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const p = { child, alive: true, exited: new Promise((ok) => child.once('exit', ok)), log: () => text };
  void p.exited.then(() => {
    p.alive = false;
    writeFileSync(out, text);
  });
  procs.set(name, p);
  return p;
}
async function stopProc(name) {
  const p = procs.get(name);
  if (!p) return;
  procs.delete(name);
  if (p.alive) {
    try {
      process.kill(-p.child.pid, 'SIGTERM');
    } catch {}
    const force = setTimeout(() => {
      try {
        process.kill(-p.child.pid, 'SIGKILL');
      } catch {}
    }, 5000);
    await p.exited;
    clearTimeout(force);
  }
}
function killAll() {
  for (const p of procs.values()) {
    try {
      if (p.alive) process.kill(-p.child.pid, 'SIGKILL');
    } catch {}
  }
}
process.on('exit', () => {
  killAll();
  if (RUN) rmSync(RUN, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => {
  console.error(`bench:throttle: ${sig}, stopping what it started`);
  killAll();
  process.exit(130);
});

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
const portOpen = (port) => new Promise((ok) => {
  const s = connect(port, '127.0.0.1');
  s.once('connect', () => (s.destroy(), ok(true)));
  s.once('error', () => ok(false));
});
async function waitPort(name, port, seconds) {
  const end = Date.now() + seconds * 1000;
  while (!(await portOpen(port))) {
    const p = procs.get(name);
    if (p && !p.alive) throw new Error(`${name} exited during start:\n${p.log().slice(-2000)}`);
    if (Date.now() > end) throw new Error(`${name} did not listen on ${port} within ${seconds} s:\n${p?.log().slice(-2000) ?? ''}`);
    await sleep(50);
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '–');
const pct = (a, b) => (b > 0 ? `${fmt((100 * a) / b, 2)}%` : '–');

// ---- the bodies: a seeded read mix ----
function rng(seed) {
  let h = createHash('sha256').update(String(seed)).digest().readUInt32LE(0) || 1;
  return () => {
    h ^= h << 13;
    h >>>= 0;
    h ^= h >>> 17;
    h ^= h << 5;
    h >>>= 0;
    return h / 4294967296;
  };
}
function makeBodies(rand, n) {
  const addr = (i) => `0x${createHash('sha256').update(`addr${i}`).digest('hex').slice(0, 40)}`;
  const zipf = (k) => Math.min(k - 1, Math.floor(k ** rand() - 1)); // hot keys first
  const HEAD = 0x1000; // bench/throttle-upstream.mjs's head
  const hx = (v) => `0x${v.toString(16)}`;
  const mix = [
    [20, () => ['eth_call', [{ to: addr(10_000 + zipf(20)), data: '0x70a08231000000000000000000000000' + addr(zipf(2000)).slice(2) }, 'latest']]],
    [15, () => ['eth_getBalance', [addr(zipf(2000)), 'latest']]],
    [15, () => ['eth_blockNumber', []]],
    [5, () => ['eth_getBlockByNumber', ['latest', false]]],
    [10, () => ['eth_getBlockByNumber', [hx(HEAD - Math.floor(rand() * 64)), false]]],
    [10, () => ['eth_chainId', []]],
    [10, () => ['eth_getTransactionCount', [addr(zipf(2000)), 'latest']]],
    [5, () => ['eth_getBlockByHash', [`0x${(HEAD - Math.floor(rand() * 256) + 1).toString(16).padStart(64, '0')}`, false]]],
    [5, () => ['eth_gasPrice', []]],
    [5, () => ['eth_getCode', [addr(10_000 + zipf(20)), 'latest']]],
  ];
  const total = mix.reduce((a, [w]) => a + w, 0);
  const lines = [];
  for (let i = 0; i < n; i++) {
    let x = rand() * total;
    const [, make] = mix.find(([w]) => (x -= w) < 0) ?? mix[0];
    const [method, params] = make();
    lines.push(`S ${JSON.stringify({ jsonrpc: '2.0', id: 1 + Math.floor(rand() * 1e6), method, params })}`);
  }
  return lines;
}

// ---- load generators: bench:mix's wrk script (saturation) and open-loop generator (the rounds) ----
function runLoad(argv, extraEnv, seconds, outFile) {
  const p = startProc('load', LOAD_CPU, argv, extraEnv);
  return new Promise((done) => {
    const guard = setTimeout(() => {
      try {
        process.kill(-p.child.pid, 'SIGKILL');
      } catch {}
    }, (seconds + 30) * 1000);
    p.exited.then(() => {
      clearTimeout(guard);
      procs.delete('load');
      const out = p.log();
      writeFileSync(outFile, out, { flag: 'a' });
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      done(line ? Object.fromEntries(line.slice(7).trim().split(' ').map((kv) => [kv.split('=')[0], Number(kv.split('=')[1])])) : null);
    });
  });
}
const runWrk = (t, seconds) =>
  runLoad(['wrk', '-t1', `-c${CONNS}`, `-d${seconds}s`, '--timeout', '5s', '-s', join(ROOT, 'bench', 'mix.lua'), t.url],
    { MIX_BODIES: join(RUN, 'bodies.txt'), MIX_STATE: join(RUN, 'state.txt'), MIX_API_KEY: API_KEY }, seconds, join(OUT_DIR, 'logs', 'wrk.log'));
const runOpenLoop = (t, rate, seconds) =>
  runLoad([process.execPath, join(ROOT, 'bench', 'open-loop.mjs')],
    { OL_URL: t.url, OL_RATE: String(rate), OL_SECONDS: String(seconds), OL_WARMUP: '1', OL_CONNS: String(RATE_CONNS), OL_BODIES: join(RUN, 'bodies.txt'), OL_STATE: join(RUN, 'state.txt'), OL_API_KEY: API_KEY },
    seconds + 1, join(OUT_DIR, 'logs', 'open-loop.log'));

const counts = async () => (await fetch(`http://127.0.0.1:${PORTS.control}/counts`)).json();
/** gateway_upstream_throttled_total of the chain, summed over its upstreams. */
async function gatewayThrottled() {
  const text = await (await fetch(`http://127.0.0.1:${PORTS.admin}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^gateway_upstream_throttled_total\{([^}]*)\} (\S+)$/gm)) if (/chain="eth"/.test(m[1])) n += Number(m[2]);
  return n;
}
/** Waits (30 s at most) until the gateway's three upstreams are up and the pool has a served tip. */
async function untilPooled() {
  const end = Date.now() + 30_000;
  while (Date.now() < end) {
    const text = await (await fetch(`http://127.0.0.1:${PORTS.admin}/metrics`)).text();
    const up = [...text.matchAll(/^gateway_upstream_up\{[^}]*chain="eth"[^}]*\} 1$/gm)].length;
    const tip = /^gateway_pool_served_tip\{[^}]*\} (\S+)$/m.exec(text);
    if (up === 3 && tip && Number(tip[1]) >= 0) return;
    await sleep(200);
  }
  throw new Error('the gateway\'s three upstreams were not all up with a served tip within 30 s');
}
/** 100 bodies once each: how many came back 200 with a JSON-RPC result and the request's id, and the first that did not. */
async function smoke(t, lines) {
  let good = 0;
  let first = '';
  for (const line of lines) {
    const req = JSON.parse(line.slice(2));
    let why = '';
    try {
      const r = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': API_KEY }, body: JSON.stringify(req) });
      const text = await r.text();
      let j = null;
      try {
        j = JSON.parse(text);
      } catch {}
      if (r.status !== 200) why = `HTTP ${r.status} ${text.slice(0, 100)}`;
      else if (!j || j.jsonrpc !== '2.0' || !('result' in j)) why = `not a JSON-RPC result: ${text.slice(0, 100)}`;
      else if (j.id !== req.id) why = `id ${JSON.stringify(j.id)} for ${JSON.stringify(req.id)}`;
    } catch (err) {
      why = err.message;
    }
    if (why === '') good++;
    else if (first === '') first = `${req.method}: ${why}`;
  }
  return good === lines.length ? `ok ${good}/${lines.length}` : `${lines.length - good} of ${lines.length} wrong, first ${first.replaceAll('|', '\\|')}`;
}

async function main() {
  mkdirSync(join(OUT_DIR, 'logs'), { recursive: true });
  RUN = mkdtempSync('/tmp/throttle-bench.');
  for (const p of [...Object.values(PORTS), ...targets.flatMap((t) => Object.values(t.up))]) {
    if (await portOpen(p)) die(`127.0.0.1:${p} is already in use; pick another BASE_PORT`);
  }
  const est = 2 * (MAX_DURATION + 3 + WARMUP + 2 + ROUNDS * (DURATION + 4)) + 40;
  const guard = setTimeout(() => {
    console.error(`bench:throttle: still running ${est + 120} s after the start (estimate ${est} s): stopping`);
    killAll();
    process.exit(1);
  }, (est + 120) * 1000);
  guard.unref();
  log(`${COMMAND}: about ${Math.ceil(est / 60)} min; results in ${OUT_DIR}`);

  // the gateway's build
  const manifest = readFileSync(join(ROOT, 'bench', 'gateway.throttle.yaml'), 'utf8');
  if (!manifest.includes('    # selection:here\n')) die('bench/gateway.throttle.yaml has no "# selection:here" line');
  writeFileSync(join(RUN, 'gateway.yaml'), SELECTION === null ? manifest : manifest.replace('    # selection:here\n', `    selection: ${SELECTION}\n`));
  writeFileSync(join(RUN, 'keys.yaml'), `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(API_KEY).digest('hex')}"\n`);
  const dist = join(RUN, 'gateway.mjs');
  try {
    execFileSync(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', join(RUN, 'gateway.yaml'), '--out', dist], { cwd: ROOT, stdio: ['ignore', 2, 2] });
  } catch {
    die(`the gateway did not build from bench/gateway.throttle.yaml${SELECTION === null ? '' : ` with selection: ${SELECTION}`}`);
  }

  // the bodies (fixed lines of bench:mix's format; the state file is there for the generators, unused by fixed lines)
  const lines = makeBodies(rng(`${SEED}:throttle-mix`), 20_000);
  writeFileSync(join(RUN, 'bodies.txt'), lines.join('\n') + '\n');
  writeFileSync(join(RUN, 'state.txt'), `4096\n1\n0x${'1'.padStart(64, '0')}\n1\n0x${'2'.padStart(64, '0')}\n`);

  // the upstreams: one process, three ports per target
  const listen = targets.flatMap((t) => UPSTREAMS.map((u) => `${t.name}/${u}:${t.up[u]}`)).join(',');
  startProc('upstreams', LOAD_CPU, [process.execPath, join(ROOT, 'bench', 'throttle-upstream.mjs')],
    { LISTEN: listen, SLOW: 'slow', SLOW_MS: String(SLOW_MS), THROTTLE: 'throttle', THROTTLE_EVERY: String(THROTTLE_EVERY), CONTROL_PORT: String(PORTS.control) });
  await waitPort('upstreams', PORTS.control, 15);

  // the gateway
  const [gw, ng] = targets;
  startProc('gateway', PROXY_CPU, [process.execPath, '--no-memory-reducer', dist], {
    GATEWAY_KEYS_FILE: join(RUN, 'keys.yaml'), HOST: '127.0.0.1', PORT: String(gw.port), ADMIN_PORT: String(PORTS.admin),
    ...Object.fromEntries(UPSTREAMS.map((u) => [ENV_OF[u], `http://127.0.0.1:${gw.up[u]}/`])),
  });
  await waitPort('gateway', gw.port, 30);
  await untilPooled();

  // nginx round-robin over its three, as test/support/nginx.ts configures it (one process, keep-alive 32)
  const nd = join(RUN, 'nginx');
  mkdirSync(join(nd, 'tmp'), { recursive: true });
  writeFileSync(join(nd, 'nginx.conf'), `master_process off;
daemon off;
pid ${nd}/nginx.pid;
error_log ${nd}/error.log error;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path ${nd}/tmp/body;
    proxy_temp_path ${nd}/tmp/proxy;
    fastcgi_temp_path ${nd}/tmp/fastcgi;
    uwsgi_temp_path ${nd}/tmp/uwsgi;
    scgi_temp_path ${nd}/tmp/scgi;
    upstream pool {
${UPSTREAMS.map((u) => `        server 127.0.0.1:${ng.up[u]};`).join('\n')}
        keepalive 32;
    }
    server {
        listen 127.0.0.1:${ng.port};
        location / {
            proxy_pass http://pool;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
`);
  const nginx = ['/usr/sbin/nginx', ...(env.PATH ?? '').split(':').map((d) => join(d, 'nginx'))].find((p) => existsSync(p));
  if (!nginx) die('nginx not found (apt-get install -y nginx)');
  startProc('nginx', PROXY_CPU, [nginx, '-p', `${nd}/`, '-e', join(nd, 'error.log'), '-c', join(nd, 'nginx.conf')]);
  await waitPort('nginx', ng.port, 10);

  const git = (args) => spawnSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).stdout.trim();
  const meta = [
    `git ${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain', '--untracked-files=no']) ? ' (modified)' : ''}; command: \`${COMMAND}\``,
    `node ${process.version}, ${spawnSync(nginx, ['-v'], { encoding: 'utf8' }).stderr.trim()}, ${cpus().length} CPUs,${(/model name\s*:(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8')) ?? [, ''])[1]}; load average at the start ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
    `gateway: bench/gateway.throttle.yaml, ${SELECTION === null ? "the chain's default selection" : `selection: ${SELECTION}`}, no cache; nginx: round-robin, keep-alive 32${PIN ? `; gateway and nginx on core ${PROXY_CPU}, load, upstreams and this script on core ${LOAD_CPU}` : ''}`,
    `upstreams (bench/throttle-upstream.mjs): fast; slow, +${SLOW_MS} ms on every answer; throttle, 1 client call in ${THROTTLE_EVERY} refused (429 Retry-After: 1 and 200 -32005, alternately)`,
  ].map((l) => `- ${l}`).join('\n');
  writeFileSync(join(OUT_DIR, 'meta.txt'), meta + '\n');

  const smokes = {};
  for (const t of targets) {
    smokes[t.name] = await smoke(t, lines.slice(0, 100));
    log(`${t.name}: smoke ${smokes[t.name]}`);
  }

  // the rate: a share of the slower target's max (one wrk round each), or RPS
  const maxes = {};
  for (const t of targets) {
    const r = await runWrk(t, MAX_DURATION);
    if (!r) throw new Error(`${t.name}: no result from wrk (logs/wrk.log)`);
    maxes[t.name] = (r.requests - r.errors) / r.seconds;
    log(`${t.name}: max ${fmt(maxes[t.name])} ok req/s (wrk, ${CONNS} connections, ${MAX_DURATION} s; ${r.errors} error answers)`);
  }
  const slower = targets.reduce((a, b) => (maxes[b.name] < maxes[a.name] ? b : a));
  const offered = RPS ?? Math.round(RATE * maxes[slower.name]);
  if (!(offered > 0)) throw new Error(`${slower.name} served nothing in its saturation round: no rate to set`);
  const rateNote = RPS !== null ? `RPS=${RPS}` : `${RATE} × the slower target's max, ${slower.name}'s ${fmt(maxes[slower.name])}`;
  log(`fixed rate: ${offered} req/s (${rateNote})`);
  for (const t of targets) if (WARMUP > 0) await runOpenLoop(t, offered, WARMUP);

  const rows = [];
  const COLS = ['round', 'target', 'offered', 'ok_rps', 'p50_us', 'p95_us', 'p99_us', 'max_us', 'requests', 'warm', 'errors', 'err_http429', 'err_http_other', 'err_rpc_32005', 'err_rpc_other', 'sockerr',
    'up_fast', 'up_slow', 'up_throttle', 'refused_429', 'refused_200', 'gw_throttled', 'lag_p99_us'];
  writeFileSync(join(OUT_DIR, 'rounds.tsv'), COLS.join('\t') + '\n');
  for (let round = 1; round <= ROUNDS; round++) {
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(i + round - 1) % targets.length];
      const c0 = await counts();
      const g0 = t === gw ? await gatewayThrottled() : 0;
      const res = await runOpenLoop(t, offered, DURATION);
      const c1 = await counts();
      const g1 = t === gw ? await gatewayThrottled() : 0;
      if (!res) throw new Error(`${t.name}: no result from the open-loop generator (logs/open-loop.log)`);
      const d = (u, k) => c1[`${t.name}/${u}`][k] - c0[`${t.name}/${u}`][k];
      const row = {
        round, target: t.name, offered, ok_rps: (res.requests - res.errors) / res.seconds,
        ...Object.fromEntries(['p50_us', 'p95_us', 'p99_us', 'max_us', 'requests', 'warm', 'errors', 'err_http429', 'err_http_other', 'err_rpc_32005', 'err_rpc_other', 'lag_p99_us'].map((k) => [k, res[k]])),
        sockerr: res.err_connect + res.err_read + res.err_write + res.err_timeout,
        ...Object.fromEntries(UPSTREAMS.map((u) => [`up_${u}`, d(u, 'requests') - d(u, 'health')])),
        refused_429: d('throttle', 'throttled429'), refused_200: d('throttle', 'throttled200'),
        gw_throttled: t === gw ? g1 - g0 : '',
      };
      rows.push(row);
      writeFileSync(join(OUT_DIR, 'rounds.tsv'), COLS.map((k) => (typeof row[k] === 'number' && !Number.isInteger(row[k]) ? row[k].toFixed(1) : row[k])).join('\t') + '\n', { flag: 'a' });
      const calls = row.up_fast + row.up_slow + row.up_throttle;
      log(`round ${round} ${t.name.padEnd(7)} ${fmt(row.ok_rps).padStart(6)} ok req/s  p50 ${fmt(row.p50_us / 1000, 2)}  p95 ${fmt(row.p95_us / 1000, 2)}  p99 ${fmt(row.p99_us / 1000, 2)} ms  ` +
        `errors ${row.errors} (429 ${row.err_http429}, -32005 ${row.err_rpc_32005}, other ${row.err_http_other + row.err_rpc_other}) sockerr ${row.sockerr}  ` +
        `calls fast/slow/throttle ${row.up_fast}/${row.up_slow}/${row.up_throttle} (${pct(row.up_slow, calls)} slow, ${pct(row.up_throttle, calls)} throttle), refused ${row.refused_429 + row.refused_200}`);
    }
  }
  for (const name of ['nginx', 'gateway', 'upstreams']) await stopProc(name);
  const text = report({ rows, offered, rateNote, meta, smokes, maxes });
  writeFileSync(join(OUT_DIR, 'report.md'), text);
  console.log(`\n${text}\n(written to ${OUT_DIR}; again: ${COMMAND})`);
}

function report({ rows, offered, rateNote, meta, smokes, maxes }) {
  const ms = (us) => fmt(us / 1000, 2);
  const of = (name) => rows.filter((r) => r.target === name);
  const sum = (rs, k) => rs.reduce((a, r) => a + Number(r[k] || 0), 0);
  const lines = [
    '| target | max ok req/s (wrk) | ok req/s at the rate | p50 ms | p95 ms | p99 ms (median) | p99 min–max | error answers ÷ requests | HTTP 429 / -32005 in a 200 / other | socket errors | calls at fast / slow / throttle | share slow | share throttle | refused by throttle (429 / 200) | throttles the gateway saw | generator lag p99 ms | smoke |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  const s = {};
  for (const t of targets) {
    const rs = of(t.name);
    const med = (k) => median(rs.map((r) => Number(r[k])));
    const p99s = rs.map((r) => Number(r.p99_us));
    const reqs = sum(rs, 'requests');
    const calls = sum(rs, 'up_fast') + sum(rs, 'up_slow') + sum(rs, 'up_throttle');
    s[t.name] = { errors: sum(rs, 'errors') + sum(rs, 'sockerr'), reqs, slow: sum(rs, 'up_slow') / calls, throttle: sum(rs, 'up_throttle') / calls };
    lines.push(`| ${t.name} | ${fmt(maxes[t.name])} | ${fmt(med('ok_rps'))} | ${ms(med('p50_us'))} | ${ms(med('p95_us'))} | ${ms(med('p99_us'))} | ${ms(Math.min(...p99s))}–${ms(Math.max(...p99s))} | ` +
      `${pct(sum(rs, 'errors'), reqs)} (${sum(rs, 'errors')} of ${reqs}) | ${sum(rs, 'err_http429')} / ${sum(rs, 'err_rpc_32005')} / ${sum(rs, 'err_http_other') + sum(rs, 'err_rpc_other')} | ${sum(rs, 'sockerr')} | ` +
      `${sum(rs, 'up_fast')} / ${sum(rs, 'up_slow')} / ${sum(rs, 'up_throttle')} | ${pct(sum(rs, 'up_slow'), calls)} | ${pct(sum(rs, 'up_throttle'), calls)} | ` +
      `${sum(rs, 'refused_429')} / ${sum(rs, 'refused_200')} | ${t.name === 'gateway' ? sum(rs, 'gw_throttled') : '–'} | ${ms(med('lag_p99_us'))} | ${smokes[t.name]} |`);
  }
  const ratios = [];
  for (let r = 1; r <= ROUNDS; r++) {
    const [g, n] = ['gateway', 'nginx'].map((name) => rows.find((w) => w.round === r && w.target === name));
    if (g && n && n.p99_us > 0) ratios.push(g.p99_us / n.p99_us);
  }
  const ratio = ratios.length ? median(ratios) : NaN;
  const verdict = (ok) => (ok ? 'met' : '**missed**');
  const gwRate = s.gateway.errors / Math.max(1, s.gateway.reqs);
  const check = ['| target | goal | measured | met? |', '|---|---|---:|---|',
    `| gateway error rate (error answers and socket errors ÷ requests) | 0, where nginx passes the throttles on | ${fmt(100 * gwRate, 3)}% (${s.gateway.errors}); nginx ${fmt((100 * s.nginx.errors) / Math.max(1, s.nginx.reqs), 3)}% (${s.nginx.errors}) | ${verdict(s.gateway.errors === 0)} |`,
    `| gateway p99 ÷ nginx p99, per round | ≤ 0.5 | ${fmt(ratio, 3)} (${ratios.map((x) => fmt(x, 3)).join(', ')}) | ${verdict(ratio <= 0.5)} |`,
    `| share of the calls at the upstreams sent to the slow one | reported | gateway ${pct(s.gateway.slow, 1)}, nginx ${pct(s.nginx.slow, 1)} | – |`,
    `| share sent to the throttling one | reported | gateway ${pct(s.gateway.throttle, 1)}, nginx ${pct(s.nginx.throttle, 1)} | – |`,
  ];
  return `# bench:throttle (issue 39: throttling and a slow upstream, against nginx round-robin) ${new Date().toISOString()}\n\n${meta}\n\n` +
    `At ${fmt(offered)} req/s (${rateNote}), ${ROUNDS} round(s) of ${DURATION} s per target after ${WARMUP} s each at the rate, interleaved, open-loop ` +
    `(bench/open-loop.mjs, latency from each request's scheduled send). p50/p95/p99 and ok req/s: medians over rounds; counts pool the rounds ` +
    `(calls at the upstreams include the generator's unrecorded first second, and the gateway's retries; polls and health checks aside). ` +
    `Generator lag: how late the generator sent (a floor under every latency figure: its core also carries the upstreams).\n\n` +
    `${lines.join('\n')}\n\nThe issue's targets:\n\n${check.join('\n')}\n`;
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`bench:throttle: ${err.stack ?? err}`);
    killAll();
    process.exit(1);
  },
);
