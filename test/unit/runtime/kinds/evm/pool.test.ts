// A pool (issue 33) without HTTP: the served tip as the chain view keeps it,
// where a pool sends each call, the table of "the state is gone" errors, tag
// rewriting and the hedging budget. Upstreams are real Upstream objects whose
// undici pool is replaced by a fake one that records what reached it and
// answers at once (Forward drives it exactly as it drives undici's); what a
// poll would report is given to the chain's view directly, as the poller does.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Dispatcher } from 'undici';
import { ChainView } from '../../../../../runtime/upstreams/chain-view.ts';
import type { PollReport } from '../../../../../runtime/upstreams/upstream-view.ts';
import type { Logger } from '../../../../../runtime/observe/log.ts';
import { Pool } from '../../../../../runtime/kinds/evm/pool.ts';
import type { ForwardRequest, ForwardResult, ForwardTarget, Sink, Transport } from '../../../../../runtime/dispatch.ts';
import { plainDispatch } from '../../../../../runtime/upstreams/forward.ts';
import { callOf, readCall, rewriteTags } from '../../../../../runtime/kinds/evm/pool-call.ts';
import { Call, callParses } from '../../../../../runtime/kinds/evm/call.ts';
import { checkEvmBody } from '../../../../../runtime/kinds/evm/guard.ts';
import { evmParamsCheck } from '../../../../../runtime/kinds/evm/params.ts';
import { NO_VALIDATORS } from '../../../../../runtime/config/validators.ts';
import { isStateGone, STATE_GONE } from '../../../../../runtime/kinds/evm/state-errors.ts';
import { HedgeBudget } from '../../../../../runtime/pool/stats.ts';
import type { EvmRouteSpec, UpstreamSpec } from '../../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../../runtime/upstreams/upstream.ts';

/** The client side of the targets here: never written to (every request's classify buffers its answer). */
const UNUSED_SINK = {} as Sink;

const ROUTE = { path: 'eth', interface: 'evm-jsonrpc', maxLag: 10, limits: { timeoutMs: 1000 } } as unknown as EvmRouteSpec;
/** The route's pool settings, as the pool reads them. */
type PoolSettings = Pick<EvmRouteSpec, 'rewriteTags' | 'pruneDepth' | 'hedge' | 'broadcast' | 'quorum'>;
const DEFAULTS: PoolSettings = { rewriteTags: false, pruneDepth: 128, hedge: null, broadcast: 'all', quorum: null };

function upstream(name: string, archive = false, role: 'primary' | 'fallback' = 'primary'): Upstream {
  const spec = { name, url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role, weight: 1, connections: 1, idleTimeoutMs: 1000, archive } as unknown as UpstreamSpec;
  const u = new Upstream(spec, ROUTE);
  u.state = 'up';
  return u;
}

function report(number: number): PollReport {
  return { identity: 'chainId 1', own: true, genesis: '0xgen', number, hash: '', finalized: -1, safe: -1, canonical: [] };
}

/** Heads as the polls report them, one upstream after the other (null: no report from that one). */
function heads(view: ChainView, ups: readonly Upstream[], numbers: readonly (number | null)[]): void {
  numbers.forEach((n, i) => n !== null && view.report(ups[i]!.view, report(n)));
}

/**
 * The first round of polls, the slowest upstream's report first. Order
 * matters in a first round: the tip never goes back, so a report that comes
 * before the slower ones sets a tip that their later reports do not lower
 * (that case is its own test below).
 */
function firstRound(view: ChainView, ups: readonly Upstream[], numbers: readonly number[]): void {
  const order = numbers.map((n, i) => [n, i] as const).sort((a, b) => a[0] - b[0]);
  for (const [n, i] of order) view.report(ups[i]!.view, report(n));
}

