// Selection by score (issue 39): the primaries of a chain (and, apart, its
// fallbacks) ranked by what a sliding window of their recent calls shows.
// Nothing is counted here on the request path: every SCORE_PERIOD_MS the
// scorer reads the counters forwarding already keeps (tally.ts UpstreamTally:
// attempts, failures, among them error answers the call did not cause, and
// latency; the view's throttles) and keeps their growth
// per period, one minute of periods in all. From the newest periods that hold
// MIN_CALLS calls (or the whole minute) it computes a score, lower is better:
//
//   score = mean latency (ms, at least FLOOR_MS) × (1 + 20 × error share + 20 × throttle share)
//           × (1 + 0.5 × blocks behind the chain's best head beyond the first)
//
// and ranks by it (the floor: below 5 ms latency is noise, and a node that
// fails fast is not better for it). Upstreams within reach of the best score
// (ENTER × best to come in, STAY × best to stay: the band is wider for one
// already in, so ranks near the edge do not flap) are preferred and share
// the traffic by weight, as before; the others get PROBE of their weight,
// under 1% (a slow one stays out of the clients' p99), so that their score
// stays current and they come back when they recover. Selection itself (upstream.ts `choose`) is still smooth weighted
// round-robin, over these shares. A chain with `selection: weighted`, and a
// list with one upstream, has no scorer: its shares are its weights.
// docs/upstreams.md: "Selection by score".
import type { UpstreamView } from './upstream-view.ts';
import type { UpstreamTally } from './tally.ts';

/** What the scorer reads and writes of an upstream (upstream.ts's Upstream is one; named here so the two files do not import each other). */
export interface Scored {
  readonly name: string;
  readonly weight: number;
  readonly serving: boolean;
  readonly tally: UpstreamTally;
  readonly view: Pick<UpstreamView, 'head' | 'throttledTotal'>;
  share: number;
  score: UpstreamScore | null;
}

/** How often scores are recomputed, and how many periods the window holds (one minute). */
export const SCORE_PERIOD_MS = 2000;
export const WINDOW_PERIODS = 30;
/** Calls a score is computed from at least, where the window has them: the newest periods that reach it. */
export const MIN_CALLS = 20;
/** What an error and a throttle weigh against latency, and a block of lag. */
export const ERROR_WEIGHT = 20;
export const THROTTLE_WEIGHT = 20;
export const LAG_WEIGHT = 0.5;
/** The band of the preferred: to come in, and to stay in (hysteresis). */
export const ENTER = 1.5;
export const STAY = 2;
/** Latency below this counts as this. */
export const FLOOR_MS = 5;
/** The share of its weight an upstream outside the band keeps (probes). */
export const PROBE = 1 / 128;

/** What the window shows of one upstream, and where it ranks. */
export interface ScoreFigures {
  /** Calls the score is computed from, and over how many seconds. */
  readonly calls: number;
  readonly seconds: number;
  readonly latencyMs: number;
  readonly errorRate: number;
  readonly throttleRate: number;
  /** Blocks behind the chain's best head (null: no head known). */
  readonly lag: number | null;
}

/** One upstream's window: the counters' growth per period, in a ring. */
export class UpstreamScore {
  /** Per period: calls, failed, latency sum (s), throttles. */
  private readonly ring = new Float64Array(WINDOW_PERIODS * 4);
  private periods = 0;
  private ok = 0;
  private failed = 0;
  private sum = 0;
  private throttles = 0;
  /** The score (lower is better; null: no call yet), its rank (1 = preferred first) and whether it is in the preferred band. */
  score: number | null = null;
  rank = 0;
  preferred = true;
  figures: ScoreFigures | null = null;

  constructor(private readonly u: Scored) {
    const t = u.tally;
    this.ok = t.ok;
    this.failed = t.failed;
    this.sum = t.sum;
    this.throttles = u.view.throttledTotal;
  }

