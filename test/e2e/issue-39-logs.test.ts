// Issue 39, eth_getLogs ranges: through the built gateway, against anvil with
// real logs (a contract whose code is LOG0, called in most of 300 blocks, twice
// in some). Each chain's upstreams are stand-ins in front of that anvil that
// cap eth_getLogs as providers do and refuse wider ranges with their own texts
// (test/support/range-capped-node.ts); every range that reached them is
// recorded. The oracle is anvil itself, asked for the whole range.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, EVM_METHODS, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRangeCappedNode, type CapText, type LogsSeen, type RangeCappedNode } from '../support/range-capped-node.ts';

const KEY = newKey();
/** anvil's first dev account (unlocked). */
const FROM = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
/** Init code that deploys the runtime code 0x60006000a0: PUSH1 0 PUSH1 0 LOG0 (a log with no topics and no data). */
const DEPLOY_LOG0 = '0x6460006000a06000526005601bf3';
/** Blocks with logs. */
const BLOCKS = 300;

let anvil: Anvil;
let rig: Gateway;
let gw: RunningGateway;
let first = 0;
let last = 0;
const nodes: Record<string, RangeCappedNode> = {};

const ENV: Record<string, string> = { SPLIT_A: 'split-a', SPLIT_B: 'split-b', ONE: 'one', LEARN_A: 'learn-a', LEARN_B: 'learn-b', FAIL_A: 'fail-a', FAIL_B: 'fail-b', TINY: 'tiny', LIMITED: 'limited' };

async function send(method: string, params: unknown[]): Promise<any> {
  const r = await anvil.rpc(method, params);
  if (r.error) throw new Error(`${method}: ${r.error.message}`);
  return r.result;
}

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  const deploy = await send('eth_sendTransaction', [{ from: FROM, data: DEPLOY_LOG0, gas: '0x30000' }]);
  await anvil.mine(1);
  const contract = ((await send('eth_getTransactionReceipt', [deploy])) as { contractAddress: string }).contractAddress;
  first = Number.parseInt(await send('eth_blockNumber', []), 16) + 1;
  // Logs in most blocks: none in every seventh, two in every third (log indexes 0 and 1).
  for (let i = 0; i < BLOCKS; i++) {
    const calls = i % 7 === 6 ? 0 : i % 3 === 0 ? 2 : 1;
    for (let k = 0; k < calls; k++) await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
    await anvil.mine(1);
  }
  last = first + BLOCKS - 1;
  // Blocks after the logs: anvil's finalized block (64 below its head) is past the last log, and the head is past
  // block 1000 (a range is clamped to the head before it is split: the tiny chain's 1001 blocks are all below it).
  await anvil.mine(1000);
  // The learning pool's caps are set per test; the limited chain's node takes any range.
  for (const id of Object.values(ENV)) nodes[id] = await startRangeCappedNode(anvil.url, { cap: id.startsWith('learn') || id === 'limited' || id === 'tiny' ? null : 50 });
  rig = await gateway({
    name: 'issue-39-logs',
    chains: [
      // A pool of two nodes that each take 50 blocks, as the manifest says.
      { path: 'split', interface: 'evm-jsonrpc', upstreams: [{ url: '${SPLIT_A}', maxLogRange: 50 }, { url: '${SPLIT_B}', maxLogRange: 50 }] },
      // One node that takes 50 blocks: the plain dispatch, no pool.
      { path: 'one', interface: 'evm-jsonrpc', upstreams: [{ url: '${ONE}', maxLogRange: 50 }] },
      // Two capped nodes, and no word of their caps in the manifest: their errors teach them.
      evmChain('learn', ['LEARN_A', 'LEARN_B']),
      // One node fails every eth_getLogs; no retry of the request's own, so only the split's try elsewhere can help.
      { path: 'failover', interface: 'evm-jsonrpc', retries: 0, upstreams: [{ url: '${FAIL_A}', maxLogRange: 50 }, { url: '${FAIL_B}', maxLogRange: 50 }] },
      // A node that takes one block: a range of more than 1000 blocks below the head takes more requests than a call may cost.
      { path: 'tiny', interface: 'evm-jsonrpc', upstreams: [{ url: '${TINY}', maxLogRange: 1 }] },
      // What clients may ask: 100 blocks at most.
      evmChain('limited', ['LIMITED'], { limits: { maxLogRange: 100 } }),
    ],
    header: { methodSets: { evm: [...EVM_METHODS, 'eth_getLogs'] }, admin: null },
    keys: [{ id: 'logs', key: KEY }],
    standIns: { anvil, nodes: Object.values(nodes) },
    env: Object.fromEntries(Object.entries(ENV).map(([k, id]) => [k, nodes[id]!.url])),
  });
  gw = rig.gw;
}, 120_000);

