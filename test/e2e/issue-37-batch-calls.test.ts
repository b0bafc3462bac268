// Issue 37, "one Call, parsed once", for a client's batch: the guard's
// decision on a batch carries one Call per call (kinds/evm/call.ts; the fast path
// makes them, with the params it read for validate: params), and the layers
// that split the batch, the cache (kinds/evm/cache-batch.ts) and the pool
// (pool/batch.ts), use those instead of parsing each call again. The gateway
// runs with a preload (test/support/count-parses.mjs) that logs every
// JSON.parse of a text holding a marker; each eth_call of a batch carries a
// marker of its own, so the log says how many times the gateway parsed that
// call. Two nodes (anvil behind recording proxies) make each chain a pool.
// Before the batch's decision carried its Calls, each call of a pooled batch
// was parsed twice: its params by the guard, then its body again by the
// cache's Call (cache on) or the pool's split (cache off, and the calls a
// cache does not take, which go on together as the batch's rest).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, type RunningGateway } from './harness.ts';
import { parseCountManifest, startParseCountedPool, type ParseCountedPool } from '../support/parse-count.ts';

const KEY = newKey();
const MARK = 'c0ffee37';
const TO = '0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6';

let pool: ParseCountedPool;
let gw: RunningGateway;

const MANIFEST = parseCountManifest();

beforeAll(async () => {
  pool = await startParseCountedPool('issue-37-batch-calls', MANIFEST, KEY, MARK);
  gw = pool.gw;
}, 60_000);

afterAll(async () => {
  await pool?.close();
});

let serial = 0;

interface Sent {
  status: number;
  xCache: string | undefined;
  answers: { id?: unknown; result?: unknown }[];
  data: string[];
}

/** A batch: two eth_calls whose data are their own markers, at block 1 (cacheable by number) or at `second`, and an eth_chainId. */
async function markedBatch(chain: string, second = '0x1'): Promise<Sent> {
  const data = [0, 1].map(() => `0x${MARK}${(++serial).toString(16).padStart(8, '0')}`);
  const first = serial;
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify([
      { jsonrpc: '2.0', id: first - 1, method: 'eth_call', params: [{ to: TO, data: data[0] }, '0x1'] },
      { jsonrpc: '2.0', id: first, method: 'eth_call', params: [{ to: TO, data: data[1] }, second] },
      { jsonrpc: '2.0', id: 'chain', method: 'eth_chainId' },
    ]),
  });
  const answers = (await r.body.json()) as Sent['answers'];
  const x = r.headers['x-cache'];
  return { status: r.statusCode, xCache: typeof x === 'string' ? x : undefined, answers, data };
}

const parsesOf = (data: string) => pool.parsesOf(data);
const reached = (data: string) => pool.reached(data);

function expectAnswered(s: Sent): void {
  expect(s.status).toBe(200);
  expect(s.answers.map((a) => a.id)).toEqual([serial - 1, serial, 'chain']);
  expect(s.answers[0]!.result).toBe('0x');
  expect(s.answers[1]!.result).toBe('0x');
  expect(s.answers[2]!.result).toBe('0x7a69');
}

describe("a client batch's calls, parsed once each (issue 37)", () => {
  beforeAll(async () => {
    for (const chain of ['cached', 'pooled']) {
      await until(async () => (await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' })).statusCode === 200, `${chain} serving`);
    }
  }, 30_000);

  it("a pooled batch of cache misses (validate: params): the guard parses each call's params, and neither the cache nor the pool parses a call again", async () => {
    const s = await markedBatch('cached');
    expectAnswered(s);
    expect(s.xCache, 'the calls went upstream').toBe('MISS');
    for (const data of s.data) {
      expect(reached(data), 'each call sent to one node').toBe(1);
      expect(parsesOf(data), 'parses of the call in the gateway').toBe(1);
    }
  });

  it('a pooled batch with a call the cache does not take (at pending): that call goes on with the rest, and the pool splits the rest with the guard\'s Calls', async () => {
    const s = await markedBatch('cached', 'pending');
    expectAnswered(s);
    expect(s.xCache, 'the calls went upstream').toBe('MISS');
    for (const data of s.data) {
      expect(reached(data), 'each call sent to one node').toBe(1);
      expect(parsesOf(data), 'parses of the call in the gateway').toBe(1);
    }
  });

  it("a pooled batch without a cache (validate: params): each call parsed once, by the guard, and not again by the pool's split", async () => {
    const s = await markedBatch('pooled');
    expectAnswered(s);
    for (const data of s.data) {
      expect(reached(data), 'each call sent to one node').toBe(1);
      expect(parsesOf(data), 'parses of the call in the gateway').toBe(1);
    }
  });
});
