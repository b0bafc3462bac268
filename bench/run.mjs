#!/usr/bin/env node
// `npm run bench`: build the gateway for bench/gateway.bench.yaml, then run the
// shared side-by-side harness (../shared/bench/bench.sh) with the gateway as
// one more target. The gateway is measured doing its full job: the key comes
// in the path AND the header (post.lua always sends X-API-Key), both are
// checked and stripped, the allowlist is checked, logging and metrics are on.
//
//   npm run bench                          # small, big and batch; 5 interleaved rounds
//   SCENARIOS=small RUNS=3 npm run bench   # any bench.sh knob passes through
//   WORKERS=2 npm run bench                # cluster mode (one worker per core), its own row
//   CHAINS=200 npm run bench               # the measured route is the last of 200 chains
//   CACHE=1 SCENARIOS=small npm run bench  # with the answer cache on (identical calls in flight coalesce; see below)
//   VALIDATE=0 npm run bench               # skip the last part: eth_getBalance and eth_call, validate: params over off (bench/validate.sh)
import { spawn, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, writeFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rssMiB } from './proc.mjs';
import { checkTargets, formatPeerRatios, formatRss, formatTargets, parseResults, peerRatios, rssVerdict } from './targets.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BENCH_DIR = resolve(process.env.BENCH_DIR ?? join(ROOT, '..', 'shared', 'bench'));
if (!existsSync(join(BENCH_DIR, 'bench.sh'))) {
  console.error(`bench: no harness at ${BENCH_DIR} (set BENCH_DIR)`);
  process.exit(1);
}
const API_KEY = process.env.API_KEY ?? 'bench-key-5f2c9a7e-0123456789';
const PORT = process.env.GATEWAY_PORT ?? '18549';
const workers = process.env.WORKERS ?? '';
const chains = Number(process.env.CHAINS ?? '1');
const cacheOn = process.env.CACHE === '1';
if (!Number.isInteger(chains) || chains < 1 || chains > 5000) {
  console.error(`bench: CHAINS must be a whole number from 1 to 5000, not "${process.env.CHAINS}"`);
  process.exit(1);
}

const work = join(ROOT, '.tmp', 'bench');
mkdirSync(work, { recursive: true });
// CHAINS=N: the same manifest with N-1 more EVM chains (each with its own
// upstream pool and health checks) before /eth, so that the measured route is
// the last of N: dispatch must not cost more with more chains.
let manifest = 'bench/gateway.bench.yaml';
if (chains > 1) {
  const base = readFileSync(join(ROOT, manifest), 'utf8');
  const filler = Array.from(
    { length: chains - 1 },
    (_, i) => `  - { path: c${String(i + 1).padStart(4, '0')}, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["\${UPSTREAM_URL}"] }\n`,
  ).join('');
  const many = base.replace(/^chains:\n/m, `chains:\n${filler}`);
  if (many === base) {
    console.error(`bench: CHAINS: no "chains:" line in ${manifest} to add chains under`);
    process.exit(1);
  }
  manifest = join(work, `gateway.bench-${chains}.yaml`);
  writeFileSync(manifest, many);
}
// CACHE=1: the same manifest with a cache block, for information. The
// harness's node answers every call with one fixed body, the cache's head poll
// included, so the gateway never knows a head and keeps nothing bound to it:
// the small call (eth_blockNumber) is never a hit, and the figure shows
// identical calls in flight sharing one upstream call (coalescing). For the
// hit path, bench/ab.sh OLD NEW hit.
if (cacheOn) {
  // A batch's misses go to the node as one batch with the calls renumbered 0..n-1 (each client keeps its own
  // ids); the fixed-body node answers with the fixture's ids 1..10, as no real node would.
  if ((process.env.SCENARIOS ?? 'small big batch').split(/\s+/).includes('batch')) {
    console.error('bench: CACHE=1 runs the small and big calls only (SCENARIOS="small big"): the harness\'s fixed-body node answers a batch with fixed ids, and the cache sends a batch\'s misses renumbered');
    process.exit(1);
  }
  const base = readFileSync(join(ROOT, manifest), 'utf8');
  const cached = base.replace(/^chains:\n/m, 'cache: { maxBytes: 67108864 }\nchains:\n');
  manifest = join(work, `gateway.bench-cache-${chains}.yaml`);
  writeFileSync(manifest, cached);
}

const t0 = process.hrtime.bigint();
execFileSync(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', manifest, '--out', 'dist/bench-gateway.mjs'], {
  cwd: ROOT,
  stdio: 'inherit',
});
console.error(`bench: build took ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(0)} ms`);

