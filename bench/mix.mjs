#!/usr/bin/env node
// `npm run bench:mix`: a realistic read mix against a REAL EVM node, through the
// gateway and through the shared harness's peers, in one interleaved run.
//
// The node is anvil (from npm) mining a block every 2 s, with ~20 small contracts
// and a few hundred value transfers of history, and a background sender putting a
// few transactions into every block during the load. The load is wrk with
// bench/mix.lua cycling through BODIES seeded request bodies: per 100 calls 20
// eth_blockNumber, 20 eth_call (latest, 20 contracts), 15 eth_getBalance (latest,
// 2,000 addresses), 10 eth_chainId, 10 eth_getTransactionReceipt (old and recent
// txs), 10 eth_getBlockByNumber (latest and recent numbers), 5 eth_gasPrice,
// 5 eth_getTransactionCount, 5 eth_getBlockByHash (old and recent blocks); keys
// drawn from Zipf distributions, ids varying. Every answer is checked: a non-200
// status or an "error" member is a failure, not throughput.
//
// Each target forwards to its own port of one counting proxy (bench/mix-proxy.mjs)
// in front of anvil, which counts upstream JSON-RPC calls per target. Targets:
// the gateway (bench/gateway.mix.yaml; CACHE=1 keeps its cache block, CACHE=0
// drops it), nginx+njs and node-stream from ../shared/bench (copied, not edited),
// and `limit`: a bare node:http server (bench/fixed-upstream.mjs) answering every
// request with one fixed JSON-RPC answer from memory, as long as the mix's answers
// are on average (asked of anvil at the start), on the gateway's core, with the
// gateway's node flags: Node's ceiling for an answer from memory on this host in
// this run (its id is not the request's; the smoke check lets that pass).
// Pinned like the harness: targets on PROXY_CPU; wrk, anvil, the counting proxy
// and this script on LOAD_CPU.
//
// HIT=1: an all-hit workload instead of the mix, for the cache's hit path: per 100
// calls 20 eth_chainId, 25 eth_getBlockByHash and 25 eth_getBlockByNumber of the
// 125 old blocks (final: the node mines 40 more blocks first), 30
// eth_getTransactionReceipt of old txs; ids varying, as in the mix. Default targets
// "gateway limit"; the report's gateway ÷ limit per round is the hit path's share of
// Node's ceiling for answers of the same average size, and the gateway's upstream
// calls per 1,000 show that the calls were hits (~0).
//
// RATE=F: after the saturation rounds, a second phase at a fixed offered load: F times
// RATE_OF's (default nginx) median ok req/s of this run, for every target in turn
// (RATE_RUNS rounds of RATE_DURATION s), sent by bench/open-loop.mjs on LOAD_CPU,
// open-loop with latency timed from each request's scheduled send (wrk's p99 under
// saturation measures its queue; this measures a target below its limit). Results:
// rate.tsv and a second table.
//
//   npm run bench:mix                                  # RUNS=3 DURATION=10 WARMUP=5, CACHE=1
//   RATE=0.7 npm run bench:mix                         # and the fixed-rate phase, at 70% of nginx+njs's max
//   HIT=1 RUNS=3 npm run bench:mix                     # the hit path ÷ limit
//   CACHE=0 RUNS=1 DURATION=5 WARMUP=2 npm run bench:mix
//   TARGETS="gateway nginx node-stream direct" npm run bench:mix   # direct: wrk -> counting proxy -> anvil
//   OLD=../other-checkout TARGETS="gateway old" npm run bench:mix  # old: the same manifest built by another checkout's
//                                                    generator, interleaved with this one's (new ÷ old per round)
//
// Other knobs: CONNS=50 THREADS=1 PIN=1 PROXY_CPU=0 LOAD_CPU=1 SEED=1 BODIES=100000
// ZIPF_S=1.0 TX_PER_BLOCK=4 BASE_PORT=18760 QUIET_MAX=10 QUIET_WAIT=60 QUIET_BUDGET=300
// RATE_OF=nginx RATE_RUNS=RUNS RATE_DURATION=DURATION RATE_CONNS=CONNS (the open-loop generator's connections at most;
// a request due while all are busy waits for one, and that wait counts)
// BATCH=N (the gateway's cache.batch; default: the manifest's) CLIENT_BATCH=N (each request a JSON-RPC batch of the mix's
// next N calls, as clients that batch send them; ok req/s then counts batches, upstream figures are per call) INSTALL=1 OUT_DIR=bench/results/mix-<timestamp>; GW_NODE_ARGS="--trace-gc" adds node flags to the gateway's
// process (its log is logs/gateway.log). Results: results.tsv, methods.tsv,
// report.md, meta.txt, logs/.
import { spawn, execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';
import { resolveLine } from './mix-bodies.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BENCH_DIR = resolve(process.env.BENCH_DIR ?? join(ROOT, '..', 'shared', 'bench'));
const require = createRequire(import.meta.url);

// ---- knobs --------------------------------------------------------------------------------------
const int = (name, dflt) => {
  const v = process.env[name] ?? String(dflt);
  if (!/^[0-9]+$/.test(v)) die(`${name} must be a non-negative integer, not "${v}"`);
  return Number(v);
};
function die(msg) {
  console.error(`bench:mix: ${msg}`);
  process.exit(1);
}
const RUNS = int('RUNS', 3);
const DURATION = int('DURATION', 10);
const WARMUP = int('WARMUP', 5);
const CONNS = int('CONNS', 50);
const THREADS = int('THREADS', 1);
const PIN = (process.env.PIN ?? '1') !== '0';
const PROXY_CPU = int('PROXY_CPU', 0);
const LOAD_CPU = int('LOAD_CPU', 1);
const CACHE = (process.env.CACHE ?? '1') !== '0';
/** cache.batch for the gateway (unset: the manifest's own). */
const BATCH = process.env.BATCH === undefined ? null : int('BATCH', 1);
/** Calls per client request: N > 1 sends each request as a JSON-RPC batch of the mix's next N calls. */
const CLIENT_BATCH = int('CLIENT_BATCH', 1);
/** What the upstream figures are per: client requests, or with CLIENT_BATCH the calls in them. */
const CALLS = CLIENT_BATCH > 1 ? `client calls (each request a batch of ${CLIENT_BATCH})` : 'client requests';
const SEED = process.env.SEED ?? '1';
const BODIES = int('BODIES', 100_000);
const ZIPF_S = Number(process.env.ZIPF_S ?? '1.0');
const TX_PER_BLOCK = int('TX_PER_BLOCK', 4);
const BASE_PORT = int('BASE_PORT', 18760);
const QUIET_MAX = int('QUIET_MAX', 10);
const QUIET_WAIT = int('QUIET_WAIT', 60);
const QUIET_BUDGET = int('QUIET_BUDGET', 300);
const INSTALL = (process.env.INSTALL ?? '1') !== '0';
const API_KEY = process.env.API_KEY ?? 'bench-key-5f2c9a7e-0123456789';
const HIT = (process.env.HIT ?? '0') !== '0';
const TARGETS = (process.env.TARGETS ?? (HIT ? 'gateway limit' : 'gateway nginx node-stream limit')).split(/\s+/).filter(Boolean);
/** RATE=F: the fixed-rate phase at F times RATE_OF's median ok req/s (null: no such phase). */
const RATE = process.env.RATE === undefined || process.env.RATE === '' ? null : Number(process.env.RATE);
const RATE_OF = process.env.RATE_OF ?? 'nginx';
const RATE_RUNS = int('RATE_RUNS', RUNS);
const RATE_DURATION = int('RATE_DURATION', DURATION);
// as many connections as wrk's: more let a stall of the target pile up more requests on it (nginx+njs,
// whose upstream keeps 64 connections alive, then opens and closes one per request beyond them)
const RATE_CONNS = int('RATE_CONNS', CONNS);
if (!(ZIPF_S > 0)) die(`ZIPF_S must be a positive number, not "${process.env.ZIPF_S}"`);
if (RUNS < 1 || DURATION < 1 || BODIES < 100 || CONNS < 1 || THREADS < 1) die('RUNS, DURATION, CONNS, THREADS must be at least 1 and BODIES at least 100');
if (!/^[A-Za-z0-9._-]+$/.test(API_KEY)) die('API_KEY must match [A-Za-z0-9._-]+');
for (const t of TARGETS) if (!['gateway', 'old', 'nginx', 'node-stream', 'direct', 'limit'].includes(t)) die(`unknown target "${t}" (gateway, old, nginx, node-stream, direct, limit)`);
/** OLD=dir: another checkout whose generator builds the `old` target from this checkout's manifest. */
const OLD = process.env.OLD ? resolve(process.env.OLD) : null;
if (TARGETS.includes('old') && (OLD === null || !existsSync(join(OLD, 'bin', 'gateway.mjs')))) die('the old target needs OLD=<another checkout with bin/gateway.mjs and its node_modules>');
if (RATE !== null && !(RATE > 0 && RATE <= 2)) die(`RATE must be a fraction of ${RATE_OF}'s req/s above 0 (0.7 for 70%), not "${process.env.RATE}"`);
if (RATE !== null && !TARGETS.includes(RATE_OF)) die(`RATE needs RATE_OF (${RATE_OF}) among TARGETS: its max req/s in this run sets the rate`);
if (RATE !== null && (RATE_RUNS < 1 || RATE_DURATION < 1 || RATE_CONNS < 1)) die('RATE_RUNS, RATE_DURATION, RATE_CONNS must be at least 1');
for (const f of ['peer-node-min.mjs', 'common.mjs', 'nginx/peer.conf.tmpl', 'nginx/gateway.njs']) {
  if (!existsSync(join(BENCH_DIR, f))) die(`no ${f} in the harness at ${BENCH_DIR} (set BENCH_DIR)`);
}

const PORTS = {
  anvil: BASE_PORT,
  control: BASE_PORT + 1,
  up: { gateway: BASE_PORT + 2, nginx: BASE_PORT + 3, 'node-stream': BASE_PORT + 4, direct: BASE_PORT + 5, old: BASE_PORT + 11 },
  gateway: BASE_PORT + 6,
  nginx: BASE_PORT + 7,
  'node-stream': BASE_PORT + 8,
  admin: BASE_PORT + 9,
  limit: BASE_PORT + 10,
  old: BASE_PORT + 12,
  adminOld: BASE_PORT + 13,
};
/** The targets that forward to the node, each through its own port of the counting proxy. */
const FORWARDING = TARGETS.filter((t) => t !== 'limit');
const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 15);
const OUT_DIR = resolve(process.env.OUT_DIR ?? join(ROOT, 'bench', 'results', `mix-${stamp}`));
const WORK = join(ROOT, '.tmp', 'bench-mix');
const NJS_SO = '/usr/lib/nginx/modules/ngx_http_js_module.so';
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
const ANVIL_BIN = join(dirname(require.resolve('@foundry-rs/anvil-linux-amd64/package.json')), 'bin', 'anvil');
const log = (msg) => console.error(`[${new Date().toTimeString().slice(0, 8)}] ${msg}`);

