#!/usr/bin/env node
// An open-loop load generator for `RATE=0.7 npm run bench:mix` (bench/mix.mjs runs it, pinned to the
// load core): sends the mix's bodies at a fixed rate, whatever the target answers, and times each
// answer from the moment its request was SCHEDULED, not from when it went out. A closed-loop tool
// (wrk, autocannon) waits for an answer before a connection sends again, so a target that stalls is
// sent less during the stall and its slow answers are under-counted ("coordinated omission"); wrk2
// fixes that, but is not packaged for Debian.
//
// Here request k is due at start + k / rate; a timer sends every request due, each on an idle
// keep-alive connection, opening one more (up to OL_CONNS) when none is idle; a request that finds
// all OL_CONNS busy waits for one, and that wait counts. The generator's own lateness (sent - due:
// timer granularity, ~1 ms, and its event loop's load) is reported apart, as lag: it is a floor under
// every target's figures, which the `limit` target shows.
//
// The HTTP client is net sockets and http-parser-js, not undici: undici took ~85 us of CPU per request
// on this host (wrk ~16 us), and the generator shares its core with anvil and the counting proxy,
// which a heavy generator would slow for the targets that forward the most.
//
// Every answer is checked as bench/mix.lua checks it: a status other than 200 or a body with an
// "error" member is an error; "result":null answers are counted apart.
//
//   OL_URL=http://127.0.0.1:18766/eth OL_RATE=5000 OL_SECONDS=10 OL_BODIES=bodies.txt OL_STATE=state.txt \
//     node bench/open-loop.mjs
//
// Other knobs: OL_WARMUP=1 (seconds sent at the rate before the recorded ones) OL_CONNS=256
// OL_TIMEOUT_MS=5000 OL_API_KEY OL_CLIENT_BATCH=1. Prints one line "RESULT key=value ..." with wrk's
// fields (requests, seconds, rps, p50_us, p90_us, p99_us, max_us, answers, errors, nulls, err_connect,
// err_read, err_write, err_status, err_timeout) and its own: p95_us, offered (req/s), sent, warm, lag_p50_us,
// lag_p99_us, svc_p50_us, svc_p99_us (from when the request was written to a connection, as a
// closed-loop tool times it: without the wait for a free connection), conns (opened in all), and the
// error answers by kind: err_http429, err_http_other (another non-200 status), err_rpc_32005 (a 200
// with -32005 in its error), err_rpc_other (a 200 with another error).
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { HTTPParser } from 'http-parser-js';
import { readState, resolveLine } from './mix-bodies.mjs';

const env = (name, dflt) => {
  const v = process.env[name] ?? dflt;
  if (v === undefined) {
    console.error(`open-loop: ${name} must be set`);
    process.exit(2);
  }
  return v;
};
const num = (name, dflt) => {
  const n = Number(env(name, dflt));
  if (!(n >= 0) || (n === 0 && name !== 'OL_WARMUP')) {
    console.error(`open-loop: ${name} must be a positive number`);
    process.exit(2);
  }
  return n;
};
const url = new URL(env('OL_URL'));
if (url.protocol !== 'http:') {
  console.error('open-loop: OL_URL must be http://');
  process.exit(2);
}
const RATE = num('OL_RATE');
const SECONDS = num('OL_SECONDS');
const WARMUP = num('OL_WARMUP', '1');
const CONNS = Math.floor(num('OL_CONNS', '256'));
const TIMEOUT = num('OL_TIMEOUT_MS', '5000');
const PER = Math.floor(num('OL_CLIENT_BATCH', '1'));
const STATE = env('OL_STATE');
const lines = readFileSync(env('OL_BODIES'), 'utf8').split('\n').filter(Boolean);
const HEAD = `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nX-API-Key: ${process.env.OL_API_KEY ?? ''}\r\nContent-Length: `;

