// When health checks run: every chain at start, then each chain once per
// interval with the chains spread over it, never two checks of one chain at a
// time. Fake timers and fake pools: what is asserted is the order and count of
// probes, not how long anything takes.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Poller } from '../../../../runtime/upstreams/poller.ts';
import { moduleOf } from '../../../../runtime/kinds/index.ts';
import { ChainView } from '../../../../runtime/upstreams/chain-view.ts';
import { UpstreamView } from '../../../../runtime/upstreams/upstream-view.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import type { Metrics } from '../../../../runtime/observe/metrics.ts';
import type { RouteSpec, UpstreamSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';

const INTERVAL = 1000;

interface FakeChain {
  route: RouteSpec;
  probes: number;
  /** While set, this chain's node does not answer until it is called. */
  hold: (() => void) | null;
  stall: boolean;
}

/** The poller of these chains, each polled at the health interval (no cache). */
function poller(routes: RouteSpec[], groups: Map<RouteSpec, UpstreamGroup>, opts: { intervalMs: number; timeoutMs: number }, log: Logger, metrics: Metrics): Poller {
  return new Poller(
    routes.map((route) => ({ route, group: groups.get(route)!, view: new ChainView(groups.get(route)!.all), everyMs: null, heads: false, probe: moduleOf(route.interface).probe })),
    opts,
    log,
    metrics,
  );
}

function setup(n: number): { chains: FakeChain[]; checker: Poller; counts: () => number[]; states: () => string[] } {
  const chains: FakeChain[] = [];
  const upstreams: Array<{ state: string }> = [];
  const groups = new Map<RouteSpec, UpstreamGroup>();
  for (let i = 0; i < n; i++) {
    const route = { path: `chain-${i}`, interface: 'evm-jsonrpc', maxLag: 10, upstreams: [{}] } as unknown as RouteSpec;
    const chain: FakeChain = { route, probes: 0, hold: null, stall: false };
    const answer = { statusCode: 200, body: { text: async () => '{"jsonrpc":"2.0","id":1,"result":"0x10"}' } };
    const pool = {
      request: async () => {
        chain.probes++;
        if (chain.stall) await new Promise<void>((done) => (chain.hold = done));
        return answer;
      },
    };
    const view = new UpstreamView();
    const upstream = {
      name: `chain-${i}#0`,
      rpcPath: '/',
      headers: {},
      pool,
      view,
      requestFails: 0,
      get state() {
        return view.state;
      },
      get takesBatches() {
        return view.takesBatches;
      },
      get usable() {
        return view.state === 'up' || (view.state === 'unknown' && !view.verify);
      },
      get serving() {
        return view.state === 'up' || (view.state === 'unknown' && !view.verify);
      },
    };
    groups.set(route, { all: [upstream] } as unknown as UpstreamGroup);
    upstreams.push(upstream);
    chains.push(chain);
  }
  const log = { warn: vi.fn(), error: vi.fn() } as unknown as Logger;
  const metrics = { upstream: vi.fn() } as unknown as Metrics;
  const checker = poller(
    chains.map((c) => c.route),
    groups,
    { intervalMs: INTERVAL, timeoutMs: 500 },
    log,
    metrics,
  );
  return { chains, checker, counts: () => chains.map((c) => c.probes), states: () => upstreams.map((u) => u.state) };
}

describe('Poller schedule (chains without a cache: the health interval)', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('checks every chain at start, then one chain at a time, spread evenly over the interval', async () => {
    const { checker, counts, states } = setup(4);
    checker.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(counts()).toEqual([1, 1, 1, 1]);
    expect(states()).toEqual(['up', 'up', 'up', 'up']);
    await vi.advanceTimersByTimeAsync(INTERVAL - 1);
    expect(counts()).toEqual([1, 1, 1, 1]);
    await vi.advanceTimersByTimeAsync(1); // t = 1000: the first chain's turn
    expect(counts()).toEqual([2, 1, 1, 1]);
    await vi.advanceTimersByTimeAsync(INTERVAL / 4); // t = 1250
    expect(counts()).toEqual([2, 2, 1, 1]);
    await vi.advanceTimersByTimeAsync(INTERVAL / 2); // t = 1750
    expect(counts()).toEqual([2, 2, 2, 2]);
    await vi.advanceTimersByTimeAsync(INTERVAL / 4); // t = 2000: the first chain again
    expect(counts()).toEqual([3, 2, 2, 2]);
    await vi.advanceTimersByTimeAsync(10 * INTERVAL);
    expect(counts()).toEqual([13, 12, 12, 12]);
    checker.stop();
  });

  it('checks many chains in ten groups over the interval, each group at once', async () => {
    const { checker, counts } = setup(25);
    checker.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(counts().every((c) => c === 1)).toBe(true);
    const probedAt: number[][] = [];
    for (let slot = 0; slot < 10; slot++) {
      const before = counts();
      await vi.advanceTimersByTimeAsync(slot === 0 ? INTERVAL : INTERVAL / 10);
      probedAt.push(counts().flatMap((c, i) => (c > before[i]! ? [i] : [])));
    }
    // chain i goes in group floor(i * 10 / 25): groups of 3 and 2, in order, every chain once
    expect(probedAt).toEqual([[0, 1, 2], [3, 4], [5, 6, 7], [8, 9], [10, 11, 12], [13, 14], [15, 16, 17], [18, 19], [20, 21, 22], [23, 24]]);
    expect(counts().every((c) => c === 2)).toBe(true);
    checker.stop();
  });

  it('never checks a chain again while its previous check is under way', async () => {
    const { checker, counts, chains } = setup(2);
    chains[0]!.stall = true;
    checker.start();
    await vi.advanceTimersByTimeAsync(3 * INTERVAL); // chain 1 at 0, 1500, 2500; chain 0's turns at 1000, 2000, 3000 pass
    expect(counts()).toEqual([1, 3]);
    chains[0]!.stall = false;
    chains[0]!.hold!();
    await vi.advanceTimersByTimeAsync(INTERVAL); // t = 4000: chain 0's next turn; chain 1 at 3500
    expect(counts()).toEqual([2, 4]);
    checker.stop();
  });

  it('checks nothing after stop', async () => {
    const { checker, counts } = setup(3);
    checker.start();
    await vi.advanceTimersByTimeAsync(INTERVAL + INTERVAL / 3);
    expect(counts()).toEqual([2, 2, 1]);
    checker.stop();
    await vi.advanceTimersByTimeAsync(10 * INTERVAL);
    expect(counts()).toEqual([2, 2, 1]);
  });
});

