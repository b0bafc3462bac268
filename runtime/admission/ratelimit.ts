// Counting credits in windows, per key: the rate limit's fixed window
// (N/s, N/min, N/h) and the quota's calendar window (a UTC day or month). A
// batch counts as the sum of its calls' credits (each 1 unless the manifest's
// `credits` says otherwise). This file counts in this process; with REDIS_URL
// the counts are Redis's (ratelimit-redis.ts), shared by every replica.

import type { Quota, Rate } from '../config/rate.ts';

/** One window of one limit: what to count against, and when it ends. */
export interface CountWindow {
  /** Which limit: `rl:<windowMs>` (rate) or `q:day`, `q:month` (quota). */
  readonly slot: string;
  /** When the window began: a new start begins a new count. */
  readonly start: number;
  readonly limit: number;
  /** When the window ends (ms since the epoch). */
  readonly endsAt: number;
}

export interface Taken {
  readonly ok: boolean;
  /** Credits counted in the window after this take (before it, when refused). */
  readonly used: number;
  readonly limit: number;
  readonly endsAt: number;
}

/**
 * A request's take of its rate limit and quota, in that order: a refused rate
 * limit leaves the quota untouched (`quota` null), and a refused quota gives
 * the rate limit's credits back, so a refused request spends nothing.
 */
export interface Admitted {
  readonly rate: Taken | null;
  readonly quota: Taken | null;
}

export interface RateLimiter {
  /** Resolves when counting can start (never rejects: a store that is away fails open). */
  ready(): Promise<void>;
  /** Takes `n` credits of the rate window and the quota window (either may be null), in one step. */
  admit(keyId: string, rate: CountWindow | null, quota: CountWindow | null, n: number): Admitted | Promise<Admitted>;
  close(): Promise<void>;
}

/** Slot names by window length, made once (no string built per request). */
const RATE_SLOTS = new Map<number, string>();

/** The rate limit's window at `now`: fixed, aligned to its length. */
export function rateWindow(rate: Rate, now: number): CountWindow {
  const start = now - (now % rate.windowMs);
  let slot = RATE_SLOTS.get(rate.windowMs);
  if (slot === undefined) RATE_SLOTS.set(rate.windowMs, (slot = `rl:${rate.windowMs}`));
  return { slot, start, limit: rate.limit, endsAt: start + rate.windowMs };
}

/** The current calendar day and month, computed when `now` leaves them (not per request). */
const CALENDAR = { day: { start: 0, end: 0 }, month: { start: 0, end: 0 } };

/** The quota's window at `now`: the UTC calendar day or month. */
export function quotaWindow(q: Quota, now: number): CountWindow {
  const c = CALENDAR[q.per];
  if (now < c.start || now >= c.end) {
    const d = new Date(now);
    const y = d.getUTCFullYear();
    const m = d.getUTCMonth();
    c.start = q.per === 'day' ? Date.UTC(y, m, d.getUTCDate()) : Date.UTC(y, m, 1);
    c.end = q.per === 'day' ? Date.UTC(y, m, d.getUTCDate() + 1) : Date.UTC(y, m + 1, 1);
  }
  return { slot: q.per === 'day' ? 'q:day' : 'q:month', start: c.start, limit: q.limit, endsAt: c.end };
}

export class MemoryRateLimiter implements RateLimiter {
  /** Per key, per limit (slot): the current window's start and its count. */
  private readonly windows = new Map<string, Map<string, { start: number; used: number }>>();

  async ready(): Promise<void> {}

  private counter(keyId: string, w: CountWindow): { start: number; used: number } {
    let slots = this.windows.get(keyId);
    if (slots === undefined) this.windows.set(keyId, (slots = new Map()));
    let c = slots.get(w.slot);
    if (c === undefined) slots.set(w.slot, (c = { start: w.start, used: 0 }));
    else if (c.start !== w.start) {
      c.start = w.start;
      c.used = 0;
    }
    return c;
  }

  take(keyId: string, w: CountWindow, n: number): Taken {
    const c = this.counter(keyId, w);
    if (c.used + n > w.limit) return { ok: false, used: c.used, limit: w.limit, endsAt: w.endsAt };
    c.used += n;
    return { ok: true, used: c.used, limit: w.limit, endsAt: w.endsAt };
  }

  admit(keyId: string, rate: CountWindow | null, quota: CountWindow | null, n: number): Admitted {
    const r = rate === null ? null : this.take(keyId, rate, n);
    if (r !== null && !r.ok) return { rate: r, quota: null };
    const q = quota === null ? null : this.take(keyId, quota, n);
    if (r === null || q === null || q.ok) return { rate: r, quota: q };
    // The quota refused it: the rate limit's credits go back.
    const c = this.counter(keyId, rate!);
    c.used -= n;
    return { rate: { ...r, used: c.used }, quota: q };
  }

  /** Starts a window's count at `used` (what Redis said last, while it is away), never lower. */
  seed(keyId: string, w: CountWindow, used: number): void {
    const c = this.counter(keyId, w);
    if (c.used < used) c.used = used;
  }

  async close(): Promise<void> {}
}
