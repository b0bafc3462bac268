// A pool's counters (/metrics, the status page), the hedging budget and the
// latency window a hedge at p95 reads.

export class PoolStats {
  /** Calls asked again of another upstream: a null or empty answer about data not final, or a state error. */
  readonly retries = { empty: 0, state: 0 };
  /** Hedges sent, won (the hedge answered first) and not sent because the budget was spent. */
  readonly hedges = { sent: 0, won: 0, capped: 0 };
  /** eth_sendRawTransaction sent to every usable upstream. */
  broadcasts = 0;
  /** Quorum calls, by outcome. */
  readonly quorum = { agree: 0, disagree: 0, short: 0 };
  /** eth_blockNumber answered from the served tip, without asking a node. */
  tipAnswers = 0;
  /** Calls that waited for an upstream to reach their block, at or below the served tip (pool.ts, wait). */
  tipWaits = 0;
  constructor(
    readonly chain: string,
    /** The chain's served tip now (-1: none yet). */
    readonly tip: () => number,
  ) {}
}

/** Hedges may be at most this share of a chain's calls over the last minute. */
const HEDGE_SHARE = 0.1;
const BUCKET_MS = 10_000;
const BUCKETS = 6;

/** Calls and hedges over a sliding minute, in six ten-second buckets. */
export class HedgeBudget {
  private readonly calls = new Float64Array(BUCKETS);
  private readonly hedges = new Float64Array(BUCKETS);
  private bucket = -1;

  private roll(now: number): number {
    const b = Math.floor(now / BUCKET_MS);
    if (b !== this.bucket) {
      const gap = this.bucket < 0 ? BUCKETS : Math.min(BUCKETS, b - this.bucket);
      for (let i = 1; i <= gap; i++) {
        const k = (this.bucket + i) % BUCKETS;
        this.calls[k] = 0;
        this.hedges[k] = 0;
      }
      this.bucket = b;
    }
    return b % BUCKETS;
  }

  call(now = Date.now()): void {
    this.calls[this.roll(now)]!++;
  }

  /** Takes one hedge if that keeps hedges within 10% of the minute's calls. */
  take(now = Date.now()): boolean {
    const k = this.roll(now);
    let calls = 0;
    let hedges = 0;
    for (let i = 0; i < BUCKETS; i++) {
      calls += this.calls[i]!;
      hedges += this.hedges[i]!;
    }
    if (hedges + 1 > HEDGE_SHARE * calls) return false;
    this.hedges[k]!++;
    return true;
  }
}

const WINDOW = 512;

/** The last calls' times, for a hedge at p95 (no p95 before 64 calls are known). */
export class LatencyWindow {
  private readonly times = new Float64Array(WINDOW);
  private seen = 0;
  private cached = -1;

  record(ms: number): void {
    this.times[this.seen++ % WINDOW] = ms;
    if (this.seen % 64 === 0) this.cached = -1;
  }

  /** The p95 in ms, at least 1; -1 while fewer than 64 calls are known. */
  p95(): number {
    if (this.seen < 64) return -1;
    if (this.cached < 0) {
      const n = Math.min(this.seen, WINDOW);
      const sorted = Array.from(this.times.subarray(0, n)).sort((a, b) => a - b);
      this.cached = Math.max(1, Math.round(sorted[Math.floor(n * 0.95)]!));
    }
    return this.cached;
  }
}
