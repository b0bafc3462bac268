// The status page's figures (runtime/admin/status.ts): read from the very counters
// /metrics renders, with windows worked out from copies taken at known times
// (copy(now) and json(now) take the time, so nothing here waits).
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Metrics, type RouteMetrics } from '../../../../runtime/observe/metrics.ts';
import { BUCKETS } from '../../../../runtime/observe/series.ts';
import { quantile, StatusBoard, STEP_MS } from '../../../../runtime/admin/status.ts';
import type { GatewaySpec, RouteSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';
import { Usage } from '../../../../runtime/observe/usage.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import { ChainView } from '../../../../runtime/upstreams/chain-view.ts';

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
    redis: [
      { part: 'keys', link: { state: 'empty' as const } },
      { part: 'limits', link: { state: 'down' as const } },
    ],
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
    expect(d.redis).toEqual({ keys: 'empty', limits: 'down' });
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

/**
 * Stands in for ioredis with the usage script's rule (a batch at or below the
 * last one applied of its process changes nothing): `mode` says what the next
 * calls do: ok; fail (refused, nothing applied); late (applied, but the answer
 * times out, as a frozen Redis that wakes does).
 */
class FakeRedis extends EventEmitter {
  mode: 'ok' | 'fail' | 'late' = 'ok';
  readonly fields = new Map<string, number>();
  /** Each call's batch: its sequence number and its increments. */
  readonly calls: { seq: number; incr: [string, number][] }[] = [];
  private readonly last = new Map<string, number>();
  private gate: Promise<void> = Promise.resolve();
  /** Holds the next calls until `release()`. */
  release: () => void = () => undefined;

  hold(): void {
    this.gate = new Promise((r) => (this.release = r));
  }

  ping(): Promise<string> {
    return Promise.resolve('PONG');
  }

  disconnect(): void {}

  defineCommand(name: string): void {
    (this as unknown as Record<string, unknown>)[name] = async (...args: (string | number)[]) => {
      await this.gate;
      const n = Number(args[0]);
      const [batchKey, ...hashes] = args.slice(1, 1 + n) as string[];
      const argv = args.slice(1 + n);
      const seq = Number(argv[0]);
      const incr: [string, number][] = [];
      let a = 2;
      for (const h of hashes) {
        const count = Number(argv[a++]);
        for (let i = 0; i < count; i++, a += 2) incr.push([`${h} ${argv[a]}`, Number(argv[a + 1])]);
      }
      this.calls.push({ seq, incr });
      if (this.mode === 'fail') throw new Error('Connection is closed.');
      if (seq > (this.last.get(batchKey!) ?? 0)) {
        this.last.set(batchKey!, seq);
        for (const [f, v] of incr) this.fields.set(f, (this.fields.get(f) ?? 0) + v);
      }
      if (this.mode === 'late') throw new Error('Command timed out');
      return 1;
    };
  }

  /** A field's total, summed over every usage hash. */
  total(suffix: string): number {
    let n = 0;
    for (const [f, v] of this.fields) if (f.endsWith(suffix)) n += v;
    return n;
  }
}

const quiet = { error: () => undefined, info: () => undefined } as unknown as Logger;

async function usageOn(redis: FakeRedis): Promise<Usage> {
  const usage = new Usage(redis as never, quiet);
  await usage.link!.check();
  return usage;
}

describe('Usage with Redis', () => {
  it('counts what was sent to Redis and what waits, once each, whether a flush succeeds or fails', async () => {
    const redis = new FakeRedis();
    const usage = await usageOn(redis);
    usage.record('a', 'dev', 'eth_call', 2, 20);
    usage.record('b', 'dev', 'eth_call', 1, 5);
    await usage.flush(); // sent: no longer waiting in memory
    expect(usage.topToday(10)).toEqual([
      { id: 'a', credits: 20, calls: 2 },
      { id: 'b', credits: 5, calls: 1 },
    ]);
    redis.mode = 'fail';
    usage.record('b', 'dev', 'eth_call', 4, 40);
    await usage.flush(); // failed: kept for the next flush
    expect(usage.link!.state).toBe('down');
    expect(usage.topToday(10)).toEqual([
      { id: 'b', credits: 45, calls: 5 },
      { id: 'a', credits: 20, calls: 2 },
    ]);
    redis.mode = 'ok';
    await usage.link!.check();
    await usage.flush();
    expect(usage.topToday(1)).toEqual([{ id: 'b', credits: 45, calls: 5 }]);
    expect(redis.total(' dev eth_call credits')).toBe(65);
  });

  it('sends a batch whose answer timed out again with the same id and the same counts, never merged into the next: Redis counts it once', async () => {
    const redis = new FakeRedis();
    const usage = await usageOn(redis);
    usage.record('a', 'dev', 'eth_call', 1, 10);
    redis.mode = 'late';
    await usage.flush(); // applied by Redis, but the gateway saw a timeout
    usage.record('a', 'dev', 'eth_call', 2, 20); // counted meanwhile
    await usage.flush(); // down: not tried
    expect(redis.calls).toHaveLength(1);
    await usage.link!.check();
    await usage.flush(); // the same batch again: applied already, so nothing; still "timed out"
    redis.mode = 'ok';
    await usage.link!.check();
    await usage.flush(); // the same batch once more (answered now), then the next one
    expect(redis.calls.map((c) => c.seq)).toEqual([1, 1, 1, 2]);
    expect(redis.calls[2]!.incr).toEqual(redis.calls[0]!.incr);
    expect(redis.calls[3]!.incr.map(([, v]) => v)).toEqual([2, 20]);
    expect(redis.total(' calls')).toBe(3);
    expect(redis.total(' credits')).toBe(30);
  });

  it('sends every count exactly once when requests add to a key while flushes succeed, fail and time out', async () => {
    const redis = new FakeRedis();
    const usage = await usageOn(redis);
    let expected = 0;
    const record = (n: number) => {
      usage.record('a', 'dev', 'eth_call', n, n * 10);
      expected += n;
    };
    for (const mode of ['ok', 'fail', 'late', 'ok', 'late', 'fail', 'ok'] as const) {
      record(1);
      redis.mode = mode;
      redis.hold();
      const flushing = usage.flush();
      record(2); // while the flush is under way
      redis.release();
      await flushing;
      await usage.link!.check();
    }
    redis.mode = 'ok';
    await usage.stop();
    expect(redis.total(' calls')).toBe(expected);
    expect(redis.total(' credits')).toBe(expected * 10);
  });
});
