// Per-upstream budgets (issue 39): an upstream with `rateLimit` (a provider
// plan's N/s or N/min) is sent no more than that, client calls and the
// poller's own requests together. A token bucket: it fills at the rate, holds
// at most BURST of them (a tenth of a second's worth, plus one), and every
// request sent takes one. An upstream whose bucket is empty is not usable
// (upstream.ts `usable`): selection passes it over for another, and with none
// left the client gets "every upstream throttled" (throttle.ts allThrottled,
// Retry-After: when the soonest has room again). In any one second it is sent
// at most rate + BURST ≤ rate × 1.1 + 1 requests.
//
// The poller's requests are taken from the same bucket, a batch by its calls
// (a poll is never skipped for want of room: the bucket goes below zero and
// client calls wait), and a budgeted upstream is polled no more often than
// keeps its polls' calls within POLL_SHARE of the budget. With GATEWAY_WORKERS=N each worker process holds a
// bucket of its own, of a N-th of the rate.
//
// A batch costs its calls (issue 43: the plans a rate stands for count calls,
// not HTTP requests): a request of n calls takes n tokens, and goes only to an
// upstream whose bucket holds them (upstream.ts `choose`). A batch larger than
// the room any of its upstreams has is split (jsonrpc/forward-batch.ts), down to calls
// sent alone, which get "every upstream throttled" once no room is left.
// docs/upstreams.md: "Budgets".
import { workerCount } from '../process/workers.ts';

/** The share of a budget the poller may take. */
export const POLL_SHARE = 0.1;

export class Budget {
  /** Requests a second (this process's share), and the most the bucket holds. */
  readonly perSecond: number;
  readonly burst: number;
  private tokens: number;
  private at: number;
  /** Calls sent, ever (a batch's count each), and the requests of polls (for the status page). */
  sent = 0;
  polled = 0;
  /** When the last poll began (epoch ms), and the calls it has taken. */
  private pollAt = 0;
  private pollCost = 1;

  constructor(perSecond: number, now = Date.now()) {
    this.perSecond = perSecond;
    this.burst = Math.floor(perSecond / 10) + 1;
    this.tokens = this.burst;
    this.at = now;
  }

  private refill(now: number): void {
    if (now > this.at) {
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.perSecond) / 1000);
      this.at = now;
    }
  }

  /** Whether a request may be sent now. */
  ready(now = Date.now()): boolean {
    if (this.tokens >= 1) return true;
    this.refill(now);
    return this.tokens >= 1;
  }

  /** Calls a request may carry now: the whole tokens in the bucket. */
  room(now = Date.now()): number {
    this.refill(now);
    return Math.max(0, Math.floor(this.tokens));
  }

  /** A request of `n` calls is sent (a batch's; a client call's is one). */
  take(n: number, now = Date.now()): void {
    this.refill(now);
    this.tokens -= n;
    this.sent += n;
  }

  /** A request is sent (a client call's, or with `poll` one of a poll's, which may be a batch of `calls`). */
  spend(poll = false, now = Date.now(), calls = 1): void {
    this.take(calls, now);
    if (poll) {
      this.polled++;
      this.pollCost += calls;
    }
  }

  /** When a request may be sent again (epoch ms; now when it may). */
  readyAt(now = Date.now()): number {
    this.refill(now);
    return this.tokens >= 1 ? now : now + Math.ceil(((1 - this.tokens) * 1000) / this.perSecond);
  }

  /** Requests that may be sent now without waiting (the bucket's whole tokens; 0 while it is below one). */
  available(now = Date.now()): number {
    this.refill(now);
    return Math.max(0, Math.floor(this.tokens));
  }

  /** When the bucket will hold `n` requests (epoch ms; now when it does). */
  availableAt(n: number, now = Date.now()): number {
    this.refill(now);
    return this.tokens >= n ? now : now + Math.ceil(((n - this.tokens) * 1000) / this.perSecond);
  }

  /** Whether a poll may begin: the last one began long enough ago that polls take at most POLL_SHARE of the budget. */
  pollDue(now = Date.now()): boolean {
    return now - this.pollAt >= this.pollGapMs;
  }

  /** A poll begins. */
  pollBegins(now = Date.now()): void {
    this.pollAt = now;
    this.pollCost = 0;
  }

  /** The least time between two polls' starts. */
  get pollGapMs(): number {
    return Math.ceil((Math.max(1, this.pollCost) * 1000) / (POLL_SHARE * this.perSecond));
  }
}

/** The budget of an upstream with a rateLimit (requests a second), or null. */
export function budgetOf(rateLimit: number | undefined): Budget | null {
  return rateLimit === undefined ? null : new Budget(rateLimit / workerCount());
}
