// The status page's figures (runtime/observe/status.ts): read from the very counters
// /metrics renders, with windows worked out from copies taken at known times
// (copy(now) and json(now) take the time, so nothing here waits).
import { describe, expect, it } from 'vitest';
import { Metrics, type RouteMetrics } from '../../../runtime/observe/metrics.ts';
import { BUCKETS } from '../../../runtime/upstreams/tally.ts';
import { quantile, StatusBoard, STEP_MS } from '../../../runtime/observe/status.ts';
import type { GatewaySpec, RouteSpec } from '../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../runtime/upstreams/upstream.ts';
import { Usage } from '../../../runtime/observe/usage.ts';
import type { Logger } from '../../../runtime/observe/log.ts';
import { ChainView } from '../../../runtime/upstreams/chain-view.ts';

const counts = (pairs: [number, number][]): Float64Array => {
  const c = new Float64Array(BUCKETS.length + 1);
  for (const [i, n] of pairs) c[i] = n;
  return c;
};

describe('quantile (as Prometheus histogram_quantile reads buckets)', () => {
  it('interpolates inside the bucket the rank falls in', () => {
    // 10 in (0.005, 0.01]: the median is halfway through it.
    expect(quantile(counts([[3, 10]]), 0.5)).toBeCloseTo(0.0075, 10);
    // 90 in (0, 0.001], 10 in (0.1, 0.25]: p50 in the first, p99 9/10 of the way into the other.
    const c = counts([
      [0, 90],
      [7, 10],
    ]);
    expect(quantile(c, 0.5)).toBeCloseTo(0.001 * (50 / 90), 10);
    expect(quantile(c, 0.99)).toBeCloseTo(0.1 + 0.15 * 0.9, 10);
  });

  it('is null for an empty histogram and the highest finite bound in +Inf', () => {
    expect(quantile(counts([]), 0.5)).toBeNull();
    expect(quantile(counts([[BUCKETS.length, 3]]), 0.99)).toBe(BUCKETS[BUCKETS.length - 1]);
  });
});

function board() {
  const route = { path: 'dev', listener: 'rpc', interface: 'evm-jsonrpc', limits: { timeoutMs: 1000 } } as unknown as RouteSpec;
  const spec = (name: string, role: 'primary' | 'fallback') => ({ name, url: { parts: ['http://127.0.0.1:1'] }, weight: 1, role, archive: false, connections: 1, idleTimeoutMs: 1000, headers: {} });
  const group = new UpstreamGroup([new Upstream(spec('dev#0', 'primary'), route), new Upstream(spec('dev#1', 'fallback'), route)]);
  const metrics = new Metrics(() => 0);
  metrics.upstreams(group.all);
  const rm: RouteMetrics = metrics.route('dev', 'evm-jsonrpc');
  const usage = new Usage(null, { error: () => undefined } as unknown as Logger);
  const src = {
    spec: { source: 'gateway.yaml', manifestSha256: 'ab'.repeat(32) } as GatewaySpec,
    chains: [{ route, group, metrics: rm, view: new ChainView(group.all) }],
    metrics,
    usage,
    draining: false,
  };
  return { b: new StatusBoard(src), rm, group, metrics, usage };
}

