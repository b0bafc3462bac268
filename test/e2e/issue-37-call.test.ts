// Issue 37, "one Call, parsed once": the guard's decision is the Call that
// travels (kinds/evm/call.ts), holding what the guard parsed, so no layer below it
// (the cache, the pool) parses the call's body again. The gateway runs with a
// preload (test/support/count-parses.mjs) that logs every JSON.parse of a
// text holding a marker; each call here carries a marker of its own in its
// params (eth_call data), so the log says how many times the gateway parsed
// that call. Two nodes (anvil behind recording proxies) make each chain a
// pool. Before the guard's decision carried the Call, a pooled cache miss was
// parsed twice (its params by the guard, its body again by the cache's Call),
// and so was a pooled call without a cache (by the pool's Call).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, type RunningGateway } from './harness.ts';
import { parseCountManifest, startParseCountedPool, type ParseCountedPool } from '../support/parse-count.ts';

const KEY = newKey();
const MARK = 'c0ffee37';
const TO = '0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6';

let pool: ParseCountedPool;
let gw: RunningGateway;

const MANIFEST = parseCountManifest(
  '  - { path: unchecked, interface: evm-jsonrpc, listener: rpc, methods: [eth_chainId, eth_blockNumber, eth_call], validate: off, upstreams: ["${NODE1}", "${NODE2}"] }\n',
);

beforeAll(async () => {
  pool = await startParseCountedPool('issue-37-call', MANIFEST, KEY, MARK);
  gw = pool.gw;
}, 60_000);

afterAll(async () => {
  await pool?.close();
});

let serial = 0;

/** An eth_call whose data is this call's own marker, at block 1 (cacheable by number). */
async function markedCall(chain: string): Promise<{ status: number; xCache: string | undefined; result: unknown; data: string }> {
  const data = `0x${MARK}${(++serial).toString(16).padStart(8, '0')}`;
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: serial, method: 'eth_call', params: [{ to: TO, data }, '0x1'] }),
  });
  const json = (await r.body.json()) as { result?: unknown };
  const x = r.headers['x-cache'];
  return { status: r.statusCode, xCache: typeof x === 'string' ? x : undefined, result: json.result, data };
}

const parsesOf = (data: string) => pool.parsesOf(data);
const reached = (data: string) => pool.reached(data);

