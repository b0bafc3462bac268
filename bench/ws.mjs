#!/usr/bin/env node
// `npm run bench:ws`: WebSocket fan-out (issue 38), three designs side by side in
// one run, in front of one anvil (from npm, --no-mining: blocks come only from
// anvil_mine), everything on 127.0.0.1:
//  - gateway: the gateway built from bench/gateway.ws.yaml (`websocket: true`),
//    run as docs/operations.md says (node --no-memory-reducer),
//    its upstream anvil through a timestamping proxy in this process, which also
//    counts what the gateway asks of the node (its polls and its block fetches),
//    and its heads pushed by anvil over the upstream's `ws:` (issue 46: one
//    upstream socket per upstream, counted from the gateway's log);
//  - pinned: bench/ws-pinned-proxy.mjs, proxyd's design: one upstream socket to
//    anvil per client socket, frames piped both ways;
//  - anvil: the clients subscribed on anvil itself.
// The clients are bench/ws-clients.mjs processes (`ws`), apart from the targets
// (ulimit -n is the targets' alone), each socket subscribed to newHeads, and every
// notification checked (its subscription, ascending without a gap, one hash per
// height, equal to anvil's).
//
// Part 1, memory: SOCKETS (10,000) sockets open and subscribed on each target,
// fresh (started for the part): the RSS (VmRSS of /proc/PID/status) once every
// socket has had one new block, minus the RSS before the first socket, per socket.
// The pinned design's figure is its proxies' (PINNED_PROCS processes: each client
// socket costs it two descriptors, and ulimit -n is 20,000) plus what anvil grew
// by for its upstream sockets.
// Part 2, latency: FANOUT (1,000) subscribers on each target; BLOCKS (100) blocks
// mined one at a time, each once every subscriber had the one before and GAP_MS
// later. Per block: from anvil_mine's answer to the last subscriber's receipt, for
// all three (the gateway learns the block from its upstream socket: its push, the
// block's fetch, one eth_getBlockByNumber, and the fan-out). Also per block, first
// to last receipt (the fan-out alone: anvil pushes before it answers anvil_mine),
// the gateway's poll delay (anvil_mine's answer to the first poll answer, User-Agent
// chain-gateway-health, showing the block: what a gateway without sockets waits),
// and the CPU time of each target and of anvil over the blocks.
// Part 3, eth_blockNumber on a pool (/pool: two upstreams, each with its socket):
// BLOCKS blocks, each GAP_MS after the last; from anvil_mine's answer to the first
// answer of eth_blockNumber (asked back to back) that names the block.
// Then the Blockbook part (issue 46), bench/ws-blockbook.mjs, with the same knobs:
// SOCKETS Blockbook sockets' RSS, a block to FANOUT subscribeNewBlock subscribers
// over BLOCKS blocks, the upstream sockets held. The report ends with one summary
// table of both parts.
//
//   npm run bench:ws
//   SOCKETS=2000 FANOUT=200 BLOCKS=10 npm run bench:ws     # a quick look
// Other knobs: CLIENT_PROCS=4 (clients' processes for part 1; part 2 uses 2),
// PINNED_PROCS=2, GAP_MS=100, BASE_PORT=18840, OUT=<file> (the report, also printed),
// BLOCKBOOK=0 (the EVM part alone; the Blockbook part alone: node bench/ws-blockbook.mjs).
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, Agent } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { cpus, loadavg } from 'node:os';
import { cpuMs, rssMiB } from './proc.mjs';
import { BLOCK_TIMEOUT_MS, ROOT, allHave, closeClients, elapsedS, int, log, ms, now, openClients, pidOf, q, start, stop, summaryTable, until, workDir } from './ws-harness.mjs';

