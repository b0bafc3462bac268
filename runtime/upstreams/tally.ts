// Latency buckets, an upstream's states, and the per-upstream counters
// forwarding keeps: plain arithmetic on pre-made arrays (see metrics.ts for why
// not prom-client's own). A leaf of its own so that upstream.ts and metrics.ts
// need not import each other.

/** wrong_chain: a poll found it serving another chain (it takes no traffic until a poll finds the right one). */
export type UpstreamState = 'unknown' | 'up' | 'down' | 'wrong_chain';
export const UPSTREAM_STATES: readonly UpstreamState[] = ['unknown', 'up', 'down', 'wrong_chain'];

/** Upper bounds (seconds) of the latency histograms' buckets; one more bucket, +Inf, follows. */
export const BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * The attempts one upstream got, by outcome, and their latency (send to the
 * answer's end): gateway_upstream_requests_total and
 * gateway_upstream_request_duration_seconds. Counted where forwarding already
 * marks an attempt good or failed (an answer that carries a JSON-RPC error the
 * call did not cause is a failed one: throttle.ts answerFailed); an attempt the
 * client abandoned is not counted.
 */
export class UpstreamTally {
  readonly buckets = new Float64Array(BUCKETS.length + 1);
  sum = 0;
  ok = 0;
  failed = 0;
  observe(ms: number, ok: boolean): void {
    if (ok) this.ok++;
    else this.failed++;
    const seconds = ms / 1000;
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
    this.buckets[i]!++;
    this.sum += seconds;
  }
}
