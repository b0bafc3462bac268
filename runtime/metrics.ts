// Prometheus metrics, served on the admin listener through prom-client's
// registry and text format. Label sets are bounded: chains and methods come
// from the manifest, refused methods share the label 'refused', statuses are
// HTTP codes.
//
// Per-request counting is plain arithmetic on pre-created slots: prom-client's
// own observe()/inc() hash their labels on every call and measured at ~15 µs a
// request here under load. The request counter and latency histogram are
// therefore kept by this module and handed to prom-client as metrics that
// render on scrape. Rare events (rate limits, upstream state) use prom-client
// directly. Hot path: change with care.
import cluster from 'node:cluster';
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics, type Metric, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Upstream } from './upstream.ts';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Latency histogram of one chain: bucket counts, sum and count. */
class Timing {
  readonly counts = new Float64Array(BUCKETS.length + 1);
  sum = 0;
  count = 0;
  constructor(readonly chain: string, readonly iface: string) {}
  observe(seconds: number): void {
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }
}

/** One label set of gateway_requests_total. */
interface Tally {
  readonly labels: { chain: string; interface: string; method: string; status: string };
  value: number;
}

/** A prom-client metric that renders what a collector returns, on scrape. */
class Rendered {
  readonly aggregator = 'sum' as const;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    private readonly values: () => MetricValue<string>[],
  ) {}
  get(): Promise<MetricObjectWithValues<MetricValue<string>>> {
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() } as unknown as MetricObjectWithValues<MetricValue<string>>);
  }
  reset(): void {}
}

export class Metrics {
  readonly registry = new Registry();
  private readonly tallies = new Map<string, Tally>();
  private readonly timings = new Map<string, Timing>();

  readonly rateLimited = new Counter({
    name: 'gateway_rate_limited_total',
    help: 'Requests refused by a rate limit, by key id.',
    labelNames: ['key_id'] as const,
    registers: [this.registry],
  });
  readonly upstreamUp = new Gauge({
    name: 'gateway_upstream_up',
    help: '1 when the upstream is taking traffic, 0 when taken out.',
    labelNames: ['chain', 'upstream'] as const,
    registers: [this.registry],
  });
  readonly upstreamHead = new Gauge({
    name: 'gateway_upstream_head',
    help: 'Latest block height the upstream reported.',
    labelNames: ['chain', 'upstream'] as const,
    registers: [this.registry],
  });
  readonly upstreamLag = new Gauge({
    name: 'gateway_upstream_lag_blocks',
    help: "Blocks behind the chain's best head.",
    labelNames: ['chain', 'upstream'] as const,
    registers: [this.registry],
  });

  /** `inflight` reads the gateway's own count of requests being served, on scrape. */
  constructor(inflight: () => number) {
    collectDefaultMetrics({ register: this.registry });
    // In multi-process mode the primary sums every worker's registry.
    // (Constructing one in the worker is what makes it answer the primary.)
    if (cluster.isWorker) {
      new AggregatorRegistry();
      AggregatorRegistry.setRegistries([this.registry]);
    }
    new Gauge({
      name: 'gateway_inflight_requests',
      help: 'Requests being served now.',
      registers: [this.registry],
      collect() {
        this.set(inflight());
      },
    });
    this.registry.registerMetric(
      <Metric>(<unknown>new Rendered('gateway_requests_total', 'Requests answered, by chain, interface, method or endpoint, and HTTP status (0: client went away).', 'counter', () =>
        [...this.tallies.values()].map((t) => ({ labels: t.labels, value: t.value })),
      )),
    );
    this.registry.registerMetric(
      <Metric>(<unknown>new Rendered('gateway_request_duration_seconds', 'Time from request to the end of the answer.', 'histogram', () => {
        const out: MetricValue<string>[] = [];
        for (const t of this.timings.values()) {
          let cumulative = 0;
          for (let i = 0; i <= BUCKETS.length; i++) {
            cumulative += t.counts[i]!;
            const le = i === BUCKETS.length ? '+Inf' : String(BUCKETS[i]);
            out.push({ metricName: 'gateway_request_duration_seconds_bucket', labels: { le, chain: t.chain, interface: t.iface }, value: cumulative } as MetricValue<string>);
          }
          out.push({ metricName: 'gateway_request_duration_seconds_sum', labels: { chain: t.chain, interface: t.iface }, value: t.sum } as MetricValue<string>);
          out.push({ metricName: 'gateway_request_duration_seconds_count', labels: { chain: t.chain, interface: t.iface }, value: t.count } as MetricValue<string>);
        }
        return out;
      })),
    );
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Hot path: two Map lookups and a few additions. */
  observe(chain: string, iface: string, method: string, status: number, ms: number): void {
    const key = `${chain} ${method} ${status}`;
    let t = this.tallies.get(key);
    if (t === undefined) {
      t = { labels: { chain, interface: iface, method, status: String(status) }, value: 0 };
      this.tallies.set(key, t);
    }
    t.value++;
    let h = this.timings.get(chain);
    if (h === undefined) {
      h = new Timing(chain, iface);
      this.timings.set(chain, h);
    }
    h.observe(ms / 1000);
  }

  upstream(chain: string, u: Upstream, best: number): void {
    this.upstreamUp.labels(chain, u.name).set(u.state === 'down' ? 0 : 1);
    if (u.head !== null) {
      this.upstreamHead.labels(chain, u.name).set(u.head);
      if (best >= 0) this.upstreamLag.labels(chain, u.name).set(Math.max(0, best - u.head));
    }
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
