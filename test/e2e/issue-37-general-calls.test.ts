// Issue 37, "one Call, parsed once", for a client's batch the guard takes on
// its general path (kinds/evm/guard.ts checkEvmBodyGeneral): a body with an escape
// or a character outside ASCII, a batch with a refused call, or a key with a
// contracts list. The guard JSON.parses such a body whole; its decision
// carries one Call per forwarded call, made of what it parsed, each with its
// own bytes of the body that goes upstream (the body as it came, or the
// canonical re-serialization of what was checked) and its id. The cache
// (kinds/evm/cache-batch.ts) and the pool (pool/batch.ts) split the batch with
// those. Counted as issue-37-batch-calls.test.ts counts: each eth_call carries
// a marker of its own, and a preload logs every JSON.parse of a text with the
// marker. Before, the general path's batch decision carried no Calls, and each
// call was parsed again by the cache's Call (cache on) or the pool's split
// (cache off): two parses per call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { keysYaml, newKey, sha256, until, type RunningGateway } from './harness.ts';
import { parseCountManifest, startParseCountedPool, type ParseCountedPool } from '../support/parse-count.ts';

const KEY = newKey();
const CONTRACTS_KEY = newKey();
const MARK = 'c0ffee3a';
const TO = '0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6';

let pool: ParseCountedPool;
let gw: RunningGateway;

const MANIFEST = parseCountManifest();

const KEYS = `${keysYaml([{ id: 'call', key: KEY }])}  - id: contracts
    sha256: "${sha256(CONTRACTS_KEY)}"
    allow: { contracts: ["${TO}"] }
`;

beforeAll(async () => {
  pool = await startParseCountedPool('issue-37-general-calls', MANIFEST, KEY, MARK, KEYS);
  gw = pool.gw;
}, 60_000);

afterAll(async () => {
  await pool?.close();
});

let serial = 0;

interface Sent {
  status: number;
  xCache: string | undefined;
  answers: { id?: unknown; result?: unknown; error?: { code?: number } }[];
  data: string[];
}

/**
 * A batch of two eth_calls at block 1 (cacheable by number), each with its own marker as data, and an eth_chainId,
 * with ids `ids` (written as JSON.stringify writes them, then passed through `spell`), and `extra` calls after them.
 */
async function markedBatch(chain: string, ids: readonly string[], spell: (body: string) => string = (b) => b, key = KEY, extra: readonly object[] = []): Promise<Sent> {
  const data = [0, 1].map(() => `0x${MARK}${(++serial).toString(16).padStart(8, '0')}`);
  const body = JSON.stringify([
    { jsonrpc: '2.0', id: ids[0], method: 'eth_call', params: [{ to: TO, data: data[0] }, '0x1'] },
    { jsonrpc: '2.0', id: ids[1], method: 'eth_call', params: [{ to: TO, data: data[1] }, '0x1'] },
    { jsonrpc: '2.0', id: ids[2], method: 'eth_chainId' },
    ...extra,
  ]);
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: spell(body),
  });
  const answers = (await r.body.json()) as Sent['answers'];
  const x = r.headers['x-cache'];
  return { status: r.statusCode, xCache: typeof x === 'string' ? x : undefined, answers, data };
}

/** Distinct ids for one batch. */
function ids(prefix: string): string[] {
  return ['a', 'b', 'c'].map((s) => `${prefix}${s}${serial}`);
}

/** The ids' last letters written as JSON escapes: the body has a backslash, so the guard's fast path leaves it to the general path. */
function escaped(id: string): (body: string) => string {
  return (body) => body.replaceAll(`"${id}`, `"\\u00${id.charCodeAt(0).toString(16)}${id.slice(1)}`);
}

function expectParsedOnce(s: Sent, want: readonly string[]): void {
  expect(s.status).toBe(200);
  expect(s.answers.slice(0, 3).map((a) => a.id)).toEqual(want);
  expect(s.answers[0]!.result).toBe('0x');
  expect(s.answers[1]!.result).toBe('0x');
  expect(s.answers[2]!.result).toBe('0x7a69');
  for (const data of s.data) {
    expect(pool.reached(data), 'each call sent to one node').toBe(1);
    expect(pool.parsesOf(data), 'parses of the call in the gateway').toBe(1);
  }
}

describe("a client batch on the guard's general path: each call parsed once (issue 37)", () => {
  beforeAll(async () => {
    for (const chain of ['cached', 'pooled']) {
      await until(async () => (await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' })).statusCode === 200, `${chain} serving`);
    }
  }, 30_000);

  for (const chain of ['cached', 'pooled']) {
    it(`${chain}: a batch with an escape (sent as the canonical calls): the guard parses it, and neither the cache nor the pool parses a call again`, async () => {
      const want = ids('esc');
      const s = await markedBatch(chain, want, escaped(want[0]!));
      expectParsedOnce(s, want);
      if (chain === 'cached') expect(s.xCache, 'the calls went upstream').toBe('MISS');
    });

    it(`${chain}: a batch with ids outside ASCII (sent as it came): each call parsed once`, async () => {
      const want = ids('é');
      const s = await markedBatch(chain, want);
      expectParsedOnce(s, want);
      if (chain === 'cached') expect(s.xCache, 'the calls went upstream').toBe('MISS');
    });

    it(`${chain}: a batch with a refused call (answered in place): each forwarded call parsed once`, async () => {
      const want = ids('ref');
      const s = await markedBatch(chain, want, escaped(want[0]!), KEY, [{ jsonrpc: '2.0', id: 'refused', method: 'eth_getBalance', params: [TO, 'latest'] }]);
      expectParsedOnce(s, want);
      expect(s.answers[3]).toMatchObject({ id: 'refused', error: { code: -32601 } });
    });

    it(`${chain}: a batch through a key with a contracts list: each call parsed once`, async () => {
      const want = ids('key');
      const s = await markedBatch(chain, want, undefined, CONTRACTS_KEY);
      expectParsedOnce(s, want);
    });
  }
});