describe('served tip (chain view)', () => {
  const setup = (n: number, mode: 'all' | 'majority') => {
    const ups = Array.from({ length: n }, (_, i) => upstream(`u${i}`));
    return { ups, view: new ChainView(ups, mode) };
  };

  it('all: the lowest head of the usable upstreams, rising as the slowest catches up', () => {
    const { ups, view } = setup(3, 'all');
    firstRound(view, ups, [100, 98, 103]);
    expect(view.tip).toBe(98);
    expect(view.number).toBe(103); // the chain's head is the highest: the tip is not it
    heads(view, ups, [null, 101, null]);
    expect(view.tip).toBe(100);
    heads(view, ups, [104, 104, 104]);
    expect(view.tip).toBe(104);
  });

  it('all: an upstream that is not usable does not hold the tip back', () => {
    const { ups, view } = setup(3, 'all');
    ups[2]!.state = 'down';
    heads(view, ups, [100, 101, 50]);
    expect(view.tip).toBe(100);
  });

  it('majority: the highest block more than half of them have (3 upstreams, then 4)', () => {
    const three = setup(3, 'majority');
    firstRound(three.view, three.ups, [100, 98, 103]);
    expect(three.view.tip).toBe(100); // 100 and 103 have 100: two of three
    const four = setup(4, 'majority');
    firstRound(four.view, four.ups, [100, 98, 103, 96]);
    expect(four.view.tip).toBe(98); // 103, 100 and 98 have 98: three of four (two of four is no majority)
    heads(four.view, four.ups, [null, 101, null, null]);
    expect(four.view.tip).toBe(100); // 103, 101 and 100
  });

  it('never goes backwards when an upstream lags behind it or drops out', () => {
    const { ups, view } = setup(3, 'all');
    ups[2]!.state = 'down';
    heads(view, ups, [100, 100, null]);
    expect(view.tip).toBe(100);
    // The third comes up far behind (its first report: it did not go down, it is behind).
    ups[2]!.state = 'up';
    heads(view, ups, [null, null, 95]);
    expect(view.tip).toBe(100);
    heads(view, ups, [101, null, 96]);
    expect(view.tip).toBe(100);

    // A first round in which the node ahead reports first: the tip waits for the slower one's first report.
    const s = setup(2, 'all');
    heads(s.view, s.ups, [103, null]);
    expect(s.view.tip).toBe(-1);
    heads(s.view, s.ups, [null, 98]);
    expect(s.view.tip).toBe(98);
    heads(s.view, s.ups, [104, 103]);
    expect(s.view.tip).toBe(103);
    heads(s.view, s.ups, [null, 104]);
    expect(s.view.tip).toBe(104);

    const m = setup(3, 'majority');
    firstRound(m.view, m.ups, [100, 102, 104]);
    expect(m.view.tip).toBe(102);
    m.ups[2]!.state = 'down'; // the one furthest ahead drops out: of the two left, the majority has only 100
    heads(m.view, m.ups, [100, 102, null]);
    expect(m.view.tip).toBe(102);
  });

  it('holds when one upstream dips, and when every upstream comes back behind; goes back only with a reset', () => {
    const { ups, view } = setup(2, 'all');
    heads(view, ups, [110, 110]);
    expect(view.tip).toBe(110);
    heads(view, ups, [109, null]);
    expect(view.tip).toBe(110);
    heads(view, ups, [107, 107]);
    expect(view.tip).toBe(110);
    heads(view, ups, [111, 111]);
    expect(view.tip).toBe(111);
    // The chain itself went back below a block it called final: a reset, and the tip follows.
    view.report(ups[0]!.view, { ...report(111), finalized: 100 });
    view.report(ups[1]!.view, { ...report(111), finalized: 100 });
    view.report(ups[0]!.view, { ...report(10), finalized: 0 });
    view.report(ups[1]!.view, { ...report(10), finalized: 0 });
    expect(view.tip).toBe(10);
  });

  it('holds when one upstream dips on a chain whose finality is a depth (its finalized block dips with it): no reset until the head is below the old finalized block at more than half of them', () => {
    const { ups, view } = setup(2, 'all');
    const byDepth = (n: number): PollReport => ({ ...report(n), finalized: n - 10, finalizedByDepth: true });
    view.report(ups[0]!.view, byDepth(1000));
    view.report(ups[1]!.view, byDepth(1000));
    expect(view.tip).toBe(1000);
    view.report(ups[1]!.view, byDepth(999));
    expect([view.tip, view.resets]).toEqual([1000, 0]);
    view.report(ups[0]!.view, byDepth(980)); // below the block it called final (990): it went back, the other did not (issue 43)
    expect([view.tip, view.resets, ups[0]!.usable]).toEqual([1000, 0, false]);
    view.report(ups[1]!.view, byDepth(980)); // both went back: the chain did
    expect(view.resets).toBe(1);
    expect(view.tip).toBe(980);
  });

  it('leaves out of the tip an upstream whose poll has no usable height, or is overdue, until it answers on time', () => {
    const { ups, view } = setup(2, 'all');
    heads(view, ups, [100, 100]);
    expect(view.tip).toBe(100);
    // b answers with no height: the tip follows a alone, and b is not at it.
    view.report(ups[1]!.view, report(Number.NaN));
    heads(view, ups, [120, null]);
    expect(view.tip).toBe(120);
    expect([view.atTip(ups[0]!.view), view.atTip(ups[1]!.view)]).toEqual([true, false]);
    heads(view, ups, [null, 120]);
    expect(view.atTip(ups[1]!.view)).toBe(true);
    // b's poll is overdue: left out at once, though its head is at the tip.
    view.pollOverdue(ups[1]!.view);
    expect(view.atTip(ups[1]!.view)).toBe(false);
    heads(view, ups, [121, null]);
    expect(view.tip).toBe(121);
    // Its late answer (the head it names is old) keeps it out; one on time brings it back.
    view.report(ups[1]!.view, report(121), true);
    expect(view.atTip(ups[1]!.view)).toBe(false);
    heads(view, ups, [122, null]);
    expect(view.tip).toBe(122);
    heads(view, ups, [null, 121]);
    expect(view.tip).toBe(122);
    expect(view.atTip(ups[1]!.view)).toBe(false); // current, but behind the tip
    heads(view, ups, [null, 122]);
    expect(view.atTip(ups[1]!.view)).toBe(true);
    // Every one overdue: the tip follows what they last said.
    view.pollOverdue(ups[0]!.view);
    view.pollOverdue(ups[1]!.view);
    view.report(ups[0]!.view, report(123), true);
    view.report(ups[1]!.view, report(123), true);
    expect(view.tip).toBe(123);
  });
});

// ------------------------------------------------------------------ routing

interface Seen {
  readonly method: string;
  readonly params: unknown[];
}

/** What a fake node answers a call with: a result, a JSON-RPC error, no answer (connection refused), or an HTTP 500. */
type Reply = { readonly result: unknown } | { readonly error: { code: number; message: string } } | 'refused' | 'http 500';