// ---- processes: each in its own group, stopped by group, also on Ctrl-C --------------------------
const procs = new Map(); // name -> { child, exited }
let RUN = null; // transient directory (bodies, state, nginx conf), removed at exit

function startProc(name, cpu, argv, { env = process.env, cwd = WORK, stdout } = {}) {
  const pinned = PIN ? ['taskset', '-c', String(cpu), ...argv] : argv;
  // setpriv --pdeathsig KILL: the kernel kills it if this script dies without cleaning up
  const full = SETPRIV ? [SETPRIV, '--pdeathsig', 'KILL', '--', ...pinned] : pinned;
  const logFd = openSync(join(OUT_DIR, 'logs', `${name}.log`), 'a');
  const child = spawn(full[0], full.slice(1), { detached: true, cwd, env, stdio: ['ignore', stdout ?? logFd, logFd] });
  closeSync(logFd);
  const exited = new Promise((done) => child.once('exit', (code, signal) => done(code ?? signal)));
  const entry = { child, exited, alive: true };
  exited.then(() => (entry.alive = false));
  child.once('error', () => (entry.alive = false));
  procs.set(name, entry);
  return entry;
}

async function stopProc(name) {
  const p = procs.get(name);
  if (!p) return;
  procs.delete(name);
  if (!p.alive) return;
  try {
    process.kill(-p.child.pid, 'SIGTERM');
  } catch {
    return;
  }
  const done = await Promise.race([p.exited.then(() => true), sleep(5000).then(() => false)]);
  if (!done) {
    log(`${name} (pid ${p.child.pid}) ignored SIGTERM; SIGKILL`);
    try {
      process.kill(-p.child.pid, 'SIGKILL');
    } catch {}
    await p.exited;
  }
}

function killAllNow() {
  for (const [, p] of procs) {
    try {
      process.kill(-p.child.pid, 'SIGKILL');
    } catch {}
  }
  procs.clear();
  if (RUN) rmSync(RUN, { recursive: true, force: true });
  RUN = null;
}
process.on('exit', killAllNow);
let stopping = false;
for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]]) {
  process.on(sig, async () => {
    if (stopping) return;
    stopping = true;
    log(`${sig}: stopping everything this run started`);
    tracker?.stop();
    await Promise.all([...procs.keys()].map(stopProc));
    process.exit(code);
  });
}

function portOpen(port) {
  return new Promise((ok) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      ok(true);
    });
    s.once('error', () => ok(false));
  });
}
async function waitPort(name, port, seconds) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const p = procs.get(name);
    if (!p?.alive) {
      const tail = readFileSync(join(OUT_DIR, 'logs', `${name}.log`), 'utf8').split('\n').slice(-20).join('\n');
      throw new Error(`${name} exited during start; log tail:\n${tail}`);
    }
    if (await portOpen(port)) return;
    await sleep(100);
  }
  throw new Error(`${name} did not open 127.0.0.1:${port} within ${seconds} s`);
}

