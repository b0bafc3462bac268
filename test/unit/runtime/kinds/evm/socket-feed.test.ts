// A chain's WebSocket feed (runtime/kinds/evm/socket-feed.ts) without HTTP: a fake chain
// answers the feed's block and log fetches (through a fake dispatch), and a
// fake view tells it the head moved. The cases e2e tests reach only by luck:
// a head that skips heights, a reorg to a shorter chain with the view going
// back, a view behind what was sent, and the last subscriber leaving.
import { describe, expect, it } from 'vitest';
import type { ChainListener, ChainView } from '../../../../../runtime/upstreams/chain-view.ts';
import type { Dispatch, ForwardRequest, HeldRequest, HeldTarget } from '../../../../../runtime/dispatch.ts';
import type { Logger } from '../../../../../runtime/observe/log.ts';
import type { EvmRouteSpec } from '../../../../../runtime/types.ts';
import type { Upstream } from '../../../../../runtime/upstreams/upstream.ts';
import { ChainFeed, type FeedSubscriber } from '../../../../../runtime/kinds/evm/socket-feed.ts';
import { parseLogFilter, type LogFilter } from '../../../../../runtime/kinds/evm/socket-logs.ts';

const ROUTE = { path: 'eth', interface: 'evm-jsonrpc', retries: 0, limits: { timeoutMs: 1000 } } as unknown as EvmRouteSpec;
const LOG = { warn() {}, info() {}, error() {} } as unknown as Logger;
const ADDRESS = `0x${'ee'.repeat(20)}`;

interface Block {
  readonly number: number;
  readonly hash: string;
  readonly parentHash: string;
}

/** A chain of blocks by height, with branches: `fork` names the branch of every block from a height on. */
class FakeChain {
  readonly byHash = new Map<string, Block>();
  canonical: Block[] = [];
  calls: string[] = [];

  constructor(height: number) {
    this.canonical = [{ number: 0, hash: hash(0, 'a'), parentHash: `0x${'00'.repeat(32)}` }];
    this.extend(height, 'a');
  }

  extend(to: number, branch: string): void {
    while (this.canonical.length - 1 < to) {
      const parent = this.canonical.at(-1)!;
      const b = { number: parent.number + 1, hash: hash(parent.number + 1, branch), parentHash: parent.hash };
      this.canonical.push(b);
      this.byHash.set(b.hash, b);
    }
    this.byHash.set(this.canonical[0]!.hash, this.canonical[0]!);
  }

  /** Replaces every block from `from` on with branch `branch`, up to `to`. */
  reorg(from: number, to: number, branch: string): void {
    this.canonical = this.canonical.slice(0, from);
    this.extend(to, branch);
  }

  readonly dispatch: Dispatch = (target: HeldTarget, request: ForwardRequest) => {
    const call = JSON.parse(String(request.transport.body)) as { method: string; params: unknown[] };
    this.calls.push(call.method);
    let result: unknown = null;
    if (call.method === 'eth_getBlockByNumber') result = wire(this.canonical[Number.parseInt(call.params[0] as string, 16)]);
    else if (call.method === 'eth_getBlockByHash') result = wire(this.byHash.get(call.params[0] as string));
    else if (call.method === 'eth_getLogs') {
      const b = this.byHash.get((call.params[0] as { blockHash: string }).blockHash)!;
      result = [{ address: ADDRESS, topics: [], blockHash: b.hash, blockNumber: hex(b.number), logIndex: '0x0' }];
    }
    queueMicrotask(() =>
      target.forwarded({ kind: 'buffered', upstream: null as unknown as Upstream, status: 200, headers: {}, body: Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, result })) }),
    );
    return { cancel() {} };
  };
}

const hex = (n: number) => `0x${n.toString(16)}`;
const hash = (n: number, branch: string) => `0x${branch.repeat(2)}${n.toString(16).padStart(62, '0')}`;
const wire = (b: Block | undefined) => (b === undefined ? null : { number: hex(b.number), hash: b.hash, parentHash: b.parentHash, transactions: [] });

