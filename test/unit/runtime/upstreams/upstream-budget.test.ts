// Per-upstream budgets (runtime/upstreams/upstream-budget.ts): the token bucket's
// bound (any one second: at most rate × 1.1 + 1 requests), polls taken from
// it, when it has room again, and how far apart a budgeted upstream's polls are.
import { describe, expect, it } from 'vitest';
import { Budget, POLL_SHARE } from '../../../../runtime/upstreams/upstream-budget.ts';

/** A sender that sends whenever the bucket has room, checking every `stepMs` from 0 to `ms`; the send times. */
function greedy(b: Budget, ms: number, stepMs: number): number[] {
  const sent: number[] = [];
  for (let t = 0; t <= ms; t += stepMs) {
    while (b.ready(t)) {
      b.spend(false, t);
      sent.push(t);
    }
  }
  return sent;
}

/** The most send times within any window of 1000 ms. */
function busiest(times: readonly number[]): number {
  let most = 0;
  let j = 0;
  for (let i = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= 1000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe('Budget', () => {
  it('a batch takes its calls (issue 43): room counts whole calls, take(n) spends n, and batches sized to the room get at most rate × 1.1 + 1 calls in any second', () => {
    const b = new Budget(100, 0);
    expect(b.room(0)).toBe(11);
    b.take(8, 0);
    expect(b.room(0)).toBe(3);
    expect(b.sent).toBe(8);
    // A sender of batches of 20, each cut to the room there is, every 7 ms for a minute: the calls, not the requests, keep the bound.
    const calls: number[] = [];
    for (let t = 1000; t <= 61_000; t += 7) {
      const n = Math.min(20, b.room(t));
      if (n === 0) continue;
      b.take(n, t);
      for (let i = 0; i < n; i++) calls.push(t);
    }
    expect(busiest(calls)).toBeLessThanOrEqual(100 * 1.1 + 1);
  });

  it.each([0.5, 1, 5, 20, 100, 1000])('at %s/s, a greedy sender gets at most rate × 1.1 + 1 in any second, and near the rate over a minute', (rate) => {
    const b = new Budget(rate, 0);
    const sent = greedy(b, 60_000, 7);
    expect(busiest(sent)).toBeLessThanOrEqual(rate * 1.1 + 1);
    // Near the rate: a sender that looks only every 7 ms loses a little where the bucket holds one.
    expect(sent.length).toBeGreaterThanOrEqual(Math.floor(rate * 60 * 0.95));
    expect(sent.length).toBeLessThanOrEqual(rate * 60 + b.burst);
  });

  it('holds a tenth of a second and one more at most: a quiet spell does not buy a burst', () => {
    const b = new Budget(100, 0);
    expect(b.burst).toBe(11);
    expect(greedy(b, 0, 1)).toHaveLength(11);
    const late = greedy(b, 60_000, 60_000).filter((t) => t === 60_000);
    expect(late).toHaveLength(11);
  });

  it('takes polls from the same bucket, below zero if need be: client calls wait until it is back above one', () => {
    const b = new Budget(10, 0);
    expect(b.burst).toBe(2);
    b.spend(true, 0);
    b.spend(true, 0);
    b.spend(true, 0);
    expect(b.ready(0)).toBe(false);
    // -1 → 1 takes 200 ms at 10/s.
    expect(b.readyAt(0)).toBe(200);
    expect(b.ready(199)).toBe(false);
    expect(b.ready(200)).toBe(true);
    expect([b.sent, b.polled]).toEqual([3, 3]);
  });

  it('spaces polls so that they take at most POLL_SHARE of the budget, by what a poll costs', () => {
    const b = new Budget(20, 0);
    expect(POLL_SHARE).toBe(0.1);
    b.pollBegins(0);
    b.spend(true, 0);
    expect(b.pollGapMs).toBe(500);
    expect(b.pollDue(499)).toBe(false);
    expect(b.pollDue(500)).toBe(true);
    // A poll of two requests (an eth_chainId and eth_blockNumber asked apart): twice as far apart.
    b.pollBegins(500);
    b.spend(true, 500);
    b.spend(true, 500);
    expect(b.pollGapMs).toBe(1000);
    expect(new Budget(5, 0).pollGapMs).toBe(2000);
  });

  it('a poll that is one batch of four calls takes four, and spaces the polls by its calls (issue 43: plans count calls)', () => {
    const b = new Budget(20, 0);
    b.pollBegins(0);
    b.spend(true, 0, 4);
    expect(b.room(0)).toBe(0);
    expect([b.sent, b.polled]).toEqual([4, 1]);
    expect(b.pollGapMs).toBe(2000);
  });
});