// ---- dependencies (as bench.sh: apt when something is missing) ------------------------------------
function ensureDeps() {
  const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
  const pkgs = [];
  if (!has('wrk')) pkgs.push('wrk');
  if (TARGETS.includes('nginx') && !has('nginx')) pkgs.push('nginx');
  if (TARGETS.includes('nginx') && !existsSync(NJS_SO)) pkgs.push('libnginx-mod-http-js');
  if (PIN && !has('taskset')) pkgs.push('util-linux');
  if (pkgs.length === 0) return;
  if (!INSTALL) die(`missing: ${pkgs.join(' ')} (INSTALL=0)`);
  log(`apt-get install -y ${pkgs.join(' ')}`);
  execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 2, 2] });
  execFileSync('apt-get', ['install', '-y', '-qq', ...pkgs], { stdio: ['ignore', 2, 2], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

// ---- seeded randomness ----------------------------------------------------------------------------
function rng(seed) {
  let a = Number.parseInt(createHash('sha256').update(String(seed)).digest('hex').slice(0, 8), 16) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
/** Zipf over ranks 0..n-1 (rank 0 hottest), weight 1/(r+1)^s. */
function zipf(n, s, rand) {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let r = 0; r < n; r++) cdf[r] = sum += 1 / (r + 1) ** s;
  return () => {
    const x = rand() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}
function shuffle(xs, rand) {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}
const hex = (n) => `0x${n.toString(16)}`;

// ---- the node: anvil, contracts, history ---------------------------------------------------------
let rpcId = 0;
async function rpc(method, params = []) {
  const r = await fetch(`http://127.0.0.1:${PORTS.anvil}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params }),
  });
  const j = await r.json();
  if (j.error) throw new Error(`${method}: ${j.error.message}`);
  return j.result;
}
async function inBatches(items, size, fn) {
  const out = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

// A contract whose every call returns one word: slot 0 (set at deployment) plus the first
// argument, so totalSupply() gives the stored value and balanceOf(a) the value plus a.
//   runtime: PUSH1 4 CALLDATALOAD PUSH1 0 SLOAD ADD PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN
//   init:    PUSH2 v PUSH1 0 SSTORE, then CODECOPY the 15-byte runtime from offset 17 and RETURN it
const RUNTIME = '6004356000540160005260206000f3';
const initCode = (v) => `0x61${v.toString(16).padStart(4, '0')}600055600f8060116000396000f3${RUNTIME}`;
const SEL_TOTAL_SUPPLY = '0x18160ddd';
const SEL_BALANCE_OF = '0x70a08231';

async function setupChain(rand, addresses, funded) {
  const pickTo = zipf(addresses.length, ZIPF_S, rand);
  await rpc('anvil_mine', [hex(100)]); // some depth: the "old" blocks
  const deploys = [];
  for (let i = 0; i < 20; i++) deploys.push(await rpc('eth_sendTransaction', [{ from: funded[i % funded.length], data: initCode((i + 1) * 1000) }]));
  await rpc('evm_mine');
  const contracts = (await inBatches(deploys, 20, (h) => rpc('eth_getTransactionReceipt', [h]))).map((r) => {
    if (!r?.contractAddress || r.status !== '0x1') throw new Error(`deployment failed: ${JSON.stringify(r)}`);
    return r.contractAddress;
  });
  const probe = await rpc('eth_call', [{ to: contracts[3], data: SEL_TOTAL_SUPPLY }, 'latest']);
  if (BigInt(probe) !== 4000n) throw new Error(`contract probe: totalSupply() gave ${probe}, expected 4000`);
  const history = [];
  for (let b = 0; b < 24; b++) {
    for (let i = 0; i < 16; i++) {
      const from = funded[Math.floor(rand() * funded.length)];
      const to = addresses[pickTo()];
      history.push(await rpc('eth_sendTransaction', [{ from, to, value: hex(1 + Math.floor(rand() * 1e15)) }]));
    }
    await rpc('evm_mine');
  }
  const receipts = await inBatches(history, 32, (h) => rpc('eth_getTransactionReceipt', [h]));
  const missing = receipts.filter((r) => !r).length;
  if (missing > 0) throw new Error(`${missing} history txs not mined`);
  const head = Number(await rpc('eth_blockNumber'));
  // the "old" blocks: 1 to 125 (100 empty, the deployments', 24 of history), however many the interval miner added
  const blocks = await inBatches([...Array(125).keys()].map((i) => i + 1), 32, (n) => rpc('eth_getBlockByNumber', [hex(n), false]));
  return { contracts, history, blockHashes: blocks.map((b) => b.hash), head };
}

// Follows the head (straight to anvil, not counted), puts TX_PER_BLOCK transfers into every block,
// and writes what mix.lua needs to build "recent" requests: the head, the newest block hashes and the
// newest mined tx hashes, newest first.
function track(statePath, funded, addresses, rand, seedTxs) {
  const pickTo = zipf(addresses.length, ZIPF_S, rand);
  const state = { head: 0, blocks: [], txs: [...seedTxs].reverse().slice(0, 32) };
  let timer = null;
  let stopped = false;
  let sent = 0;
  let sendErrors = 0;
  let lastSendError = '';
  let sending = Promise.resolve();
  const write = () => {
    const text = [state.head, state.blocks.length, ...state.blocks, state.txs.length, ...state.txs].join('\n') + '\n';
    writeFileSync(`${statePath}.tmp`, text);
    renameSync(`${statePath}.tmp`, statePath);
  };
  const tick = async () => {
    try {
      const head = Number(await rpc('eth_blockNumber'));
      if (head > state.head) {
        const from = Math.max(state.head + 1, head - 15);
        for (let n = from; n <= head; n++) {
          const b = await rpc('eth_getBlockByNumber', [hex(n), false]);
          state.blocks.unshift(b.hash);
          state.txs.unshift(...[...b.transactions].reverse());
        }
        state.blocks.length = Math.min(state.blocks.length, 16);
        state.txs.length = Math.min(state.txs.length, 32);
        state.head = head;
        write();
        // one after another, from different accounts where there are enough: anvil gives two
        // concurrent sends from one account the same nonce
        const senders = shuffle([...funded], rand);
        const batch = Array.from({ length: TX_PER_BLOCK }, (_, i) => ({ from: senders[i % senders.length], to: addresses[pickTo()], value: hex(1 + Math.floor(rand() * 1e12)) }));
        sending = sending.then(async () => {
          for (const tx of batch) {
            if (stopped) return;
            try {
              await rpc('eth_sendTransaction', [tx]);
              sent++;
            } catch (err) {
              sendErrors++;
              lastSendError = err.message;
            }
          }
        });
      }
    } catch (err) {
      if (!stopped) log(`tracker: ${err.message}`);
    }
    if (!stopped) timer = setTimeout(tick, 300);
  };
  const ready = tick();
  return {
    state,
    ready,
    stats: () => ({ sent, sendErrors, lastSendError }),
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
let tracker = null;

// ---- the seeded mix -------------------------------------------------------------------------------
const MIX = [
  ['eth_blockNumber', 20],
  ['eth_call', 20],
  ['eth_getBalance', 15],
  ['eth_chainId', 10],
  ['eth_getTransactionReceipt', 10],
  ['eth_getBlockByNumber', 10],
  ['eth_gasPrice', 5],
  ['eth_getTransactionCount', 5],
  ['eth_getBlockByHash', 5],
];
/**
 * BODIES lines for mix.lua: every 100 consecutive lines hold exactly the mix above, shuffled.
 * Keys are Zipf-distributed: contracts, addresses (the same ranking for balances, nonces and
 * balanceOf arguments), old txs and old blocks (each in a seeded order), and "recent" depths.
 * Ids count up from a seeded start; one in eight is a string.
 */
function makeBodies(rand, { addresses, contracts, oldTxs, oldBlocks }) {
  const pickAddr = zipf(addresses.length, ZIPF_S, rand);
  const pickContract = zipf(contracts.length, ZIPF_S, rand);
  const pickOldTx = zipf(oldTxs.length, ZIPF_S, rand);
  const pickOldBlock = zipf(oldBlocks.length, ZIPF_S, rand);
  const pickRecentTx = zipf(32, ZIPF_S, rand);
  const pickRecentBlock = zipf(16, ZIPF_S, rand);
  let id = 1 + Math.floor(rand() * 1e6);
  const deck = MIX.flatMap(([m, n]) => Array(n).fill(m));
  const lines = [];
  const call = (i, method, params) => `S {"jsonrpc":"2.0","id":${i},"method":"${method}","params":${JSON.stringify(params)}}`;
  while (lines.length < BODIES) {
    for (const method of shuffle([...deck], rand)) {
      const i = rand() < 0.125 ? `"w${(id++).toString(36)}"` : String(id++);
      const half = rand() < 0.5;
      switch (method) {
        case 'eth_call': {
          const data = half ? SEL_TOTAL_SUPPLY : SEL_BALANCE_OF + addresses[pickAddr()].slice(2).padStart(64, '0');
          lines.push(call(i, method, [{ to: contracts[pickContract()], data }, 'latest']));
          break;
        }
        case 'eth_getBalance':
        case 'eth_getTransactionCount':
          lines.push(call(i, method, [addresses[pickAddr()], 'latest']));
          break;
        case 'eth_getTransactionReceipt':
          lines.push(half ? call(i, method, [oldTxs[pickOldTx()]]) : `T ${i} ${1 + pickRecentTx()}`);
          break;
        case 'eth_getBlockByNumber':
          lines.push(half ? call(i, method, ['latest', false]) : `B ${i} ${pickRecentBlock()} ${rand() < 0.1}`);
          break;
        case 'eth_getBlockByHash':
          lines.push(half ? call(i, method, [oldBlocks[pickOldBlock()], false]) : `H ${i} ${1 + pickRecentBlock()}`);
          break;
        default:
          lines.push(call(i, method, []));
      }
    }
  }
  lines.length = BODIES;
  return lines;
}
const HIT_MIX = [
  ['eth_chainId', 20],
  ['eth_getBlockByHash', 25],
  ['eth_getBlockByNumber', 25],
  ['eth_getTransactionReceipt', 30],
];
/**
 * HIT=1: BODIES lines of calls the cache keeps once asked (the chain id, and old blocks and receipts,
 * all in final blocks), every 100 consecutive lines the HIT_MIX above, shuffled; keys Zipf-distributed
 * over seeded orders, ids counting up as in the mix. Only fixed bodies: nothing follows the head.
 */
function makeHitBodies(rand, { oldTxs, oldBlocks }) {
  const numbers = shuffle([...Array(oldBlocks.length).keys()].map((i) => i + 1), rand);
  const pickTx = zipf(oldTxs.length, ZIPF_S, rand);
  const pickBlock = zipf(oldBlocks.length, ZIPF_S, rand);
  const pickNumber = zipf(numbers.length, ZIPF_S, rand);
  let id = 1 + Math.floor(rand() * 1e6);
  const deck = HIT_MIX.flatMap(([m, n]) => Array(n).fill(m));
  const lines = [];
  const call = (i, method, params) => `S {"jsonrpc":"2.0","id":${i},"method":"${method}","params":${JSON.stringify(params)}}`;
  while (lines.length < BODIES) {
    for (const method of shuffle([...deck], rand)) {
      const i = rand() < 0.125 ? `"w${(id++).toString(36)}"` : String(id++);
      if (method === 'eth_getBlockByHash') lines.push(call(i, method, [oldBlocks[pickBlock()], false]));
      else if (method === 'eth_getBlockByNumber') lines.push(call(i, method, [hex(numbers[pickNumber()]), false]));
      else if (method === 'eth_getTransactionReceipt') lines.push(call(i, method, [oldTxs[pickTx()]]));
      else lines.push(call(i, method, []));
    }
  }
  lines.length = BODIES;
  return lines;
}

/**
 * The fixed answer of the `limit` target: a JSON-RPC answer as long as the mix's answers are on average
 * (the first 1,000 lines, asked of anvil directly), so that it costs what an average answer of the mix
 * costs to send. Returns the body and the sizes' mean and median.
 */
async function limitAnswer(lines, state) {
  const sizes = await inBatches(lines.slice(0, 1000), 20, async (line) => {
    const r = await fetch(`http://127.0.0.1:${PORTS.anvil}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: resolveLine(line, state) });
    return Buffer.byteLength(await r.text());
  });
  const mean = Math.round(sizes.reduce((a, b) => a + b, 0) / sizes.length);
  const base = '{"jsonrpc":"2.0","id":1,"result":"0x"}';
  const body = `{"jsonrpc":"2.0","id":1,"result":"0x${'0'.repeat(Math.max(0, mean - base.length))}"}`;
  return { body, mean, median: median(sizes) };
}

// ---- targets --------------------------------------------------------------------------------------
const urlOf = (t) =>
  t === 'gateway' || t === 'old' ? `http://127.0.0.1:${PORTS[t]}/eth/${API_KEY}` : t === 'direct' ? `http://127.0.0.1:${PORTS.up.direct}/` : `http://127.0.0.1:${PORTS[t]}/eth`;
/** The fixed answer file of the `limit` target (main writes it once the mix is known). */
let limitFile = null;
const upstreamUrl = (t) => `http://127.0.0.1:${PORTS.up[t]}/`;

function buildGateway(root = ROOT, out = join(ROOT, 'dist', 'mix-gateway.mjs')) {
  let manifest = join(ROOT, 'bench', 'gateway.mix.yaml');
  const text = readFileSync(manifest, 'utf8');
  const block = /^# cache:start\n[\s\S]*?^# cache:end\n/m;
  if (!block.test(text)) die(`${manifest} has no "# cache:start" ... "# cache:end" block`);
  if (!CACHE) {
    manifest = join(WORK, 'gateway.mix.nocache.yaml');
    writeFileSync(manifest, text.replace(block, ''));
  } else if (BATCH !== null) {
    if (!/batch: [0-9]+/.test(text)) die(`${manifest}'s cache block has no "batch: N" for BATCH to replace`);
    manifest = join(WORK, `gateway.mix.batch${BATCH}.yaml`);
    writeFileSync(manifest, text.replace(/batch: [0-9]+/, `batch: ${BATCH}`));
  }
  const t0 = Date.now();
  try {
    execFileSync(process.execPath, [join(root, 'bin/gateway.mjs'), 'build', manifest, '--out', out], { cwd: root, stdio: ['ignore', 2, 2] });
  } catch {
    die(`${root === ROOT ? 'the gateway' : root}: did not build from ${manifest}${CACHE ? ' (CACHE=0 builds it without the cache block, for a gateway that has no cache)' : ''}`);
  }
  log(`${root === ROOT ? 'gateway' : `old (${root})`} built from ${manifest.replace(ROOT + '/', '')} (cache ${CACHE ? 'on' : 'off'}) in ${Date.now() - t0} ms`);
}

async function startTarget(t) {
  const up = upstreamUrl(t);
  if (t === 'direct') return;
  if (t === 'limit') {
    startProc(t, PROXY_CPU, [process.execPath, '--no-memory-reducer', ...(process.env.GW_NODE_ARGS ?? '').split(' ').filter(Boolean), join(ROOT, 'bench', 'fixed-upstream.mjs'), limitFile, String(PORTS.limit)]);
    return waitPort(t, PORTS.limit, 15);
  }
  if (t === 'gateway' || t === 'old') {
    const keys = join(WORK, 'keys.yaml');
    writeFileSync(keys, `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(API_KEY).digest('hex')}"\n`);
    const admin = t === 'old' ? PORTS.adminOld : PORTS.admin;
    const env = { ...process.env, GATEWAY_KEYS_FILE: keys, HOST: '127.0.0.1', PORT: String(PORTS[t]), ADMIN_PORT: String(admin), UPSTREAM_URL: up };
    const file = join(ROOT, 'dist', t === 'old' ? 'mix-gateway-old.mjs' : 'mix-gateway.mjs');
    startProc(t, PROXY_CPU, [process.execPath, '--no-memory-reducer', ...(process.env.GW_NODE_ARGS ?? '').split(' ').filter(Boolean), file], { env });
    return waitPort(t, PORTS[t], 30);
  }
  if (t === 'nginx') {
    mkdirSync(join(RUN, 'tmp'), { recursive: true });
    mkdirSync(join(RUN, 'conf'), { recursive: true });
    copyFileSync(join(BENCH_DIR, 'nginx', 'gateway.njs'), join(RUN, 'gateway.js'));
    chmodSync(join(RUN, 'gateway.js'), 0o644);
    const conf = readFileSync(join(BENCH_DIR, 'nginx', 'peer.conf.tmpl'), 'utf8')
      .replaceAll('@RUN@', RUN)
      .replaceAll('@UP_PORT@', String(PORTS.up.nginx))
      .replaceAll('@PORT@', String(PORTS.nginx))
      .replaceAll('@KEY@', API_KEY)
      .replaceAll('@CHECK@', 'js_content gw.check;')
      .replaceAll('@LOAD_NJS@', `load_module ${NJS_SO};`)
      .replaceAll('@NJS_IMPORT@', `js_import gw from ${RUN}/gateway.js;`);
    writeFileSync(join(RUN, 'conf', 'nginx.conf'), conf);
    startProc(t, PROXY_CPU, ['nginx', '-p', `${RUN}/`, '-e', join(OUT_DIR, 'logs', 'nginx.early.log'), '-c', join(RUN, 'conf', 'nginx.conf')]);
    return waitPort(t, PORTS.nginx, 10);
  }
  // node-stream: the harness's peer, copied under the project so that it finds undici
  const harness = join(WORK, 'harness');
  mkdirSync(harness, { recursive: true });
  for (const f of ['peer-node-min.mjs', 'common.mjs']) copyFileSync(join(BENCH_DIR, f), join(harness, f));
  const env = { ...process.env, PORT: String(PORTS['node-stream']), UPSTREAM_URL: up, API_KEY, NODE_MIN_API: 'stream' };
  startProc(t, PROXY_CPU, [process.execPath, join(harness, 'peer-node-min.mjs')], { env });
  return waitPort(t, PORTS['node-stream'], 15);
}

/** Each sample body twice (two different ids, so a cache answers the second): 200, a result, the request's id (limit: any id). */
async function smoke(t, lines, state) {
  let good = 0;
  let first = '';
  let n = 0;
  for (const line of lines) {
    for (const variant of [0, 1]) {
      n++;
      const text = resolveLine(line, state);
      const req = JSON.parse(text);
      if (variant === 1) req.id = typeof req.id === 'string' ? `${req.id}-again` : req.id + 1_000_000_000;
      let why = '';
      try {
        const r = await fetch(urlOf(t), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': API_KEY }, body: JSON.stringify(req) });
        const body = await r.text();
        let j = null;
        try {
          j = JSON.parse(body);
        } catch {}
        if (r.status !== 200) why = `HTTP ${r.status} ${body.slice(0, 120)}`;
        else if (!j || j.jsonrpc !== '2.0') why = `not a JSON-RPC answer: ${body.slice(0, 120)}`;
        else if ('error' in j) why = `error ${JSON.stringify(j.error).slice(0, 120)}`;
        else if (!('result' in j)) why = 'no result';
        else if (j.id !== req.id && t !== 'limit') why = `id ${JSON.stringify(j.id)} for ${JSON.stringify(req.id)}`;
      } catch (err) {
        why = err.message;
      }
      if (why === '') good++;
      else if (first === '') first = `${req.method}: ${why}`;
    }
  }
  return { good, n, first };
}

// ---- measuring ------------------------------------------------------------------------------------
function runWrk(url, seconds, outFile) {
  const argv = [...(PIN ? ['taskset', '-c', String(LOAD_CPU)] : []), 'wrk', `-t${THREADS}`, `-c${CONNS}`, `-d${seconds}s`, '--timeout', '5s', '-s', join(ROOT, 'bench', 'mix.lua'), url];
  const env = { ...process.env, MIX_BODIES: join(RUN, 'bodies.txt'), MIX_STATE: join(RUN, 'state.txt'), MIX_API_KEY: API_KEY, MIX_CLIENT_BATCH: String(CLIENT_BATCH) };
  return runLoad(argv, env, seconds, outFile);
}
/** Runs a load generator (registered as 'wrk', so that it is stopped with the rest) and parses its "RESULT k=v ..." line (null: none). */
function runLoad(argv, env, seconds, outFile) {
  const child = spawn(argv[0], argv.slice(1), { detached: true, env, stdio: ['ignore', 'pipe', 'pipe'] });
  procs.set('wrk', { child, alive: true, exited: new Promise((d) => child.once('exit', d)) });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.on('data', (c) => (out += c));
  const guard = setTimeout(() => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {}
  }, (seconds + 30) * 1000);
  return new Promise((done) =>
    child.once('close', () => {
      clearTimeout(guard);
      procs.delete('wrk');
      if (outFile) writeFileSync(outFile, out, { flag: 'a' });
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      done(line ? Object.fromEntries(line.slice(7).split(' ').map((kv) => [kv.split('=')[0], Number(kv.split('=')[1])])) : null);
    }),
  );
}

/** RATE: bench/open-loop.mjs at `rate` req/s on LOAD_CPU, after one second of the same rate unrecorded; its RESULT line parsed as runWrk's. */
function runOpenLoop(url, rate, seconds, outFile) {
  const argv = [...(PIN ? ['taskset', '-c', String(LOAD_CPU)] : []), process.execPath, join(ROOT, 'bench', 'open-loop.mjs')];
  const env = {
    ...process.env,
    OL_URL: url,
    OL_RATE: String(rate),
    OL_SECONDS: String(seconds),
    OL_WARMUP: '1',
    OL_CONNS: String(RATE_CONNS),
    OL_BODIES: join(RUN, 'bodies.txt'),
    OL_STATE: join(RUN, 'state.txt'),
    OL_API_KEY: API_KEY,
    OL_CLIENT_BATCH: String(CLIENT_BATCH),
  };
  return runLoad(argv, env, seconds + 1, outFile);
}

async function upstreamCounts() {
  const r = await fetch(`http://127.0.0.1:${PORTS.control}/counts`);
  return r.json();
}

/** CPU ticks (utime+stime) of every user-space process: [pid, pgid, ticks]. */
function scanProcs() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const st = readFileSync(`/proc/${name}/stat`, 'latin1');
      const f = st.slice(st.lastIndexOf(') ') + 2).split(' ');
      if (f[2] === '0') continue; // kernel threads
      out.push([Number(name), Number(f[2]), Number(f[11]) + Number(f[12])]);
    } catch {}
  }
  return out;
}
function coreTicks() {
  const lines = readFileSync('/proc/stat', 'latin1').split('\n');
  return [PROXY_CPU, LOAD_CPU].map((c) => {
    const f = lines.find((l) => l.startsWith(`cpu${c} `)).trim().split(/\s+/).slice(1).map(Number);
    const total = f.reduce((a, b) => a + b, 0);
    return { busy: total - f[3] - f[4], total };
  });
}
const HZ = Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;
/** CPU% (100 = one core) per group of pgids between two scans, and of processes this run did not start. */
function cpuSplit(s0, s1, seconds) {
  const before = new Map(s0.map(([pid, , t]) => [pid, t]));
  const groups = Object.fromEntries([...procs].map(([name, p]) => [p.child.pid, name]));
  const by = { other: 0 };
  for (const [pid, pgid, t] of s1) {
    const d = Math.max(0, t - (before.get(pid) ?? 0));
    const name = groups[pgid] ?? (pid === process.pid ? 'self' : null);
    if (name) by[name] = (by[name] ?? 0) + d;
    else if (pgid !== process.pid && pid !== process.ppid) by.other += d;
  }
  for (const k of Object.keys(by)) by[k] = Math.round((100 * by[k]) / HZ / seconds);
  return by;
}
let quietSpent = 0;
async function waitQuiet() {
  if (QUIET_MAX === 0) return;
  const start = Date.now();
  for (;;) {
    const s0 = scanProcs();
    await sleep(1000);
    const other = cpuSplit(s0, scanProcs(), 1).other;
    const waited = (Date.now() - start) / 1000;
    if (other <= QUIET_MAX) break;
    if (waited >= QUIET_WAIT || quietSpent + waited >= QUIET_BUDGET) {
      log(`processes not started by this run still use ${other}% CPU; measuring anyway (see other_cpu)`);
      break;
    }
    log(`waiting: processes not started by this run use ${other}% CPU`);
    await sleep(2000);
  }
  quietSpent += (Date.now() - start) / 1000;
}