let state = readState(STATE);
let stateAt = Math.floor(Date.now() / 1000);
let next = 0; // the next line, cycling as mix.lua does
function nextBody() {
  const now = Math.floor(Date.now() / 1000);
  if (now !== stateAt) {
    stateAt = now;
    state = readState(STATE) ?? state;
  }
  const calls = [];
  for (let i = 0; i < PER; i++) {
    calls.push(resolveLine(lines[next], state));
    next = (next + 1) % lines.length;
  }
  return PER === 1 ? calls[0] : `[${calls.join(',')}]`;
}

const WARM = Math.round(RATE * WARMUP); // sent at the rate first, not recorded: connections open, code warms
const N = Math.max(1, Math.round(RATE * SECONDS));
const gap = 1000 / RATE; // ms
const latency = new Float64Array(N); // done - due, ms
const service = new Float64Array(N); // done - written to a connection, ms: what a closed-loop tool would time
const lag = new Float64Array(N); // sent - due, ms
const c = { answers: 0, errors: 0, nulls: 0, connect: 0, read: 0, write: 0, timeout: 0 };
/** The error answers by kind: HTTP 429, another non-200 status, a 200 with -32005 (a throttle), a 200 with another error. */
const kinds = { http429: 0, http_other: 0, rpc_32005: 0, rpc_other: 0 };
let finished = 0;
let lastDone = 0;
let allDone;
const done = new Promise((resolve) => (allDone = resolve));

/** A request's end, answered or not: recorded unless it is a warm-up one (k < 0). */
function settle(req, outcome) {
  if (req.settled) return;
  req.settled = true;
  if (req.k < 0) return;
  const end = performance.now();
  latency[req.k] = end - req.due;
  service[req.k] = end - (req.wire || end);
  lastDone = Math.max(lastDone, end);
  if (outcome !== 'answer') c[outcome]++;
  if (++finished === N) allDone();
}

// ---- connections --------------------------------------------------------------------------------
const idle = []; // connections waiting for a request, oldest first (all stay in use: none sits idle until the server drops it)
const queue = []; // requests due while every connection was busy, oldest first
const open = new Set();
let opened = 0;

function openConn() {
  opened++;
  const sock = connect({ host: url.hostname, port: Number(url.port || 80), noDelay: true });
  const conn = { sock, req: null, status: 0, keepAlive: true, chunks: [], dead: false, ready: false };
  open.add(conn);
  const parser = new HTTPParser(HTTPParser.RESPONSE);
  parser[HTTPParser.kOnHeadersComplete] = (info) => {
    conn.status = info.statusCode;
    conn.keepAlive = info.shouldKeepAlive;
  };
  parser[HTTPParser.kOnBody] = (b, start, len) => conn.chunks.push(b.subarray(start, start + len));
  parser[HTTPParser.kOnMessageComplete] = () => answered(conn);
  sock.on('connect', () => {
    conn.ready = true;
    release(conn);
  });
  sock.on('data', (d) => {
    if (conn.req === null) return kill(conn, 'read'); // bytes nobody asked for
    const r = parser.execute(d);
    if (r instanceof Error) kill(conn, 'read');
  });
  sock.on('error', (err) => kill(conn, !conn.ready ? 'connect' : err.code === 'EPIPE' ? 'write' : 'read'));
  sock.on('close', () => kill(conn, conn.ready ? 'read' : 'connect'));
}

/** A connection is gone (error, close, timeout): its request fails with `why`; more are opened for the queue. */
function kill(conn, why) {
  if (conn.dead) return;
  conn.dead = true;
  open.delete(conn);
  const i = idle.indexOf(conn);
  if (i >= 0) idle.splice(i, 1);
  conn.sock.destroy();
  if (conn.req !== null) settle(conn.req, why);
  // a connection that never connected fails the request it was opened for (so a refusing target costs one attempt a request, not a loop)
  else if (!conn.ready) while (queue.length > 0 && !settleFirst(why));
  conn.req = null;
  if (queue.length > open.size - idle.length && open.size < CONNS) openConn();
}

/** Fails the oldest queued request not settled yet; false when it was settled already (a timeout). */
function settleFirst(why) {
  const req = queue.shift();
  if (req.settled) return false;
  settle(req, why);
  return true;
}

