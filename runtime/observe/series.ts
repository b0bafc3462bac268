// What the metrics' series are labelled and bucketed by, which the counters
// that feed them use too (upstreams/tally.ts, metrics.ts's per-route tallies,
// the status page): a leaf of observe/, so that upstreams/ imports observe/
// and observe/ imports nothing of upstreams/.

/** wrong_chain: a poll found it serving another chain (it takes no traffic until a poll finds the right one). */
export type UpstreamState = 'unknown' | 'up' | 'down' | 'wrong_chain';
export const UPSTREAM_STATES: readonly UpstreamState[] = ['unknown', 'up', 'down', 'wrong_chain'];

/** Upper bounds (seconds) of the latency histograms' buckets; one more bucket, +Inf, follows. */
export const BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The bucket a latency of `seconds` falls in (BUCKETS.length: +Inf). */
export function bucketOf(seconds: number): number {
  let i = 0;
  while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
  return i;
}
