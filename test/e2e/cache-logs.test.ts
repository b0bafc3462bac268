// The cache's layer below the eth_getLogs ranges layer (issues 37 and 39:
// ranges -> cache -> pool -> forward; "chunks in final blocks are cacheable
// like any final answer"): through the built gateway, against anvil with real
// logs (a contract whose code is LOG0). Each upstream is a stand-in in front of
// anvil that takes 50 blocks at most and records every range that reached it
// (test/support/range-capped-node.ts), so a chunk served from memory is one
// the nodes never saw. The oracle is anvil itself, asked for the whole range.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, EVM_METHODS, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRangeCappedNode, type LogsSeen, type RangeCappedNode } from '../support/range-capped-node.ts';
import { startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';

const KEY = newKey();
/** anvil's first dev account (unlocked). */
const FROM = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
/** Init code that deploys the runtime code 0x60006000a0: PUSH1 0 PUSH1 0 LOG0 (a log with no topics and no data). */
const DEPLOY_LOG0 = '0x6460006000a06000526005601bf3';

let anvil: Anvil;
let rig: Gateway;
let gw: RunningGateway;
let contract = '';
/** The first block of the final ranges asked: a multiple of 50, so that the chunks fall where the test says. */
let a0 = 0;
const nodes: Record<string, RangeCappedNode> = {};
/** A pool of a node at the head and one 80 blocks behind (anvil-like: above its head, eth_getLogs answers what it has, or an empty list). */
let healthy: PoolStandin;
let laggard: PoolStandin;
const LAG = 80;
/** anvil's state before any log: evm_revert to it takes the chain back below its finalized block. */
let snapshot = '';

const ENV: Record<string, string> = { ONE: 'one', POOL_A: 'pool-a', POOL_B: 'pool-b' };

async function send(method: string, params: unknown[]): Promise<any> {
  const r = await anvil.rpc(method, params);
  if (r.error) throw new Error(`${method}: ${r.error.message}`);
  return r.result;
}

const hex = (n: number): string => `0x${n.toString(16)}`;
const logsCall = (id: string | number, filter: Record<string, unknown>): string => `{"jsonrpc":"2.0","id":${id},"method":"eth_getLogs","params":[${JSON.stringify(filter)}]}`;

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  const deploy = await send('eth_sendTransaction', [{ from: FROM, data: DEPLOY_LOG0, gas: '0x30000' }]);
  await anvil.mine(1);
  contract = ((await send('eth_getTransactionReceipt', [deploy])) as { contractAddress: string }).contractAddress;
  snapshot = (await anvil.rpc('evm_snapshot')).result as string;
  const first = Number.parseInt(await send('eth_blockNumber', []), 16) + 1;
  a0 = Math.ceil(first / 50) * 50;
  // Logs in two blocks of every three, up to a0 + 499: anvil's finalized block (64 below its head) is past
  // a0 + 399, the laggard's head (80 below) too.
  for (let n = first; n < a0 + 500; n++) {
    if (n % 3 !== 2) await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
    await anvil.mine(1);
  }
  // A log in the head block: not final.
  await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
  await anvil.mine(1);
  for (const id of Object.values(ENV)) nodes[id] = await startRangeCappedNode(anvil.url, { cap: 50 });
  [healthy, laggard] = await Promise.all([startPoolStandin(anvil.url, { role: 'healthy' }), startPoolStandin(anvil.url, { role: 'laggard', lag: LAG, node: 'anvil' })]);
  rig = await gateway({
    name: 'cache-logs',
    chains: [
      // One node that takes 50 blocks: no pool.
      { path: 'one', interface: 'evm-jsonrpc', upstreams: [{ url: '${ONE}', maxLogRange: 50 }] },
      // A pool of two such nodes.
      { path: 'pool', interface: 'evm-jsonrpc', upstreams: [{ url: '${POOL_A}', maxLogRange: 50 }, { url: '${POOL_B}', maxLogRange: 50 }] },
      // A node at the head and a laggard, taking turns (weighted), both still usable.
      {
        path: 'lag',
        interface: 'evm-jsonrpc',
        maxLag: 100,
        selection: 'weighted',
        upstreams: [{ url: '${HEALTHY}', maxLogRange: 50 }, { url: '${LAGGARD}', maxLogRange: 50 }],
      },
    ],
    header: { methodSets: { evm: [...EVM_METHODS, 'eth_getLogs'] }, admin: null, cache: { headPollMs: 100 } },
    keys: [{ id: 'logs', key: KEY }],
    standIns: { anvil, HEALTHY: healthy, LAGGARD: laggard, nodes: Object.values(nodes) },
    env: Object.fromEntries(Object.entries(ENV).map(([k, id]) => [k, nodes[id]!.url])),
  });
  gw = rig.gw;
}, 120_000);

