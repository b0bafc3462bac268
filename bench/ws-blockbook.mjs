#!/usr/bin/env node
// The Blockbook part of `npm run bench:ws` (issue 46), run by bench/ws.mjs after
// its EVM part, or alone (`node bench/ws-blockbook.mjs`). Everything on 127.0.0.1:
//  - the upstream: bench/ws-blockbook-upstream.ts, the tests' Blockbook stand-ins
//    (REST, and the WebSocket API at /websocket as websocket.go serves it) in a
//    process of their own; a new block is announced there both ways at once (its
//    status names it, every subscribeNewBlock socket on it is sent it);
//  - the gateway: built from bench/gateway.ws-blockbook.yaml (one Blockbook chain,
//    `websocket: true`, one upstream, polled every 100 ms), run as
//    docs/operations.md says (node --no-memory-reducer);
//  - the subscribers: bench/ws-clients.mjs processes, each socket at
//    /btc/<key>/websocket (where blockchain-link puts the key) subscribed with
//    subscribeNewBlock, and every notification checked (its subscribe id, each
//    socket's heights ascending without a gap, one hash per height, equal to the
//    upstream's).
// Every figure is timed from the upstream's announcement, whatever the gateway
// learns the block from: its poll today, its upstream socket's push once an
// upstream's heads come through it; the same bench measures either.
//
// Part 1, memory: SOCKETS (10,000) sockets open and subscribed, gateway and
// upstream fresh: the gateway's RSS (VmRSS) once every socket has had one new
// block, minus the RSS before the first socket, per socket.
// Part 2, latency: FANOUT (1,000) subscribers; BLOCKS (100) blocks announced one
// at a time, each once every subscriber had the one before and GAP_MS plus a
// random share of the poll interval later (a fixed gap would fall at the same
// point of the poll's cycle each time, and time that point, not the poll). Per
// block: from the announcement to the last subscriber's receipt, to the first,
// first to last, and the poll's delay (the announcement to the first poll of the
// gateway's to reach the upstream after it); the gateway's CPU time.
// Both parts: the sockets the gateway holds on the upstream (the stand-in's count;
// one per upstream at most, whatever the number of clients), what it subscribed
// there, and what it asked of the upstream's REST.
//
//   node bench/ws-blockbook.mjs
//   SOCKETS=1000 FANOUT=100 BLOCKS=10 node bench/ws-blockbook.mjs     # a quick look
// Other knobs: CLIENT_PROCS=4 (clients' processes for part 1; part 2 uses 2),
// GAP_MS=100, BB_BASE_PORT=18860, OUT=<file> (the report, also printed),
// SUMMARY=<file> (the summary table's rows as JSON, for bench/ws.mjs).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { cpus, loadavg } from 'node:os';
import { cpuMs, rssMiB } from './proc.mjs';
import { ROOT, allHave, ask, closeClients, elapsedS, int, log, ms, openClients, pidOf, q, start, stop, summaryTable, until, workDir } from './ws-harness.mjs';

const SOCKETS = int('SOCKETS', 10_000);
const FANOUT = int('FANOUT', 1_000);
const BLOCKS = int('BLOCKS', 100);
const GAP_MS = int('GAP_MS', 100);
const CLIENT_PROCS = int('CLIENT_PROCS', 4);
const BASE_PORT = int('BB_BASE_PORT', 18860);
const PORTS = { upstream: BASE_PORT, gateway: BASE_PORT + 1 };
const API_KEY = 'bench-ws-bb-key-4be1a09d-01234567';
const WORK = workDir('bench-ws-blockbook');
/** The EVM figure beside which this one is read (bench/RESULTS.md: 10,000 sockets, issue 38's runs). */
const EVM_KIB = 9.6;
/** The chain's poll interval (bench/gateway.ws-blockbook.yaml's health.intervalMs). */
const POLL_MS = 100;

// ---- the upstream and the gateway ---------------------------------------------------------------
async function startUpstream() {
  const p = start('upstream', [process.execPath, '--import', 'tsx', join(ROOT, 'bench/ws-blockbook-upstream.ts'), String(PORTS.upstream)], { ipc: true });
  await ask(p.child, {}, 'ready');
  return p;
}
const stats = async (up) => (await ask(up.child, { stats: true }, 'stats')).stats;