/** Gives `u` a fake undici pool: records every call that reached it and answers as `reply` says, on the next turn (or after `delayMs`). */
function fake(u: Upstream, reply: (call: Seen) => Reply = () => ({ result: '0x1' }), delayMs = 0): Seen[] {
  const seen: Seen[] = [];
  const dispatch = (opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean => {
    const doc = JSON.parse(String(opts.body)) as { id: unknown; method: string; params?: unknown[] };
    seen.push({ method: doc.method, params: doc.params ?? [] });
    let aborted = false;
    const controller = {
      abort: (err: Error) => {
        if (aborted) return;
        aborted = true;
        handler.onResponseError?.(controller as never, err);
      },
      pause: () => undefined,
      resume: () => undefined,
    };
    handler.onRequestStart?.(controller as never, {});
    const later = (f: () => void) => (delayMs > 0 ? setTimeout(f, delayMs) : setImmediate(f));
    later(() => {
      if (aborted) return;
      const answer = reply({ method: doc.method, params: doc.params ?? [] });
      if (answer === 'refused') return controller.abort(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
      const failed = answer === 'http 500';
      const body = Buffer.from(failed ? 'oops' : JSON.stringify({ jsonrpc: '2.0', id: doc.id, ...answer }));
      handler.onResponseStart?.(controller as never, failed ? 500 : 200, { 'content-type': failed ? 'text/plain' : 'application/json' }, failed ? 'Internal Server Error' : 'OK');
      handler.onResponseData?.(controller as never, body);
      handler.onResponseEnd?.(controller as never, {});
    });
    return true;
  };
  Object.defineProperty(u, 'pool', { value: { dispatch, close: async () => undefined }, configurable: true });
  return seen;
}

let nextId = 1;
/** A call's request, with its Call as a route makes it (nothing read of the body until a layer asks). */
const request = (method: string, params: unknown[]): ForwardRequest => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params });
  return { calls: { one: new Call(body, method) }, transport: transportOf(body) };
};

function transportOf(body: string | Buffer): Transport {
  return { method: 'POST', path: () => '/', headers: ['content-type', 'application/json'], body, idempotent: true, retries: 1, maxBuffer: 1 << 20, deadline: performance.now() + 1000, emptyOk: false, classify: () => 'buffer' };
}

/** One call through the pool's dispatch: the upstream that answered, and the answer's body. */
function send(pool: Pool, method: string, params: unknown[]): Promise<{ upstream: string; body: string }> {
  return new Promise((resolve, reject) => {
    const target: ForwardTarget = {
      res: UNUSED_SINK,
      streamHead: () => reject(new Error('nothing streams here')),
      forwarded: (r: ForwardResult) => {
        if (r.kind !== 'buffered') return reject(new Error(`the call failed: ${r.kind}`));
        resolve({ upstream: r.upstream.name, body: r.body.toString('utf8') });
      },
    };
    pool.dispatch(target, request(method, params));
  });
}

/** Which upstreams `times` identical calls went to. */
async function spread(pool: Pool, method: string, params: unknown[], times = 12): Promise<Set<string>> {
  const names = new Set<string>();
  for (let i = 0; i < times; i++) names.add((await send(pool, method, params)).upstream);
  return names;
}

function poolOf(specs: readonly { name: string; head: number | null; archive?: boolean }[], settings: Partial<PoolSettings> = {}, mode: 'all' | 'majority' = 'all') {
  const ups = specs.map((s) => upstream(s.name, s.archive ?? false));
  const seen = new Map(ups.map((u) => [u.name, fake(u)]));
  const group = new UpstreamGroup(ups);
  const view = new ChainView(ups, mode);
  // An upstream with no head yet is not in the pool yet (down): the tip waits for every usable one to report.
  specs.forEach((s, i) => {
    if (s.head === null) ups[i]!.state = 'down';
  });
  const known = specs.flatMap((s, i) => (s.head === null ? [] : [[s.head, i] as const])).sort((a, b) => a[0] - b[0]);
  for (const [n, i] of known) view.report(ups[i]!.view, report(n)); // a first round, the slowest first (see firstRound)
  const log = { warn: vi.fn(), info: vi.fn(), error: vi.fn() } as unknown as Logger;
  const pool = new Pool({ ...ROUTE, ...DEFAULTS, ...settings }, group, view, log, plainDispatch(group));
  return { ups, view, pool, seen };
}

const ADDR = '0x00000000000000000000000000000000000000aa';
const hex = (n: number) => `0x${n.toString(16)}`;