afterAll(() => rig?.close());

/** A raw call through the gateway: its status, X-Cache and text. */
async function raw(chain: string, body: string): Promise<{ status: number; xCache: unknown; text: string }> {
  const r = await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body });
  return { status: r.statusCode, xCache: r.headers['x-cache'], text: await r.body.text() };
}

/** anvil's own answer to the range. */
async function oracle(filter: Record<string, unknown>): Promise<unknown[]> {
  const r = await anvil.rpc('eth_getLogs', [filter]);
  expect(r.error).toBeUndefined();
  return r.result as unknown[];
}

/** The ranges that reached the chain's nodes since `marks` was taken, in block order. */
function seenSince(ids: readonly string[], marks: readonly number[]): { from: LogsSeen['from']; to: LogsSeen['to'] }[] {
  return ids
    .flatMap((id, i) => nodes[id]!.logs.slice(marks[i]))
    .map((s) => ({ from: s.from, to: s.to }))
    .sort((a, b) => Number(a.from) - Number(b.from));
}

/** The eth_getLogs ranges a pool stand-in was asked since request `from`, in block order. */
function logsSeen(n: PoolStandin, from: number): { from: number; to: number }[] {
  return n.requests
    .slice(from)
    .map((r) => r.json as { method?: string; params?: { fromBlock?: string; toBlock?: string }[] })
    .filter((j) => j?.method === 'eth_getLogs')
    .map((j) => ({ from: Number.parseInt(j.params![0]!.fromBlock!, 16), to: Number.parseInt(j.params![0]!.toBlock!, 16) }))
    .sort((a, b) => a.from - b.from);
}

const marksOf = (ids: readonly string[]): number[] => ids.map((id) => nodes[id]!.logs.length);

