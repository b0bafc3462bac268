// Issue 31, defect 5: cache.maxBytes must bound the memory the kept answers
// hold. A small answer cut out of Node's shared 8 KiB buffer pool keeps that
// whole slab alive; with a hot set read often while the rest churns, every
// hot entry ends up alone on a slab of its own (its neighbours evicted long
// ago), and the store counts bytes while far more stays alive.
//
// A fast stand-in node answers eth_getBalance with a few bytes, at a final
// block, so every answer is kept forever until the LRU (maxBytes: the minimum,
// 1 MiB) evicts it. The load: tens of thousands of distinct calls churn while
// a hot set, one new member every HOT_EVERY calls, is read again and again
// and stays. The figure: the memory held by array buffers in the gateway
// process (process.memoryUsage().arrayBuffers after a full GC, read through
// the inspector: no hook in the product) after the load, minus the same
// figure after a warm-up of calls that are never kept. It must stay within
// 1.25 x maxBytes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from 'node:http';
import { Pool } from 'undici';
import { metricValue, newKey, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { NO_MEMORY_REDUCER } from '../../runtime/process/node-flags.ts';
import { createSafeServer, listen, parseJson, readAll } from '../support/http.ts';
import { connectCdp, inspectorUrl, type Cdp } from '../support/inspector.ts';

const KEY = newKey();
const MAX_BYTES = 1_048_576;
const ALLOWED = 1.25 * MAX_BYTES;
/** Distinct calls that churn through the LRU. */
const CHURN = 6_000;
/** A new hot call every this many churning ones; all hot calls are read again every HOT_READ_EVERY. */
const HOT_EVERY = 30;
const HOT_READ_EVERY = 500;
/** Client connections (the warm-up uses as many, so the baseline has the same sockets). */
const CONNECTIONS = 8;

let node: Server;
let rig: Gateway;
let gw: RunningGateway;
let cdp: Cdp;

const hex = (n: number): string => `0x${n.toString(16)}`;
const block = (n: number) => ({ number: hex(n), hash: `0x${n.toString(16).padStart(64, '0')}`, parentHash: `0x${(n - 1).toString(16).padStart(64, '0')}` });
/** The stand-in's chain: head 1000, finalized 900, safe 950. */
const TAGS: Record<string, number> = { latest: 1000, finalized: 900, safe: 950 };

function answer(c: { id?: unknown; method?: string; params?: unknown[] }): unknown {
  const ok = (result: unknown) => ({ jsonrpc: '2.0', id: c.id ?? null, result });
  switch (c.method) {
    case 'eth_chainId':
      return ok('0x1');
    case 'eth_blockNumber':
      return ok(hex(TAGS.latest!));
    case 'eth_getBlockByNumber': {
      const at = c.params?.[0];
      const n = typeof at === 'string' ? (TAGS[at] ?? Number.parseInt(at, 16)) : -1;
      return ok(n >= 0 && n <= TAGS.latest! ? block(n) : null);
    }
    case 'eth_getBalance':
      return ok('0x2a');
    default:
      return { jsonrpc: '2.0', id: c.id ?? null, error: { code: -32601, message: 'the method does not exist' } };
  }
}

beforeAll(async () => {
  node = createSafeServer(async (req, res) => {
    const doc = parseJson(await readAll(req)) as Parameters<typeof answer>[0] | Parameters<typeof answer>[0][];
    const text = JSON.stringify(Array.isArray(doc) ? doc.map(answer) : answer(doc));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  });
  const url = await listen(node);
  rig = await gateway({
    name: 'issue-31-memory',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, methods: ['eth_chainId', 'eth_blockNumber', 'eth_getBlockByNumber', 'eth_getBalance'], upstreams: ['${NODE_URL}'] }],
    header: { cache: { maxBytes: MAX_BYTES, headPollMs: 1000 }, health: { intervalMs: 60000, timeoutMs: 2000 } },
    keys: [{ id: 'memory', key: KEY }],
    standIns: { node },
    env: { NODE_URL: url },
    nodeArgs: [NO_MEMORY_REDUCER, '--inspect=127.0.0.1:0'],
  });
  gw = rig.gw;
  cdp = await connectCdp(await inspectorUrl(gw.proc, gw.stderr));
}, 60_000);

afterAll(async () => {
  cdp?.close();
  await rig?.close();
});

/** Array buffers (and, for the record, the JS heap) alive in the gateway after a full GC (twice: backing stores are freed as the sweep finishes). */
async function held(): Promise<{ arrayBuffers: number; heapUsed: number }> {
  await cdp.collectGarbage();
  await cdp.collectGarbage();
  return cdp.evaluate('(({ arrayBuffers, heapUsed }) => ({ arrayBuffers, heapUsed }))(process.memoryUsage())');
}

