// Selection by score (runtime/upstreams/upstream-score.ts): the score of a window, the
// preferred band and its hysteresis, probes, weights, and the window that
// reaches back only as far as it needs calls. Ticks are called by hand.
import { afterEach, describe, expect, it } from 'vitest';
import type { RouteSpec, UpstreamRole } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';
import { MIN_CALLS, PROBE, scoreOf, WINDOW_PERIODS } from '../../../../runtime/upstreams/upstream-score.ts';

const ROUTE = { path: 'c', limits: { timeoutMs: 1000 } } as RouteSpec;
const groups: UpstreamGroup[] = [];
afterEach(async () => {
  await Promise.all(groups.splice(0).map((g) => g.close()));
});

/** Upstreams from 'a:2 b f1 f2': name and weight (default 1); names starting with f are fallbacks. */
function group(layout: string, scored = true): { g: UpstreamGroup; u: Record<string, Upstream> } {
  const u: Record<string, Upstream> = {};
  const all = layout.split(' ').map((part, i) => {
    const [name, weight] = part.split(':') as [string, string | undefined];
    const role: UpstreamRole = name.startsWith('f') ? 'fallback' : 'primary';
    const up = new Upstream({ name, url: { parts: [`http://127.0.0.1:${1 + i}`] }, weight: Number(weight ?? 1), role, archive: false, connections: 1, idleTimeoutMs: 1000, headers: {} }, ROUTE);
    up.state = 'up';
    u[name] = up;
    return up;
  });
  const g = new UpstreamGroup(all, scored);
  groups.push(g);
  return { g, u };
}

/** `n` attempts of `u` taking `ms` each, `failed` of them failed. */
function calls(u: Upstream, n: number, ms: number, failed = 0): void {
  for (let i = 0; i < n; i++) u.tally.observe(ms, i >= failed);
}

const count = (g: UpstreamGroup, n: number): Record<string, number> => {
  const out: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const name = g.pick(null)!.name;
    out[name] = (out[name] ?? 0) + 1;
  }
  return out;
};

describe('scoreOf', () => {
  it('is the mean latency (at least 5 ms) times 1 + 20 × (error share + throttle share), times 1 + 0.5 a block behind beyond the first', () => {
    expect(scoreOf({ calls: 10, seconds: 2, latencyMs: 10, errorRate: 0, throttleRate: 0, lag: 0 })).toBe(10);
    expect(scoreOf({ calls: 10, seconds: 2, latencyMs: 10, errorRate: 0.1, throttleRate: 0, lag: 1 })).toBe(30);
    expect(scoreOf({ calls: 10, seconds: 2, latencyMs: 10, errorRate: 0, throttleRate: 0.05, lag: 3 })).toBe(40);
    expect(scoreOf({ calls: 10, seconds: 2, latencyMs: 10, errorRate: 0, throttleRate: 0, lag: null })).toBe(10);
    expect(scoreOf({ calls: 10, seconds: 2, latencyMs: 1, errorRate: 0.1, throttleRate: 0, lag: null })).toBe(15);
  });
});