describe('health checks and the circuit breaker', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  /** A real Upstream whose node answers eth_blockNumber (so it passes every check) and nothing is sent anywhere. */
  function checkedUpstream(): { upstream: Upstream; checker: Poller } {
    const route = { path: 'failchain', interface: 'evm-jsonrpc', maxLag: 10, upstreams: [{}], limits: { timeoutMs: 1000 } } as unknown as RouteSpec;
    const spec = { name: 'failchain#0', url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec;
    const upstream = new Upstream(spec, route);
    const answer = { statusCode: 200, body: { text: async () => '{"jsonrpc":"2.0","id":1,"result":"0x10"}' } };
    Object.defineProperty(upstream, 'pool', { value: { request: async () => answer } });
    const log = { warn: vi.fn(), error: vi.fn() } as unknown as Logger;
    const metrics = { upstream: vi.fn() } as unknown as Metrics;
    const checker = poller([route], new Map([[route, new UpstreamGroup([upstream])]]), { intervalMs: INTERVAL, timeoutMs: 500 }, log, metrics);
    return { upstream, checker };
  }

  it('opens after three failed requests in a row even when passing checks come between them', async () => {
    const { upstream, checker } = checkedUpstream();
    checker.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(upstream.state).toBe('up');
    const opened: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      opened.push(upstream.markFailure());
      await vi.advanceTimersByTimeAsync(INTERVAL); // a passing check between each failure
      expect(upstream.view.healthFails).toBe(0);
    }
    expect(opened).toEqual([false, false, true]);
    checker.stop();
  });

  it('puts an upstream a check brings back on trial: one more failure takes it out, one success clears the run', async () => {
    const { upstream, checker } = checkedUpstream();
    checker.start();
    await vi.advanceTimersByTimeAsync(0);
    for (let i = 0; i < 3; i++) upstream.markFailure();
    expect(upstream.state).toBe('down');
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(upstream.state).toBe('up');
    expect(upstream.markFailure()).toBe(true);
    expect(upstream.state).toBe('down');
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(upstream.state).toBe('up');
    upstream.markSuccess();
    expect([upstream.markFailure(), upstream.markFailure()]).toEqual([false, false]);
    expect(upstream.state).toBe('up');
    checker.stop();
  });
});

