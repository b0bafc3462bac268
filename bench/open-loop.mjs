#!/usr/bin/env node
// An open-loop load generator for `RATE=0.7 npm run bench:mix` (bench/mix.mjs runs it, pinned to the
// load core): sends the mix's bodies at a fixed rate, whatever the target answers, and times each
// answer from the moment its request was SCHEDULED, not from when it went out. A closed-loop tool
// (wrk, autocannon) waits for an answer before a connection sends again, so a target that stalls is
// sent less during the stall and its slow answers are under-counted ("coordinated omission"); wrk2
// fixes that, but is not packaged for Debian. Here request k is due at start + k / rate; a timer sends
// every request due, each on a free connection of an undici Pool that opens up to OL_CONNS of them (a
// request waits for a connection only when all are busy, and that wait counts). The generator's own
// lateness (sent - due: timer granularity, ~1 ms, and its event loop's load) is reported apart, as
// lag: it is a floor under every target's figures, which the `limit` target shows.
//
// Every answer is checked as bench/mix.lua checks it: a status other than 200 or a body with an
// "error" member is an error; "result":null answers are counted apart.
//
//   OL_URL=http://127.0.0.1:18766/eth OL_RATE=5000 OL_SECONDS=10 OL_BODIES=bodies.txt OL_STATE=state.txt \
//     node bench/open-loop.mjs
//
// Other knobs: OL_WARMUP=1 (seconds sent at the rate before the recorded ones) OL_CONNS=256 OL_TIMEOUT_MS=5000 OL_API_KEY OL_CLIENT_BATCH=1. Prints one line
// "RESULT key=value ..." with wrk's fields (requests, seconds, rps, p50_us, p90_us, p99_us, max_us,
// answers, errors, nulls, err_connect, err_read, err_write, err_status, err_timeout) and its own:
// offered (req/s), sent, lag_p50_us, lag_p99_us, svc_p50_us, svc_p99_us (from the actual send),
// inflight_max.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
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
  if (!(n > 0)) {
    console.error(`open-loop: ${name} must be a positive number`);
    process.exit(2);
  }
  return n;
};
const url = new URL(env('OL_URL'));
const RATE = num('OL_RATE');
const SECONDS = num('OL_SECONDS');
const CONNS = Math.floor(num('OL_CONNS', '256'));
const TIMEOUT = num('OL_TIMEOUT_MS', '5000');
const PER = Math.floor(num('OL_CLIENT_BATCH', '1'));
const STATE = env('OL_STATE');
const lines = readFileSync(env('OL_BODIES'), 'utf8').split('\n').filter(Boolean);
const headers = { 'content-type': 'application/json', 'x-api-key': process.env.OL_API_KEY ?? '' };

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
  for (let c = 0; c < PER; c++) {
    calls.push(resolveLine(lines[next], state));
    next = (next + 1) % lines.length;
  }
  return PER === 1 ? calls[0] : `[${calls.join(',')}]`;
}

const pool = new Pool(url.origin, { connections: CONNS, pipelining: 1, headersTimeout: TIMEOUT, bodyTimeout: TIMEOUT, keepAliveTimeout: 60_000 });
const path = url.pathname + url.search;
const WARM = Math.round(RATE * Number(env('OL_WARMUP', '1'))); // sent at the rate first, not recorded: connections open, code warms
const N = Math.max(1, Math.round(RATE * SECONDS));
const gap = 1000 / RATE; // ms
const latency = new Float64Array(N); // done - due, ms
const service = new Float64Array(N); // done - sent, ms
const lag = new Float64Array(N); // sent - due, ms
const c = { answers: 0, errors: 0, nulls: 0, connect: 0, read: 0, write: 0, timeout: 0 };
let inflight = 0;
let inflightMax = 0;
let finished = 0;
let lastDone = 0;
let allDone;
const done = new Promise((resolve) => (allDone = resolve));

function settle(k, due, sent) {
  const end = performance.now();
  inflight--;
  if (k < 0) return;
  latency[k] = end - due;
  service[k] = end - sent;
  lastDone = Math.max(lastDone, end);
  if (++finished === N) allDone();
}

/** Sends request k (negative: a warm-up request, not recorded), due at `due`. */
function fire(k, due) {
  const sent = performance.now();
  if (k >= 0) lag[k] = sent - due;
  inflight++;
  if (inflight > inflightMax) inflightMax = inflight;
  pool.request({ path, method: 'POST', headers, body: nextBody() }).then(
    async ({ statusCode, body }) => {
      let text;
      try {
        text = await body.text();
      } catch (err) {
        if (k >= 0) classify(err);
        settle(k, due, sent);
        return;
      }
      if (k >= 0) {
        c.answers++;
        if (statusCode !== 200 || text.includes('"error"')) c.errors++;
        else if (text.includes('"result":null')) c.nulls++;
      }
      settle(k, due, sent);
    },
    (err) => {
      if (k >= 0) classify(err);
      settle(k, due, sent);
    },
  );
}

function classify(err) {
  const code = err?.code ?? '';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') c.timeout++;
  else if (code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT') c.connect++;
  else if (code === 'EPIPE') c.write++;
  else c.read++;
}

// Sends every request due by now, then sleeps until the next one is due (a timer: ~1 ms granularity;
// a loop spinning on setImmediate would be exact but take the load core from anvil and the proxy).
// Request k (from -WARM) is due at start + k * gap: the recorded ones follow the warm-up on the same timeline.
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
await pool.close();

const pct = (xs, p) => {
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
const us = (ms) => Math.round(ms * 1000);
const seconds = (lastDone - start) / 1000;
const requests = c.answers; // as wrk counts: answers, whatever their status; socket errors apart
const out = {
  requests,
  seconds: seconds.toFixed(3),
  rps: (requests / seconds).toFixed(1),
  p50_us: us(pct(latency, 50)),
  p90_us: us(pct(latency, 90)),
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
  lag_p50_us: us(pct(lag, 50)),
  lag_p99_us: us(pct(lag, 99)),
  svc_p50_us: us(pct(service, 50)),
  svc_p99_us: us(pct(service, 99)),
  inflight_max: inflightMax,
};
console.log(`RESULT ${Object.entries(out).map(([key, v]) => `${key}=${v}`).join(' ')}`);
