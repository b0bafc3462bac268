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
import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { BUCKETS, bucketOf, UPSTREAM_STATES, type UpstreamState } from './series.ts';
import { LINGER_OUTCOMES, lingerStats } from '../process/linger.ts';
import { REDIS_STATES, type RedisState } from '../redis.ts';

// What the metrics read of the layers they count, as narrow shapes declared
// here: the layers' own objects (Upstream, ChainView, CacheStats, PoolStats,
// WsStats) fit them, and this file imports none of those layers.

/** An upstream: its attempts, its state and its head (upstreams/upstream.ts's Upstream). */
export interface UpstreamSeries {
  readonly chain: string;
  readonly name: string;
  readonly usable: boolean;
  readonly state: UpstreamState;
  readonly head: number | null;
  /** Its attempts by outcome, and their latency (upstreams/tally.ts's UpstreamTally). */
  readonly tally: { readonly ok: number; readonly failed: number; readonly buckets: Float64Array; readonly sum: number };
  readonly view: { readonly throttledTotal: number };
}

/** A chain's head and finality as its view has them (upstreams/chain-view.ts's ChainView). */
export interface ChainHeads {
  readonly number: number;
  readonly finalized: number;
  readonly headChanges: number;
}

/** A chain's cache counters (cache/store.ts's CacheStats). */
export interface CacheCounts {
  readonly chain: string;
  readonly hits: number;
  readonly misses: number;
  readonly coalesced: number;
  readonly evictions: number;
  readonly bytes: number;
  readonly sharedHits: number;
  readonly batched: number;
  readonly batches: number;
  readonly resets: { readonly identity: number; readonly finalized_backwards: number };
}

/** A pool's counters and its served tip (pool/stats.ts's PoolStats). */
export interface PoolCounts {
  readonly chain: string;
  readonly retries: Readonly<Record<string, number>>;
  readonly hedges: Readonly<Record<string, number>>;
  readonly quorum: Readonly<Record<string, number>>;
  readonly broadcasts: number;
  readonly tipAnswers: number;
  readonly tipWaits: number;
  tip(): number;
}

/** A Redis-backed store (keys, limits, usage, cache) and its state (redis.ts's RedisLink). */
export interface RedisPart {
  readonly part: string;
  readonly link: { readonly state: RedisState };
}

/** A chain's WebSocket counters (ws/stats.ts's WsStats). */
export interface SocketCounts {
  readonly chain: string;
  readonly connections: number;
  readonly subscriptions: Readonly<Record<string, number>>;
  readonly notifications: Readonly<Record<string, number>>;
  readonly closed: Readonly<Record<string, number>>;
}

/** One method (or endpoint, or 'batch', 'refused') of one chain: answers counted by HTTP status. */
export class LabelTally {
  /** The access log's `"chain":...,"method":...,"status":` fields, made once. */
  readonly logFields: string;
  readonly statuses: number[] = [];
  readonly counts: number[] = [];
  constructor(
    readonly label: string,
    chainJson: string,
  ) {
    this.logFields = `,"chain":${chainJson},"method":${JSON.stringify(label)},"status":`;
  }
  count(status: number): void {
    const { statuses } = this;
    for (let i = 0; i < statuses.length; i++) {
      if (statuses[i] === status) {
        this.counts[i]!++;
        return;
      }
    }
    statuses.push(status);
    this.counts.push(1);
  }
}

/**
 * The counters of one chain, made once at start: a request finds them
 * through its route, so counting one takes a Map lookup by label and a few
 * additions, with no label strings built.
 */
export class RouteMetrics {
  /** The chain as JSON text ('null' for requests that match no chain), for the access log. */
  readonly json: string;
  readonly labels = new Map<string, LabelTally>();
  /** Latency histogram: bucket counts, sum and count. */
  readonly buckets = new Float64Array(BUCKETS.length + 1);
  sum = 0;
  total = 0;
  constructor(
    readonly chain: string,
    readonly iface: string,
    chainJson: string,
  ) {
    this.json = chainJson;
  }

