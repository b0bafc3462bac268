// The per-upstream counters forwarding keeps: plain arithmetic on pre-made
// arrays (see metrics.ts for why not prom-client's own), in the buckets the
// metrics' series have (observe/series.ts). metrics.ts reads them through a
// narrow shape of its own.
import { BUCKETS, bucketOf } from '../observe/series.ts';

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
    this.buckets[bucketOf(seconds)]!++;
    this.sum += seconds;
  }
}