const address = (i: number): string => `0x${i.toString(16).padStart(40, '0')}`;
/**
 * Each call's id carries 1 KiB (a client that tags its calls with trace data):
 * the gateway's own per-call buffers (the id, the answer it writes) then fill
 * the pool's slabs fast, as a busy gateway's other work does, so the entries
 * kept stay scattered over many slabs. The ids are no part of what is kept.
 */
const PAD = 't'.repeat(1024);
const balanceAt = (who: string, at: string, id: number): string => `{"jsonrpc":"2.0","id":"${PAD}${id}","method":"eth_getBalance","params":["${who}","${at}"]}`;

/** Sends every body, CONNECTIONS at a time, over one client pool closed at the end; returns the X-Cache counts. */
async function drive(bodies: Iterable<string>): Promise<Record<string, number>> {
  const pool = new Pool(gw.url('rpc', ''), { connections: CONNECTIONS, pipelining: 1 });
  const counts: Record<string, number> = {};
  const it = bodies[Symbol.iterator]();
  const worker = async (): Promise<void> => {
    for (let n = it.next(); !n.done; n = it.next()) {
      const res = await pool.request({ path: '/ethereum', method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: n.value });
      const text = await res.body.text();
      if (res.statusCode !== 200 || !text.includes('"result"')) throw new Error(`unexpected answer ${res.statusCode}: ${text}`);
      const tag = String(res.headers['x-cache'] ?? 'none');
      counts[tag] = (counts[tag] ?? 0) + 1;
    }
  };
  try {
    await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  } finally {
    await pool.close();
  }
  return counts;
}

/**
 * The churn, with the hot set growing among it (each member first asked
 * between churning calls, so each is kept at another moment) and all of it
 * read again every HOT_READ_EVERY churning calls.
 */
function* load(): Generator<string> {
  let id = 1;
  const hot: string[] = [];
  for (let i = 1; i <= CHURN; i++) {
    yield balanceAt(address(1_000_000 + i), '0x10', id++);
    if (i % HOT_EVERY === 0) {
      hot.push(address(hot.length + 1));
      yield balanceAt(hot[hot.length - 1]!, '0x10', id++);
    }
    if (i % HOT_READ_EVERY === 0) for (const h of hot) yield balanceAt(h, '0x10', id++);
  }
}
/** How many reads of the hot set load() makes after each member's first. */
const HOT_READS = Array.from({ length: Math.floor(CHURN / HOT_READ_EVERY) }, (_, k) => Math.floor(((k + 1) * HOT_READ_EVERY) / HOT_EVERY)).reduce((a, b) => a + b, 0);

describe('issue 31: maxBytes bounds the memory kept answers hold', () => {
  it('after a hot set read often while the rest churns, the array buffers the gateway holds grew by at most 1.25 x maxBytes', { timeout: 45_000 }, async () => {
    // Warm-up: calls never kept (at `pending`), over as many connections, so the baseline has every socket and pool.
    await drive(Array.from({ length: 400 }, (_, i) => balanceAt(address(i), 'pending', i)));
    const before = await held();

    const t0 = performance.now();
    const counts = await drive(load());
    const seconds = (performance.now() - t0) / 1000;
    const after = await held();
    const bytes = await metricValue(gw, 'gateway_cache_bytes', '{chain="ethereum"}');
    const evictions = await metricValue(gw, 'gateway_cache_evictions_total', '{chain="ethereum"}');
    const delta = after.arrayBuffers - before.arrayBuffers;
    console.log(
      `issue-31 memory: arrayBuffers ${before.arrayBuffers} -> ${after.arrayBuffers} (delta ${delta} B = ${(delta / MAX_BYTES).toFixed(2)} x maxBytes, allowed 1.25); ` +
        `heapUsed delta ${after.heapUsed - before.heapUsed} B (not asserted); ` +
        `gateway_cache_bytes ${bytes}, maxBytes ${MAX_BYTES}, evictions ${evictions}; X-Cache ${JSON.stringify(counts)} in ${seconds.toFixed(1)} s`,
    );
    // The setting the test is about: the LRU was full and evicting, and the hot set was served from memory.
    expect(evictions, 'the LRU evicted').toBeGreaterThan(0);
    expect(bytes, 'the LRU is full').toBeGreaterThan(MAX_BYTES * 0.9);
    expect(counts.HIT ?? 0, `hits among the ${HOT_READS} reads of the hot set`).toBeGreaterThan(HOT_READS * 0.9);
    expect(delta, `array buffers held after the load, beyond the baseline (${(delta / MAX_BYTES).toFixed(2)} x maxBytes)`).toBeLessThanOrEqual(ALLOWED);
  });
});
