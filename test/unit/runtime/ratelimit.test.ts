// The in-process rate limiter (runtime/ratelimit.ts): fixed windows aligned to
// the clock, a batch counting as its items, Retry-After to the window's end.
// Fake timers drive Date.now(): every instant below is exact.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryRateLimiter } from '../../../runtime/ratelimit.ts';

/** A whole hour (so also a whole minute and second). */
const T0 = Date.UTC(2030, 0, 1, 12, 0, 0);
const PER_SECOND = { limit: 3, windowMs: 1000 };
const PER_MINUTE = { limit: 1, windowMs: 60_000 };

describe('MemoryRateLimiter', () => {
  let rl: MemoryRateLimiter;
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    rl = new MemoryRateLimiter();
  });
  afterEach(() => void vi.useRealTimers());

  const take = (n = 1, rate = PER_SECOND, key = 'k') => rl.take(key, rate, n);

  it('lets `limit` requests through per window and refuses the rest until the window ends', () => {
    expect([take(), take(), take()]).toEqual(Array(3).fill({ ok: true, retryAfter: 0 }));
    expect(take()).toEqual({ ok: false, retryAfter: 1 });
    vi.setSystemTime(T0 + 999);
    expect(take()).toEqual({ ok: false, retryAfter: 1 });
    vi.setSystemTime(T0 + 1000);
    expect([take(), take(), take()].map((v) => v.ok)).toEqual([true, true, true]);
    expect(take().ok).toBe(false);
  });

  it('aligns windows to the clock, not to the first request', () => {
    vi.setSystemTime(T0 + 700);
    expect([take(), take(), take(), take()].map((v) => v.ok)).toEqual([true, true, true, false]);
    // The window began at T0, so it ends at T0 + 1000, 300 ms after the first request.
    vi.setSystemTime(T0 + 1000);
    expect(take().ok).toBe(true);
  });

  it('answers Retry-After in whole seconds, rounded up, to the window’s end', () => {
    vi.setSystemTime(T0 + 15_500);
    expect(take(1, PER_MINUTE).ok).toBe(true);
    expect(take(1, PER_MINUTE)).toEqual({ ok: false, retryAfter: 45 }); // 44.5 s left
    vi.setSystemTime(T0 + 59_001);
    expect(take(1, PER_MINUTE)).toEqual({ ok: false, retryAfter: 1 }); // 0.999 s left
    vi.setSystemTime(T0 + 60_000);
    expect(take(1, PER_MINUTE).ok).toBe(true);
  });

  it('counts a batch as its items, and refuses one that does not fit whole without using any', () => {
    const rate = { limit: 5, windowMs: 1000 };
    expect(take(3, rate).ok).toBe(true);
    expect(take(3, rate)).toEqual({ ok: false, retryAfter: 1 });
    expect(take(2, rate).ok).toBe(true); // the refused batch took nothing
    expect(take(1, rate).ok).toBe(false);
  });

  it('counts each key apart', () => {
    expect(take(1, PER_MINUTE, 'a').ok).toBe(true);
    expect(take(1, PER_MINUTE, 'a').ok).toBe(false);
    expect(take(1, PER_MINUTE, 'b').ok).toBe(true);
  });

  it('starts afresh after idle windows', () => {
    expect([take(), take(), take(), take()].map((v) => v.ok)).toEqual([true, true, true, false]);
    vi.setSystemTime(T0 + 5 * 3_600_000 + 250);
    expect([take(), take(), take(), take()].map((v) => v.ok)).toEqual([true, true, true, false]);
  });
});