  /** Counts one answer; returns the label's tally (it holds the access log's fields). */
  observe(label: string, status: number, ms: number): LabelTally {
    let t = this.labels.get(label);
    if (t === undefined) {
      t = new LabelTally(label, this.json);
      this.labels.set(label, t);
    }
    t.count(status);
    const seconds = ms / 1000;
    this.buckets[bucketOf(seconds)]!++;
    this.sum += seconds;
    this.total++;
    return t;
  }
}

/** One histogram's series as Prometheus has them: cumulative buckets (BUCKETS, then +Inf), sum and count. */
function histogram(out: MetricValue<string>[], name: string, labels: Readonly<Record<string, string>>, buckets: Float64Array, sum: number, count: number): void {
  let cumulative = 0;
  for (let i = 0; i <= BUCKETS.length; i++) {
    cumulative += buckets[i]!;
    const le = i === BUCKETS.length ? '+Inf' : String(BUCKETS[i]);
    out.push({ metricName: `${name}_bucket`, labels: { le, ...labels }, value: cumulative } as MetricValue<string>);
  }
  out.push({ metricName: `${name}_sum`, labels, value: sum } as MetricValue<string>);
  out.push({ metricName: `${name}_count`, labels, value: count } as MetricValue<string>);
}

/** A prom-client metric that renders what a collector returns, on scrape. */
class Rendered {
  readonly aggregator = 'sum' as const;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram' | 'gauge',
    private readonly values: () => MetricValue<string>[],
  ) {}
  get(): Promise<MetricObjectWithValues<MetricValue<string>>> {
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() } as unknown as MetricObjectWithValues<MetricValue<string>>);
  }
  reset(): void {}
}

export class Metrics {
  readonly registry = new Registry();
  private readonly routes: RouteMetrics[] = [];