describe('pool routing', () => {
  afterEach(() => {
    nextId = 1;
  });

  it('a call naming block N goes only to upstreams whose head is at least N', async () => {
    const { pool, view } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 103 },
      { name: 'c', head: 97 },
    ]);
    expect(view.tip).toBe(97);
    expect(await spread(pool, 'eth_getBlockByNumber', [hex(99), false])).toEqual(new Set(['a', 'b']));
    expect(await spread(pool, 'eth_getBalance', [ADDR, hex(101)])).toEqual(new Set(['b']));
    expect(await spread(pool, 'eth_getBalance', [ADDR, { blockNumber: hex(101) }])).toEqual(new Set(['b']));
    // At or below every head: any of them.
    expect(await spread(pool, 'eth_getBlockByNumber', [hex(97), false])).toEqual(new Set(['a', 'b', 'c']));
  });

  it('a call naming a block by a hash the gateway has learned goes only to upstreams that have that block', async () => {
    const { pool, view } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 103 },
      { name: 'c', head: 97 },
    ]);
    const hash = `0x${'ab'.repeat(32)}`;
    view.learnNumber(hash, 99);
    expect(await spread(pool, 'eth_getBlockByHash', [hash, false])).toEqual(new Set(['a', 'b']));
    expect(await spread(pool, 'eth_getBlockTransactionCountByHash', [hash.toUpperCase().replace('0X', '0x')])).toEqual(new Set(['a', 'b']));
    expect(await spread(pool, 'eth_getBalance', [ADDR, { blockHash: hash }])).toEqual(new Set(['a', 'b']));
    // A hash it has not learned: nothing to route by.
    expect(await spread(pool, 'eth_getBlockByHash', [`0x${'cd'.repeat(32)}`, false])).toEqual(new Set(['a', 'b', 'c']));
  });

  it('a call at latest goes to upstreams at or above the served tip', async () => {
    // majority: the tip (100) is above the slowest node's head.
    const { pool, view } = poolOf(
      [
        { name: 'a', head: 100 },
        { name: 'b', head: 103 },
        { name: 'c', head: 90 },
      ],
      {},
      'majority',
    );
    expect(view.tip).toBe(100);
    expect(await spread(pool, 'eth_getBalance', [ADDR, 'latest'])).toEqual(new Set(['a', 'b']));
    expect(await spread(pool, 'eth_getBalance', [ADDR])).toEqual(new Set(['a', 'b'])); // no block: latest
    expect(await spread(pool, 'eth_call', [{ to: ADDR, data: '0x' }])).toEqual(new Set(['a', 'b']));
    expect(await spread(pool, 'eth_getBlockByNumber', ['latest', false])).toEqual(new Set(['a', 'b']));
  });

  it('a call at latest skips an upstream that came up behind the tip (all: the tip held, not lowered)', async () => {
    const { pool, ups, view } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 100 },
      { name: 'c', head: null },
    ]);
    ups[2]!.state = 'up';
    heads(view, ups, [null, null, 95]);
    expect(view.tip).toBe(100);
    expect(await spread(pool, 'eth_getCode', [ADDR, 'latest'])).toEqual(new Set(['a', 'b']));
  });

  it('a call at or below the tip that no usable upstream has yet waits for a poll to find one; above the tip, or a tag left as it is, goes to the furthest at once', async () => {
    const { pool, ups, view, seen } = poolOf(
      [
        { name: 'a', head: 100 },
        { name: 'b', head: 97 },
      ],
      { rewriteTags: true },
    );
    heads(view, ups, [103, 103]);
    // a set the tip and went down; b came back behind it.
    ups[0]!.state = 'down';
    view.report(ups[0]!.view, null);
    view.report(ups[1]!.view, report(101));
    expect(view.tip).toBe(103);
    const b = seen.get('b')!;
    const before = b.length;
    const latest = send(pool, 'eth_getBlockByNumber', ['latest', false]);
    const named = send(pool, 'eth_getCode', [ADDR, hex(102)]);
    // Above the tip: the furthest answers at once (its null would be the chain's answer).
    expect((await send(pool, 'eth_getBlockByNumber', [hex(104), false])).upstream).toBe('b');
    expect(b.slice(before).map((c) => c.params[0])).toEqual([hex(104)]);
    expect(pool.stats.tipWaits).toBe(2);
    view.report(ups[1]!.view, report(102)); // b has 102, not the tip yet: only the call about 102 goes
    expect((await named).upstream).toBe('b');
    // The call at latest (the tip, 103) still waits: nothing more reached b.
    expect(b.slice(before).map((c) => c.params[0])).toEqual([hex(104), ADDR]);
    view.report(ups[1]!.view, report(103));
    expect((await latest).upstream).toBe('b');
    expect(b.slice(before).map((c) => c.params[0])).toEqual([hex(104), ADDR, hex(103)]);

    // Without rewriteTags a call at latest is the node's own latest: no wait.
    const plain = poolOf(
      [
        { name: 'a', head: 100 },
        { name: 'b', head: 100 },
      ],
      { rewriteTags: false },
    );
    plain.ups[0]!.state = 'down';
    plain.view.report(plain.ups[0]!.view, null);
    plain.view.report(plain.ups[1]!.view, report(99));
    expect(plain.view.tip).toBe(100);
    expect((await send(plain.pool, 'eth_getBlockByNumber', ['latest', false])).upstream).toBe('b');
    expect(plain.pool.stats.tipWaits).toBe(0);
  });

  it('a waiting call that no upstream catches up for ends at its timeoutMs with the gateway timeout; cancelled, it is forgotten', async () => {
    const { pool, ups, view, seen } = poolOf(
      [
        { name: 'a', head: 100 },
        { name: 'b', head: 100 },
      ],
      { rewriteTags: true },
    );
    ups[0]!.state = 'down';
    view.report(ups[0]!.view, null);
    view.report(ups[1]!.view, report(99));
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const results: ForwardResult[] = [];
      const target = { res: UNUSED_SINK, streamHead: () => undefined, forwarded: (r: ForwardResult) => void results.push(r) } as ForwardTarget;
      pool.dispatch(target, request('eth_getBlockByNumber', ['latest', false]));
      const cancelled = pool.dispatch(target, request('eth_getBlockByNumber', [hex(100), false]));
      cancelled.cancel();
      vi.advanceTimersByTime(999);
      expect(results).toEqual([]);
      vi.advanceTimersByTime(1);
      expect(results).toEqual([{ kind: 'failed', fail: 'timeout', upstream: null }]);
      vi.advanceTimersByTime(5000);
      expect(results).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
    // Neither reached the node behind: not when it caught up later either.
    view.report(ups[1]!.view, report(100));
    await new Promise((r) => setImmediate(r));
    expect(seen.get('b')!.filter((c) => c.method === 'eth_getBlockByNumber')).toEqual([]);
  });

  it('a call at latest skips an upstream whose head is stale (no height, or its poll overdue), even at the tip and when no one is at the tip; a call at an older block may still go there', async () => {
    const { pool, ups, view } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 100 },
    ]);
    view.report(ups[1]!.view, report(Number.NaN)); // b: no height; its last head (100) is at the tip
    expect(await spread(pool, 'eth_getCode', [ADDR, 'latest'])).toEqual(new Set(['a']));
    expect(await spread(pool, 'eth_getCode', [ADDR, hex(99)])).toEqual(new Set(['a', 'b']));
    // Every node behind the tip (a dipped to 98; b's stale head is 100): the furthest of those whose head is current.
    view.report(ups[0]!.view, report(98));
    expect(view.tip).toBe(100);
    expect(await spread(pool, 'eth_getCode', [ADDR, 'latest'])).toEqual(new Set(['a']));
    // b's poll is overdue instead: the same.
    view.report(ups[1]!.view, report(100));
    view.pollOverdue(ups[1]!.view);
    expect(await spread(pool, 'eth_getCode', [ADDR, 'latest'])).toEqual(new Set(['a']));
  });

  it('state older than pruneDepth goes to the archive upstreams; newer state to any', async () => {
    const { pool } = poolOf(
      [
        { name: 'full', head: 200 },
        { name: 'archive', head: 200, archive: true },
      ],
      { pruneDepth: 64 },
    );
    for (const method of ['eth_getBalance', 'eth_getTransactionCount', 'eth_getCode']) {
      expect(await spread(pool, method, [ADDR, hex(100)])).toEqual(new Set(['archive']));
    }
    expect(await spread(pool, 'eth_getStorageAt', [ADDR, '0x0', hex(135)])).toEqual(new Set(['archive']));
    expect(await spread(pool, 'eth_call', [{ to: ADDR }, { blockNumber: hex(1) }])).toEqual(new Set(['archive']));
    // 64 behind is not older than pruneDepth.
    expect(await spread(pool, 'eth_getBalance', [ADDR, hex(136)])).toEqual(new Set(['full', 'archive']));
    // A block (not state) that old: any node has it.
    expect(await spread(pool, 'eth_getBlockByNumber', [hex(100), false])).toEqual(new Set(['full', 'archive']));
  });

  it('old state goes to any upstream far enough ahead when no archive upstream is usable', async () => {
    const { pool, ups } = poolOf(
      [
        { name: 'full', head: 200 },
        { name: 'full2', head: 200 },
        { name: 'archive', head: 200, archive: true },
      ],
      { pruneDepth: 64 },
    );
    ups[2]!.state = 'down';
    expect(await spread(pool, 'eth_getBalance', [ADDR, hex(100)])).toEqual(new Set(['full', 'full2']));
  });

  it('when no upstream is known to have block N, the call goes to the ones furthest ahead', async () => {
    const { pool } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 103 },
      { name: 'c', head: 103 },
      { name: 'd', head: 97 },
    ]);
    expect(await spread(pool, 'eth_getBlockByNumber', [hex(110), false])).toEqual(new Set(['b', 'c']));
    expect(await spread(pool, 'eth_getBalance', [ADDR, hex(104)])).toEqual(new Set(['b', 'c']));
  });

  for (const failure of ['refused', 'http 500'] as const) {
    it(`a null asked again of a node that then fails (${failure}): the client gets the null, not the failure`, async () => {
      const a = upstream('a');
      const b = upstream('b', false, 'fallback');
      const seenA = fake(a, () => ({ result: null }));
      const seenB = fake(b, () => failure);
      const view = new ChainView([a, b], 'all');
      view.report(a.view, report(100));
      view.report(b.view, report(100));
      const pool = new Pool({ ...ROUTE, ...DEFAULTS }, new UpstreamGroup([a, b]), view, { warn: vi.fn() } as unknown as Logger, plainDispatch(new UpstreamGroup([a, b])));
      const r = await send(pool, 'eth_getTransactionReceipt', [`0x${'ab'.repeat(32)}`]);
      expect(seenA).toHaveLength(1);
      expect(seenB).toHaveLength(1); // asked again
      expect(r.upstream).toBe('a');
      expect(JSON.parse(r.body).result).toBeNull();
      expect(pool.stats.retries.empty).toBe(1);
    });
  }

  it('broadcast: every usable node is sent the transaction; a success wins over an earlier "already known"; without one, the first answer', async () => {
    const hash = `0x${'cd'.repeat(32)}`;
    const setup = (replies: readonly [Reply, number][]) => {
      const ups = replies.map((_, i) => upstream(`n${i}`));
      const seen = ups.map((u, i) => fake(u, () => replies[i]![0], replies[i]![1]));
      const view = new ChainView(ups, 'all');
      for (const u of ups) view.report(u.view, report(100));
      const pool = new Pool({ ...ROUTE, ...DEFAULTS }, new UpstreamGroup(ups), view, { warn: vi.fn() } as unknown as Logger, plainDispatch(new UpstreamGroup(ups)));
      return { pool, seen };
    };
    const known = { error: { code: -32000, message: 'already known' } };
    const low = { error: { code: -32000, message: 'nonce too low' } };
    // The node that has it already answers first; the success that follows is what the client gets.
    const a = setup([
      [known, 0],
      [{ result: hash }, 30],
      [low, 60],
    ]);
    const ra = await send(a.pool, 'eth_sendRawTransaction', ['0x02f8']);
    expect(JSON.parse(ra.body).result).toBe(hash);
    expect(a.seen.map((s) => s.length)).toEqual([1, 1, 1]);
    expect(a.pool.stats.broadcasts).toBe(1);
    // No success anywhere: the first answer that came.
    const b = setup([
      [low, 30],
      [known, 0],
    ]);
    expect(JSON.parse((await send(b.pool, 'eth_sendRawTransaction', ['0x02f8'])).body).error.message).toBe('already known');
    // broadcast: one: a single node.
    const ups = [upstream('x'), upstream('y')];
    const seen = ups.map((u) => fake(u, () => ({ result: hash })));
    const view = new ChainView(ups, 'all');
    for (const u of ups) view.report(u.view, report(100));
    const one = new Pool({ ...ROUTE, ...DEFAULTS, broadcast: 'one' }, new UpstreamGroup(ups), view, { warn: vi.fn() } as unknown as Logger, plainDispatch(new UpstreamGroup(ups)));
    await send(one, 'eth_sendRawTransaction', ['0x02f8']);
    expect(seen.map((s) => s.length).sort()).toEqual([0, 1]);
    expect(one.stats.broadcasts).toBe(0);
  });

  it('eth_blockNumber with no usable upstream is not answered from a tip nobody serves: no upstream, as any other call', async () => {
    const { pool, ups } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 100 },
    ]);
    for (const u of ups) u.state = 'down';
    const r = await new Promise<ForwardResult>((resolve) => {
      pool.dispatch({ res: UNUSED_SINK, streamHead: () => undefined, forwarded: resolve }, request('eth_blockNumber', []));
    });
    expect(r).toEqual({ kind: 'failed', fail: 'no-upstream', upstream: null });
    expect(pool.stats.tipAnswers).toBe(0);
  });

  it('a quorum method with fewer than `of` usable upstreams at the served tip: no upstream, at once, counted short (never a quorum of one, never left waiting)', async () => {
    const quorum = { methods: ['eth_getBalance'], of: 2 };
    const outcome = (pool: Pool): Promise<ForwardResult | 'no answer'> =>
      new Promise((resolve) => {
        const timer = setTimeout(() => resolve('no answer'), 2000);
        pool.dispatch(
          {
            res: UNUSED_SINK,
            streamHead: () => undefined,
            forwarded: (r) => {
              clearTimeout(timer);
              resolve(r);
            },
          },
          request('eth_getBalance', [ADDR, 'latest']),
        );
      });
    // Every upstream down.
    const none = poolOf([{ name: 'a', head: 100 }, { name: 'b', head: 100 }], { quorum });
    for (const u of none.ups) u.state = 'down';
    expect(await outcome(none.pool)).toEqual({ kind: 'failed', fail: 'no-upstream', upstream: null });
    expect(none.pool.stats.quorum).toEqual({ agree: 0, disagree: 0, short: 1 });
    // One left at the tip (b set it, then went down; c is behind it).
    const one = poolOf([{ name: 'a', head: 100 }, { name: 'b', head: 100 }, { name: 'c', head: 97 }], { quorum }, 'majority');
    one.ups[1]!.state = 'down';
    expect(await outcome(one.pool)).toEqual({ kind: 'failed', fail: 'no-upstream', upstream: null });
    expect([...one.seen.values()].flat()).toEqual([]);
    expect(one.pool.stats.quorum).toEqual({ agree: 0, disagree: 0, short: 1 });
    // Two at the tip: both asked, equal answers served.
    const two = poolOf([{ name: 'a', head: 100 }, { name: 'b', head: 100 }], { quorum });
    const r = await outcome(two.pool);
    expect(r).toMatchObject({ kind: 'buffered', status: 200 });
    expect(two.seen.get('a')).toHaveLength(1);
    expect(two.seen.get('b')).toHaveLength(1);
    expect(two.pool.stats.quorum).toEqual({ agree: 1, disagree: 0, short: 0 });
  });

  it("a quorum's votes are held as large as a lone call's answer is (proxy.ts's MAX_HELD: one cap for every answer held whole)", async () => {
    // 5 MiB: past the 4 MiB a quorum's votes were held to before, well within the 32 MiB a lone read is held to.
    const big = 'ab'.repeat(5 * 512 * 1024);
    const quorum = { methods: ['eth_getBlockByNumber'], of: 2 };
    const voted = poolOf([{ name: 'a', head: 100 }, { name: 'b', head: 100 }], { quorum });
    const alone = poolOf([{ name: 'a', head: 100 }, { name: 'b', head: 100 }]);
    for (const u of [...voted.ups, ...alone.ups]) fake(u, () => ({ result: { number: hex(90), extraData: `0x${big}` } }));
    for (const { pool } of [alone, voted]) {
      const r = await send(pool, 'eth_getBlockByNumber', [hex(90), true]);
      expect((JSON.parse(r.body) as { result: { extraData: string } }).result.extraData).toHaveLength(2 + big.length);
    }
    expect(voted.pool.stats.quorum).toEqual({ agree: 1, disagree: 0, short: 0 });
  });

  it('eth_blockNumber is answered from the served tip, asking no node, with the id as the client wrote it', async () => {
    const { pool, seen, ups, view } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 103 },
    ]);
    const r = await send(pool, 'eth_blockNumber', []);
    expect(JSON.parse(r.body)).toEqual({ jsonrpc: '2.0', id: 1, result: hex(100) });
    expect([...seen.values()].flat()).toEqual([]);
    expect(pool.stats.tipAnswers).toBe(1);
    heads(view, ups, [99, null]); // a dips below the tip it had: the tip holds (issue 37, defect 3)
    expect(JSON.parse((await send(pool, 'eth_blockNumber', [])).body).result).toBe(hex(100));
  });
});

