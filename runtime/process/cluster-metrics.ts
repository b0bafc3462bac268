// The primary's /metrics in multi-process mode: every worker's registry,
// summed as prom-client's AggregatorRegistry sums them, plus what workers no
// longer running counted. A roll replaces every worker; without the second
// part, gateway_requests_total and every other counter would drop at each
// deploy, which Prometheus reads as a counter reset (a false spike in
// rate()). A worker that retires sends its counters after its last answer
// (process/cluster-worker.ts: 'final'); one that dies keeps the counters of its last
// scrape, so no sum goes below what a scrape has shown.
import { AggregatorRegistry } from 'prom-client';
import type { MetricsJson } from './cluster-ipc.ts';

type Metric = MetricsJson[number];
/** A series; a histogram's carry the name of their part (_bucket, _sum, _count). */
type Value = Metric['values'][number] & { metricName?: string };

export class WorkerMetrics {
  /** Each live worker's last answer, by worker id. */
  private readonly seen = new Map<number, MetricsJson>();
  /** Workers gone: an answer of theirs that comes late (sent before they went) is not counted again. */
  private readonly left = new Set<number>();
  /** What workers gone counted: counters and histograms (sums), by metric name, then by series. */
  private readonly retired = new Map<string, { metric: Metric; series: Map<string, Value> }>();

  /** A live worker's answer to a scrape. */
  seenFrom(id: number, metrics: MetricsJson): void {
    if (!this.left.has(id)) this.seen.set(id, metrics);
  }

  /**
   * A worker is gone: what it counted (its final counters, else those of its
   * last answer) stays in the sums. Gauges go with it.
   */
  gone(id: number, final?: MetricsJson): void {
    if (this.left.has(id)) return;
    this.left.add(id);
    const last = final ?? this.seen.get(id);
    this.seen.delete(id);
    if (last === undefined) return;
    for (const m of last) {
      // prom-client's types call it an enum; the JSON holds its name.
      const type = m.type as unknown as string;
      if ((type !== 'counter' && type !== 'histogram') || (m.aggregator ?? 'sum') !== 'sum') continue;
      let kept = this.retired.get(m.name);
      if (kept === undefined) this.retired.set(m.name, (kept = { metric: { ...m, values: [] }, series: new Map() }));
      for (const v of m.values as Value[]) {
        const key = `${v.metricName ?? ''}${JSON.stringify(v.labels)}`;
        const sum = kept.series.get(key);
        if (sum === undefined) kept.series.set(key, { ...v });
        else sum.value += v.value;
      }
    }
  }

  /** The sums, in Prometheus' text format, from the workers' answers as they are now. */
  render(): Promise<string> {
    const retired: MetricsJson = [...this.retired.values()].map(({ metric, series }) => ({ ...metric, values: [...series.values()] }));
    return AggregatorRegistry.aggregate([...this.seen.values(), retired]).metrics();
  }

  readonly contentType = AggregatorRegistry.PROMETHEUS_CONTENT_TYPE;
}
