// Counting credits in windows (runtime/admission/ratelimit.ts): the rate limit's fixed
// windows aligned to the clock, the quota's UTC calendar days and months, a
// batch counting as its credits, each key and limit apart. Every instant is
// given explicitly: the windows are computed from it, nothing waits.
import { describe, expect, it } from 'vitest';
import { MemoryRateLimiter, quotaWindow, rateWindow } from '../../../../runtime/admission/ratelimit.ts';
import { parseQuota, type Quota, type Rate } from '../../../../runtime/config/rate.ts';

/** A whole hour (so also a whole minute and second). */
const T0 = Date.UTC(2030, 0, 1, 12, 0, 0);
const PER_SECOND: Rate = { limit: 3, windowMs: 1000 };
const PER_MINUTE: Rate = { limit: 1, windowMs: 60_000 };

describe('MemoryRateLimiter: rate limits', () => {
  const rl = () => {
    const l = new MemoryRateLimiter();
    return (at: number, n = 1, rate = PER_SECOND, key = 'k') => l.take(key, rateWindow(rate, at), n);
  };

  it('lets `limit` credits through per window and refuses the rest until the window ends', () => {
    const take = rl();
    expect([take(T0), take(T0), take(T0)].map((v) => [v.ok, v.used])).toEqual([[true, 1], [true, 2], [true, 3]]);
    expect(take(T0)).toEqual({ ok: false, used: 3, limit: 3, endsAt: T0 + 1000 });
    expect(take(T0 + 999).ok).toBe(false);
    expect([take(T0 + 1000), take(T0 + 1000), take(T0 + 1000)].map((v) => v.ok)).toEqual([true, true, true]);
    expect(take(T0 + 1000).ok).toBe(false);
  });

  it('aligns windows to the clock, not to the first request', () => {
    const take = rl();
    expect([take(T0 + 700), take(T0 + 700), take(T0 + 700), take(T0 + 700)].map((v) => v.ok)).toEqual([true, true, true, false]);
    // The window began at T0, so it ends at T0 + 1000, 300 ms after the first request.
    expect(take(T0 + 999).endsAt).toBe(T0 + 1000);
    expect(take(T0 + 1000).ok).toBe(true);
  });

  it('counts a batch as its credits, and refuses one that does not fit whole without using any', () => {
    const take = rl();
    const rate = { limit: 5, windowMs: 1000 };
    expect(take(T0, 3, rate).ok).toBe(true);
    expect(take(T0, 3, rate)).toMatchObject({ ok: false, used: 3 });
    expect(take(T0, 2, rate).ok).toBe(true); // the refused batch took nothing
    expect(take(T0, 1, rate).ok).toBe(false);
  });

  it('counts each key apart, and a key\'s rate limit apart from its quota', () => {
    const l = new MemoryRateLimiter();
    expect(l.take('a', rateWindow(PER_MINUTE, T0), 1).ok).toBe(true);
    expect(l.take('a', rateWindow(PER_MINUTE, T0), 1).ok).toBe(false);
    expect(l.take('b', rateWindow(PER_MINUTE, T0), 1).ok).toBe(true);
    expect(l.take('a', quotaWindow({ limit: 1, per: 'day' }, T0), 1).ok).toBe(true);
  });

  it('starts afresh after idle windows', () => {
    const take = rl();
    expect([take(T0), take(T0), take(T0), take(T0)].map((v) => v.ok)).toEqual([true, true, true, false]);
    const later = T0 + 5 * 3_600_000 + 250;
    expect([take(later), take(later), take(later), take(later)].map((v) => v.ok)).toEqual([true, true, true, false]);
  });
});