/** The gateway's view has anvil's head (and so its finalized block): polled after the last block was mined. */
async function caughtUp(chain: string): Promise<void> {
  const head = await send('eth_blockNumber', []);
  await until(async () => JSON.parse((await raw(chain, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}')).text).result === head, `${chain} at anvil's head`);
}

describe('the cache below the eth_getLogs ranges layer (issues 37 and 39)', () => {
  for (const [chain, ids] of [
    ['one', ['one']],
    ['pool', ['pool-a', 'pool-b']],
  ] as const) {
    it(`${chain}: a second overlapping final range gets its shared chunks from memory (X-Cache MISS), one off the chunk boundaries its edges too (HIT), the first again all of them (HIT), each equal to anvil's answer`, async () => {
      await caughtUp(chain);
      const A = { fromBlock: hex(a0), toBlock: hex(a0 + 199) };
      const B = { fromBlock: hex(a0 + 100), toBlock: hex(a0 + 299) };
      let marks = marksOf(ids);
      const a = await raw(chain, logsCall(1, A));
      expect(a.status).toBe(200);
      expect(a.xCache).toBe('MISS');
      expect((JSON.parse(a.text) as { result: unknown[] }).result).toEqual(await oracle(A));
      expect(seenSince(ids, marks)).toEqual([0, 50, 100, 150].map((k) => ({ from: a0 + k, to: a0 + k + 49 })));

      // Kept: asked again, every chunk from memory (an answer that came back across a new epoch is not kept: asked
      // until it is).
      await until(async () => (await raw(chain, logsCall(2, A))).xCache === 'HIT', 'A kept');

      // B shares [a0+100, a0+199] with A: only its other two chunks reach a node.
      marks = marksOf(ids);
      const b = await raw(chain, logsCall('"b"', B));
      expect(b.xCache).toBe('MISS');
      expect(JSON.parse(b.text)).toEqual({ jsonrpc: '2.0', id: 'b', result: await oracle(B) });
      expect(seenSince(ids, marks)).toEqual([200, 250].map((k) => ({ from: a0 + k, to: a0 + k + 49 })));

      // Ranges that do not fall on multiples of 50: an edge chunk asks for the whole final chunk it is part of (kept),
      // and only the logs within the range are answered. C is all from memory; D's last edge goes to a node once.
      const C = { fromBlock: hex(a0 + 30), toBlock: hex(a0 + 220) };
      marks = marksOf(ids);
      const c = await raw(chain, logsCall(3, C));
      expect(c.xCache).toBe('HIT');
      expect((JSON.parse(c.text) as { result: unknown[] }).result).toEqual(await oracle(C));
      expect(seenSince(ids, marks)).toEqual([]);
      const D = { fromBlock: hex(a0 + 240), toBlock: hex(a0 + 310) };
      marks = marksOf(ids);
      const d = await raw(chain, logsCall(4, D));
      expect(d.xCache).toBe('MISS');
      expect((JSON.parse(d.text) as { result: unknown[] }).result).toEqual(await oracle(D));
      expect(seenSince(ids, marks)).toEqual([{ from: a0 + 300, to: a0 + 349 }]);

      // A again, with a long id: every chunk from memory, nothing reaches a node, the id's bytes are the client's.
      marks = marksOf(ids);
      const again = await raw(chain, logsCall('123456789012345678901234567890', A));
      expect(again.xCache).toBe('HIT');
      expect(again.text.slice(0, 63)).toBe('{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":[');
      expect((JSON.parse(again.text) as { result: unknown[] }).result).toEqual(await oracle(A));
      expect(seenSince(ids, marks)).toEqual([]);
    }, 30_000);
  }

  it('lag: a range beyond the laggard\'s head is not final to the chain (never kept, however final anvil calls it); of a final range, only the chunks the node at the head answered are kept', async () => {
    const head = Number.parseInt(await send('eth_blockNumber', []), 16);
    // The chain's finalized block is the lowest the usable upstreams report: the laggard's (its head), as the pool
    // rewrites the tag.
    await until(async () => JSON.parse((await raw('lag', '{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["finalized",false]}')).text).result?.number === hex(head - LAG), 'finalized at the laggard\'s head');
    const anvilFinal = Number.parseInt(((await send('eth_getBlockByNumber', ['finalized', false])) as { number: string }).number, 16);
    expect(anvilFinal).toBeGreaterThan(head - LAG);
    // Final to anvil, above the laggard's head (where it would answer an empty list): never kept, right every time.
    const X = { fromBlock: hex(head - LAG + 1), toBlock: hex(anvilFinal) };
    const want = await oracle(X);
    expect(want.length).toBeGreaterThan(0);
    for (const id of [1, 2]) {
      const from = healthy.requests.length;
      const x = await raw('lag', logsCall(id, X));
      expect(x.xCache).toBe('BYPASS');
      expect((JSON.parse(x.text) as { result: unknown[] }).result).toEqual(want);
      expect(logsSeen(healthy, from), 'the node at the head is asked every time').toEqual([{ from: head - LAG + 1, to: anvilFinal }]);
    }

    // Final to the chain: the chunks go to the two nodes in turn; the laggard's answers (not at the head) are never
    // kept: each chunk only it answered is asked again the next time. Asked until every chunk comes from memory
    // (each kept once the node at the head has answered it).
    const Y = { fromBlock: hex(a0), toBlock: hex(a0 + 399) };
    const wantY = await oracle(Y);
    let laggardOnly: { from: number; to: number }[] | null = null;
    let laggardTook = 0;
    await until(async () => {
      const [h, l] = [healthy.requests.length, laggard.requests.length];
      const y = await raw('lag', logsCall(1, Y));
      expect((JSON.parse(y.text) as { result: unknown[] }).result).toEqual(wantY);
      const [byHealthy, byLaggard] = [logsSeen(healthy, h), logsSeen(laggard, l)];
      laggardTook += byLaggard.length;
      const asked = [...byHealthy, ...byLaggard];
      for (const c of laggardOnly ?? []) expect(asked, 'a chunk only the laggard answered is asked again').toContainEqual(c);
      laggardOnly = byLaggard.filter((c) => !byHealthy.some((k) => k.from === c.from));
      if (y.xCache === 'HIT') expect(asked).toEqual([]);
      return y.xCache === 'HIT';
    }, 'every chunk of a final range kept from the node at the head');
    expect(laggardTook, 'the laggard took chunks').toBeGreaterThan(0);
  }, 30_000);

  it('one: a range within the cap by the finalized tag is kept by number; a range above the finalized block is never kept (BYPASS, asked each time)', async () => {
    await caughtUp('one');
    const finalized = Number.parseInt(((await send('eth_getBlockByNumber', ['finalized', false])) as { number: string }).number, 16);
    const F = { fromBlock: hex(finalized - 9), toBlock: 'finalized' };
    let marks = marksOf(['one']);
    const f1 = await raw('one', logsCall(1, F));
    expect(f1.xCache).toBe('MISS');
    expect((JSON.parse(f1.text) as { result: unknown[] }).result).toEqual(await oracle(F));
    expect(seenSince(['one'], marks)).toEqual([{ from: finalized - 9, to: finalized }]);
    await until(async () => (await raw('one', logsCall(2, F))).xCache === 'HIT', 'F kept');
    marks = marksOf(['one']);
    expect((await raw('one', logsCall(3, F))).xCache).toBe('HIT');
    expect(seenSince(['one'], marks)).toEqual([]);

    const head = Number.parseInt(await send('eth_blockNumber', []), 16);
    const N = { fromBlock: hex(head - 3), toBlock: hex(head) };
    for (const id of [1, 2]) {
      marks = marksOf(['one']);
      const n = await raw('one', logsCall(id, N));
      expect(n.xCache).toBe('BYPASS');
      expect((JSON.parse(n.text) as { result: unknown[] }).result).toEqual(await oracle(N));
      expect(seenSince(['one'], marks)).toEqual([{ from: head - 3, to: head }]);
    }
  }, 30_000);

  it('one: a range reaching past the finalized block keeps its final chunks only; after anvil_reorg of the head block the client gets the new logs, not the old', async () => {
    await caughtUp('one');
    const head = Number.parseInt(await send('eth_blockNumber', []), 16);
    const finalized = Number.parseInt(((await send('eth_getBlockByNumber', ['finalized', false])) as { number: string }).number, 16);
    expect(finalized).toBeGreaterThanOrEqual(a0 + 399);
    const R = { fromBlock: hex(a0 + 350), toBlock: hex(head) };
    const chunks = (from: number): { from: number; to: number }[] => {
      const out: { from: number; to: number }[] = [];
      for (let s = from; s <= head; s = s - (s % 50) + 50) out.push({ from: s, to: Math.min(head, s - (s % 50) + 49) });
      return out;
    };
    // The chunks that reach above the finalized block: asked every time.
    const open = chunks(a0 + 350).filter((c) => c.to > finalized);
    expect(open.length).toBeGreaterThan(0);
    let marks = marksOf(['one']);
    const r1 = await raw('one', logsCall(1, R));
    expect(r1.xCache).toBe('MISS');
    const before = await oracle(R);
    expect((JSON.parse(r1.text) as { result: unknown[] }).result).toEqual(before);
    expect(seenSince(['one'], marks)).toEqual(chunks(a0 + 350));
    // Asked again until the final chunks come from memory (each is kept once an answer comes back within one epoch);
    // the chunks above the finalized block reach the node every time.
    await until(async () => {
      marks = marksOf(['one']);
      const r2 = await raw('one', logsCall(2, R));
      expect(r2.xCache).toBe('MISS');
      expect((JSON.parse(r2.text) as { result: unknown[] }).result).toEqual(before);
      const seen = seenSince(['one'], marks);
      for (const c of open) expect(seen, 'a chunk above the finalized block is asked every time').toContainEqual(c);
      return seen.length === open.length;
    }, 'only the chunks above the finalized block reach the node');
    // The head block, with one log, replaced by one with two (other block hash, other transactions).
    const reorg = await anvil.rpc('anvil_reorg', [
      1,
      [
        [{ from: FROM, to: contract, gas: '0x10000' }, 0],
        [{ from: FROM, to: contract, gas: '0x10000' }, 0],
      ],
    ]);
    expect(reorg.error).toBeUndefined();
    const after = await oracle(R);
    expect(after).not.toEqual(before);
    marks = marksOf(['one']);
    const r3 = await raw('one', logsCall(3, R));
    expect((JSON.parse(r3.text) as { result: unknown[] }).result).toEqual(after);
    expect(seenSince(['one'], marks)).toEqual(open);
  }, 30_000);
  // Last: it takes anvil back to before the logs.
  it('one: after evm_revert below the finalized block (a reset), a range final again is asked anew and answered as anvil does now', async () => {
    const A = { fromBlock: hex(a0), toBlock: hex(a0 + 199) };
    const old = await oracle(A);
    // Kept (again: anvil_reorg may have shown a lower finalized block for a moment, and a reset dropped it).
    await until(async () => (await raw('one', logsCall(1, A))).xCache === 'HIT', 'A kept');
    expect((await anvil.rpc('evm_revert', [snapshot])).result).toBe(true);
    // The gateway has seen the chain go back: a reset, which drops what was kept as final.
    await until(async () => gw.lines.some((l) => l.includes('"event":"cache_reset"') && l.includes('"chain":"one"')), 'a cache_reset on one');
    await caughtUp('one');
    // Other logs this time: one in every block.
    const first = Number.parseInt(await send('eth_blockNumber', []), 16) + 1;
    for (let n = first; n < a0 + 400; n++) {
      await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
      await anvil.mine(1);
    }
    await anvil.mine(100);
    await caughtUp('one');
    const now = await oracle(A);
    expect(now).not.toEqual(old);
    const marks = marksOf(['one']);
    const a = await raw('one', logsCall(2, A));
    expect(a.xCache).toBe('MISS');
    expect((JSON.parse(a.text) as { result: unknown[] }).result).toEqual(now);
    expect(seenSince(['one'], marks)).toEqual([0, 50, 100, 150].map((k) => ({ from: a0 + k, to: a0 + k + 49 })));
  }, 60_000);
});