describe('one Call, parsed once (issue 37)', () => {
  afterEach(() => {
    nextId = 1;
    vi.restoreAllMocks();
  });

  /** Resolves with the answer's upstream, sending `r` as it is. */
  const sendRequest = (pool: Pool, r: ForwardRequest): Promise<string> =>
    new Promise((resolve, reject) => {
      pool.dispatch({ res: UNUSED_SINK, streamHead: () => reject(new Error('nothing streams here')), forwarded: (o) => (o.kind === 'buffered' ? resolve(o.upstream.name) : reject(new Error(o.kind))) }, r);
    });

  it("a request's Call is routed by: the pool parses the body only where no layer above read it, once", async () => {
    const { pool } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 103 },
    ]);
    const parse = vi.spyOn(JSON, 'parse');
    const parsesOf = (body: unknown) => parse.mock.calls.filter(([text]) => text === body).length;
    // A Call nothing read yet: the pool's routing parses it (and the stand-in node reads the body too).
    const bare = request('eth_getBalance', [ADDR, hex(101)]);
    expect(await sendRequest(pool, bare)).toBe('b');
    // One a layer above read already: not parsed again.
    const r = request('eth_getBalance', [ADDR, hex(101)]);
    expect(callOf(r)!.block).toBe(101);
    const before = parsesOf(r.transport.body);
    expect(await sendRequest(pool, r)).toBe('b');
    expect(parsesOf(r.transport.body) - before).toBe(parsesOf(bare.transport.body) - 1);
  });

  it("the guard's decision is the Call: with validate: params it holds the params the guard read, and the pool routes by it with no parse of the body", async () => {
    const { pool } = poolOf([
      { name: 'a', head: 100 },
      { name: 'b', head: 103 },
    ]);
    const allowed = new Set(['eth_getBalance', 'eth_call']);
    const check = evmParamsCheck(allowed, { maxParamsDepth: 32, maxArrayItems: 10_000, maxHexBytes: 262_144 }, NO_VALIDATORS);
    // A flat params list (read from its bytes), params with an object (JSON.parse of the params alone), and a body
    // only the general path takes (an unknown key: parsed whole there, re-serialized).
    for (const body of [
      `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["${ADDR}","${hex(101)}"]}`,
      `{"jsonrpc":"2.0","id":2,"method":"eth_call","params":[{"to":"${ADDR}","data":"0x"},"${hex(101)}"]}`,
      `{"jsonrpc":"2.0","id":3,"method":"eth_getBalance","params":["${ADDR}","${hex(101)}"],"x":1}`,
    ]) {
      const before = callParses.count;
      const d = checkEvmBody(Buffer.from(body), allowed, 10, check);
      if (d.kind !== 'forward' || d.call === null) throw new Error(`not forwarded as one call: ${body}`);
      expect(d.call.body).toBe(d.body);
      expect(await sendRequest(pool, { calls: { one: d.call }, transport: transportOf(d.body) }), body).toBe('b');
      expect([d.call.block, d.call.idJson]).toEqual([101, String(JSON.parse(body).id)]);
      expect(callParses.count - before, `bodies parsed after the guard: ${body}`).toBe(0);
    }
  });

  it('a Call parses its params at most once, whatever layers ask', () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_getLogs', params: [{ fromBlock: '0x10', toBlock: 'latest' }] });
    const parse = vi.spyOn(JSON, 'parse');
    const call = new Call(body, 'eth_getLogs');
    expect([call.at, call.from, call.block, call.idJson, call.params.length, call.traits.read]).toEqual([0, 16, 'latest', '7', 1, true]);
    expect(call.doc).toBe(call.doc);
    expect(parse.mock.calls.filter(([text]) => text === body)).toHaveLength(1);
  });
});

