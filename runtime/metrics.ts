// Prometheus metrics (prom-client), served on the admin listener. Label sets
// are bounded: chains and methods come from the manifest, refused methods
// share the label 'refused', statuses are HTTP codes.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Upstream } from './upstream.ts';

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'gateway_requests_total',
    help: 'Requests answered, by chain, interface, method or endpoint, and HTTP status (0: client went away).',
    labelNames: ['chain', 'interface', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly duration = new Histogram({
    name: 'gateway_request_duration_seconds',
    help: 'Time from request to the end of the answer.',
    labelNames: ['chain', 'interface'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly inflight = new Gauge({ name: 'gateway_inflight_requests', help: 'Requests being served now.', registers: [this.registry] });
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
  /** Children per label set, made once: prom-client hashes labels on every call otherwise. */
  private readonly children = new Map<string, { count: { inc(): void }; time: { observe(v: number): void } }>();

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  observe(chain: string, iface: string, method: string, status: number, ms: number): void {
    const k = `${chain}\u0000${method}\u0000${status}`;
    let c = this.children.get(k);
    if (c === undefined) {
      c = {
        count: this.requests.labels(chain, iface, method, String(status)),
        time: this.duration.labels(chain, iface),
      };
      this.children.set(k, c);
    }
    c.count.inc();
    c.time.observe(ms / 1000);
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