const COLS = ['round', 'target', 'ok_rps', 'rps', 'p50_us', 'p90_us', 'p99_us', 'requests', 'errors', 'nulls', 'sockerr', 'up_calls', 'up_http', 'up_per_1000', 'target_cpu', 'anvil_cpu', 'counter_cpu', 'cpu_proxy', 'cpu_load', 'other_cpu'];
/** rate.tsv: the same, and what the open-loop generator adds. */
const RATE_COLS = [...COLS.slice(0, 2), 'offered_rps', ...COLS.slice(2), 'max_us', 'lag_p50_us', 'lag_p99_us', 'svc_p50_us', 'svc_p99_us', 'conns', 'warm'];
const rows = [];
const rateRows = [];
const methodTotals = {}; // target -> method -> upstream calls (the saturation rounds only)

/** One slice of load on target t: wrk flat out, or with `offered` (req/s) the open-loop generator at that rate. */
async function measure(t, round, offered = null) {
  await waitQuiet();
  const c0 = await upstreamCounts();
  const s0 = scanProcs();
  const k0 = coreTicks();
  const t0 = process.hrtime.bigint();
  const res =
    offered === null
      ? await runWrk(urlOf(t), DURATION, join(OUT_DIR, 'logs', 'wrk.log'))
      : await runOpenLoop(urlOf(t), offered, RATE_DURATION, join(OUT_DIR, 'logs', 'open-loop.log'));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = cpuSplit(s0, scanProcs(), seconds);
  const k1 = coreTicks();
  const c1 = await upstreamCounts();
  if (!res) {
    log(`${t}: ${offered === null ? 'wrk gave no result (see logs/wrk.log)' : 'the open-loop generator gave no result (see logs/open-loop.log)'}`);
    return;
  }
  const none = { calls: 0, requests: 0, methods: {} }; // limit: no upstream
  const [u0, u1] = [c0[t] ?? none, c1[t] ?? none];
  const up = { calls: u1.calls - u0.calls, http: u1.requests - u0.requests };
  if (offered === null) {
    const mt = (methodTotals[t] ??= {});
    for (const [m, n] of Object.entries(u1.methods)) mt[m] = (mt[m] ?? 0) + n - (u0.methods[m] ?? 0);
  }
  const busy = (i) => Math.round((100 * (k1[i].busy - k0[i].busy)) / Math.max(1, k1[i].total - k0[i].total));
  const row = {
    round,
    target: t,
    ok_rps: ((res.requests - res.errors) / res.seconds).toFixed(1),
    rps: res.rps.toFixed(1),
    p50_us: res.p50_us,
    p90_us: res.p90_us,
    p99_us: res.p99_us,
    requests: res.requests,
    errors: res.errors,
    nulls: res.nulls,
    sockerr: res.err_connect + res.err_read + res.err_write + res.err_timeout,
    up_calls: up.calls,
    up_http: up.http,
    // the open-loop generator's warm-up second is not in its figures but is in the proxy's count
    up_per_1000: res.requests > 0 ? ((1000 * up.calls) / ((res.requests + (res.warm ?? 0)) * CLIENT_BATCH)).toFixed(1) : '',
    target_cpu: t === 'direct' ? 0 : (cpu[t] ?? 0),
    anvil_cpu: cpu.anvil ?? 0,
    counter_cpu: cpu.counter ?? 0,
    cpu_proxy: busy(0),
    cpu_load: busy(1),
    other_cpu: cpu.other,
  };
  if (offered !== null) {
    Object.assign(row, { offered_rps: res.offered, max_us: res.max_us, lag_p50_us: res.lag_p50_us, lag_p99_us: res.lag_p99_us, svc_p50_us: res.svc_p50_us, svc_p99_us: res.svc_p99_us, conns: res.conns, warm: res.warm });
    rateRows.push(row);
    writeFileSync(join(OUT_DIR, 'rate.tsv'), RATE_COLS.map((c) => row[c]).join('\t') + '\n', { flag: 'a' });
  } else {
    rows.push(row);
    writeFileSync(join(OUT_DIR, 'results.tsv'), COLS.map((c) => row[c]).join('\t') + '\n', { flag: 'a' });
  }
  log(
    `${offered === null ? '' : `at ${offered} req/s `}round ${round} ${t.padEnd(11)} ${row.ok_rps.padStart(9)} ok req/s  p50 ${String(row.p50_us).padStart(6)}us  p99 ${String(row.p99_us).padStart(7)}us  ` +
      `errors ${row.errors}  sockerr ${row.sockerr}${offered === null ? '' : `  generator lag p99 ${row.lag_p99_us}us`}  upstream/1000 ${row.up_per_1000}  target-cpu ${row.target_cpu}%  anvil ${row.anvil_cpu}%  ` +
      `cpu${PROXY_CPU} ${row.cpu_proxy}%  cpu${LOAD_CPU} ${row.cpu_load}%  other ${row.other_cpu}%`,
  );
}