describe('quotas: UTC calendar windows', () => {
  const DAY: Quota = { limit: 10, per: 'day' };
  const MONTH: Quota = { limit: 10, per: 'month' };

  it('a day quota resets at UTC midnight, to the millisecond', () => {
    const l = new MemoryRateLimiter();
    const lastMs = Date.UTC(2030, 5, 30, 23, 59, 59, 999);
    expect(l.take('k', quotaWindow(DAY, Date.UTC(2030, 5, 30, 0, 0, 0)), 10).ok).toBe(true);
    expect(l.take('k', quotaWindow(DAY, lastMs), 1)).toEqual({ ok: false, used: 10, limit: 10, endsAt: Date.UTC(2030, 6, 1) });
    expect(l.take('k', quotaWindow(DAY, lastMs + 1), 1)).toEqual({ ok: true, used: 1, limit: 10, endsAt: Date.UTC(2030, 6, 2) });
  });

  it('a month quota resets on the 1st, across a year end and a leap February', () => {
    const l = new MemoryRateLimiter();
    expect(l.take('k', quotaWindow(MONTH, Date.UTC(2030, 11, 1)), 10).ok).toBe(true);
    expect(l.take('k', quotaWindow(MONTH, Date.UTC(2030, 11, 31, 23, 59, 59, 999)), 1)).toMatchObject({ ok: false, endsAt: Date.UTC(2031, 0, 1) });
    expect(l.take('k', quotaWindow(MONTH, Date.UTC(2031, 0, 1)), 1).ok).toBe(true);
    expect(quotaWindow(MONTH, Date.UTC(2032, 1, 29, 12)).endsAt).toBe(Date.UTC(2032, 2, 1));
    expect(quotaWindow(DAY, Date.UTC(2032, 1, 28, 12)).endsAt).toBe(Date.UTC(2032, 1, 29));
  });

  it('seed starts a window from a count given elsewhere (Redis\'s last word during an outage), never lower', () => {
    const l = new MemoryRateLimiter();
    const w = quotaWindow(DAY, T0);
    l.seed('k', w, 8);
    expect(l.take('k', w, 2).ok).toBe(true);
    expect(l.take('k', w, 1).ok).toBe(false);
    l.seed('k', w, 3); // a lower, older count does not give credits back
    expect(l.take('k', w, 1).ok).toBe(false);
  });

  it('parses N/day and N/month only', () => {
    expect(parseQuota('3000000/day')).toEqual({ limit: 3_000_000, per: 'day' });
    expect(parseQuota('5/month')).toEqual({ limit: 5, per: 'month' });
    for (const bad of ['0/day', '10/week', '10/h', 'day', '-1/day', '1.5/day']) expect(parseQuota(bad), bad).toBeNull();
  });
});

describe('MemoryRateLimiter.admit: the rate limit, then the quota, in one step', () => {
  it('a refused rate limit leaves the quota untouched; a refused quota gives the rate limit back, so a refused request spends nothing', () => {
    const l = new MemoryRateLimiter();
    const rate = rateWindow({ limit: 2, windowMs: 1000 }, T0);
    const quota = quotaWindow({ limit: 3, per: 'day' }, T0);
    expect(l.admit('k', rate, quota, 1)).toMatchObject({ rate: { ok: true, used: 1 }, quota: { ok: true, used: 1 } });
    expect(l.admit('k', rate, quota, 1)).toMatchObject({ rate: { ok: true, used: 2 }, quota: { ok: true, used: 2 } });
    expect(l.admit('k', rate, quota, 1)).toEqual({ rate: { ok: false, used: 2, limit: 2, endsAt: T0 + 1000 }, quota: null });
    const next = rateWindow({ limit: 2, windowMs: 1000 }, T0 + 1000);
    expect(l.admit('k', next, quota, 2)).toMatchObject({ rate: { ok: true, used: 0 }, quota: { ok: false, used: 2 } });
    // The rate window's credits came back: both fit.
    expect(l.admit('k', next, quota, 1)).toMatchObject({ rate: { ok: true, used: 1 }, quota: { ok: true, used: 3 } });
    expect(l.admit('k', null, quota, 1)).toMatchObject({ rate: null, quota: { ok: false, used: 3 } });
  });
});
