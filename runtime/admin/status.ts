// The data behind the admin status page (GET /status.json). Every figure is
// read from the counters /metrics renders (RouteMetrics, UpstreamTally) and
// from the chains' views (heads and lag), never counted or copied a second time: a timer copies them every
// STEP_MS into a small ring, and the one-minute and fifteen-minute figures are
// differences between the live counters and those copies, the way Prometheus'
// rate() and histogram_quantile() read the same series. Nothing here runs per
// request. The top keys are the exception: usage per key is kept out of
// Prometheus on purpose (runtime/observe/usage.ts), so they come from the /usage counters.
import type { Chain } from '../chains.ts';
import type { Metrics, PoolCounts, RedisPart, SocketCounts } from '../observe/metrics.ts';
import { BUCKETS } from '../observe/series.ts';
import type { GatewaySpec } from '../types.ts';
import type { Upstream } from '../upstreams/upstream.ts';
import type { Usage } from '../observe/usage.ts';
import { VERSION } from '../config/version.ts';

/** How often the counters are copied. */
export const STEP_MS = 5000;
/** Copies kept for the charts: fifteen minutes. */
const CHART_STEPS = 180;
/** The window of the latency and failure figures. */
const WINDOW_MS = 60_000;
/** Copies of the upstreams' histograms kept: enough to reach a minute back. */
const WINDOW_STEPS = Math.ceil(WINDOW_MS / STEP_MS) + 2;
/** Per upstream in a copy: the histogram's buckets, then ok, failed and polls begun. */
const UP_WIDTH = BUCKETS.length + 4;
const TOP_KEYS = 10;

interface Copy {
  /** Epoch ms. */
  readonly t: number;
  /** Per chain: requests answered, then those answered with a 5xx. */
  readonly chains: Float64Array;
  /** Per upstream: UP_WIDTH numbers; dropped once older than the window needs. */
  ups: Float64Array | null;
}

/** What the page reads of a chain. */
export type StatusChain = Pick<Chain, 'route' | 'group' | 'view' | 'metrics'>;

export interface StatusSource {
  readonly spec: GatewaySpec;
  readonly chains: readonly StatusChain[];
  readonly metrics: Metrics;
  readonly usage: Usage;
  /** Each Redis-backed store (keys, limits, usage, cache) and its state. */
  readonly redis: readonly RedisPart[];
  readonly draining: boolean;
}

/**
 * The q-quantile (0..1) of a histogram given as per-bucket counts (not
 * cumulative), in seconds, interpolated linearly inside the bucket it falls in,
 * as Prometheus' histogram_quantile() does; the highest finite bound when it
 * falls in +Inf. null when the histogram is empty.
 */
export function quantile(counts: ArrayLike<number>, q: number): number | null {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i]!;
  if (total <= 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < BUCKETS.length; i++) {
    const n = counts[i]!;
    if (below + n >= rank && n > 0) {
      const lower = i === 0 ? 0 : BUCKETS[i - 1]!;
      return lower + (BUCKETS[i]! - lower) * ((rank - below) / n);
    }
    below += n;
  }
  return BUCKETS[BUCKETS.length - 1]!;
}

