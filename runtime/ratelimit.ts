// Per-key rate limits: a fixed window per key id, counted in this process.
// A batch counts as its number of items.
export interface Rate {
  readonly limit: number;
  readonly windowMs: number;
}

export interface RateVerdict {
  readonly ok: boolean;
  /** Seconds until the window resets, for Retry-After. */
  readonly retryAfter: number;
}

const OK: RateVerdict = { ok: true, retryAfter: 0 };

export interface RateLimiter {
  /** Resolves when counting can start (never rejects: a store that is away fails open). */
  ready(): Promise<void>;
  take(keyId: string, rate: Rate, n: number): RateVerdict | Promise<RateVerdict>;
  close(): Promise<void>;
}

export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, { start: number; used: number }>();

  async ready(): Promise<void> {}

  take(keyId: string, rate: Rate, n: number): RateVerdict {
    const now = Date.now();
    let w = this.windows.get(keyId);
    if (w === undefined || now - w.start >= rate.windowMs) {
      w = { start: now - (now % rate.windowMs), used: 0 };
      this.windows.set(keyId, w);
    }
    if (w.used + n > rate.limit) {
      return { ok: false, retryAfter: Math.max(1, Math.ceil((w.start + rate.windowMs - now) / 1000)) };
    }
    w.used += n;
    return OK;
  }

  async close(): Promise<void> {}
}