describe('StatusBoard', () => {
  it('gives the last minute against the newest copy at least a minute old, and totals equal to the counters', async () => {
    const { b, rm, group } = board();
    const t0 = 1_000_000_000_000;
    b.copy(t0);
    // Before: 5 answers and 2 failed attempts, which fall out of the window.
    for (let i = 0; i < 5; i++) rm.observe('eth_call', 200, 3);
    group.all[0]!.tally.observe(3, false);
    group.all[0]!.tally.observe(3, false);
    for (let s = 1; s <= 12; s++) b.copy(t0 + s * STEP_MS);
    // In the window: 8 answers, 2 of them 502; dev#0 gets 4 ok attempts of 3 ms and 1 failed of 700 ms.
    for (let i = 0; i < 6; i++) rm.observe('eth_call', 200, 3);
    rm.observe('eth_call', 502, 3);
    rm.observe('batch', 502, 3);
    for (let i = 0; i < 4; i++) group.all[0]!.tally.observe(3, true);
    group.all[0]!.tally.observe(700, false);
    const d = JSON.parse(await b.json(t0 + 13 * STEP_MS + 1000)); // base: the copy at t0 + 5 s, 61 s old
    expect(d.windowSeconds).toBe(60 + 1);
    const c = d.chains[0];
    expect(c).toMatchObject({ path: 'dev', listener: 'rpc', interface: 'evm-jsonrpc', requests: 8, errorRate: 0.25, requestsTotal: 13, errorsTotal: 2 });
    expect(c.rps).toBeCloseTo(8 / 61, 3);
    const [u0, u1] = c.upstreams;
    expect(u0).toMatchObject({ name: 'dev#0', role: 'primary', attempts: 5, failed: 1, failedShare: 0.2, attemptsTotal: 7, failedTotal: 3 });
    // 4 of 5 in (2.5 ms, 5 ms]: p50 inside it; p99 in (0.5 s, 1 s].
    expect(u0.p50Ms).toBeGreaterThan(2.5);
    expect(u0.p50Ms).toBeLessThanOrEqual(5);
    expect(u0.p99Ms).toBeGreaterThan(500);
    expect(u0.p99Ms).toBeLessThanOrEqual(1000);
    expect(u1).toMatchObject({ name: 'dev#1', role: 'fallback', attempts: 0, failedShare: null, p50Ms: null, p99Ms: null });
  });

  it('charts requests per second and error rate per step, from consecutive copies', async () => {
    const { b, rm } = board();
    const t0 = 1_000_000_000_000;
    b.copy(t0);
    for (let i = 0; i < 10; i++) rm.observe('eth_call', 200, 1);
    b.copy(t0 + STEP_MS);
    b.copy(t0 + 2 * STEP_MS);
    for (let i = 0; i < 4; i++) rm.observe('eth_call', i === 0 ? 503 : 200, 1);
    b.copy(t0 + 3 * STEP_MS);
    const d = JSON.parse(await b.json(t0 + 3 * STEP_MS));
    expect(d.chart).toEqual({ stepMs: STEP_MS, t: [1, 2, 3].map((s) => t0 + s * STEP_MS) });
    expect(d.chains[0].chart).toEqual({ rps: [10 / 5, 0, 4 / 5], errorRate: [0, null, 0.25] });
  });

  it('keeps fifteen minutes of copies, not more', async () => {
    const { b } = board();
    const t0 = 1_000_000_000_000;
    for (let s = 0; s <= 200; s++) b.copy(t0 + s * STEP_MS);
    const d = JSON.parse(await b.json(t0 + 200 * STEP_MS));
    expect(d.chart.t).toHaveLength((15 * 60_000) / STEP_MS);
    expect(d.chart.t.at(-1)).toBe(t0 + 200 * STEP_MS);
    expect(d.windowSeconds).toBe(60);
  });

  it("shows head and lag from the chain's view (lag behind the best fresh head), the state as the upstream has it, and the build", async () => {
    const { b, group } = board();
    const [a, c] = group.all;
    a!.state = 'up';
    a!.view.head = 120;
    a!.view.fresh = true; // its last poll came back on the chain: its head is the best
    c!.state = 'wrong_chain' as never; // any state the runtime reports is shown as it is
    c!.view.head = 100;
    b.copy(1);
    const d = JSON.parse(await b.json(2));
    expect(d.chains[0].upstreams.map((u: Record<string, unknown>) => [u.name, u.state, u.head, u.lag])).toEqual([
      ['dev#0', 'up', 120, 0],
      ['dev#1', 'wrong_chain', 100, 20],
    ]);
    expect(d.chains[0].state).toBe('up');
    expect(d.build).toEqual({ version: 'dev', manifest: 'gateway.yaml', manifestSha256: 'ab'.repeat(32) });
  });

  it('lists the ten keys with the most credits today, most first, by id only', async () => {
    const { b, usage } = board();
    for (let i = 0; i < 12; i++) usage.record(`key-${String(i).padStart(2, '0')}`, 'dev', 'eth_call', i + 1, (i + 1) * 10);
    usage.record('key-00', 'other', 'eth_call', 1, 500); // another chain adds to the same key
    b.copy();
    const d = JSON.parse(await b.json());
    expect(d.topKeys.day).toBe(new Date().toISOString().slice(0, 10));
    expect(d.topKeys.keys.map((k: { id: string; credits: number }) => [k.id, k.credits])).toEqual([
      ['key-00', 510],
      ['key-11', 120],
      ['key-10', 110],
      ['key-09', 100],
      ['key-08', 90],
      ['key-07', 80],
      ['key-06', 70],
      ['key-05', 60],
      ['key-04', 50],
      ['key-03', 40],
    ]);
  });
});