const bundle = join(WORK, 'gateway.mjs');
execFileSync(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', join(ROOT, 'bench/gateway.ws-blockbook.yaml'), '--out', bundle], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
const keysFile = join(WORK, 'keys.yaml');
writeFileSync(keysFile, `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(API_KEY).digest('hex')}"\n`);
async function startGateway(up) {
  const env = { PATH: process.env.PATH, PORT: String(PORTS.gateway), UPSTREAM_URL: `http://127.0.0.1:${PORTS.upstream}/api`, GATEWAY_KEYS_FILE: keysFile };
  const g = start('gateway', [process.execPath, '--no-memory-reducer', bundle], { env });
  await until('the gateway', async () => (await fetch(`http://127.0.0.1:${PORTS.gateway}/btc/v2/block-index/1`, { headers: { 'x-api-key': API_KEY } })).status === 200);
  // Its chain view knows the head (a poll answered) before the first subscriber, which starts the feed there.
  const polls = (await stats(up)).polls;
  await until('a poll of the gateway', async () => (await stats(up)).polls >= polls + 2);
  return g;
}
const SOCKET_URL = `ws://127.0.0.1:${PORTS.gateway}/btc/${API_KEY}/websocket`;

/** Announces one block at the upstream; its height, hash and when (µs) it was announced. */
const announce = async (up) => {
  const b = await ask(up.child, { block: true }, 'block');
  return { n: b.block, hash: b.hash, t: b.t };
};
async function announceAndWait(up, group) {
  const a = await announce(up);
  const b = await allHave(group, a.n);
  if (b.hashes.size !== 1 || !b.hashes.has(a.hash)) throw new Error(`block ${a.n}: subscribers saw ${[...b.hashes]}, the upstream has ${a.hash}`);
  return { ...a, first: b.first, last: b.last };
}
/** What the gateway held and asked at the upstream since `before` (a stats snapshot). */
function upstreamUse(before, after) {
  const diff = (a, b) => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v - (b[k] ?? 0)]).filter(([, v]) => v > 0));
  return { socketsOpen: after.socketsOpen, socketsOpened: after.socketsOpened, socketMethods: after.socketMethods, polls: after.polls - before.polls, requests: diff(after.requests, before.requests) };
}
const list = (o) => Object.entries(o).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';

