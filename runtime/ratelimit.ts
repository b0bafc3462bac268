// Counting credits in windows, per key: the rate limit's fixed window
// (N/s, N/min, N/h) and the quota's calendar window (a UTC day or month). A
// batch counts as the sum of its calls' credits (each 1 unless the manifest's
// `credits` says otherwise). This file counts in this process; with REDIS_URL
// the counts are Redis's (ratelimit-redis.ts), shared by every replica.

export interface Rate {
  readonly limit: number;
  readonly windowMs: number;
}

/** One window of one limit: what to count against, and when it ends. */
export interface CountWindow {
  /** Which limit: `rl:<windowMs>` (rate) or `q:day`, `q:month` (quota). */
  readonly slot: string;
  /** The slot and which window of it: a new name starts a new count. */
  readonly name: string;
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

export interface RateLimiter {
  /** Resolves when counting can start (never rejects: a store that is away fails open). */
  ready(): Promise<void>;
  take(keyId: string, w: CountWindow, n: number): Taken | Promise<Taken>;
  close(): Promise<void>;
}

/** The rate limit's window at `now`: fixed, aligned to its length. */
export function rateWindow(rate: Rate, now: number): CountWindow {
  const start = now - (now % rate.windowMs);
  const slot = `rl:${rate.windowMs}`;
  return { slot, name: `${slot}:${start}`, limit: rate.limit, endsAt: start + rate.windowMs };
}

export interface Quota {
  readonly limit: number;
  readonly per: 'day' | 'month';
}

/** The quota's window at `now`: the UTC calendar day or month. */
export function quotaWindow(q: Quota, now: number): CountWindow {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const start = q.per === 'day' ? Date.UTC(y, m, d.getUTCDate()) : Date.UTC(y, m, 1);
  const end = q.per === 'day' ? Date.UTC(y, m, d.getUTCDate() + 1) : Date.UTC(y, m + 1, 1);
  const slot = `q:${q.per}`;
  return { slot, name: `${slot}:${start}`, limit: q.limit, endsAt: end };
}

/** Parses `3000000/day` or `90000000/month`. */
export function parseQuota(s: string): Quota | null {
  const m = /^([1-9][0-9]{0,15})\/(day|month)$/.exec(s);
  if (!m) return null;
  const limit = Number(m[1]);
  return Number.isSafeInteger(limit) ? { limit, per: m[2] as 'day' | 'month' } : null;
}

export class MemoryRateLimiter implements RateLimiter {
  /** Per key and limit kind: the current window's name and its count. */
  private readonly windows = new Map<string, { name: string; used: number }>();

  async ready(): Promise<void> {}

  take(keyId: string, w: CountWindow, n: number): Taken {
    const slot = `${keyId}\u0000${w.slot}`;
    let c = this.windows.get(slot);
    if (c === undefined || c.name !== w.name) {
      c = { name: w.name, used: 0 };
      this.windows.set(slot, c);
    }
    if (c.used + n > w.limit) return { ok: false, used: c.used, limit: w.limit, endsAt: w.endsAt };
    c.used += n;
    return { ok: true, used: c.used, limit: w.limit, endsAt: w.endsAt };
  }

  /** Starts a window's count at `used` (what Redis said last, while it is away). */
  seed(keyId: string, w: CountWindow, used: number): void {
    const slot = `${keyId}\u0000${w.slot}`;
    const c = this.windows.get(slot);
    if (c === undefined || c.name !== w.name || c.used < used) this.windows.set(slot, { name: w.name, used });
  }

  async close(): Promise<void> {}
}