const SOCKETS = int('SOCKETS', 10_000);
const FANOUT = int('FANOUT', 1_000);
const BLOCKS = int('BLOCKS', 100);
const GAP_MS = int('GAP_MS', 100);
const CLIENT_PROCS = int('CLIENT_PROCS', 4);
const PINNED_PROCS = int('PINNED_PROCS', 2);
const BASE_PORT = int('BASE_PORT', 18840);
const PORTS = { anvil: BASE_PORT, stamp: BASE_PORT + 1, gateway: BASE_PORT + 2, pinned: BASE_PORT + 3 };
const API_KEY = 'bench-ws-key-7d41c0e2-0123456789';
const WORK = workDir('bench-ws');
const ANVIL_BIN = join(ROOT, 'node_modules', '.bin', 'anvil');

// ---- anvil --------------------------------------------------------------------------------------
let agent = new Agent({ keepAlive: true, maxSockets: 16 });
function post(port, body, headers = {}, path = '/') {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path, agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
async function rpc(method, params = []) {
  const r = JSON.parse((await post(PORTS.anvil, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }))).body.toString());
  if (r.error) throw new Error(`${method}: ${JSON.stringify(r.error)}`);
  return r.result;
}
async function startAnvil() {
  // A new chain from block 0: forget the old one's connections and what the gateway learned of it.
  agent.destroy();
  agent = new Agent({ keepAlive: true, maxSockets: 16 });
  learned.clear();
  learnedTop = -1;
  const a = start('anvil', [ANVIL_BIN, '--host', '127.0.0.1', '--port', String(PORTS.anvil), '--no-mining', '--silent']);
  await until('anvil', async () => (await rpc('eth_blockNumber')) !== undefined);
  return a;
}

// ---- the timestamping proxy in front of anvil, for the gateway ----------------------------------
/** Height -> when (µs) the gateway was handed the first poll answer at or above it. */
const learned = new Map();
let learnedTop = -1;
const upstreamCalls = { polls: 0, other: 0, methods: {} };
const stamp = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const body = Buffer.concat(chunks);
    const poll = String(req.headers['user-agent'] ?? '').startsWith('chain-gateway-health');
    let answer;
    try {
      answer = await post(PORTS.anvil, body);
    } catch (err) {
      return res.writeHead(502).end(String(err));
    }
    poll ? upstreamCalls.polls++ : upstreamCalls.other++;
    let calls = [];
    let results = [];
    try {
      calls = [JSON.parse(body.toString())].flat();
      results = [JSON.parse(answer.body.toString())].flat();
    } catch {}
    if (!poll) for (const c of calls) upstreamCalls.methods[c.method] = (upstreamCalls.methods[c.method] ?? 0) + 1;
    if (poll) {
      for (const c of calls) {
        if (c.method !== 'eth_getBlockByNumber' || c.params?.[0] !== 'latest') continue;
        const n = Number.parseInt(results.find((r) => r.id === c.id)?.result?.number, 16);
        if (n > learnedTop) {
          const t = now();
          for (let k = learnedTop + 1; k <= n; k++) learned.set(k, t);
          learnedTop = n;
        }
      }
    }
    res.writeHead(answer.status, { 'content-type': 'application/json', 'content-length': answer.body.length }).end(answer.body);
  });
});
await new Promise((r) => stamp.listen(PORTS.stamp, '127.0.0.1', r));

/** Calls by method (polls apart) since the snapshot `before`. */
const diffMethods = (before) => Object.fromEntries(Object.entries(upstreamCalls.methods).map(([k, v]) => [k, v - (before[k] ?? 0)]).filter(([, v]) => v > 0));