  readonly rateLimited = new Counter({
    name: 'gateway_rate_limited_total',
    help: 'Requests refused by a rate limit, by key id.',
    labelNames: ['key_id'] as const,
    registers: [this.registry],
  });
  readonly quotaExceeded = new Counter({
    name: 'gateway_quota_exceeded_total',
    help: 'Requests refused because the key\'s quota is spent, by key id.',
    labelNames: ['key_id'] as const,
    registers: [this.registry],
  });
  readonly upstreamState = new Gauge({
    name: 'gateway_upstream_state',
    help: 'The upstream\'s state: 1 on the series of its current state (unknown, up, down, wrong_chain), 0 on the others.',
    labelNames: ['chain', 'upstream', 'state'] as const,
    // With workers, each checks on its own: a state is on if any worker sees it (a sum would read 2, 3...).
    aggregator: 'max',
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
    // In multi-process mode the primary sums every worker's registry (process/cluster-worker.ts sends it).
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: 'gateway_inflight_requests',
      help: 'Requests being served now.',
      registers: [this.registry],
      collect() {
        this.set(inflight());
      },
    });
    this.rendered('gateway_requests_total', 'Requests answered, by chain, interface, method or endpoint, and HTTP status (0: client went away).', 'counter', () =>
      this.routes.flatMap((r) =>
        [...r.labels.values()].flatMap((t) =>
          t.statuses.map((status, i) => ({ labels: { chain: r.chain, interface: r.iface, method: t.label, status: String(status) }, value: t.counts[i]! })),
        ),
      ));
    this.rendered('gateway_lingering_closes_total', 'Connections closed after an early answer (a body over maxBodyBytes) once the client stopped sending, by how: complete, closed (by the client), idle, time, bytes (a bound hit), busy (too many lingering: closed at once).', 'counter', () =>
      LINGER_OUTCOMES.map((outcome) => ({ labels: { outcome }, value: lingerStats.outcomes[outcome] })));
    this.rendered('gateway_lingering_discarded_bytes_total', 'Bytes of over-limit request bodies read and dropped while lingering.', 'counter', () => [{ labels: {}, value: lingerStats.discardedBytes }]);
    this.rendered('gateway_request_duration_seconds', 'Time from request to the end of the answer.', 'histogram', () => {
      const out: MetricValue<string>[] = [];
      for (const t of this.routes) if (t.total !== 0) histogram(out, 'gateway_request_duration_seconds', { chain: t.chain, interface: t.iface }, t.buckets, t.sum, t.total);
      return out;
    });
  }

  private readonly caches: CacheCounts[] = [];
  /** Each cached chain's view (the same index as `caches`): its head and finality are read there, not copied. */
  private readonly cachedViews: ChainHeads[] = [];
  private readonly upstreamList: UpstreamSeries[] = [];

  /** Counts a chain's upstreams' attempts under the gateway_upstream_request* metrics (registered with the first chain). */
  upstreams(list: readonly UpstreamSeries[]): void {
    if (this.upstreamList.length === 0) {
      this.rendered('gateway_upstream_requests_total', 'Attempts sent to an upstream, by chain, upstream and outcome (ok, failed: no answer, timeout, 5xx or no answer of the interface).', 'counter', () =>
        this.upstreamList.flatMap((u) => [
          { labels: { chain: u.chain, upstream: u.name, outcome: 'ok' }, value: u.tally.ok },
          { labels: { chain: u.chain, upstream: u.name, outcome: 'failed' }, value: u.tally.failed },
        ]));
      this.rendered('gateway_upstream_request_duration_seconds', 'Time from sending an attempt to an upstream to the end of its answer.', 'histogram', () => {
        const out: MetricValue<string>[] = [];
        for (const { chain, name, tally: t } of this.upstreamList) histogram(out, 'gateway_upstream_request_duration_seconds', { chain, upstream: name }, t.buckets, t.sum, t.ok + t.failed);
        return out;
      });
      this.rendered('gateway_upstream_throttled_total', 'Answers in which an upstream throttled a call (HTTP 429, a JSON-RPC -32005 or 429, a provider\'s "rate limit" text), by chain and upstream: each took it out of client traffic for its Retry-After or a cooldown (docs/upstreams.md: "Throttling").', 'counter', () =>
        this.upstreamList.map((u) => ({ labels: { chain: u.chain, upstream: u.name }, value: u.view.throttledTotal })));
    }
    this.upstreamList.push(...list);
  }

  /** Counts a chain's cache under the gateway_cache_* metrics (registered with the first chain that has one). */
  cache(stats: CacheCounts, view: ChainHeads): void {
    if (this.caches.length === 0) {
      const ofView = (name: string, help: string, type: 'counter' | 'gauge', field: keyof ChainHeads) =>
        this.rendered(name, help, type, () => this.caches.map((c, i) => ({ labels: { chain: c.chain }, value: this.cachedViews[i]![field] } as MetricValue<string>)));
      const per = (name: string, help: string, type: 'counter' | 'gauge', field: Exclude<keyof CacheCounts, 'chain' | 'resets'>) =>
        this.rendered(name, help, type, () => this.caches.map((c) => ({ labels: { chain: c.chain }, value: c[field] } as MetricValue<string>)));
      per('gateway_cache_hits_total', 'Calls answered from the cache, by chain.', 'counter', 'hits');
      per('gateway_cache_misses_total', 'Cacheable calls sent upstream (one per flight), by chain.', 'counter', 'misses');
      per('gateway_cache_coalesced_total', 'Calls that joined an identical call in flight instead of going upstream, by chain.', 'counter', 'coalesced');
      per('gateway_cache_evictions_total', 'Entries evicted to stay within cache.maxBytes, by chain.', 'counter', 'evictions');
      per('gateway_cache_bytes', 'Bytes the chain\'s cached answers take.', 'gauge', 'bytes');
      ofView('gateway_cache_head_block', 'The chain\'s head as the cache knows it (the highest block a usable upstream reports; -1 unknown).', 'gauge', 'number');
      ofView('gateway_cache_finalized_block', 'The block at or below which answers are kept forever (-1 while unknown: nothing is final).', 'gauge', 'finalized');
      per('gateway_cache_shared_hits_total', 'Calls answered from the shared tier (Redis): another replica fetched the answer. Counted in hits too.', 'counter', 'sharedHits');
      per('gateway_cache_batched_total', 'Misses sent to the node inside a batch with others (cache.batch), by chain. Counted in misses too.', 'counter', 'batched');
      per('gateway_cache_batches_total', 'Batches of misses sent to the node (cache.batch), by chain.', 'counter', 'batches');
      ofView('gateway_cache_head_changes_total', 'Times the head\'s number or hash changed (new blocks and reorgs), each dropping the entries bound to the head.', 'counter', 'headChanges');
      this.rendered(
        'gateway_cache_resets_total',
        "Times a chain's forever entries and its head read's floor (EVM: eth_blockNumber) were dropped, by chain and reason: identity (an upstream's chain id, network, coin or genesis hash changed) or finalized_backwards (the chain went back below its finalized block).",
        'counter',
        () => this.caches.flatMap((c) => (['identity', 'finalized_backwards'] as const).map((reason) => ({ labels: { chain: c.chain, reason }, value: c.resets[reason] }) as MetricValue<string>)),
      );
    }
    this.caches.push(stats);
    this.cachedViews.push(view);
  }

  private readonly pools: PoolCounts[] = [];

  /** A pool's counters, by chain (the status page shows them); undefined for a chain of one upstream. */
  poolOf(chain: string): PoolCounts | undefined {
    return this.pools.find((p) => p.chain === chain);
  }

  /** Counts a pool's retries, hedges, broadcasts and quorums under gateway_pool_* (registered with the first pool). */
  pool(stats: PoolCounts): void {
    if (this.pools.length === 0) {
      const by = <K extends 'retries' | 'hedges' | 'quorum'>(name: string, help: string, field: K, label: string) =>
        this.rendered(name, help, 'counter', () =>
          this.pools.flatMap((p) => Object.entries(p[field]).map(([k, value]) => ({ labels: { chain: p.chain, [label]: k }, value }) as MetricValue<string>)));
      by('gateway_pool_retries_total', 'Calls asked again of another upstream of a pool, by chain and reason: empty (a null or empty answer about data not final), state (a node that no longer has the state asked for).', 'retries', 'reason');
      by('gateway_pool_hedges_total', 'Hedged reads, by chain and outcome: sent (a second upstream asked after hedge.afterMs), won (its answer came first), capped (not sent: hedges are at most 10% of a minute\'s calls).', 'hedges', 'outcome');
      by('gateway_pool_quorum_total', 'Quorum reads, by chain and outcome: agree, disagree (the client gets the interface\'s "upstreams disagree" error), short (too few upstreams answered).', 'quorum', 'outcome');
      const one = (name: string, help: string, field: 'broadcasts' | 'tipAnswers' | 'tipWaits') =>
        this.rendered(name, help, 'counter', () => this.pools.map((p) => ({ labels: { chain: p.chain }, value: p[field] }) as MetricValue<string>));
      one('gateway_pool_broadcasts_total', 'Transactions sent to every usable upstream of a pool (broadcast: all).', 'broadcasts');
      one('gateway_pool_tip_answers_total', "Calls for the chain's head (EVM: eth_blockNumber) answered from the served tip, without asking a node.", 'tipAnswers');
      one('gateway_pool_tip_waits_total', 'Calls about a block at or below the served tip that no usable upstream had yet: they waited for one to reach it, within their timeoutMs.', 'tipWaits');
      this.rendered('gateway_pool_served_tip', "A pool's served tip: the highest block its usable upstreams all have (servedTip: all) or most of them have (majority); -1 while unknown.", 'gauge', () =>
        this.pools.map((p) => ({ labels: { chain: p.chain }, value: p.tip() }) as MetricValue<string>));
    }
    this.pools.push(stats);
  }

  private readonly sockets: SocketCounts[] = [];

  /** A chain's WebSocket counters (the status page shows them); undefined for a chain without websocket: true. */
  socketsOf(chain: string): SocketCounts | undefined {
    return this.sockets.find((w) => w.chain === chain);
  }

  /** A chain that takes WebSockets (issue 38): its sockets, subscriptions, notifications and closes. */
  websocket(stats: SocketCounts): void {
    if (this.sockets.length === 0) {
      const gauge = (name: string, help: string, values: () => MetricValue<string>[], type: 'gauge' | 'counter' = 'gauge') =>
        this.rendered(name, help, type, values);
      gauge('gateway_ws_connections', 'WebSocket connections open, by chain.', () => this.sockets.map((w) => ({ labels: { chain: w.chain }, value: w.connections }) as MetricValue<string>));
      gauge('gateway_ws_subscriptions', "Subscriptions held, by chain and type (the socket protocol's own: EVM's newHeads, logs).", () =>
        this.sockets.flatMap((w) => Object.entries(w.subscriptions).map(([type, value]) => ({ labels: { chain: w.chain, type }, value }) as MetricValue<string>)),
      );
      gauge(
        'gateway_ws_notifications_total',
        'Subscription notifications sent, by chain and type.',
        () => this.sockets.flatMap((w) => Object.entries(w.notifications).map(([type, value]) => ({ labels: { chain: w.chain, type }, value }) as MetricValue<string>)),
        'counter',
      );
      gauge(
        'gateway_ws_closed_total',
        'WebSocket connections ended, by chain and reason: client (closed by the client), slow (unsent data passed maxBufferedBytes), ping (no pong within pingIntervalMs), drain (the gateway stops), revoked (the key no longer admits the chain), quota (the key\'s quota spent by notifications), gap (the feed missed more blocks than it fills), error (a protocol error or a broken connection).',
        () => this.sockets.flatMap((w) => Object.entries(w.closed).map(([reason, value]) => ({ labels: { chain: w.chain, reason }, value }) as MetricValue<string>)),
        'counter',
      );
    }
    this.sockets.push(stats);
  }

  /** The state of each Redis-backed store (issue 44): 1 on the series of its current state. */
  redis(parts: readonly RedisPart[]): void {
    if (parts.length === 0) return;
    this.rendered(
      'gateway_redis_state',
      "Each Redis-backed store's state (part: keys, limits, usage, cache): 1 on the series of its current state (up: answering; down: a command failed or timed out, a probe runs; empty: the key store answers without its keys), 0 on the others. With workers, the number of workers in that state.",
      'gauge',
      () => parts.flatMap(({ part, link }) => REDIS_STATES.map((state) => ({ labels: { part, state }, value: link.state === state ? 1 : 0 }) as MetricValue<string>)),
    );
  }

  /** Registers a metric that renders what `values` returns, on scrape. */
  private rendered(name: string, help: string, type: 'counter' | 'histogram' | 'gauge', values: () => MetricValue<string>[]): void {
    this.registry.registerMetric(<Metric>(<unknown>new Rendered(name, help, type, values)));
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The counters of one chain (null: requests that match no chain, counted under '-'). */
  route(chain: string | null, iface: string): RouteMetrics {
    const r = new RouteMetrics(chain ?? '-', iface, chain === null ? 'null' : JSON.stringify(chain));
    this.routes.push(r);
    return r;
  }

  upstream(chain: string, u: UpstreamSeries, best: number): void {
    this.upstreamUp.labels(chain, u.name).set(u.usable ? 1 : 0);
    this.state(u);
    if (u.head !== null) {
      this.upstreamHead.labels(chain, u.name).set(u.head);
      if (best >= 0) this.upstreamLag.labels(chain, u.name).set(Math.max(0, best - u.head));
    }
  }

  /** The upstream's state series (after a health check or the circuit breaker). */
  state(u: UpstreamSeries): void {
    for (const s of UPSTREAM_STATES) this.upstreamState.labels(u.chain, u.name, s).set(u.state === s ? 1 : 0);
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