/** The view as the feed reads it: a head number, and its listeners told when it moves. */
class FakeView {
  number = -1;
  tip = -1;
  epoch = 0;
  readonly listeners: ChainListener[] = [];
  listen(l: ChainListener): void {
    this.listeners.push(l);
  }
  moveTo(n: number): void {
    this.number = n;
    this.epoch++;
    for (const l of this.listeners) l.epoch();
  }
}

/** A subscriber as a socket makes one: `after` is the feed's head when it came (-1: none known yet). */
function subscriber(type: 'newHeads' | 'logs', since = 0, filter: LogFilter | null = null, after = -1): FeedSubscriber & { got: any[]; gaps: number[] } {
  const got: any[] = [];
  const gaps: number[] = [];
  return {
    type,
    filter: type === 'logs' ? (filter ?? (parseLogFilter({}) as LogFilter)) : null,
    since,
    after,
    got,
    gaps,
    notify: (r) => void got.push(JSON.parse(r.json)),
    missed: (first) => void gaps.push(first),
  };
}

/** Lets the feed's fetches (each answered in a microtask) run to the end. */
async function settle(): Promise<void> {
  for (let i = 0; i < 200; i++) await new Promise((r) => setImmediate(r));
}

/** `slow`: each fetch answered in a later turn of the event loop (a walk takes many), not in a microtask. */
function setup(height: number, slow = false) {
  const chain = new FakeChain(height);
  const view = new FakeView();
  view.number = height;
  const dispatch: Dispatch = slow
    ? ((target: HeldTarget, request: ForwardRequest) => {
        setImmediate(() => chain.dispatch(target, request as HeldRequest));
        return { cancel() {} };
      }) as Dispatch
    : chain.dispatch;
  const feed = new ChainFeed(ROUTE, view as unknown as ChainView, dispatch, false, LOG);
  return { chain, view, feed };
}

const numbers = (got: any[]) => got.map((b) => Number.parseInt(b.number, 16));