  /** Closes a period: the counters' growth since the last one goes into the ring. */
  period(): void {
    const t = this.u.tally;
    const o = (this.periods % WINDOW_PERIODS) * 4;
    const ok = t.ok - this.ok;
    const failed = t.failed - this.failed;
    this.ring[o] = ok + failed;
    this.ring[o + 1] = failed;
    this.ring[o + 2] = t.sum - this.sum;
    this.ring[o + 3] = this.u.view.throttledTotal - this.throttles;
    this.ok = t.ok;
    this.failed = t.failed;
    this.sum = t.sum;
    this.throttles = this.u.view.throttledTotal;
    this.periods++;
  }

  /** The newest periods that hold MIN_CALLS calls, or the whole window; null when it holds none. */
  window(lag: number | null): ScoreFigures | null {
    let calls = 0;
    let failed = 0;
    let sum = 0;
    let throttles = 0;
    let n = 0;
    const have = Math.min(this.periods, WINDOW_PERIODS);
    while (n < have && calls < MIN_CALLS) {
      const o = ((this.periods - 1 - n) % WINDOW_PERIODS) * 4;
      calls += this.ring[o]!;
      failed += this.ring[o + 1]!;
      sum += this.ring[o + 2]!;
      throttles += this.ring[o + 3]!;
      n++;
    }
    if (calls === 0) return null;
    return { calls, seconds: (n * SCORE_PERIOD_MS) / 1000, latencyMs: (sum * 1000) / calls, errorRate: failed / calls, throttleRate: throttles / (calls + throttles), lag };
  }
}

/** The score of what a window shows: lower is better. */
export function scoreOf(f: ScoreFigures): number {
  const lag = f.lag === null ? 0 : Math.max(0, f.lag - 1);
  return Math.max(FLOOR_MS, f.latencyMs) * (1 + ERROR_WEIGHT * f.errorRate + THROTTLE_WEIGHT * f.throttleRate) * (1 + LAG_WEIGHT * lag);
}

/**
 * Ranks one list (a chain's primaries, or its fallbacks) and sets each
 * member's share. An upstream with no call in the window keeps its last
 * score; one never scored is preferred (it has not shown it is worse).
 */
export function rank(list: readonly Scored[], bestHead: number): void {
  let best = Infinity;
  for (const u of list) {
    const s = u.score!;
    s.period();
    const lag = u.view.head === null || bestHead < 0 ? null : Math.max(0, bestHead - u.view.head);
    const f = s.window(lag);
    if (f !== null) {
      s.figures = f;
      s.score = scoreOf(f);
    } else if (s.figures !== null && s.figures.lag !== lag) {
      // No calls, but its head moved: the lag part follows.
      s.figures = { ...s.figures, lag };
      s.score = scoreOf(s.figures);
    }
    // The best of those that may take traffic (a throttle or a budget out of room for the moment does not move the band).
    if (u.serving && s.score !== null && s.score < best) best = s.score;
  }
  // The order: known scores, lowest first, then those never scored (by name, so the order is stable).
  const order = [...list].sort((a, b) => (a.score!.score ?? Infinity) - (b.score!.score ?? Infinity) || (a.name < b.name ? -1 : 1));
  order.forEach((u, i) => {
    const s = u.score!;
    s.rank = i + 1;
    const v = s.score;
    s.preferred = v === null || best === Infinity || v <= (s.preferred ? STAY : ENTER) * best;
    u.share = s.preferred ? u.weight : u.weight * PROBE;
  });
}

/** Scores a chain's lists every SCORE_PERIOD_MS (lists of one upstream are left alone: their share is their weight). */
export class Scorer {
  private readonly timer: NodeJS.Timeout;
  private readonly lists: readonly (readonly Scored[])[];

  constructor(
    private readonly all: readonly Scored[],
    lists: readonly (readonly Scored[])[],
  ) {
    this.lists = lists.filter((l) => l.length > 1);
    for (const l of this.lists) for (const u of l) u.score = new UpstreamScore(u);
    this.timer = setInterval(() => this.tick(), SCORE_PERIOD_MS);
    this.timer.unref();
  }

  /** Whether any list has more than one upstream (else there is nothing to rank). */
  get ranks(): boolean {
    return this.lists.length > 0;
  }

  tick(): void {
    let bestHead = -1;
    for (const u of this.all) if (u.serving && u.view.head !== null && u.view.head > bestHead) bestHead = u.view.head;
    for (const l of this.lists) rank(l, bestHead);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