// ----------------------------------------------------------- state errors

describe('the table of "state is gone" errors', () => {
  const root = '4f6a0e9b3f5f6c0f5c62a5a51e2d3a1f1d8b4b2f3e6c0d7a9b8c7d6e5f4a3b2c';
  // The messages as each client writes them (the sources are in state-errors.ts).
  const GONE: readonly (readonly [string, string])[] = [
    ['geth, hash scheme: missing trie node, nothing after (path )', `missing trie node ${root} (path )`],
    ['geth: missing trie node with the wrapped error printed after it', `missing trie node ${root} (path ) <nil>`],
    ['geth: missing trie node of a storage trie, wrapping a state error', `missing trie node ${root} (owner ${root}) (path 0a0b) state 0x${root} is not available`],
    ['geth, path scheme: historical state', `historical state ${root} is not available`],
    ['geth, path scheme: a state layer that is gone', `state 0x${root} is not available`],
    ['geth: header not found', 'header not found'],
    ['erigon: pruned history', 'old data not available due to pruning'],
    ['erigon: pruned history, with the block', 'old data not available due to pruning: requested block 6134861'],
    ['nethermind', `No state available for block 0x${root}`],
    ['nethermind, hash and number', `No state available for block 15659482 (0x${root})`],
    ['reth', 'state at block #19000000 is pruned'],
    ["anvil's BlockOutOfRangeError", 'BlockOutOfRangeError: block height is 7282 but requested was 120'],
  ];
  for (const [who, message] of GONE) {
    it(`matches ${who}`, () => {
      expect(isStateGone(message)).toBe(true);
    });
  }

  const NOT_GONE: readonly string[] = [
    'execution reverted',
    'execution reverted: ERC20: transfer amount exceeds balance',
    'nonce too low',
    'nonce too low: next nonce 5, tx nonce 3',
    'insufficient funds for gas * price + value',
    'insufficient funds for gas * price + value: have 0 want 21000',
    'already known',
    'replacement transaction underpriced',
    'invalid argument 1: hex string without 0x prefix',
    'the method eth_foo does not exist/is not available',
    'rate limit exceeded',
    'out of gas',
  ];
  for (const message of NOT_GONE) {
    it(`does not match an unrelated error: ${message}`, () => {
      expect(isStateGone(message)).toBe(false);
    });
  }

  it('names the client and the source of every entry', () => {
    for (const e of STATE_GONE) {
      expect(e.client.length).toBeGreaterThan(0);
      expect(e.source.length).toBeGreaterThan(0);
    }
  });
});