describe('Usage.topToday with Redis', () => {
  /** Stands in for ioredis: a pipeline whose exec succeeds or fails as told. */
  function fakeRedis(ok: () => boolean) {
    const pipeline = () => {
      const p = { n: 0, hincrby: () => (p.n++, p), expire: () => p, exec: async () => (ok() ? Array.from({ length: p.n }, () => [null, 1]) : null) };
      return p;
    };
    return { pipeline } as never;
  }

  it('counts what was sent to Redis and what waits, once each, whether a flush succeeds or fails', async () => {
    let up = true;
    const usage = new Usage(fakeRedis(() => up), { error: () => undefined } as unknown as Logger);
    usage.record('a', 'dev', 'eth_call', 2, 20);
    usage.record('b', 'dev', 'eth_call', 1, 5);
    await usage.flush(); // sent: no longer waiting in memory
    expect(usage.topToday(10)).toEqual([
      { id: 'a', credits: 20, calls: 2 },
      { id: 'b', credits: 5, calls: 1 },
    ]);
    up = false;
    usage.record('b', 'dev', 'eth_call', 4, 40);
    await usage.flush(); // failed: kept for the next flush
    expect(usage.topToday(10)).toEqual([
      { id: 'b', credits: 45, calls: 5 },
      { id: 'a', credits: 20, calls: 2 },
    ]);
    up = true;
    await usage.flush();
    expect(usage.topToday(1)).toEqual([{ id: 'b', credits: 45, calls: 5 }]);
  });

  it('sends every count exactly once when requests add to a key while flushes succeed and fail (the per-key index of buckets follows the swaps)', async () => {
    const sent = new Map<string, number>();
    let ok = true;
    let release: () => void = () => undefined;
    const redis = {
      pipeline: () => {
        const fields: [string, number][] = [];
        const p = {
          hincrby: (_h: string, field: string, n: number) => (fields.push([field, n]), p),
          expire: () => p,
          exec: () =>
            new Promise((done) => {
              release = () => {
                if (ok) for (const [f, n] of fields) sent.set(f, (sent.get(f) ?? 0) + n);
                done(ok ? fields.map(() => [null, 1]) : null);
              };
            }),
        };
        return p;
      },
    } as never;
    const usage = new Usage(redis, { error: () => undefined } as unknown as Logger);
    usage.record('a', 'dev', 'eth_call', 1, 10);
    let flushing = usage.flush();
    usage.record('a', 'dev', 'eth_call', 2, 20); // while the first flush is under way
    release();
    await flushing;
    ok = false;
    usage.record('a', 'dev', 'eth_call', 4, 40);
    flushing = usage.flush();
    usage.record('a', 'dev', 'eth_call', 8, 80); // while a flush that fails is under way
    release();
    await flushing;
    usage.record('a', 'dev', 'eth_call', 16, 160);
    ok = true;
    flushing = usage.flush();
    release();
    await flushing;
    expect(sent.get('dev eth_call calls')).toBe(31);
    expect(sent.get('dev eth_call credits')).toBe(310);
  });
});