// ---- report ---------------------------------------------------------------------------------------
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
function perRound(a, b, col, from = rows) {
  const out = [];
  for (let r = 1; r <= Math.max(0, ...from.map((w) => w.round)); r++) {
    const x = from.find((w) => w.round === r && w.target === a);
    const y = from.find((w) => w.round === r && w.target === b);
    if (x && y && Number(y[col]) > 0 && Number(x.requests) > 0) out.push(Number(x[col]) / Number(y[col]));
  }
  return out;
}
const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '–');
/** "median (min–max)" of per-round ratios, or '–'. */
const ratioText = (xs) => (xs.length ? `${fmt(median(xs), 2)} (${fmt(Math.min(...xs), 2)}–${fmt(Math.max(...xs), 2)})` : '–');

/** RATE: the fixed-rate phase's table, and its per-round ratios. */
function rateReport(offered) {
  if (rateRows.length === 0) return '';
  const lines = [
    '| target | offered req/s | ok req/s | p50 ms | p90 ms | p99 ms (median) | p99 min–max | max ms | error answers | socket errors | generator lag p50 / p99 ms | upstream calls per 1,000 | target CPU% | load core % | other CPU% (max) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const ms = (us) => fmt(us / 1000, 2);
  for (const t of TARGETS) {
    const rs = rateRows.filter((r) => r.target === t);
    if (rs.length === 0) continue;
    const sum = (c) => rs.reduce((a, r) => a + Number(r[c]), 0);
    const med = (c) => median(rs.map((r) => Number(r[c])));
    const p99s = rs.map((r) => Number(r.p99_us));
    lines.push(
      `| ${t} | ${fmt(offered)} | ${fmt(med('ok_rps'))} | ${ms(med('p50_us'))} | ${ms(med('p90_us'))} | ${ms(med('p99_us'))} | ${ms(Math.min(...p99s))}–${ms(Math.max(...p99s))} | ${ms(med('max_us'))} | ` +
        `${sum('errors')} | ${sum('sockerr')} | ${ms(med('lag_p50_us'))} / ${ms(med('lag_p99_us'))} | ${fmt(sum('requests') > 0 ? (1000 * sum('up_calls')) / ((sum('requests') + sum('warm')) * CLIENT_BATCH) : NaN, 1)} | ` +
        `${fmt(med('target_cpu'))} | ${fmt(med('cpu_load'))} | ${fmt(Math.max(...rs.map((r) => Number(r.other_cpu))))} |`,
    );
  }
  const vs = (a, b) => `| ${a} p99 ÷ ${b} p99, per round | ${ratioText(perRound(a, b, 'p99_us', rateRows))} |`;
  const ratios = ['| at the fixed rate | median (min–max) |', '|---|---:|'];
  if (TARGETS.includes('gateway') && TARGETS.includes('nginx')) ratios.push(vs('gateway', 'nginx'), `| gateway p50 ÷ nginx p50, per round | ${ratioText(perRound('gateway', 'nginx', 'p50_us', rateRows))} |`);
  if (TARGETS.includes('gateway') && TARGETS.includes('node-stream')) ratios.push(vs('gateway', 'node-stream'));
  return (
    `## At a fixed offered rate\n\n${fmt(offered)} req/s offered to every target: RATE=${RATE} × ${RATE_OF}'s median ok req/s in the rounds above, ` +
    `${RATE_RUNS} round(s) of ${RATE_DURATION} s each (after 1 s at the same rate, not recorded), sent open-loop by bench/open-loop.mjs on core ${LOAD_CPU} ` +
    `(up to ${RATE_CONNS} connections). Latency is timed from each request's scheduled send, so a target that falls behind pays for every request ` +
    `it delays; the generator's own lateness (lag: sent − scheduled, ~1 ms of timer granularity and its load) is inside every figure, and the ` +
    `limit row (a server answering from memory) shows that floor. p50/p90/max: medians over rounds; upstream calls pool every round. ` +
    `Other CPU%: processes this run did not start, the most in any round (100 = one core): any of it on the targets' core queues every request due meanwhile.\n\n` +
    `${lines.join('\n')}\n\n${ratios.join('\n')}\n`
  );
}

function report(smokes, meta, offered = null) {
  const lines = [
    '| target | ok req/s (median) | min–max | p50 ms | p99 ms | error answers | socket errors | null results | upstream calls per 1,000 | target CPU% | anvil CPU% | smoke |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  const summary = {};
  for (const t of TARGETS) {
    const rs = rows.filter((r) => r.target === t);
    if (rs.length === 0) {
      lines.push(`| ${t} | not measured |${' |'.repeat(9)} ${smokes[t] ?? ''} |`);
      continue;
    }
    const ok = rs.map((r) => Number(r.ok_rps));
    const sum = (c) => rs.reduce((a, r) => a + Number(r[c]), 0);
    const s = {
      ok: median(ok),
      p50: median(rs.map((r) => r.p50_us)) / 1000,
      p99: median(rs.map((r) => r.p99_us)) / 1000,
      errors: sum('errors'),
      per1000: sum('requests') > 0 ? (1000 * sum('up_calls')) / (sum('requests') * CLIENT_BATCH) : NaN,
    };
    summary[t] = s;
    lines.push(
      `| ${t} | ${fmt(s.ok)} | ${fmt(Math.min(...ok))}–${fmt(Math.max(...ok))} | ${fmt(s.p50, 2)} | ${fmt(s.p99, 2)} | ${s.errors} | ${sum('sockerr')} | ${sum('nulls')} | ` +
        `${fmt(s.per1000, 1)} | ${fmt(median(rs.map((r) => r.target_cpu)))} | ${fmt(median(rs.map((r) => r.anvil_cpu)))} | ${smokes[t] ?? ''} |`,
    );
  }
  const check = ['| target | goal | measured | met? |', '|---|---|---:|---|'];
  const verdict = (v) => (v === null ? 'not measured' : v ? 'met' : '**missed**');
  const g = summary.gateway;
  const n = summary.nginx;
  const rpsRatios = perRound('gateway', 'nginx', 'ok_rps');
  const p99Ratios = perRound('gateway', 'nginx', 'p99_us');
  const rr = rpsRatios.length ? median(rpsRatios) : null;
  const pr = p99Ratios.length ? median(p99Ratios) : null;
  check.push(`| gateway ok req/s ÷ nginx+njs, per round | ≥ 2 | ${rr === null ? '–' : `${fmt(rr, 2)} (${fmt(Math.min(...rpsRatios), 2)}–${fmt(Math.max(...rpsRatios), 2)})`} | ${verdict(rr === null ? null : rr >= 2)} |`);
  check.push(`| gateway upstream calls per 1,000 ${CALLS} | ≤ 300 | ${g ? fmt(g.per1000, 1) : '–'} | ${verdict(g ? g.per1000 <= 300 : null)} |`);
  check.push(`| gateway p99 ÷ nginx+njs p99, per round | ≤ 1 | ${pr === null ? '–' : `${fmt(pr, 2)} (${fmt(Math.min(...p99Ratios), 2)}–${fmt(Math.max(...p99Ratios), 2)})`} | ${verdict(pr === null ? null : pr <= 1)} |`);
  check.push(`| gateway error answers (not a target; they never count as throughput) | 0 | ${g ? g.errors : '–'} | ${verdict(g ? g.errors === 0 : null)} |`);
  const limitRatios = perRound('gateway', 'limit', 'ok_rps');
  if (limitRatios.length) check.push(`| gateway ok req/s ÷ limit (a node:http server answering from memory, same core), per round | (information) | ${ratioText(limitRatios)} | – |`);
  const oldRatios = perRound('gateway', 'old', 'ok_rps');
  if (oldRatios.length) check.push(`| gateway ok req/s ÷ old (${OLD}), per round | (information) | ${ratioText(oldRatios)} | – |`);
  const methods = Object.keys(methodTotals);
  const allMethods = [...new Set(methods.flatMap((t) => Object.keys(methodTotals[t])))].sort();
  const perMethod = [`| upstream calls per 1,000 ${CALLS}, by method | ${methods.join(' | ')} |`, `|---|${methods.map(() => '---:').join('|')}|`];
  for (const m of allMethods) {
    perMethod.push(`| ${m} | ${methods.map((t) => {
      const req = rows.filter((r) => r.target === t).reduce((a, r) => a + r.requests, 0);
      return fmt((1000 * (methodTotals[t][m] ?? 0)) / Math.max(1, req), 1);
    }).join(' | ')} |`);
  }
  const text =
    `# bench:mix ${new Date().toISOString()}\n\n${meta}\n\n` +
    `Per target: ok req/s is answers without an error per second (median of ${RUNS} rounds of ${DURATION} s); p50 and p99 are medians over rounds ` +
    `(wrk, all answers); upstream calls per 1,000 ${CALLS} pool every round (the counting proxy, a batch's items one by one, the gateway's ` +
    `health checks and head polls included).\n\n${lines.join('\n')}\n\n` +
    `${HIT ? '**HIT=1: an all-hit workload (calls the cache keeps once asked), not the mix: only the gateway ÷ limit figure means something here.**\n\n' : ''}` +
    `Targets of the issue (gateway cache ${CACHE ? 'ON' : 'OFF'}):\n\n${check.join('\n')}\n\n${perMethod.join('\n')}\n` +
    (offered === null ? '' : `\n${rateReport(offered)}`);
  writeFileSync(join(OUT_DIR, 'report.md'), text);
  writeFileSync(
    join(OUT_DIR, 'methods.tsv'),
    'target\tmethod\tupstream_calls\n' + methods.flatMap((t) => Object.entries(methodTotals[t]).map(([m, c]) => `${t}\t${m}\t${c}`)).join('\n') + '\n',
  );
  return text;
}

// ---- main -----------------------------------------------------------------------------------------
async function main() {
  ensureDeps();
  mkdirSync(join(OUT_DIR, 'logs'), { recursive: true });
  mkdirSync(WORK, { recursive: true });
  RUN = mkdtempSync('/tmp/mix-bench.');
  chmodSync(RUN, 0o755); // nginx's workers (nobody) read gateway.js here
  const ports = [PORTS.anvil, PORTS.control, ...FORWARDING.map((t) => PORTS.up[t]), ...TARGETS.filter((t) => t !== 'direct').map((t) => PORTS[t]), PORTS.admin, PORTS.adminOld];
  for (const p of ports) if (await portOpen(p)) die(`127.0.0.1:${p} is already in use; pick another BASE_PORT`);
  if (PIN) execFileSync('taskset', ['-a', '-cp', String(LOAD_CPU), String(process.pid)], { stdio: 'ignore' });
  if (TARGETS.includes('gateway')) buildGateway();
  if (TARGETS.includes('old')) buildGateway(OLD, join(ROOT, 'dist', 'mix-gateway-old.mjs'));

  const est = TARGETS.length * (WARMUP + 1 + RUNS * (DURATION + 2) + (RATE === null ? 0 : RATE_RUNS * (RATE_DURATION + 3))) + 30;
  log(`targets ${TARGETS.join(', ')}; about ${Math.ceil(est / 60)} min; results in ${OUT_DIR}`);
  startProc('anvil', LOAD_CPU, [ANVIL_BIN, '--host', '127.0.0.1', '--port', String(PORTS.anvil), '--chain-id', '1', '--block-time', '2', '--silent']);
  await waitPort('anvil', PORTS.anvil, 20);
  const chainId = await rpc('eth_chainId');
  if (chainId !== '0x1') throw new Error(`anvil answered chain id ${chainId}`);

  // one stream per purpose, so that how long anything takes (blocks mined meanwhile) never shifts the mix
  const rand = rng(`${SEED}:addresses`);
  const funded = await rpc('eth_accounts');
  const addresses = [...funded];
  while (addresses.length < 2000) addresses.push(`0x${[...Array(20)].map(() => Math.floor(rand() * 256).toString(16).padStart(2, '0')).join('')}`);
  shuffle(addresses, rand);
  const t0 = Date.now();
  const chain = await setupChain(rng(`${SEED}:history`), addresses, funded);
  // HIT=1: every old block final (anvil's finalized block is 32 below its head), so that the cache keeps them
  if (HIT) await rpc('anvil_mine', [hex(40)]);
  log(`node ready in ${Date.now() - t0} ms: ${chain.contracts.length} contracts, ${chain.history.length} txs of history, head ${chain.head}`);

  const mixRand = rng(`${SEED}:mix`);
  const oldTxs = shuffle([...chain.history], mixRand);
  const oldBlocks = shuffle([...chain.blockHashes], mixRand);
  const lines = HIT ? makeHitBodies(mixRand, { oldTxs, oldBlocks }) : makeBodies(mixRand, { addresses, contracts: chain.contracts, oldTxs, oldBlocks });
  writeFileSync(join(RUN, 'bodies.txt'), lines.join('\n') + '\n');
  // tx and block hashes depend on block timestamps, so they differ from run to run; the rest follows the seed
  const bodiesSha = createHash('sha256').update(lines.join('\n').replace(/"0x[0-9a-f]{64}"/g, '"H"')).digest('hex').slice(0, 12);
  tracker = track(join(RUN, 'state.txt'), funded, addresses, rng(`${SEED}:sender`), chain.history);
  await tracker.ready;
  let limitNote = '';
  if (TARGETS.includes('limit')) {
    const a = await limitAnswer(lines, tracker.state);
    limitFile = join(RUN, 'limit.json');
    writeFileSync(limitFile, a.body);
    limitNote = `limit answers ${Buffer.byteLength(a.body)} bytes of body (the ${HIT ? 'hit workload' : 'mix'}'s answers: mean ${a.mean}, median ${a.median} bytes)`;
    log(limitNote);
  }

  const listen = FORWARDING.map((t) => `${t}:${PORTS.up[t]}`).join(',');
  startProc('counter', LOAD_CPU, [process.execPath, join(ROOT, 'bench', 'mix-proxy.mjs')], {
    env: { ...process.env, UPSTREAM_URL: `http://127.0.0.1:${PORTS.anvil}/`, LISTEN: listen, CONTROL_PORT: String(PORTS.control) },
  });
  await waitPort('counter', PORTS.control, 15);

  const meta = [
    `node ${process.version}, ${spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim()}, ${spawnSync('wrk', ['-v'], { encoding: 'utf8' }).stdout.split('\n')[0].split(' ').slice(0, 2).join(' ')}, ` +
      `${cpus().length} CPUs,${(/model name\s*:(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8')) ?? [, ''])[1]}`,
    `${execFileSync(ANVIL_BIN, ['--version']).toString().split('\n')[0]} (--block-time 2, chain id 1), TX_PER_BLOCK=${TX_PER_BLOCK}`,
    `RUNS=${RUNS} DURATION=${DURATION} WARMUP=${WARMUP} CONNS=${CONNS} THREADS=${THREADS} PIN=${PIN ? 1 : 0} PROXY_CPU=${PROXY_CPU} LOAD_CPU=${LOAD_CPU} CACHE=${CACHE ? 1 : 0} BATCH=${BATCH ?? "manifest"} CLIENT_BATCH=${CLIENT_BATCH} ` +
      `SEED=${SEED} BODIES=${BODIES} ZIPF_S=${ZIPF_S} TARGETS='${TARGETS.join(' ')}' HIT=${HIT ? 1 : 0}` +
      (RATE === null ? '' : ` RATE=${RATE} RATE_OF=${RATE_OF} RATE_RUNS=${RATE_RUNS} RATE_DURATION=${RATE_DURATION} RATE_CONNS=${RATE_CONNS}`),
    ...(limitNote ? [limitNote] : []),
    `the ${HIT ? 'hit workload' : 'mix'}'s sha256 ${bodiesSha} (the bodies with every tx and block hash masked: those depend on block timestamps; the rest follows SEED)`,
    `git ${spawnSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim()}${spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).stdout.trim() ? ' (modified)' : ''}`,
  ].map((l) => `- ${l}`).join('\n');
  writeFileSync(join(OUT_DIR, 'meta.txt'), meta + '\n');
  writeFileSync(join(OUT_DIR, 'results.tsv'), COLS.join('\t') + '\n');

  const smokes = {};
  const active = [];
  for (const t of TARGETS) {
    try {
      await startTarget(t);
    } catch (err) {
      log(`${t}: failed to start (${err.message}); skipped`);
      smokes[t] = 'did not start';
      continue;
    }
    const s = await smoke(t, lines.slice(0, 100), tracker.state);
    smokes[t] = s.good === s.n ? `ok ${s.good}/${s.n}` : `**${s.n - s.good} of ${s.n} wrong**: ${s.first.replaceAll('|', '\\|')}`;
    log(`${t}: smoke ${smokes[t]}`);
    active.push(t);
    if (WARMUP > 0) await runWrk(urlOf(t), WARMUP, join(OUT_DIR, 'logs', 'warmup.log'));
  }
  for (let r = 1; r <= RUNS; r++) {
    for (let i = 0; i < active.length; i++) await measure(active[(i + r - 1) % active.length], r);
  }
  // RATE: the same targets at one fixed offered rate, set by RATE_OF's max in the rounds above
  let offered = null;
  if (RATE !== null) {
    const ref = median(rows.filter((w) => w.target === RATE_OF).map((w) => Number(w.ok_rps)));
    if (ref > 0) {
      offered = Math.round(RATE * ref);
      writeFileSync(join(OUT_DIR, 'rate.tsv'), RATE_COLS.join('\t') + '\n');
      log(`fixed-rate phase: ${offered} req/s (${RATE} × ${RATE_OF}'s ${ref.toFixed(0)})`);
      for (let r = 1; r <= RATE_RUNS; r++) {
        for (let i = 0; i < active.length; i++) await measure(active[(i + r - 1) % active.length], r, offered);
      }
    } else log(`fixed-rate phase skipped: ${RATE_OF} has no ok req/s in this run`);
  }
  tracker.stop();
  const { sent, sendErrors, lastSendError } = tracker.stats();
  const refused = sendErrors ? `, ${sendErrors} refused by anvil (last: ${lastSendError})` : '';
  const text = report(smokes, `${meta}\n- background sender: ${sent} txs sent during the run${refused}; head at the end ${tracker.state.head}`, offered);
  for (const name of [...procs.keys()]) await stopProc(name);
  console.log('\n' + text + `\n(written to ${OUT_DIR})`);
}

// TAIL=1: issue 33's tail-latency scenario instead (bench/tail.mjs): this file's node, mix, processes and load generators, its own upstreams and targets.
if ((process.env.TAIL ?? '0') !== '0') main = async () => (await import('./tail.mjs')).runTail({ ensureDeps, log, rpc, rng, shuffle, setupChain, makeBodies, track, startProc, stopProc, waitPort,
  portOpen, runWrk, runOpenLoop, waitQuiet, scanProcs, cpuSplit, coreTicks, median, PORTS, OUT_DIR, WORK, ROOT, BENCH_DIR, NJS_SO, ANVIL_BIN, API_KEY, SEED, PIN, PROXY_CPU, LOAD_CPU,
  RUNS, DURATION, WARMUP, CONNS, RATE, RATE_RUNS, RATE_DURATION, RATE_CONNS, setRun: (dir) => (RUN = dir), setTracker: (t) => (tracker = t) });
main().then(
  () => process.exit(0),
  (err) => {
    console.error(`bench:mix: ${err.stack ?? err}`);
    process.exitCode = 1;
    tracker?.stop();
    Promise.all([...procs.keys()].map(stopProc)).finally(() => process.exit(1));
  },
);