describe('ranking', () => {
  it('prefers the fast one and keeps the slow one to probes (1 in 129 picks)', () => {
    const { g, u } = group('a b');
    calls(u.a!, 40, 5);
    calls(u.b!, 40, 80);
    g.scorer!.tick();
    expect([u.a!.score!.rank, u.b!.score!.rank]).toEqual([1, 2]);
    expect([u.a!.share, u.b!.share]).toEqual([1, PROBE]);
    expect(count(g, 1290)).toEqual({ a: 1280, b: 10 });
  });

  it('lets two within the band share by weight', () => {
    const { g, u } = group('a:2 b:1');
    calls(u.a!, 40, 10);
    calls(u.b!, 40, 12);
    g.scorer!.tick();
    expect([u.a!.score!.preferred, u.b!.score!.preferred]).toEqual([true, true]);
    expect(count(g, 300)).toEqual({ a: 200, b: 100 });
  });

  it('pushes out one that fails 30% of its calls, however fast', () => {
    const { g, u } = group('a b');
    calls(u.a!, 40, 5);
    calls(u.b!, 40, 2, 12);
    g.scorer!.tick();
    expect(u.b!.score!.preferred).toBe(false);
    expect(u.b!.score!.figures!.errorRate).toBeCloseTo(0.3);
  });

  it('counts throttles from the view', () => {
    const { g, u } = group('a b');
    calls(u.a!, 40, 5);
    calls(u.b!, 40, 5);
    u.b!.view.throttledTotal += 10;
    g.scorer!.tick();
    expect(u.b!.score!.figures!.throttleRate).toBe(0.2);
    expect(u.b!.score!.preferred).toBe(false);
  });

  it('has hysteresis: 1.5 × best to come in, 2 × best to stay', () => {
    const { g, u } = group('a b');
    const period = (b: number) => {
      calls(u.a!, MIN_CALLS, 10);
      calls(u.b!, MIN_CALLS, b);
      g.scorer!.tick();
      return u.b!.score!.preferred;
    };
    expect(period(30)).toBe(false);
    expect(period(17)).toBe(false); // 17 > 1.5 × 10: stays out
    expect(period(14)).toBe(true); // comes in
    expect(period(19)).toBe(true); // 19 ≤ 2 × 10: stays in
    expect(period(21)).toBe(false);
  });

  it('reads the newest periods that hold MIN_CALLS calls: a swap shows in one period for a busy upstream', () => {
    const { g, u } = group('a b');
    calls(u.a!, 100, 5);
    calls(u.b!, 100, 80);
    g.scorer!.tick();
    calls(u.a!, MIN_CALLS, 80);
    calls(u.b!, MIN_CALLS, 5);
    g.scorer!.tick();
    expect(u.a!.score!.figures!.latencyMs).toBeCloseTo(80);
    expect([u.a!.score!.rank, u.b!.score!.rank]).toEqual([2, 1]);
    expect(u.a!.score!.preferred).toBe(false);
  });

  it('keeps the last score of one with no calls, and forgets calls older than the window', () => {
    const { g, u } = group('a b');
    calls(u.a!, 5, 5);
    calls(u.b!, 5, 80);
    g.scorer!.tick();
    for (let i = 0; i < 3; i++) g.scorer!.tick();
    expect(u.b!.score!.score).toBeCloseTo(80);
    // A window of many quiet periods: the old calls still count, until they fall out of it.
    calls(u.b!, 5, 5);
    g.scorer!.tick();
    expect(u.b!.score!.figures!.calls).toBe(10);
    for (let i = 0; i < WINDOW_PERIODS - 1; i++) g.scorer!.tick();
    expect(u.b!.score!.figures!.calls).toBe(5);
    expect(u.b!.score!.score).toBeCloseTo(5);
  });

  it('prefers one never scored (it has shown nothing worse), and ranks fallbacks apart from primaries', () => {
    const { g, u } = group('a b f1 f2');
    calls(u.a!, 40, 5);
    calls(u.f1!, 40, 80);
    calls(u.f2!, 40, 5);
    g.scorer!.tick();
    expect(u.b!.score!.score).toBeNull();
    expect(u.b!.share).toBe(1);
    expect([u.a!.score!.rank, u.b!.score!.rank, u.f2!.score!.rank, u.f1!.score!.rank]).toEqual([1, 2, 1, 2]);
    expect(u.f1!.share).toBe(PROBE);
    expect(count(g, 10)).toEqual({ a: 5, b: 5 });
  });

  it('counts blocks behind the best head', () => {
    const { g, u } = group('a b');
    calls(u.a!, 40, 10);
    calls(u.b!, 40, 10);
    u.a!.view.head = 100;
    u.b!.view.head = 96;
    g.scorer!.tick();
    expect(u.b!.score!.figures!.lag).toBe(4);
    expect(u.b!.score!.score).toBeCloseTo(25);
    expect(u.b!.score!.preferred).toBe(false);
  });
});

describe('no scorer', () => {
  it('selection: weighted, or one upstream per role: shares are the weights and nothing is scored', () => {
    const w = group('a:3 b', false);
    expect(w.g.scorer).toBeNull();
    expect(w.u.a!.score).toBeNull();
    expect(count(w.g, 4)).toEqual({ a: 3, b: 1 });
    const one = group('a f1');
    expect(one.g.scorer).toBeNull();
  });
});