// ---- part 1: memory -----------------------------------------------------------------------------
let up = await startUpstream();
let gw = await startGateway(up);
log(`blockbook: upstream on ${PORTS.upstream}, gateway on ${PORTS.gateway}; built ${bundle}`);
await announce(up);
await sleep(1500);
const before = rssMiB(pidOf(gw));
let t = Date.now();
log(`blockbook: opening ${SOCKETS} sockets (RSS before ${before.toFixed(1)} MiB)`);
let group = await openClients(SOCKETS, CLIENT_PROCS, [SOCKET_URL], 'blockbook');
const openS = (Date.now() - t) / 1000;
await sleep(1000);
const s0 = await stats(up);
const blk = await announceAndWait(up, group);
await sleep(1000);
const withSockets = rssMiB(pidOf(gw));
const hwm = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pidOf(gw)}/status`, 'latin1'))[1]) / 1024;
const held = upstreamUse(s0, await stats(up));
let closed = await closeClients(group);
if (closed.errors) throw new Error(`blockbook: ${closed.errors} notification errors: ${closed.samples.join('; ')}`);
const memory = { before, withSockets, hwm, openS, lastMs: (blk.last - blk.t) / 1000, held };
log(`blockbook: ${SOCKETS} sockets: RSS ${withSockets.toFixed(1)} MiB (+${(withSockets - before).toFixed(1)}); one block to all in ${memory.lastMs.toFixed(1)} ms`);
await stop(gw);
await stop(up);

// ---- part 2: a block to FANOUT subscribers -------------------------------------------------------
up = await startUpstream();
gw = await startGateway(up);
group = await openClients(FANOUT, 2, [SOCKET_URL], 'blockbook');
await announceAndWait(up, group); // a first block to all (the feed starts at the head it knew)
await sleep(GAP_MS);
const s1 = await stats(up);
const cpu0 = cpuMs(pidOf(gw));
t = Date.now();
const rows = [];
for (let i = 0; i < BLOCKS; i++) {
  const b = await announceAndWait(up, group);
  rows.push({ n: b.n, t: b.t, toLast: (b.last - b.t) / 1000, toFirst: (b.first - b.t) / 1000, spread: (b.last - b.first) / 1000 });
  await sleep(GAP_MS + Math.random() * POLL_MS);
}
const secs = (Date.now() - t) / 1000;
const cpu = cpuMs(pidOf(gw)) - cpu0;
const s2 = await stats(up);
// A poll may come after the block reached every subscriber: read them once the blocks are over (the last may have none yet).
for (const r of rows) r.pollDelay = s2.polledAt[r.n] === undefined ? null : (s2.polledAt[r.n] - r.t) / 1000;
const fanout = upstreamUse(s1, s2);
closed = await closeClients(group);
if (closed.errors) throw new Error(`blockbook: ${closed.errors} notification errors: ${closed.samples.join('; ')}`);
log(`blockbook: ${BLOCKS} blocks to ${FANOUT} subscribers in ${secs.toFixed(1)} s`);
await stop(gw);
await stop(up);

// ---- the report ---------------------------------------------------------------------------------
const lat = (f) => ({ p50: q(rows.map((r) => r[f]), 50), p99: q(rows.map((r) => r[f]), 99), max: q(rows.map((r) => r[f]), 100) });
const last = lat('toLast');
const first = lat('toFirst');
const spread = lat('spread');
const poll = lat('pollDelay');
const perSocketKiB = ((withSockets - before) * 1024) / SOCKETS;
const sockets = (u) => `${u.socketsOpen} open (${u.socketsOpened} opened in all; subscribed there: ${list(u.socketMethods)})`;
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
const dirty = execFileSync('git', ['status', '--porcelain', '--', 'runtime', 'bench'], { cwd: ROOT, encoding: 'utf8' }).trim() ? ' (with uncommitted changes in runtime/ or bench/)' : '';
const summary = [
  ['Blockbook', `gateway RSS with ${SOCKETS.toLocaleString('en')} sockets, each subscribeNewBlock`, `${withSockets.toFixed(1)} MiB (+${(withSockets - before).toFixed(1)} MiB, ${perSocketKiB.toFixed(1)} KiB a socket; EVM's at 10,000: ${EVM_KIB} KiB in bench/RESULTS.md)`, "none set (EVM's: 10,000 in ≤ 300 MB)"],
  ['Blockbook', `a block to the last of ${FANOUT.toLocaleString('en')} subscribers, from the upstream's announcement, ${BLOCKS} blocks`, `p50 ${ms(last.p50)}, p99 ${ms(last.p99)}`, '(as EVM: p99 50 ms, once heads are pushed)'],
  ['Blockbook', '(to the first subscriber; first to last)', `p50 ${ms(first.p50)}, p99 ${ms(first.p99)}; p50 ${ms(spread.p50)}, p99 ${ms(spread.p99)}`, ''],
  ['Blockbook', `(the gateway's poll delay, health.intervalMs ${POLL_MS})`, `p50 ${ms(poll.p50)}, p99 ${ms(poll.p99)}`, ''],
  ['Blockbook', 'upstream sockets the gateway holds (1 upstream)', `${held.socketsOpen} with ${SOCKETS.toLocaleString('en')} clients, ${fanout.socketsOpen} with ${FANOUT.toLocaleString('en')}`, '≤ 1 per upstream'],
];
const lines = [
  `Blockbook part: run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${commit}${dirty}, node ${process.version}, ${cpus().length} cores, load average ${loadavg().map((x) => x.toFixed(1)).join(' ')} at the end; whole part ${elapsedS().toFixed(0)} s.`,
  '',
  `Memory: ${SOCKETS.toLocaleString('en')} Blockbook sockets (${CLIENT_PROCS} client processes), each subscribed with subscribeNewBlock and each having received one new block: gateway RSS ${before.toFixed(1)} MiB before, ${withSockets.toFixed(1)} MiB with them (${perSocketKiB.toFixed(1)} KiB a socket; EVM's at 10,000: ${EVM_KIB} KiB in bench/RESULTS.md), peak ${hwm.toFixed(1)} MiB (VmHWM); opened and subscribed in ${openS.toFixed(1)} s; one block to all ${ms(memory.lastMs)} from the announcement.`,
  '',
  `Latency: ${FANOUT.toLocaleString('en')} subscribers (2 client processes), ${BLOCKS} blocks announced one at a time, each once all had the one before and ${GAP_MS} ms plus up to ${POLL_MS} ms (at random) later; per block, from the upstream's announcement:`,
  '',
  '| to | p50 | p99 | max |',
  '|---|---|---|---|',
  `| the LAST subscriber's receipt | ${ms(last.p50)} | ${ms(last.p99)} | ${ms(last.max)} |`,
  `| the first subscriber's receipt | ${ms(first.p50)} | ${ms(first.p99)} | ${ms(first.max)} |`,
  `| (first to last: the fan-out) | ${ms(spread.p50)} | ${ms(spread.p99)} | ${ms(spread.max)} |`,
  `| (the first poll of the gateway's to reach the upstream after it: what it waits without a push) | ${ms(poll.p50)} | ${ms(poll.p99)} | ${ms(poll.max)} |`,
  '',
  `CPU time of the gateway (user + system) over the ${BLOCKS} blocks: ${((cpu * 1000) / (BLOCKS * FANOUT)).toFixed(1)} µs per notification delivered (${BLOCKS} × ${FANOUT.toLocaleString('en')}), its polls included.`,
  '',
  'What reaches the upstream for the subscribers:',
  '',
  `- with ${SOCKETS.toLocaleString('en')} subscribers held (part 1, one block, ${held.polls} polls): upstream sockets ${sockets(held)}; REST: ${list(held.requests)}.`,
  `- with ${FANOUT.toLocaleString('en')} subscribers and ${BLOCKS} blocks (part 2, ${fanout.polls} polls in ${secs.toFixed(1)} s): upstream sockets ${sockets(fanout)}; REST: ${list(fanout.requests)}.`,
  // Alone, the part ends with its summary table; under bench/ws.mjs, that one ends with both parts'.
  ...(process.env.SUMMARY ? [] : ['', summaryTable(summary)]),
];
const text = lines.join('\n') + '\n';
const out = process.env.OUT ?? join(WORK, 'report.md');
writeFileSync(out, text);
if (process.env.SUMMARY) writeFileSync(process.env.SUMMARY, JSON.stringify(summary));
console.log(`\n${text}\n(written to ${out})`);
process.exit(0);