export class StatusBoard {
  private readonly copies: Copy[] = [];
  private readonly upstreams: Upstream[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly started = Date.now();

  constructor(private readonly src: StatusSource) {
    for (const c of src.chains) this.upstreams.push(...c.group.all);
  }

  /** The first copy now (the counters are zero at start), then one every STEP_MS. */
  start(): void {
    this.copy();
    this.timer = setInterval(() => this.copy(), STEP_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** The live counters, in a copy's layout. */
  private read(t: number): Copy {
    const list = this.src.chains;
    const chains = new Float64Array(list.length * 2);
    list.forEach((c, i) => {
      let all = 0;
      let errors = 0;
      for (const tally of c.metrics.labels.values()) {
        for (let j = 0; j < tally.statuses.length; j++) {
          all += tally.counts[j]!;
          if (tally.statuses[j]! >= 500) errors += tally.counts[j]!;
        }
      }
      chains[i * 2] = all;
      chains[i * 2 + 1] = errors;
    });
    const ups = new Float64Array(this.upstreams.length * UP_WIDTH);
    this.upstreams.forEach((u, i) => {
      const o = i * UP_WIDTH;
      ups.set(u.tally.buckets, o);
      ups[o + BUCKETS.length + 1] = u.tally.ok;
      ups[o + BUCKETS.length + 2] = u.tally.failed;
      ups[o + BUCKETS.length + 3] = u.view.begun;
    });
    return { t, chains, ups };
  }

  /** Exposed for tests: takes a copy now. */
  copy(now = Date.now()): void {
    const c = this.read(now);
    this.copies.push(c);
    if (this.copies.length > CHART_STEPS + 1) this.copies.shift();
    const n = this.copies.length;
    if (n > WINDOW_STEPS) this.copies[n - WINDOW_STEPS - 1]!.ups = null;
  }

  /** What /status.json serves. */
  async json(now = Date.now()): Promise<string> {
    const { spec, usage } = this.src;
    if (this.copies.length === 0) this.copy(now);
    const live = this.read(now);
    // The newest copy at least a minute old, else the oldest that has the upstreams' figures.
    let base: Copy | null = null;
    for (const c of this.copies) if (c.ups !== null && (base === null || now - c.t >= WINDOW_MS)) base = c;
    if (base === null) throw new Error('status: no copy of the counters');
    const windowSeconds = Math.max(0, (now - base.t) / 1000);
    const chartT = this.copies.slice(1).map((c) => c.t);
    let ready = !this.src.draining;
    let k = 0;
    const chains = this.src.chains.map(({ route: r, group, view }, i) => {
      const best = view.best();
      if (!group.healthy) ready = false;
      const requests = live.chains[i * 2]! - base.chains[i * 2]!;
      const errors = live.chains[i * 2 + 1]! - base.chains[i * 2 + 1]!;
      const rps: number[] = [];
      const errorRate: (number | null)[] = [];
      for (let j = 1; j < this.copies.length; j++) {
        const a = this.copies[j - 1]!;
        const b = this.copies[j]!;
        const dn = b.chains[i * 2]! - a.chains[i * 2]!;
        const de = b.chains[i * 2 + 1]! - a.chains[i * 2 + 1]!;
        rps.push(round(dn / ((b.t - a.t) / 1000)));
        errorRate.push(dn > 0 ? round(de / dn) : null);
      }
      const upstreams = group.all.map((u) => {
        const o = k++ * UP_WIDTH;
        const counts = new Float64Array(BUCKETS.length + 1);
        for (let j = 0; j <= BUCKETS.length; j++) counts[j] = live.ups![o + j]! - base.ups![o + j]!;
        const ok = live.ups![o + BUCKETS.length + 1]! - base.ups![o + BUCKETS.length + 1]!;
        const failed = live.ups![o + BUCKETS.length + 2]! - base.ups![o + BUCKETS.length + 2]!;
        const polls = live.ups![o + BUCKETS.length + 3]! - base.ups![o + BUCKETS.length + 3]!;
        const p50 = quantile(counts, 0.5);
        const p99 = quantile(counts, 0.99);
        return {
          name: u.name,
          role: u.role,
          state: u.state,
          head: u.view.head,
          // Its head socket (issue 46): up (its pushes count), down (its polls carry its head), null: it has none.
          socket: u.view.socket,
          // Its finalized block went back and the chain's did not (chain-view.ts): out of traffic until it is back at this block; null: not behind.
          finalizedBehind: u.view.finalBehind >= 0 ? u.view.finalBehind : null,
          lag: best >= 0 && u.view.head !== null ? Math.max(0, best - u.view.head) : null,
          attempts: ok + failed,
          failed,
          failedShare: ok + failed > 0 ? round(failed / (ok + failed)) : null,
          p50Ms: p50 === null ? null : round(p50 * 1000),
          p99Ms: p99 === null ? null : round(p99 * 1000),
          // What the poller costs it: health and head polls a second over the window (each one request).
          pollsPerSecond: windowSeconds > 0 ? round(polls / windowSeconds) : null,
          // Its rateLimit (upstream-budget.ts), as requests a second this process may send it; null: no budget.
          budgetPerSecond: u.budget === null ? null : u.budget.perSecond,
          attemptsTotal: u.tally.ok + u.tally.failed,
          failedTotal: u.tally.failed,
          // Throttled (throttle.ts): out of client traffic until then (epoch ms; null: not throttled), the throttles in a row, and ever.
          throttledUntil: u.view.throttledUntil > now ? u.view.throttledUntil : null,
          throttleRun: u.view.throttleRun,
          throttledTotal: u.view.throttledTotal,
          ...scoreFigures(u),
        };
      });
      return {
        path: r.path,
        listener: r.listener,
        interface: r.interface,
        // How a request picks among its upstreams: by score, or weighted round-robin (the manifest's selection: weighted).
        selection: r.selection ?? 'score',
        state: group.healthy ? 'up' : 'down',
        requests,
        rps: windowSeconds > 0 ? round(requests / windowSeconds) : 0,
        errorRate: requests > 0 ? round(errors / requests) : null,
        requestsTotal: live.chains[i * 2]!,
        errorsTotal: live.chains[i * 2 + 1]!,
        upstreams,
        pool: poolFigures(this.src.metrics.poolOf(r.path)),
        websocket: socketFigures(this.src.metrics.socketsOf(r.path)),
        chart: { rps, errorRate },
      };
    });
    const today = new Date(now).toISOString().slice(0, 10);
    return JSON.stringify({
      status: this.src.draining ? 'draining' : ready ? 'ready' : 'not_ready',
      now,
      uptimeSeconds: Math.round((now - this.started) / 1000),
      build: { version: VERSION, manifest: spec.source, manifestSha256: spec.manifestSha256 },
      windowSeconds: round(windowSeconds),
      chart: { stepMs: STEP_MS, t: chartT },
      chains,
      // up, down (a probe runs), or for the key store empty (answering without its keys: 503 for keys not cached).
      redis: Object.fromEntries(this.src.redis.map((p) => [p.part, p.link.state])),
      topKeys: { day: today, keys: usage.topToday(TOP_KEYS) },
    });
  }
}

/** Four significant decimals are plenty for a page; keeps the JSON small. */
function round(n: number): number {
  return Math.round(n * 10_000) / 10_000;
}

/** A chain's open sockets, subscriptions and notifications (null without websocket: true). */
function socketFigures(w: SocketCounts | undefined): object | null {
  if (w === undefined) return null;
  return { connections: w.connections, subscriptions: { ...w.subscriptions }, notifications: { ...w.notifications }, closed: { ...w.closed } };
}

/** A pool's served tip and what it did for its calls (null for a chain of one upstream). */
function poolFigures(p: PoolCounts | undefined): object | null {
  if (p === undefined) return null;
  return { tip: p.tip(), hedges: { ...p.hedges }, retries: { ...p.retries }, broadcasts: p.broadcasts, quorum: { ...p.quorum }, tipAnswers: p.tipAnswers };
}

/**
 * Where selection by score ranks an upstream (upstream-score.ts), and why: its
 * score (lower is better; null: no call yet, or not ranked), its rank among
 * its role's upstreams (1 = preferred first; null: not ranked: one upstream of
 * its role, or selection: weighted), whether it is in the preferred band or
 * only probed, and the window's figures behind the score.
 */
function scoreFigures(u: Upstream) {
  const s = u.score;
  if (s === null) return { score: null, rank: null, preferred: null, share: u.share, window: null };
  const f = s.figures;
  return {
    score: s.score === null ? null : round(s.score),
    rank: s.rank === 0 ? null : s.rank,
    preferred: s.preferred,
    share: u.share,
    window: f === null ? null : { calls: f.calls, seconds: f.seconds, latencyMs: round(f.latencyMs), errorRate: round(f.errorRate), throttleRate: round(f.throttleRate), lag: f.lag },
  };
}