function answered(conn) {
  const req = conn.req;
  if (req === null) return;
  if (req.k >= 0) {
    const body = conn.chunks.length === 1 ? conn.chunks[0] : Buffer.concat(conn.chunks);
    c.answers++;
    if (conn.status !== 200 || body.includes('"error"')) {
      c.errors++;
      if (conn.status === 429) kinds.http429++;
      else if (conn.status !== 200) kinds.http_other++;
      else if (body.includes('-32005')) kinds.rpc_32005++;
      else kinds.rpc_other++;
    }
    else if (body.includes('"result":null')) c.nulls++;
  }
  conn.chunks = [];
  conn.req = null;
  settle(req, 'answer');
  if (!conn.keepAlive) return kill(conn, 'read');
  release(conn);
}

function send(conn, req) {
  conn.req = req;
  req.wire = performance.now();
  conn.sock.write(`${HEAD}${Buffer.byteLength(req.body)}\r\n\r\n${req.body}`);
  req.body = null;
}

/** A connection is free: it takes the oldest queued request, or waits for the next. */
function release(conn) {
  while (queue.length > 0) {
    const req = queue.shift();
    if (!req.settled) return send(conn, req);
  }
  idle.push(conn);
}

/** Request k (negative: a warm-up request, not recorded), due at `due`. */
function fire(k, due) {
  const sent = performance.now();
  if (k >= 0) lag[k] = sent - due;
  const req = { k, due, wire: 0, body: nextBody(), settled: false };
  if (idle.length > 0) return send(idle.shift(), req);
  queue.push(req);
  if (open.size < CONNS) openConn();
}

// Requests not answered within OL_TIMEOUT_MS of being due are timeouts (their connection is closed:
// an answer may still come on it).
const sweeper = setInterval(() => {
  const limit = performance.now() - TIMEOUT;
  for (const conn of [...open]) if (conn.req !== null && conn.req.due < limit) kill(conn, 'timeout');
  while (queue.length > 0 && queue[0].due < limit) settle(queue.shift(), 'timeout');
}, 100);

// Sends every request due by now, then sleeps until the next one is due (a timer: ~1 ms granularity;
// a loop spinning on setImmediate would be exact but take the load core from anvil and the proxy).
// Request k (from -WARM) is due at start + k * gap: the recorded ones follow the warm-up on one timeline.
const start = performance.now() + 20 + WARM * gap;
let k = -WARM;
function pump() {
  const now = performance.now();
  while (k < N && start + k * gap <= now) {
    fire(k, start + k * gap);
    k++;
  }
  if (k < N) setTimeout(pump, Math.max(0, start + k * gap - performance.now()));
}
setTimeout(pump, 20);
await done;
clearInterval(sweeper);
for (const conn of open) conn.sock.destroy();

const pct = (xs, p) => {
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const us = (ms) => Math.round(ms * 1000);
const seconds = (lastDone - start) / 1000;
const out = {
  requests: c.answers, // as wrk counts: answers, whatever their status; socket errors apart
  seconds: seconds.toFixed(3),
  rps: (c.answers / seconds).toFixed(1),
  p50_us: us(pct(latency, 50)),
  p90_us: us(pct(latency, 90)),
  p95_us: us(pct(latency, 95)),
  p99_us: us(pct(latency, 99)),
  max_us: us(pct(latency, 100)),
  answers: c.answers,
  errors: c.errors,
  nulls: c.nulls,
  err_connect: c.connect,
  err_read: c.read,
  err_write: c.write,
  err_status: 0,
  err_timeout: c.timeout,
  offered: RATE.toFixed(1),
  sent: N,
  warm: WARM, // sent before, unrecorded: in what an upstream counted meanwhile
  lag_p50_us: us(pct(lag, 50)),
  lag_p99_us: us(pct(lag, 99)),
  svc_p50_us: us(pct(service, 50)),
  svc_p99_us: us(pct(service, 99)),
  conns: opened,
  ...Object.fromEntries(Object.entries(kinds).map(([key, n]) => [`err_${key}`, n])),
};
console.log(`RESULT ${Object.entries(out).map(([key, v]) => `${key}=${v}`).join(' ')}`);