// ---- the gateway --------------------------------------------------------------------------------
const bundle = join(WORK, 'gateway.mjs');
execFileSync(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', join(ROOT, 'bench/gateway.ws.yaml'), '--out', bundle], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
const keysFile = join(WORK, 'keys.yaml');
writeFileSync(keysFile, `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(API_KEY).digest('hex')}"\n`);
async function startGateway() {
  const env = {
    PATH: process.env.PATH,
    PORT: String(PORTS.gateway),
    UPSTREAM_URL: `http://127.0.0.1:${PORTS.stamp}`,
    UPSTREAM_WS: `ws://127.0.0.1:${PORTS.anvil}`,
    NODE_URL: `http://127.0.0.1:${PORTS.anvil}`,
    GATEWAY_KEYS_FILE: keysFile,
  };
  // As docs/operations.md runs it (the other benches too).
  const g = start('gateway', [process.execPath, '--no-memory-reducer', bundle], { env });
  await until('the gateway', async () => (await post(PORTS.gateway, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}', { 'x-api-key': API_KEY }, '/eth')).status === 200);
  return g;
}
async function startPinned(count) {
  const ps = [];
  for (let i = 0; i < count; i++) ps.push(start(`pinned-${i}`, [process.execPath, join(ROOT, 'bench/ws-pinned-proxy.mjs'), String(PORTS.pinned + i), `ws://127.0.0.1:${PORTS.anvil}`]));
  for (let i = 0; i < count; i++) await until(`pinned proxy ${i}`, async () => (await fetch(`http://127.0.0.1:${PORTS.pinned + i}/stats`)).ok);
  return ps;
}
const pinnedStats = async (count) => {
  const s = { clients: 0, upstreams: 0 };
  for (let i = 0; i < count; i++) {
    const r = await (await fetch(`http://127.0.0.1:${PORTS.pinned + i}/stats`)).json();
    s.clients += r.clients;
    s.upstreams += r.upstreams;
  }
  return s;
};
const URLS = {
  gateway: () => [`ws://127.0.0.1:${PORTS.gateway}/eth/${API_KEY}`],
  pinned: (n) => Array.from({ length: n }, (_, i) => `ws://127.0.0.1:${PORTS.pinned + i}`),
  anvil: () => [`ws://127.0.0.1:${PORTS.anvil}`],
};

async function mine() {
  await rpc('anvil_mine', ['0x1']);
  const t = now();
  const b = await rpc('eth_getBlockByNumber', ['latest', false]);
  return { n: Number.parseInt(b.number, 16), hash: b.hash, t };
}
async function mineAndWait(group) {
  const m = await mine();
  const b = await allHave(group, m.n);
  if (b.hashes.size !== 1 || !b.hashes.has(m.hash)) throw new Error(`block ${m.n}: subscribers saw ${[...b.hashes]}, anvil has ${m.hash}`);
  return { ...m, first: b.first, last: b.last };
}

// ---- the run ------------------------------------------------------------------------------------
const rssOf = (pids) => pids.reduce((s, pid) => s + rssMiB(pid), 0);
const memory = {};
const latency = {};
const upstream = {};
let anvil = await startAnvil();
log(`anvil on ${PORTS.anvil}; built ${bundle}`);

// Part 1: memory, each target fresh.
for (const target of ['gateway', 'pinned', 'anvil']) {
  await stop(anvil);
  anvil = await startAnvil();
  let procsOf = [];
  if (target === 'gateway') procsOf = [await startGateway()];
  if (target === 'pinned') procsOf = await startPinned(PINNED_PROCS);
  const measured = target === 'anvil' ? [pidOf(anvil)] : procsOf.map(pidOf);
  await mine();
  await sleep(1500);
  const before = rssOf(measured);
  const anvilBefore = rssMiB(pidOf(anvil));
  const callsBefore = structuredClone(upstreamCalls);
  const t = Date.now();
  log(`${target}: opening ${SOCKETS} sockets (RSS before ${before.toFixed(1)} MiB)`);
  const group = await openClients(SOCKETS, CLIENT_PROCS, URLS[target](PINNED_PROCS));
  const openS = (Date.now() - t) / 1000;
  await sleep(1000); // the feed's last wake-ups for the subscriptions, counted with the opening
  const callsOpened = structuredClone(upstreamCalls);
  const t1 = Date.now();
  const blk = await mineAndWait(group);
  await sleep(1000);
  const withSockets = rssOf(measured);
  const anvilWith = rssMiB(pidOf(anvil));
  const hwm = measured.reduce((s, pid) => s + Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) / 1024, 0);
  const extra = target === 'pinned' ? await pinnedStats(PINNED_PROCS) : null;
  // What reached the node while the sockets subscribed, and then while they held one block's fan-out.
  const calls = {
    opening: { polls: callsOpened.polls - callsBefore.polls, other: callsOpened.other - callsBefore.other },
    held: { polls: upstreamCalls.polls - callsOpened.polls, other: upstreamCalls.other - callsOpened.other, secs: (Date.now() - t1) / 1000, methods: diffMethods(callsOpened.methods) },
  };
  const closed = await closeClients(group);
  if (closed.errors) throw new Error(`${target}: ${closed.errors} notification errors: ${closed.samples.join('; ')}`);
  memory[target] = { before, withSockets, hwm, anvilBefore, anvilWith, openS, lastMs: (blk.last - blk.t) / 1000, extra, calls, secs: (Date.now() - t) / 1000 };
  log(`${target}: ${SOCKETS} sockets: RSS ${withSockets.toFixed(1)} MiB (+${(withSockets - before).toFixed(1)}), anvil +${(anvilWith - anvilBefore).toFixed(1)} MiB; one block to all in ${memory[target].lastMs.toFixed(1)} ms`);
  for (const p of procsOf) await stop(p);
}

// Part 2: latency to FANOUT subscribers, one target at a time.
await stop(anvil);
anvil = await startAnvil();
const gw = await startGateway();
const pinned = await startPinned(1);
for (const target of ['gateway', 'pinned', 'anvil']) {
  const group = await openClients(FANOUT, 2, URLS[target](1));
  await mineAndWait(group); // a first block to all (a subscription starts after the head its server knew)
  await sleep(GAP_MS);
  const callsBefore = structuredClone(upstreamCalls);
  const own = { gateway: pidOf(gw), pinned: pidOf(pinned[0]), anvil: null }[target];
  const cpu0 = { own: own === null ? 0 : cpuMs(own), anvil: cpuMs(pidOf(anvil)) };
  const t = Date.now();
  const rows = [];
  for (let i = 0; i < BLOCKS; i++) {
    const b = await mineAndWait(group);
    rows.push({ n: b.n, t: b.t, mineToLast: (b.last - b.t) / 1000, spread: (b.last - b.first) / 1000, mineToFirst: (b.first - b.t) / 1000, pollDelay: null });
    await sleep(GAP_MS);
  }
  const secs = (Date.now() - t) / 1000;
  // The polls come after the pushes: read what they showed once the blocks are over (the last may have none yet).
  for (const r of rows) r.pollDelay = learned.has(r.n) ? (learned.get(r.n) - r.t) / 1000 : null;
  const cpu = { own: own === null ? 0 : cpuMs(own) - cpu0.own, anvil: cpuMs(pidOf(anvil)) - cpu0.anvil };
  const methods = diffMethods(callsBefore.methods);
  upstream[target] = {
    polls: upstreamCalls.polls - callsBefore.polls,
    other: upstreamCalls.other - callsBefore.other,
    methods,
    secs,
    sockets: target === 'pinned' ? (await pinnedStats(1)).upstreams : null,
    cpu,
  };
  const closed = await closeClients(group);
  if (closed.errors) throw new Error(`${target}: ${closed.errors} notification errors: ${closed.samples.join('; ')}`);
  latency[target] = rows;
  log(`${target}: ${BLOCKS} blocks to ${FANOUT} subscribers in ${secs.toFixed(1)} s`);
}
// Part 3: eth_blockNumber on a pool naming a new block.
const BLOCK_NUMBER = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const blockNumberMs = [];
for (let i = 0; i < BLOCKS; i++) {
  const b = await mine();
  for (;;) {
    const a = JSON.parse((await post(PORTS.gateway, BLOCK_NUMBER, { 'x-api-key': API_KEY }, '/pool')).body.toString());
    if (Number.parseInt(a.result, 16) >= b.n) break;
    if (now() - b.t > BLOCK_TIMEOUT_MS * 1000) throw new Error(`eth_blockNumber on /pool did not name block ${b.n} in ${BLOCK_TIMEOUT_MS} ms`);
  }
  blockNumberMs.push((now() - b.t) / 1000);
  await sleep(GAP_MS);
}
log(`pool: eth_blockNumber named ${BLOCKS} blocks`);
// The gateway's upstream sockets, each logged once it was subscribed (and again each time it came back).
const socketLines = readFileSync(join(WORK, 'gateway.log'), 'utf8').split('\n').filter((l) => l.includes('"event":"upstream_socket_'));
const socketsOpened = socketLines.filter((l) => l.includes('"event":"upstream_socket_open"')).length;
const socketsDown = socketLines.length - socketsOpened;
await stop(pinned[0]);
await stop(gw);
await stop(anvil);
stamp.close();
agent.destroy();

// ---- the report ---------------------------------------------------------------------------------
const kib = (mib) => `${((mib * 1024) / SOCKETS).toFixed(1)} KiB`;
const m = memory;
const perSock = (t) => (m[t].withSockets - m[t].before) / SOCKETS;
const pinnedNode = (m.pinned.anvilWith - m.pinned.anvilBefore) / SOCKETS;
const lat = (t, f) => ({ p50: q(latency[t].map((r) => r[f]), 50), p99: q(latency[t].map((r) => r[f]), 99), max: q(latency[t].map((r) => r[f]), 100) });
const gm = lat('gateway', 'mineToLast');
const gf = lat('gateway', 'mineToFirst');
const pm = lat('pinned', 'mineToLast');
const am = lat('anvil', 'mineToLast');
const poll = lat('gateway', 'pollDelay');
const gu = upstream.gateway;
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
const dirty = execFileSync('git', ['status', '--porcelain', '--', 'runtime', 'bench'], { cwd: ROOT, encoding: 'utf8' }).trim() ? ' (with uncommitted changes in runtime/ or bench/)' : '';
// The targets' verdicts, in the report and in its summary table.
const memoryMet = m.gateway.withSockets > 300e6 / 1048576 ? 'MISSED' : 'met';
const blockNumberMet = q(blockNumberMs, 99) <= 50 ? 'met' : 'MISSED';
const fanoutMet = gm.p99 <= 50 && gm.p99 <= pm.p99 ? 'met' : gm.p99 <= 50 ? `within 50 ms, over pinned's ${ms(pm.p99)}` : `MISSED by ${(gm.p99 - 50).toFixed(1)} ms`;
const lines = [
  '## EVM',
  '',
  `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${commit}${dirty}, node ${process.version}, ${cpus().length} cores, load average ${loadavg().map((x) => x.toFixed(1)).join(' ')} at the end; the EVM part ${elapsedS().toFixed(0)} s.`,
  '',
  `Memory: ${SOCKETS.toLocaleString('en')} sockets, each subscribed to newHeads and each having received one new block; RSS (VmRSS) with them minus before the first, per socket:`,
  '',
  '| target | RSS before | RSS with the sockets | per socket | peak RSS (VmHWM) | anvil grew by | sockets opened in | one block to all, from anvil_mine |',
  '|---|---|---|---|---|---|---|---|',
  ...['gateway', 'pinned', 'anvil'].map((t) => {
    const r = m[t];
    const name = { gateway: 'gateway', pinned: `pinned (proxyd's design, ${PINNED_PROCS} processes)`, anvil: 'anvil itself' }[t];
    const node = t === 'anvil' ? '(is the target)' : `${(r.anvilWith - r.anvilBefore).toFixed(1)} MiB`;
    return `| ${name} | ${r.before.toFixed(1)} MiB | ${r.withSockets.toFixed(1)} MiB | ${kib(perSock(t) * SOCKETS)} | ${r.hwm.toFixed(1)} MiB | ${node} | ${r.openS.toFixed(1)} s | ${ms(r.lastMs)} |`;
  }),
  '',
  `Ratios: gateway ÷ pinned per socket ${(perSock('gateway') / (perSock('pinned') + pinnedNode)).toFixed(2)} (the pinned design's proxies plus the node's growth for its upstream sockets, ${kib((perSock('pinned') + pinnedNode) * SOCKETS)}); gateway ÷ anvil per socket ${(perSock('gateway') / perSock('anvil')).toFixed(2)}.`,
  `Target: ${SOCKETS.toLocaleString('en')} sockets in at most 300 MB RSS: the gateway's RSS with them is ${((m.gateway.withSockets * 1048576) / 1e6).toFixed(0)} MB (${memoryMet}).`,
  '',
  `Latency: ${FANOUT.toLocaleString('en')} subscribers (2 client processes), ${BLOCKS} blocks mined one at a time with anvil_mine, each once all had the one before and ${GAP_MS} ms later; per block, the time to the LAST subscriber's receipt:`,
  '',
  '| target | measured from | p50 | p99 | max |',
  '|---|---|---|---|---|',
  `| gateway (heads pushed by its upstream socket) | anvil_mine's answer | ${ms(gm.p50)} | ${ms(gm.p99)} | ${ms(gm.max)} |`,
  `| (gateway, to the FIRST subscriber) | anvil_mine's answer | ${ms(gf.p50)} | ${ms(gf.p99)} | ${ms(gf.max)} |`,
  `| pinned (proxyd's design) | anvil_mine's answer | ${ms(pm.p50)} | ${ms(pm.p99)} | ${ms(pm.max)} |`,
  `| anvil itself | anvil_mine's answer | ${ms(am.p50)} | ${ms(am.p99)} | ${ms(am.max)} |`,
  ...['gateway', 'pinned', 'anvil'].map((t) => {
    const sp = lat(t, 'spread');
    return `| (${t}: first to last subscriber) | the first subscriber's receipt | ${ms(sp.p50)} | ${ms(sp.p99)} | ${ms(sp.max)} |`;
  }),
  `| (gateway's poll delay: what it would wait without its socket) | anvil_mine's answer to its poll's answer | ${ms(poll.p50)} | ${ms(poll.p99)} | ${ms(poll.max)} |`,
  '',
  `eth_blockNumber on a pool (/pool: two upstreams, each with its socket), ${BLOCKS} blocks: from anvil_mine's answer to the first answer naming the block, p50 ${ms(q(blockNumberMs, 50))}, p99 ${ms(q(blockNumberMs, 99))}, max ${ms(q(blockNumberMs, 100))}. Target: p99 50 ms (${blockNumberMet}).`,
  '',
  `CPU time (user + system, /proc/PID/stat) over the ${BLOCKS} blocks, per notification delivered (${BLOCKS} × ${FANOUT.toLocaleString('en')}); anvil's includes mining the blocks and answering the bench, the gateway's its polls: ${['gateway', 'pinned', 'anvil'].map((t) => { const c = upstream[t].cpu; const per = (x) => `${((x * 1000) / (BLOCKS * FANOUT)).toFixed(1)} µs`; return t === 'anvil' ? `anvil itself ${per(c.anvil)}` : `${t} ${per(c.own)} + anvil ${per(c.anvil)}`; }).join('; ')}.`,
  '',
  `Ratios (p99, from anvil_mine): gateway ÷ pinned ${(gm.p99 / pm.p99).toFixed(2)}; gateway ÷ anvil ${(gm.p99 / am.p99).toFixed(2)}; pinned ÷ anvil ${(pm.p99 / am.p99).toFixed(2)}.`,
  `Target: p99 50 ms from the node to the last of ${FANOUT.toLocaleString('en')} subscribers, at or under the pinned design: ${ms(gm.p99)} (${fanoutMet}).`,
  '',
  'What reaches the node for the subscribers (upstream sockets, or polls and fetches, per chain):',
  '',
  `- gateway: one upstream socket per upstream (its log in part 2: ${socketsOpened} subscribed for its 3 upstreams, /eth's and /pool's two; ${socketsDown} went down or were dropped); ${gu.polls} polls in ${gu.secs.toFixed(1)} s (${(gu.polls / gu.secs).toFixed(2)}/s) and ${gu.other} other requests for ${BLOCKS} blocks (${Object.entries(gu.methods).map(([k, v]) => `${k} ${v}`).join(', ')}) with ${FANOUT.toLocaleString('en')} subscribers; with ${SOCKETS.toLocaleString('en')} subscribers held (part 1, one block): ${m.gateway.calls.held.polls} polls and ${m.gateway.calls.held.other} other requests (${Object.entries(m.gateway.calls.held.methods).map(([k, v]) => `${k} ${v}`).join(', ')}) in ${m.gateway.calls.held.secs.toFixed(1)} s. One head source per chain whatever the number of clients. While the ${SOCKETS.toLocaleString('en')} sockets subscribed (${m.gateway.openS.toFixed(1)} s and 1 s after): ${m.gateway.calls.opening.polls} polls and ${m.gateway.calls.opening.other} other requests (a subscription wakes the feed, which asks for the head block; wake-ups while a fetch is out are folded into one).`,
  `- pinned: ${upstream.pinned.sockets} upstream sockets for ${FANOUT.toLocaleString('en')} clients, ${m.pinned.extra.upstreams} for ${SOCKETS.toLocaleString('en')}: one per client (and one subscription on the node per client).`,
  `- anvil itself: every client's socket and subscription is on the node (${FANOUT.toLocaleString('en')}, then ${SOCKETS.toLocaleString('en')}).`,
];
// One table for both parts, for bench/RESULTS.md: this part's figures, then the Blockbook part's (bench/ws-blockbook.mjs,
// run here as a process of its own with the same knobs) unless BLOCKBOOK=0.
const summary = [
  ['EVM', `RSS per socket, ${SOCKETS.toLocaleString('en')} sockets subscribed to newHeads`, `gateway ${kib(perSock('gateway') * SOCKETS)} (${m.gateway.withSockets.toFixed(1)} MiB in all); pinned ${kib((perSock('pinned') + pinnedNode) * SOCKETS)} with the node's share; anvil ${kib(perSock('anvil') * SOCKETS)}`, `${SOCKETS.toLocaleString('en')} in ≤ 300 MB: ${memoryMet}`],
  ['EVM', `a new block to the last of ${FANOUT.toLocaleString('en')} subscribers, from anvil_mine, ${BLOCKS} blocks`, `gateway p50 ${ms(gm.p50)}, p99 ${ms(gm.p99)}; pinned p50 ${ms(pm.p50)}, p99 ${ms(pm.p99)}; anvil p50 ${ms(am.p50)}, p99 ${ms(am.p99)}`, `p99 ≤ 50 ms and ≤ pinned: ${fanoutMet}`],
  ['EVM', "eth_blockNumber on a pool names a new block, from anvil_mine", `p50 ${ms(q(blockNumberMs, 50))}, p99 ${ms(q(blockNumberMs, 99))}`, `p99 ≤ 50 ms: ${blockNumberMet}`],
  ['EVM', 'upstream sockets the gateway holds (3 upstreams)', `${socketsOpened} subscribed in part 2 (${socketsDown} went down); pinned: ${upstream.pinned.sockets} for ${FANOUT.toLocaleString('en')} clients`, 'one per upstream'],
];
if (process.env.BLOCKBOOK !== '0') {
  const files = { SUMMARY: join(WORK, 'blockbook-summary.json'), OUT: join(WORK, 'blockbook-report.md') };
  const part = spawn(process.execPath, [join(ROOT, 'bench/ws-blockbook.mjs')], { cwd: ROOT, env: { ...process.env, ...files }, stdio: ['ignore', 'ignore', 'inherit'] });
  const code = await new Promise((r) => part.once('exit', r));
  if (code === 0) {
    lines.push('', '## Blockbook', '', readFileSync(files.OUT, 'utf8').trimEnd());
    summary.push(...JSON.parse(readFileSync(files.SUMMARY, 'utf8')));
  } else {
    lines.push('', `The Blockbook part (bench/ws-blockbook.mjs) failed (exit ${code}): its log above, its processes' in .tmp/bench-ws-blockbook/.`);
    process.exitCode = 1;
  }
}
lines.push('', '## Summary', '', summaryTable(summary));
const text = lines.join('\n') + '\n';
const out = process.env.OUT ?? join(WORK, 'report.md');
writeFileSync(out, text);
console.log(`\n${text}\n(written to ${out})`);
process.exit(process.exitCode ?? 0);