describe('ChainFeed', () => {
  it('starts after the head it knew, and fills the heights a head skips, in order', async () => {
    const { chain, view, feed } = setup(3);
    const s = subscriber('newHeads');
    feed.add(s);
    await settle();
    expect(s.got).toEqual([]);
    chain.extend(10, 'a');
    view.moveTo(10);
    await settle();
    expect(numbers(s.got)).toEqual([4, 5, 6, 7, 8, 9, 10]);
    expect(s.got.map((b) => b.hash)).toEqual(chain.canonical.slice(4, 11).map((b) => b.hash));
    expect(s.got[0].transactions).toBeUndefined();
  });

  it('after a reorg to a shorter chain, sends the removed logs of every replaced block, then the new branch', async () => {
    const { chain, view, feed } = setup(5);
    const heads = subscriber('newHeads');
    const logs = subscriber('logs');
    feed.add(heads);
    feed.add(logs);
    await settle();
    chain.extend(10, 'a');
    view.moveTo(10);
    await settle();
    expect(numbers(heads.got)).toEqual([6, 7, 8, 9, 10]);
    expect(logs.got.map((l) => [Number.parseInt(l.blockNumber, 16), l.removed])).toEqual([6, 7, 8, 9, 10].map((n) => [n, undefined]));
    // Blocks 8..10 are replaced by 8' and 9': the head goes back to 9.
    chain.reorg(8, 9, 'b');
    view.moveTo(9);
    await settle();
    expect(heads.got.slice(5).map((b) => [Number.parseInt(b.number, 16), b.hash])).toEqual([
      [8, hash(8, 'b')],
      [9, hash(9, 'b')],
    ]);
    expect(logs.got.slice(5).map((l) => [Number.parseInt(l.blockNumber, 16), l.blockHash, l.removed ?? false])).toEqual([
      [8, hash(8, 'a'), true],
      [9, hash(9, 'a'), true],
      [10, hash(10, 'a'), true],
      [8, hash(8, 'b'), false],
      [9, hash(9, 'b'), false],
    ]);
    // One log fetch per block sent, whatever came before.
    expect(chain.calls.filter((m) => m === 'eth_getLogs')).toHaveLength(7);
  });

  it('sends nothing while the view is behind what was sent, and nothing twice', async () => {
    const { chain, view, feed } = setup(5);
    const s = subscriber('newHeads');
    feed.add(s);
    await settle();
    chain.extend(8, 'a');
    view.moveTo(8);
    await settle();
    view.moveTo(6);
    await settle();
    view.moveTo(8);
    await settle();
    expect(numbers(s.got)).toEqual([6, 7, 8]);
  });

  it('asks the chain nothing for subscribers who join while the head stands still (joining does not grow upstream traffic)', async () => {
    const { chain, view, feed } = setup(5);
    feed.add(subscriber('newHeads'));
    await settle();
    const calls = chain.calls.length;
    const later = Array.from({ length: 100 }, (_, i) => subscriber(i % 2 === 0 ? 'newHeads' : 'logs'));
    for (const s of later) {
      feed.add(s);
      await settle();
    }
    expect(chain.calls.length - calls, 'fetches while 100 subscribers joined').toBe(0);
    // The next block is fetched once for all of them (and its logs once, for the logs subscribers).
    chain.extend(6, 'a');
    view.moveTo(6);
    await settle();
    expect(chain.calls.slice(calls)).toEqual(['eth_getBlockByNumber', 'eth_getLogs']);
    expect(later.every((s) => s.got.length === 1)).toBe(true);
  });

  it('forgets what it sent when the last subscriber leaves, and a new one starts after the head of its time', async () => {
    const { chain, view, feed } = setup(5);
    const a = subscriber('newHeads');
    feed.add(a);
    await settle();
    chain.extend(6, 'a');
    view.moveTo(6);
    await settle();
    feed.remove(a);
    chain.extend(9, 'a');
    view.moveTo(9);
    await settle();
    const calls = chain.calls.length;
    const b = subscriber('newHeads');
    feed.add(b);
    chain.extend(10, 'a');
    view.moveTo(10);
    await settle();
    expect(numbers(a.got)).toEqual([6]);
    expect(numbers(b.got)).toEqual([10]);
    expect(chain.calls.length - calls).toBeLessThanOrEqual(3);
  });

  // issue 43, rule 16: before, a subscriber that came while 300 skipped heights were being filled got all 300.
  it('starts a subscriber that comes during a gap fill after the head the gateway knew then, not with the old blocks', async () => {
    const { chain, view, feed } = setup(5, true);
    const first = subscriber('newHeads', feed.now, null, feed.head);
    feed.add(first);
    await settle();
    chain.extend(305, 'a');
    view.moveTo(305);
    // The walk back from 305 is under way (one fetch per turn): nothing sent yet.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(first.got).toEqual([]);
    const late = subscriber('newHeads', feed.now, null, feed.head);
    expect(late.after).toBe(305);
    feed.add(late);
    for (let i = 0; i < 5 && first.got.length < 300; i++) await settle();
    expect(numbers(first.got)).toEqual(Array.from({ length: 300 }, (_, i) => 6 + i));
    expect(late.got).toEqual([]);
    chain.extend(306, 'a');
    view.moveTo(306);
    await settle();
    expect(numbers(late.got)).toEqual([306]);
    expect(numbers(first.got).at(-1)).toBe(306);
  });

  // issue 43, rule 18: before, a gap over the 1,024 blocks filled was silent: the client believed it had every block.
  it('tells every subscriber of a gap it will not fill the first block it did not get', async () => {
    const { chain, view, feed } = setup(5);
    const heads = subscriber('newHeads', feed.now, null, feed.head);
    const logs = subscriber('logs', feed.now, null, feed.head);
    feed.add(heads);
    feed.add(logs);
    await settle();
    chain.extend(7, 'a');
    view.moveTo(7);
    await settle();
    expect(numbers(heads.got)).toEqual([6, 7]);
    chain.extend(7 + 1100, 'a');
    view.moveTo(7 + 1100);
    for (let i = 0; i < 20 && heads.gaps.length === 0; i++) await settle();
    // Blocks 8..82 are not filled (the last 1,024 are): each subscriber is told 8 is the first it missed.
    expect(heads.gaps).toEqual([8]);
    expect(logs.gaps).toEqual([8]);
    // A gap the feed fills tells nobody anything.
    chain.extend(7 + 1100 + 5, 'a');
    view.moveTo(7 + 1100 + 5);
    await settle();
    expect(heads.gaps).toEqual([8]);
  });
});