// ------------------------------------------------------------ rewriteTags

describe('rewriteTags', () => {
  const NUMBERS = { latest: 100, safe: 90, finalized: 80 };
  const rewrite = (body: string, numbers = NUMBERS): unknown => {
    const call = readCall(body);
    expect(call).not.toBeNull();
    const out = rewriteTags(call!, numbers);
    return out === null ? null : JSON.parse(out);
  };
  const body = (method: string, params: unknown[], id: unknown = 7) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

  it('replaces latest, safe and finalized with the numbers served', () => {
    expect(rewrite(body('eth_getBalance', [ADDR, 'latest']))).toEqual({ jsonrpc: '2.0', id: 7, method: 'eth_getBalance', params: [ADDR, '0x64'] });
    expect(rewrite(body('eth_getBalance', [ADDR, 'safe']))).toMatchObject({ params: [ADDR, '0x5a'] });
    expect(rewrite(body('eth_getBalance', [ADDR, 'finalized']))).toMatchObject({ params: [ADDR, '0x50'] });
    expect(rewrite(body('eth_getBlockByNumber', ['latest', true]))).toMatchObject({ params: ['0x64', true] });
    expect(rewrite(body('eth_getStorageAt', [ADDR, '0x0', 'safe']))).toMatchObject({ params: [ADDR, '0x0', '0x5a'] });
  });

  it('rewrites the EIP-1898 form {blockNumber: tag}, keeping its other fields', () => {
    expect(rewrite(body('eth_call', [{ to: ADDR }, { blockNumber: 'latest' }]))).toMatchObject({ params: [{ to: ADDR }, { blockNumber: '0x64' }] });
    expect(rewrite(body('eth_getCode', [ADDR, { blockNumber: 'finalized', requireCanonical: true }]))).toMatchObject({
      params: [ADDR, { blockNumber: '0x50', requireCanonical: true }],
    });
  });

  it('fills in a missing optional block parameter (latest) with the served tip', () => {
    expect(rewrite(body('eth_call', [{ to: ADDR, data: '0x' }]))).toMatchObject({ params: [{ to: ADDR, data: '0x' }, '0x64'] });
    expect(rewrite(body('eth_getBalance', [ADDR]))).toMatchObject({ params: [ADDR, '0x64'] });
    expect(rewrite(body('eth_getTransactionCount', [ADDR]))).toMatchObject({ params: [ADDR, '0x64'] });
  });

  it('leaves alone what names no tag, a tag the gateway does not know yet, and pending', () => {
    expect(rewrite(body('eth_getBalance', [ADDR, '0x10']))).toBeNull();
    expect(rewrite(body('eth_getBalance', [ADDR, 'pending']))).toBeNull();
    expect(rewrite(body('eth_getBalance', [ADDR, 'earliest']))).toBeNull();
    expect(rewrite(body('eth_getBalance', [ADDR, { blockHash: `0x${'ab'.repeat(32)}` }]))).toBeNull();
    expect(rewrite(body('eth_getTransactionReceipt', [`0x${'ab'.repeat(32)}`]))).toBeNull();
    expect(rewrite(body('eth_chainId', []))).toBeNull();
    expect(rewrite(body('eth_getBalance', [ADDR, 'safe']), { latest: 100, safe: -1, finalized: -1 })).toBeNull();
  });

  it('keeps the id exactly as the client wrote it: a number past 2^53, a string, null', () => {
    const big = '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"eth_getBalance","params":["' + ADDR + '","latest"]}';
    const call = readCall(big)!;
    const out = rewriteTags(call, NUMBERS)!;
    expect(out).toContain('"id":123456789012345678901234567890,');
    expect(out.startsWith('{"jsonrpc":"2.0","id":123456789012345678901234567890,')).toBe(true);
    const past53 = '{"id":9007199254740993,"jsonrpc":"2.0","method":"eth_blockNumber","params":[]}';
    expect(readCall(past53)!.idJson).toBe('9007199254740993');
    expect(rewrite(body('eth_getBalance', [ADDR, 'latest'], 'a-1'))).toMatchObject({ id: 'a-1' });
    expect(rewrite(body('eth_getBalance', [ADDR, 'latest'], null))).toMatchObject({ id: null });
  });
});