describe('one Call, parsed once (issue 37)', () => {
  beforeAll(async () => {
    for (const chain of ['cached', 'pooled', 'unchecked']) {
      await until(async () => (await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' })).statusCode === 200, `${chain} serving`);
    }
  }, 30_000);

  it('a pooled cache miss (validate: params): the guard parses its params, and neither the cache nor the pool parses the body again', async () => {
    const a = await markedCall('cached');
    expect(a.status).toBe(200);
    expect(a.result).toBe('0x');
    expect(a.xCache, 'a cache miss').toBe('MISS');
    expect(reached(a.data), 'sent to one node').toBe(1);
    expect(parsesOf(a.data), 'parses of the call in the gateway').toBe(1);
  });

  it('a pooled call without a cache (validate: params): parsed once, by the guard', async () => {
    const a = await markedCall('pooled');
    expect(a.status).toBe(200);
    expect(a.result).toBe('0x');
    expect(reached(a.data), 'sent to one node').toBe(1);
    expect(parsesOf(a.data), 'parses of the call in the gateway').toBe(1);
  });

  it('a pooled cache miss with validate: off: the guard parses nothing, and the Call parses the body once, when the cache first asks', async () => {
    const a = await markedCall('unchecked');
    expect(a.status).toBe(200);
    expect(a.result).toBe('0x');
    expect(a.xCache, 'a cache miss').toBe('MISS');
    expect(reached(a.data), 'sent to one node').toBe(1);
    expect(parsesOf(a.data), 'parses of the call in the gateway').toBe(1);
  });

  // Issue 45, walk B of the review: the layers read the guard's Call and one Answer, not the bytes again. The call's
  // id holds its marker too, so the node's answer (which echoes the id) is counted as well.
  it('a pooled cache miss (walk B): the call is scanned once (the guard) and its answer once, whatever layers judge it', async () => {
    const data = `0x${MARK}${(++serial).toString(16).padStart(8, '0')}`;
    const r = await request(gw.url('rpc', '/cached'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify({ jsonrpc: '2.0', id: data, method: 'eth_call', params: [{ to: TO, data }, '0x1'] }),
    });
    const json = (await r.body.json()) as { id?: unknown; result?: unknown };
    expect(r.statusCode).toBe(200);
    expect(json).toMatchObject({ id: data, result: '0x' });
    expect(r.headers['x-cache'], 'a cache miss').toBe('MISS');
    expect(reached(data), 'sent to one node').toBe(1);
    const scans = pool.scansOf(data);
    const ofCall = scans.filter((s) => s.text.includes('"method"')).map((s) => s.scan);
    const ofAnswer = scans.filter((s) => !s.text.includes('"method"')).map((s) => s.scan);
    expect(ofCall, 'scans of the call').toEqual(['scanPlainRpc']);
    expect(ofAnswer, 'scans of the answer').toEqual(['answerSpans']);
  });

  // Issue 45, "batches are split once": the cache's front splits a client batch; the rest it does not take goes on as
  // the guard's Calls, the pool sends them one by one, and each answer lands in the front's plan in its slot. Nothing
  // joins the rest's answers into a batch that the front would split again.
  it('a client batch on a cached pool (a miss and a call the cache does not take): the batch is scanned once, and no answer is scanned again to merge it', async () => {
    const kept = `0x${MARK}${(++serial).toString(16).padStart(8, '0')}`;
    const rest = `0x${MARK}${(++serial).toString(16).padStart(8, '0')}`;
    const r = await request(gw.url('rpc', '/cached'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: kept, method: 'eth_call', params: [{ to: TO, data: kept }, '0x1'] },
        // At `pending`: never kept, so it is of the rest.
        { jsonrpc: '2.0', id: rest, method: 'eth_call', params: [{ to: TO, data: rest }, 'pending'] },
      ]),
    });
    const json = (await r.body.json()) as { id?: unknown; result?: unknown }[];
    expect(r.statusCode).toBe(200);
    expect(json).toMatchObject([
      { id: kept, result: '0x' },
      { id: rest, result: '0x' },
    ]);
    expect(r.headers['x-cache'], 'a cache miss').toBe('MISS');
    expect(reached(kept) + reached(rest), 'each sent once').toBe(2);
    const ofCall = (mark: string) => pool.scansOf(mark).filter((s) => s.text.includes('"method"')).map((s) => s.scan);
    const ofAnswer = (mark: string) => pool.scansOf(mark).filter((s) => !s.text.includes('"method"')).map((s) => s.scan);
    expect(ofCall(rest), 'scans of the batch').toEqual(['scanPlainRpc']);
    expect(ofCall(kept), 'scans of the batch').toEqual(['scanPlainRpc']);
    expect(ofAnswer(kept), "scans of the miss's answer").toEqual(['answerSpans']);
    expect(ofAnswer(rest), "scans of the rest's answer").toEqual(['answerSpans']);
  });

  // The same on a pool without the cache, for a batch the guard answers in part: the pool splits it, and each answer
  // lands in the route's merge plan in its slot (the refused call's error in its own), not joined to be split again.
  it('a client batch on a pool without the cache, with a call the allowlist refuses: each answer is scanned once, and the refusal is in its place', async () => {
    const data = `0x${MARK}${(++serial).toString(16).padStart(8, '0')}`;
    const r = await request(gw.url('rpc', '/pooled'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [TO, 'latest'] },
        { jsonrpc: '2.0', id: data, method: 'eth_call', params: [{ to: TO, data }, '0x1'] },
      ]),
    });
    const json = (await r.body.json()) as { id?: unknown; result?: unknown; error?: { code: number } }[];
    expect(r.statusCode).toBe(200);
    expect(json).toMatchObject([
      { id: 1, error: { code: -32601 } },
      { id: data, result: '0x' },
    ]);
    expect(reached(data), 'sent to one node').toBe(1);
    const ofAnswer = pool.scansOf(data).filter((s) => !s.text.includes('"method"')).map((s) => s.scan);
    expect(ofAnswer, 'scans of the answer').toEqual(['answerSpans']);
  });
});
