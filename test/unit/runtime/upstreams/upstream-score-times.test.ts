// Selection by score (runtime/upstreams/upstream-score.ts) against the times
// issue 39's contract sets, on a simulated clock: steady reads at a fixed rate
// picked by the chain's real selection (UpstreamGroup.pick), each answer
// counted when it comes back (its latency later, as forwarding counts it),
// and the scorer ticked every SCORE_PERIOD_MS of simulated time (its own
// timer stopped). The contract: with two healthy primaries of equal weight,
// one ~5 ms and one ~80 ms, at least 80% of reads go to the fast one within
// 15 s; when they swap latencies, traffic follows within 20 s; one failing
// ~30% of calls gets under 25% within 20 s. Each is checked in every second
// from the one before its mark on, at several rates and at every phase of the traffic's start
// against the scorer's ticks (in steps of 250 ms).
import { afterEach, describe, expect, it } from 'vitest';
import type { RouteSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';
import { SCORE_PERIOD_MS } from '../../../../runtime/upstreams/upstream-score.ts';

const ROUTE = { path: 'c', limits: { timeoutMs: 1000 } } as RouteSpec;
const groups: UpstreamGroup[] = [];
afterEach(async () => {
  await Promise.all(groups.splice(0).map((g) => g.close()));
});

/** How one upstream answers at a moment: its latency (ms) and whether the call fails. */
type Behaviour = (u: 'a' | 'b', at: number, nth: number) => { readonly ms: number; readonly ok: boolean };

/**
 * Reads at `rps` from simulated time 0 to `untilMs`, the first scorer tick
 * `phaseMs` after the first read; returns a's and b's picks in each second
 * (index s: picks in [s, s + 1) seconds).
 */
function simulate(rps: number, phaseMs: number, untilMs: number, behave: Behaviour): { a: number[]; b: number[] } {
  const a = new Upstream({ name: 'a', url: { parts: ['http://127.0.0.1:1'] }, weight: 1, role: 'primary', archive: false, connections: 1, idleTimeoutMs: 1000, headers: {} }, ROUTE);
  const b = new Upstream({ name: 'b', url: { parts: ['http://127.0.0.1:2'] }, weight: 1, role: 'primary', archive: false, connections: 1, idleTimeoutMs: 1000, headers: {} }, ROUTE);
  a.state = 'up';
  b.state = 'up';
  const g = new UpstreamGroup([a, b], true);
  groups.push(g);
  const scorer = g.scorer!;
  // The test is the clock: the scorer's own timer is stopped, its ticks come from the simulated time.
  scorer.stop();
  const picks = { a: [] as number[], b: [] as number[] };
  const nth = { a: 0, b: 0 };
  /** Answers under way: when each comes back, and what forwarding counts of it then. */
  const pending: { at: number; u: Upstream; ms: number; ok: boolean }[] = [];
  const gap = 1000 / rps;
  let nextRead = 0;
  let nextTick = phaseMs;
  for (;;) {
    const now = Math.min(nextRead, nextTick);
    if (now >= untilMs) break;
    // Answers that came back by now are counted first.
    pending.sort((x, y) => x.at - y.at);
    while (pending.length > 0 && pending[0]!.at <= now) {
      const p = pending.shift()!;
      p.u.tally.observe(p.ms, p.ok);
    }
    if (now === nextTick) {
      scorer.tick();
      nextTick += SCORE_PERIOD_MS;
      continue;
    }
    const u = g.pick(null)!;
    const name = u.name as 'a' | 'b';
    const second = Math.floor(now / 1000);
    for (const n of ['a', 'b'] as const) while (picks[n].length <= second) picks[n].push(0);
    picks[name][second]!++;
    const { ms, ok } = behave(name, now, nth[name]++);
    pending.push({ at: now + ms, u, ms, ok });
    nextRead += gap;
  }
  return picks;
}

/** The least (or most) share of reads `u` got in any second from the one before `fromMs` to the one before `toMs`. */
function shares(p: { a: number[]; b: number[] }, u: 'a' | 'b', fromMs: number, toMs: number): { least: number; most: number } {
  let least = 1;
  let most = 0;
  for (let s = fromMs / 1000 - 1; s < toMs / 1000; s++) {
    const share = p[u][s]! / (p.a[s]! + p.b[s]!);
    least = Math.min(least, share);
    most = Math.max(most, share);
  }
  return { least, most };
}

const RATES = [10, 50, 200, 1000];
const PHASES = Array.from({ length: SCORE_PERIOD_MS / 250 }, (_, i) => i * 250);

describe('selection by score meets the contract\'s times on a simulated clock', () => {
  for (const rps of RATES) {
    it(`${rps} reads/s: a (~5 ms) gets at least 80% of the reads by 15 s; b (~80 ms) by 20 s after they swap latencies`, () => {
      const SWAP = 60_000;
      for (const phase of PHASES) {
        const p = simulate(rps, phase, SWAP + 40_000, (u, at) => ({ ms: (u === 'a') === at < SWAP ? 5 : 80, ok: true }));
        // From the second before 15 s to the swap, and from the second before 20 s after it on.
        expect(shares(p, 'a', 15_000, SWAP).least, `phase ${phase} ms`).toBeGreaterThanOrEqual(0.8);
        expect(shares(p, 'b', SWAP + 20_000, SWAP + 40_000).least, `phase ${phase} ms`).toBeGreaterThanOrEqual(0.8);
      }
    });

    it(`${rps} reads/s: b failing 30% of its calls (as fast as a) gets under 25% of the reads by 20 s`, () => {
      for (const phase of PHASES) {
        // Every tenth call in three fails: 30% exactly, spread evenly.
        const p = simulate(rps, phase, 60_000, (u, _at, n) => ({ ms: 10, ok: u === 'a' || n % 10 >= 3 }));
        // From the second before 20 s on: its probes keep its score current, and it stays out.
        expect(shares(p, 'b', 20_000, 60_000).most, `phase ${phase} ms`).toBeLessThan(0.25);
      }
    });
  }
});