// ------------------------------------------------------------ hedge budget

describe('HedgeBudget', () => {
  // On a ten-second boundary, so that the buckets line up with the test's times.
  const T = 1_700_000_000_000;

  it('allows hedges up to 10% of the calls of the last minute, and not one more', () => {
    const b = new HedgeBudget();
    for (let i = 0; i < 100; i++) b.call(T);
    let taken = 0;
    for (let i = 0; i < 50; i++) if (b.take(T + 1)) taken++;
    expect(taken).toBe(10);
  });

  it('allows none below ten calls', () => {
    const b = new HedgeBudget();
    for (let i = 0; i < 9; i++) b.call(T);
    expect(b.take(T)).toBe(false);
    b.call(T);
    expect(b.take(T)).toBe(true);
    expect(b.take(T)).toBe(false);
  });

  it('slides: calls and hedges within the minute count, older ones do not', () => {
    const b = new HedgeBudget();
    const takeUpTo = (n: number, now: number): number => {
      let taken = 0;
      for (let i = 0; i < n; i++) if (b.take(now)) taken++;
      return taken;
    };
    for (let i = 0; i < 100; i++) b.call(T);
    expect(takeUpTo(5, T)).toBe(5);
    // 45 s later the first 100 calls and their 5 hedges still count: 110 calls, 11 hedges in all.
    for (let i = 0; i < 10; i++) b.call(T + 45_000);
    expect(takeUpTo(20, T + 45_000)).toBe(6);
    // More than a minute after the first calls only the later 10 calls and their 6 hedges count.
    expect(b.take(T + 61_000)).toBe(false);
    for (let i = 0; i < 100; i++) b.call(T + 61_000);
    expect(takeUpTo(50, T + 61_000)).toBe(5); // 110 calls in the minute, 6 hedges already
  });

  it('holds over a long steady stream: never more than 10% of any minute', () => {
    const b = new HedgeBudget();
    const hedgesAt: number[] = [];
    const callsAt: number[] = [];
    // 5 minutes, 20 calls a second, each wanting a hedge.
    for (let ms = 0; ms < 300_000; ms += 50) {
      b.call(T + ms);
      callsAt.push(ms);
      if (b.take(T + ms)) hedgesAt.push(ms);
    }
    for (let end = 60_000; end <= 300_000; end += 10_000) {
      const inMinute = (t: number) => t >= end - 60_000 && t < end;
      const calls = callsAt.filter(inMinute).length;
      const hedges = hedgesAt.filter(inMinute).length;
      expect(hedges, `the minute ending at ${end} ms`).toBeLessThanOrEqual(Math.ceil(calls * 0.1));
    }
    expect(hedgesAt.length).toBeGreaterThan(250); // and it does hedge: about 10% of 6000
  });
});