describe('the wrong-chain guard', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  /** A chain with chainId 1 and one real Upstream whose node says what `node.chainId` holds (null: it does not answer). */
  function guarded(): { upstream: Upstream; checker: Poller; node: { chainId: number | null }; bodies: string[]; log: { error: ReturnType<typeof vi.fn>; warn: ReturnType<typeof vi.fn> } } {
    const route = { path: 'bsc', interface: 'evm-jsonrpc', chainId: 56, maxLag: 10, upstreams: [{}], limits: { timeoutMs: 1000 } } as unknown as RouteSpec;
    const spec = { name: 'bsc#0', url: { parts: ['http://user:secret@127.0.0.1:9/rpc'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec;
    const upstream = new Upstream(spec, route);
    const node = { chainId: 56 as number | null };
    const bodies: string[] = [];
    Object.defineProperty(upstream, 'pool', {
      value: {
        request: async (o: { body: string }) => {
          bodies.push(o.body);
          if (node.chainId === null) throw new Error('connect ECONNREFUSED');
          // answers in reverse order: items are matched by id
          const text = JSON.stringify([{ jsonrpc: '2.0', id: 2, result: '0x10' }, { jsonrpc: '2.0', id: 1, result: `0x${node.chainId.toString(16)}` }]);
          return { statusCode: 200, body: { text: async () => text } };
        },
      },
    });
    const log = { warn: vi.fn(), error: vi.fn() };
    const metrics = { upstream: vi.fn() } as unknown as Metrics;
    const checker = poller([route], new Map([[route, new UpstreamGroup([upstream])]]), { intervalMs: INTERVAL, timeoutMs: 500 }, log as unknown as Logger, metrics);
    return { upstream, checker, node, bodies, log };
  }

  it('asks eth_chainId and eth_blockNumber in one batch, one request per round', async () => {
    const { checker, bodies, upstream } = guarded();
    checker.start();
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(bodies).toHaveLength(2);
    expect(JSON.parse(bodies[0]!).map((c: { method: string }) => c.method)).toEqual(['eth_chainId', 'eth_blockNumber']);
    expect(upstream.state).toBe('up');
    expect(upstream.head).toBe(16);
    checker.stop();
  });

  it('marks an upstream of another chain wrong_chain, logs it once without its URL, keeps it there while it fails, and brings it back once it serves the chain', async () => {
    const { checker, node, upstream, log } = guarded();
    node.chainId = 137;
    checker.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(upstream.state).toBe('wrong_chain');
    expect(upstream.usable).toBe(false);
    await vi.advanceTimersByTimeAsync(3 * INTERVAL); // checked again every round, logged once
    expect(upstream.state).toBe('wrong_chain');
    expect(log.error).toHaveBeenCalledTimes(1);
    const [fields, message] = log.error.mock.calls[0]!;
    expect(fields).toMatchObject({ event: 'upstream_wrong_chain', chain: 'bsc', upstream: 'bsc#0', serves: 'chainId 137' });
    expect(JSON.stringify([fields, message])).not.toMatch(/127\.0\.0\.1|secret|\/rpc/);
    // a request that was in flight when it was taken out does not turn it into down
    for (let i = 0; i < 3; i++) upstream.markFailure();
    expect(upstream.state).toBe('wrong_chain');
    node.chainId = null; // unreachable: what it serves is unknown, it stays out as it was
    await vi.advanceTimersByTimeAsync(3 * INTERVAL);
    expect(upstream.state).toBe('wrong_chain');
    node.chainId = 56;
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(upstream.state).toBe('up');
    node.chainId = 1; // swapped again: a new transition, a new line
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(upstream.state).toBe('wrong_chain');
    expect(log.error).toHaveBeenCalledTimes(2);
    checker.stop();
  });
});

describe('a pool without chainId (issue 37, defect 16)', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  /** A pool of real Upstreams whose nodes serve the chain ids given (null: unreachable) at the heads given. */
  function pool(nodes: { chainId: number | null; head: number }[]): { ups: Upstream[]; checker: Poller; log: { error: ReturnType<typeof vi.fn>; warn: ReturnType<typeof vi.fn> } } {
    const route = { path: 'pool', interface: 'evm-jsonrpc', maxLag: 10, upstreams: nodes.map(() => ({})), limits: { timeoutMs: 1000 } } as unknown as RouteSpec;
    const ups = nodes.map((node, i) => {
      const spec = { name: `pool#${i}`, url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec;
      const u = new Upstream(spec, route);
      Object.defineProperty(u, 'pool', {
        value: {
          request: async (o: { body: string }) => {
            if (node.chainId === null) throw new Error('connect ECONNREFUSED');
            const calls = JSON.parse(o.body) as { id: number; method: string }[];
            const text = JSON.stringify(calls.map((c) => ({ jsonrpc: '2.0', id: c.id, result: `0x${(c.method === 'eth_chainId' ? node.chainId! : node.head).toString(16)}` })));
            return { statusCode: 200, body: { text: async () => text } };
          },
        },
      });
      return u;
    });
    const log = { warn: vi.fn(), error: vi.fn() };
    const metrics = { upstream: vi.fn() } as unknown as Metrics;
    const checker = poller([route], new Map([[route, new UpstreamGroup(ups)]]), { intervalMs: INTERVAL, timeoutMs: 500 }, log as unknown as Logger, metrics);
    return { ups, checker, log };
  }

  it('asks eth_chainId, and takes the identity most upstreams report at the first round: the one of another chain, far ahead, is wrong_chain', async () => {
    const nodes = [
      { chainId: 137, head: 5000 },
      { chainId: 1, head: 100 },
      { chainId: 1, head: 100 },
    ];
    const { ups, checker, log } = pool(nodes);
    await checker.start();
    expect(ups.map((u) => u.state)).toEqual(['wrong_chain', 'up', 'up']);
    expect(ups.map((u) => u.view.lagging)).toEqual([false, false, false]);
    expect(log.error.mock.calls[0]![0]).toMatchObject({ event: 'upstream_wrong_chain', upstream: 'pool#0', serves: 'chainId 137' });
    checker.stop();
  });

  it('takes out, at the first round, one more than maxLag behind what the other first polls found (no head was known when they were sent)', async () => {
    const { ups, checker } = pool([
      { chainId: 1, head: 100 },
      { chainId: 1, head: 100 },
      { chainId: 1, head: 80 },
    ]);
    await checker.start();
    expect(ups.map((u) => u.state)).toEqual(['up', 'up', 'down']);
    expect(ups.map((u) => u.view.lagging)).toEqual([false, false, true]);
    checker.stop();
  });

  it('an upstream unreachable at start takes no traffic until a poll finds it on the chain most of them serve', async () => {
    const nodes: { chainId: number | null; head: number }[] = [
      { chainId: 1, head: 100 },
      { chainId: 1, head: 100 },
      { chainId: null, head: 5000 },
    ];
    const { ups, checker } = pool(nodes);
    await checker.start();
    expect(ups.map((u) => u.state)).toEqual(['up', 'up', 'unknown']);
    expect(ups[2]!.usable).toBe(false);
    nodes[2]!.chainId = 137;
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(ups.map((u) => u.state)).toEqual(['up', 'up', 'wrong_chain']);
    checker.stop();
  });

  it('one against one settles nothing: both serve, as without a pool', async () => {
    const { ups, checker } = pool([
      { chainId: 1, head: 100 },
      { chainId: 137, head: 100 },
    ]);
    await checker.start();
    expect(ups.map((u) => u.state)).toEqual(['up', 'up']);
    checker.stop();
  });
});