const keys = join(work, 'keys.yaml');
writeFileSync(keys, `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(API_KEY).digest('hex')}"\n`);

const cmd = [`GATEWAY_KEYS_FILE=${keys}`, workers ? `GATEWAY_WORKERS=${workers}` : '', `exec node --no-memory-reducer ${join(ROOT, 'dist/bench-gateway.mjs')}`]
  .filter(Boolean)
  .join(' ');
const env = {
  ...process.env,
  API_KEY,
  GATEWAY_CMD: cmd,
  GATEWAY_URL: `http://127.0.0.1:${PORT}/eth/${API_KEY}`,
  GATEWAY_NAME: ['gateway', workers ? `x${workers}` : '', chains > 1 ? `${chains}ch` : '', cacheOn ? 'cache' : ''].filter(Boolean).join('-'),
  SCENARIOS: process.env.SCENARIOS ?? 'small big batch',
};
// shared/ is read-only here, and bench.sh installs its peers (npm ci) and
// writes results beside itself: run a copy, keeping its node_modules between runs.
const harness = join(work, 'harness');
cpSync(BENCH_DIR, harness, { recursive: true, filter: (src) => !src.includes('node_modules') && !src.includes('/results') });
env.OUT_DIR ??= join(ROOT, 'bench', 'results', new Date().toISOString().replace(/[-:]/g, '').slice(0, 15));
// The gateway's RSS, once a second, for the "memory flat" check: the harness
// starts and stops it, so find it by its command line (its cluster workers too).
const bundle = join(ROOT, 'dist/bench-gateway.mjs');
const processes = []; // one entry per gateway process (one per scenario): RSS samples in MiB
let lastPids = new Set();
const sampler = setInterval(() => {
  const pids = new Set();
  let mib = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/cmdline`, 'latin1').includes(bundle)) continue;
      mib += rssMiB(name);
      pids.add(name);
    } catch {
      // the process ended between readdir and read
    }
  }
  if (pids.size === 0) return;
  if (![...pids].some((p) => lastPids.has(p))) processes.push([]);
  lastPids = pids;
  processes.at(-1).push(mib);
}, 1000);

const child = spawn('bash', [join(harness, 'bench.sh')], { cwd: ROOT, env, stdio: 'inherit' });
const status = await new Promise((done) => child.on('exit', (code, signal) => done(code ?? (signal ? 1 : 0))));
clearInterval(sampler);
if (status !== 0) process.exit(status);

const results = join(env.OUT_DIR, 'results.tsv');
if (existsSync(results)) {
  const runs = [parseResults(readFileSync(results, 'utf8'))];
  const name = env.GATEWAY_NAME;
  const scenarios = env.SCENARIOS.split(/\s+/).filter(Boolean);
  const rss = processes.map((samples, i) => [processes.length === scenarios.length ? scenarios[i] : `process ${i + 1}`, rssVerdict(samples)]);
  const setup = [workers ? `${workers} workers` : '', env.PIN === '0' ? 'unpinned' : '', chains > 1 ? `the route is the last of ${chains} chains` : '', cacheOn ? 'the answer cache on' : '']
    .filter(Boolean)
    .join(', ');
  const note = setup ? ` The targets are set for one process pinned to one core; this run: ${setup}.` : '';
  const text =
    `Issue 5's targets, ${name} over each peer in the same round (median of per-round ratios).${note}\n\n${formatTargets(checkTargets(runs, name), name)}\n\n` +
    `${name} over each peer, pair by pair (median of per-round ratios, min–max; req/s: above 1 is faster; p99: below 1 is lower):\n\n${formatPeerRatios(peerRatios(runs, name), name)}\n\n` +
    `${name}'s RSS (all its processes), sampled once a second over each scenario:\n\n${formatRss(rss)}\n`;
  writeFileSync(join(env.OUT_DIR, 'targets.md'), text);
  console.log('\n' + text + `\n(written to ${join(env.OUT_DIR, 'targets.md')})`);
}

// Issue 23: what checking parameters costs, params over off in one gateway, one run.
if (process.env.VALIDATE !== '0') {
  const v = spawn('bash', [join(ROOT, 'bench/validate.sh'), process.env.VALIDATE_ROUNDS ?? '6'], { cwd: ROOT, env: { ...process.env, BENCH_DIR }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  v.stdout.on('data', (d) => {
    out += d;
    process.stdout.write(d);
  });
  const code = await new Promise((done) => v.on('exit', (c) => done(c ?? 1)));
  if (env.OUT_DIR && existsSync(env.OUT_DIR)) writeFileSync(join(env.OUT_DIR, 'validate.txt'), out);
  if (code !== 0) process.exit(code);
}