afterAll(() => rig?.close());

/** A raw call (the id written as given), through the gateway: its status and its text. */
async function raw(chain: string, body: string): Promise<{ status: number; text: string }> {
  const r = await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body });
  return { status: r.statusCode, text: await r.body.text() };
}

const hex = (n: number): string => `0x${n.toString(16)}`;
const logsCall = (id: string | number, filter: Record<string, unknown>): string => `{"jsonrpc":"2.0","id":${id},"method":"eth_getLogs","params":[${JSON.stringify(filter)}]}`;

/** anvil's own answer to the range. */
async function oracle(filter: Record<string, unknown>): Promise<unknown[]> {
  const r = await anvil.rpc('eth_getLogs', [filter]);
  expect(r.error).toBeUndefined();
  return r.result as unknown[];
}

/** The widths of the numeric ranges that reached a node (after index `from`), refused or not. */
function widths(seen: readonly LogsSeen[]): number[] {
  return seen.map((s) => (typeof s.from === 'number' && typeof s.to === 'number' ? s.to - s.from + 1 : Number.NaN));
}

describe('eth_getLogs ranges (issue 39)', () => {
  it('splits a 300-block range by maxLogRange: 50 over a pool: the answer equals anvil\'s, with the client\'s id bytes, and no node saw more than 50 blocks', async () => {
    const filter = { fromBlock: hex(first), toBlock: hex(last) };
    const want = await oracle(filter);
    expect(want.length).toBeGreaterThan(BLOCKS);
    const [a, b] = [nodes['split-a']!, nodes['split-b']!];
    const [fa, fb] = [a.logs.length, b.logs.length];
    const r = await raw('split', logsCall('123456789012345678901234567890', filter));
    expect(r.status).toBe(200);
    expect(r.text.slice(0, 63)).toBe('{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":[');
    expect((JSON.parse(r.text) as { result: unknown[] }).result).toEqual(want);
    const seen = [...a.logs.slice(fa), ...b.logs.slice(fb)];
    expect(seen.length).toBe(Math.ceil(BLOCKS / 50));
    expect(Math.max(...widths(seen))).toBeLessThanOrEqual(50);
    expect(seen.every((s) => !s.refused)).toBe(true);
    expect(a.logs.length - fa, 'both nodes took chunks').toBeGreaterThan(0);
    expect(b.logs.length - fb, 'both nodes took chunks').toBeGreaterThan(0);
  }, 30_000);

  it('splits on a chain of one upstream too (no pool); a range within the cap, or by blockHash, goes as one call', async () => {
    const node = nodes.one!;
    const filter = { fromBlock: hex(first + 7), toBlock: hex(last - 3) };
    const from = node.logs.length;
    const r = await raw('one', logsCall('"a"', filter));
    expect((JSON.parse(r.text) as { id: unknown; result: unknown[] })).toEqual({ jsonrpc: '2.0', id: 'a', result: await oracle(filter) });
    expect(Math.max(...widths(node.logs.slice(from)))).toBeLessThanOrEqual(50);
    expect(node.logs.length - from).toBe(Math.ceil((BLOCKS - 10) / 50));
    const narrow = { fromBlock: hex(first), toBlock: hex(first + 49) };
    const at = node.logs.length;
    expect((JSON.parse((await raw('one', logsCall(7, narrow))).text) as { result: unknown[] }).result).toEqual(await oracle(narrow));
    expect(node.logs.slice(at)).toEqual([{ from: first, to: first + 49, refused: false }]);
    // A range by blockHash is never split: it goes as it came.
    const blockHash = ((await send('eth_getBlockByNumber', [hex(first), false])) as { hash: string }).hash;
    const byHash = node.logs.length;
    expect((JSON.parse((await raw('one', logsCall(8, { blockHash }))).text) as { result: unknown[] }).result).toEqual(await oracle({ blockHash }));
    expect(node.logs.slice(byHash)).toEqual([{ from: undefined, to: undefined, refused: false }]);
  }, 30_000);

  it('refuses a range that would take more than 1000 chunk requests with -32602, naming the widest range that fits, before any node sees it', async () => {
    const node = nodes.tiny!;
    const from = node.logs.length;
    const r = JSON.parse((await raw('tiny', logsCall(4, { fromBlock: '0x0', toBlock: hex(1000) }))).text) as { id: number; error: { code: number; data: { maxLogRange: number } } };
    expect(r.id).toBe(4);
    expect(r.error.code).toBe(-32602);
    expect(r.error.data.maxLogRange).toBe(1000);
    expect(node.logs.slice(from)).toEqual([]);
  });

  it('resolves latest, finalized and earliest to the blocks served before splitting: no tag reaches a node', async () => {
    const [a, b] = [nodes['split-a']!, nodes['split-b']!];
    // The pool's polls report anvil's finalized block.
    await until(async () => JSON.parse((await raw('split', '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}')).text).result === (await send('eth_blockNumber', [])), 'served tip at anvil\'s head');
    for (const filter of [{ fromBlock: hex(last - 120) }, { fromBlock: hex(first), toBlock: 'latest' }, { fromBlock: 'earliest', toBlock: 'finalized' }]) {
      const [fa, fb] = [a.logs.length, b.logs.length];
      const got = JSON.parse((await raw('split', logsCall(1, filter))).text) as { result?: unknown[]; error?: unknown };
      expect(got.error, JSON.stringify(filter)).toBeUndefined();
      expect(got.result, JSON.stringify(filter)).toEqual(await oracle(filter));
      const seen = [...a.logs.slice(fa), ...b.logs.slice(fb)];
      expect(seen.length, JSON.stringify(filter)).toBeGreaterThan(1);
      expect(seen.every((s) => typeof s.from === 'number' && typeof s.to === 'number'), `${JSON.stringify(filter)}: only numbers reached the nodes`).toBe(true);
      expect(Math.max(...widths(seen))).toBeLessThanOrEqual(50);
    }
  }, 30_000);

  // Each text with a lower cap than the one before: the limit each teaches is new, and kept.
  const TAUGHT: readonly [CapText, number][] = [
    ['publicnode', 80],
    ['infura-range', 60],
    ['alchemy', 45],
    ['quicknode', 30],
    ['reth', 25],
  ];
  // Chunks are sized per upstream (issue 43 rule 9): a node whose cap is not known yet is given a range whole, so both
  // may refuse in the first two calls (the other node's in the second); from then on neither does.
  for (const [text, cap] of TAUGHT) {
    it(`learns a cap of ${cap} blocks from ${text}'s refusal, answers as anvil does, and keeps the cap for the next calls`, async () => {
      const [a, b] = [nodes['learn-a']!, nodes['learn-b']!];
      for (const n of [a, b]) Object.assign(n, { cap, text });
      const filter = { fromBlock: hex(first), toBlock: hex(last) };
      const want = await oracle(filter);
      let [fa, fb] = [a.logs.length, b.logs.length];
      for (const id of [5, 15]) {
        const got = JSON.parse((await raw('learn', logsCall(id, filter))).text) as { result?: unknown[]; error?: unknown };
        expect(got.error).toBeUndefined();
        expect(got.result).toEqual(want);
      }
      expect([...a.logs.slice(fa), ...b.logs.slice(fb)].some((s) => s.refused), 'a node refused a range first').toBe(true);
      // The next call: every range within the cap the nodes taught, none refused.
      [fa, fb] = [a.logs.length, b.logs.length];
      const again = JSON.parse((await raw('learn', logsCall(6, filter))).text) as { result?: unknown[] };
      expect(again.result).toEqual(want);
      const seen = [...a.logs.slice(fa), ...b.logs.slice(fb)];
      expect(seen.filter((s) => s.refused)).toEqual([]);
      expect(Math.max(...widths(seen))).toBeLessThanOrEqual(cap);
    }, 30_000);
  }

  it("splits a range Infura says holds too many results by the range it suggests (a count of logs: not kept as a cap)", async () => {
    const [a, b] = [nodes['learn-a']!, nodes['learn-b']!];
    // Below every cap learned so far: the suggestion is what splits.
    for (const n of [a, b]) Object.assign(n, { cap: 12, text: 'infura-results' });
    const filter = { fromBlock: hex(first + 100), toBlock: hex(first + 199) };
    const [fa, fb] = [a.logs.length, b.logs.length];
    const got = JSON.parse((await raw('learn', logsCall(8, filter))).text) as { result?: unknown[]; error?: unknown };
    expect(got.error).toBeUndefined();
    expect(got.result).toEqual(await oracle(filter));
    const seen = [...a.logs.slice(fa), ...b.logs.slice(fb)];
    expect(seen.some((s) => s.refused)).toBe(true);
    expect(Math.max(...widths(seen.filter((s) => !s.refused)))).toBeLessThanOrEqual(12);
  }, 30_000);

  it('serves a chunk that fails on one upstream from another (no retry of the request itself), equal to anvil; fails the call when every upstream fails it', async () => {
    const [a, b] = [nodes['fail-a']!, nodes['fail-b']!];
    a.failLogs = true;
    const filter = { fromBlock: hex(first), toBlock: hex(last) };
    const [fa, fb] = [a.logs.length, b.logs.length];
    const r = await raw('failover', logsCall(9, filter));
    expect(r.status).toBe(200);
    expect((JSON.parse(r.text) as { result: unknown[] }).result).toEqual(await oracle(filter));
    expect(a.logs.length - fa, 'the failing node was asked').toBeGreaterThan(0);
    expect(b.logs.slice(fb).filter((s) => !s.refused).length, 'the other node served every chunk').toBe(Math.ceil(BLOCKS / 50));
    // Both failing: the call fails with the gateway's error for the last failure (a 503 HTML page: -32053), as a lone call does.
    b.failLogs = true;
    const none = await raw('failover', logsCall(10, filter));
    expect(none.status).toBeGreaterThanOrEqual(500);
    expect([-32050, -32052, -32053]).toContain((JSON.parse(none.text) as { error: { code: number } }).error.code);
    a.failLogs = b.failLogs = false;
  }, 30_000);

  it('refuses a range wider than limits.maxLogRange with -32602 and the limit in data, before any node sees it', async () => {
    const node = nodes.limited!;
    const from = node.logs.length;
    const wide = await raw('limited', logsCall(11, { fromBlock: hex(first), toBlock: hex(first + 100) }));
    expect(wide.status).toBe(200);
    const e = JSON.parse(wide.text) as { id: number; error: { code: number; data: { maxLogRange: number } } };
    expect(e.id).toBe(11);
    expect(e.error.code).toBe(-32602);
    expect(e.error.data.maxLogRange).toBe(100);
    // A tag counts as the block it names: 0..latest is wider than 100 too.
    const tagged = JSON.parse((await raw('limited', logsCall(12, { fromBlock: 'earliest' }))).text) as { error: { code: number; data: { maxLogRange: number } } };
    expect(tagged.error.code).toBe(-32602);
    expect(tagged.error.data.maxLogRange).toBe(100);
    expect(node.logs.slice(from)).toEqual([]);
    // Exactly 100 blocks: answered.
    const ok = { fromBlock: hex(first), toBlock: hex(first + 99) };
    expect((JSON.parse((await raw('limited', logsCall(13, ok))).text) as { result: unknown[] }).result).toEqual(await oracle(ok));
  }, 30_000);

  it('refuses the wide range of a batch in its place, and answers the other calls', async () => {
    const node = nodes.limited!;
    const from = node.logs.length;
    const ok = { fromBlock: hex(first), toBlock: hex(first + 20) };
    const body = `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},${logsCall(2, { fromBlock: hex(first), toBlock: hex(last) })},${logsCall(3, ok)}]`;
    const r = await raw('limited', body);
    expect(r.status).toBe(200);
    const items = JSON.parse(r.text) as { id: number; result?: unknown; error?: { code: number; data: { maxLogRange: number } } }[];
    expect(items.map((i) => i.id)).toEqual([1, 2, 3]);
    expect(items[0]!.result).toBe('0x7a69');
    expect(items[1]!.error?.code).toBe(-32602);
    expect(items[1]!.error?.data.maxLogRange).toBe(100);
    expect(items[2]!.result).toEqual(await oracle(ok));
    expect(node.logs.slice(from)).toEqual([{ from: first, to: first + 20, refused: false }]);
  }, 30_000);
});
