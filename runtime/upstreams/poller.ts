// The one place that asks upstreams about themselves. Each upstream is polled
// on its own, every headPollMs on a chain whose cache needs heads and every
// health interval otherwise; one poll asks, in one batch where the interface
// has batches, for what the upstream serves (its identity and genesis), its
// head, and its finalized and safe blocks. Each report goes into the
// upstream's view and the chain's (chain-view.ts) as soon as it comes: a slow
// upstream holds up no one, and in a pool one whose poll is out longer than
// the interval is left out of the served tip until it answers on time. The
// report also decides the upstream's state: down after HEALTH_FAILS_TO_DOWN
// failed polls or when more than maxLag blocks behind (its head, or the one
// its socket pushed since the poll was sent, against the best head the chain
// had when the poll was sent: a push is never held against an answer that
// may predate it, and takes no upstream out or brings it back), wrong_chain while it
// serves another chain: the one the manifest names or, in a pool where it
// names none, the one most of its upstreams serve. A poll the upstream
// throttles (HTTP 429, or a throttle error in the answer: throttle.ts) is no
// failed poll: the upstream is throttled as by a client call's throttle (its
// Retry-After, or the cooldown), its state stays, and it is not polled again
// before the throttle is over. A poll that answers ends the run of throttles
// (the cooldown starts again at its first length), as a client call's answer does.
// An upstream that must be verified and whose polls were throttled from the
// start stays out of traffic until a poll answers, but counts as throttled
// (throttle.ts allThrottled): its clients are told when to come back.
import type { Logger } from '../observe/log.ts';
import type { Metrics } from '../observe/metrics.ts';
import type { RouteSpec } from '../types.ts';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { ChainView } from './chain-view.ts';
import type { PollReport } from './upstream-view.ts';
import type { ChainProbe, ProbeRequest } from './probe.ts';
import { errorThrottled, throttled } from './throttle.ts';
import { HEALTH_AGENT, HEALTH_FAILS_TO_DOWN, unreachable, type Upstream, type UpstreamGroup } from './upstream.ts';
import { HeadSockets } from './head-sockets.ts';

/** Groups of chains polled together, spread over each interval. */
const SLOTS = 10;
const NONE: readonly number[] = [];

export interface PollerOptions {
  /** The health interval, for chains without a cache. */
  readonly intervalMs: number;
  readonly timeoutMs: number;
}

export interface PolledChain {
  readonly route: RouteSpec;
  readonly group: UpstreamGroup;
  readonly view: ChainView;
  /** How often its upstreams are polled; null: the health interval. */
  readonly everyMs: number | null;
  /** Whether the chain's cache needs heads: then the poll asks for the head's hash, finality and genesis too. */
  readonly heads: boolean;
  /** How its upstreams are asked: its interface module's probe (chains.ts hands it in). */
  readonly probe: ChainProbe;
}

export class Poller {
  private readonly timers: NodeJS.Timeout[] = [];
  /** Upstreams whose poll is under way: a slow one is never overlapped by its next. */
  private readonly polling = new Set<Upstream>();
  /** Pools whose manifest names no identity: they take the one most of their upstreams report. */
  private readonly elections = new Map<PolledChain, Election>();
  /** The upstreams' head sockets, beside the polls (head-sockets.ts); none where no upstream of a chain that follows heads has one. */
  private readonly sockets: HeadSockets;

  constructor(
    private readonly chains: readonly PolledChain[],
    private readonly opts: PollerOptions,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    // Where the manifest says which chain an upstream must serve, none takes traffic before a poll says it does.
    for (const c of chains) {
      const names = c.probe.names(c.route);
      if (!names && c.group.all.length > 1) this.elections.set(c, new Election(c.group.all.length));
      if (names || c.group.all.length > 1) for (const u of c.group.all) u.view.verify = true;
    }
    this.sockets = new HeadSockets(chains, opts, log);
  }

  /**
   * Polls every upstream at once (so that readiness is known at start), then
   * each chain once per its interval, the chains spread in up to SLOTS groups
   * over it: 200 chains every 5 s are 20 chains every 500 ms, not a burst
   * that a rate-limited provider behind all of them may refuse. Resolves when
   * the first round is over (each poll is bounded by timeoutMs): the server
   * listens only then.
   */
  start(): Promise<void> {
    const first = Promise.all(this.chains.map((c) => this.firstRound(c)));
    const n = this.chains.length;
    const slots = Math.min(n, SLOTS);
    this.chains.forEach((c, i) => {
      const every = c.everyMs ?? this.opts.intervalMs;
      const t = setTimeout(() => {
        void this.round(c);
        const each = setInterval(() => void this.round(c), every);
        each.unref();
        this.timers.push(each);
      }, every + Math.floor((every * Math.floor((i * slots) / n)) / slots));
      t.unref();
      this.timers.push(t);
    });
    // The sockets open once the first polls have verified their upstreams: a head pushed before counts for nothing.
    return first.then(() => this.sockets.start());
  }

  stop(): void {
    for (const t of this.timers) clearTimeout(t); // clears intervals as well
    this.timers.length = 0;
    this.sockets.stop();
  }

  /** Polls each upstream of a chain whose previous poll is over. */
  round(c: PolledChain): Promise<unknown> {
    // A budgeted upstream is polled only as often as keeps its polls within their share of it (upstream-budget.ts);
    // a throttled one not before its throttle is over (throttle.ts).
    return Promise.all(c.group.all.map((u) => (this.polling.has(u) || u.budget?.pollDue() === false || this.inThrottle(c, u) ? undefined : this.poll(c, u))));
  }

  /** Throttled (throttle.ts): not polled before the throttle is over; in a pool, its head (not asked meanwhile) is left out of the served tip. */
  private inThrottle(c: PolledChain, u: Upstream): boolean {
    const v = u.view;
    if (!v.throttled) return false;
    if (c.group.all.length > 1) c.view.pollOverdue(v);
    return true;
  }

  /** The first round: in a pool that takes its identity from its upstreams, every answer is in before any counts. */
  private async firstRound(c: PolledChain): Promise<unknown> {
    const election = this.elections.get(c);
    if (election === undefined) return this.round(c);
    const all = c.group.all;
    const polls = await Promise.all(all.map((u) => this.ask(c, u)));
    polls.forEach((p, i) => p?.report?.own === true && p.report.identity !== '' && election.tell(all[i]!, p.report.identity));
    polls.forEach((p, i) => p !== null && this.apply(c, all[i]!, p));
  }

  private async poll(c: PolledChain, u: Upstream): Promise<void> {
    const p = await this.ask(c, u);
    if (p !== null) this.apply(c, u, p);
  }

  /** One poll of `u`, not yet applied (null: an internal error, logged). */
  private async ask(c: PolledChain, u: Upstream): Promise<Poll | null> {
    this.polling.add(u);
    const v = u.view;
    const n = ++v.begun;
    u.budget?.pollBegins();
    const every = c.everyMs ?? this.opts.intervalMs;
    const start = performance.now();
    const sentAt = Date.now();
    const best = c.view.best();
    // In a pool, a poll out longer than the interval leaves the upstream out of the served tip at once.
    const overdue = c.group.all.length > 1 ? setTimeout(() => c.view.pollOverdue(v), every) : null;
    overdue?.unref();
    try {
      const heads = c.heads;
      const outcome = await pollOnce(c.route, c.probe, u, this.opts.timeoutMs, heads, heads ? c.view.pendingLookups(v) : NONE);
      const throttle = 'failure' in outcome ? (outcome.failure.throttle ?? null) : null;
      return { report: 'report' in outcome ? outcome.report : null, n, late: performance.now() - start > every, throttle, sentAt, best };
    } catch (err) {
      this.log.error({ event: 'internal_error', chain: c.route.path, upstream: u.name, error: (err as Error)?.message }, 'internal error in a poll');
      return null;
    } finally {
      if (overdue !== null) clearTimeout(overdue);
      this.polling.delete(u);
    }
  }

  /** One poll's outcome: the upstream's state, its view and the chain's. */
  private apply(c: PolledChain, u: Upstream, { report, n, late, throttle, sentAt, best: bestThen }: Poll): void {
    const v = u.view;
    const before = v.state;
    const path = c.route.path;
    if (throttle !== null) {
      // Throttled: no word on its head or its health. Out of traffic for the throttle, as after a client call's (throttle.ts).
      throttled(u, throttle.headers, sentAt, throttle.body);
      v.pollThrottled = true;
      c.view.report(v, null, late);
      v.settled(n, false);
      return;
    }
    v.pollThrottled = false;
    // An answer (of this chain or another): the run of throttles is over, as after a client call's answer (upstream.ts markSuccess).
    if (report !== null && v.throttleRun !== 0) v.throttleRun = 0;
    // A poll sent before any head was known (the first round) is judged against what the other first polls found.
    let best = bestThen >= 0 ? bestThen : c.view.best();
    let r = report;
    const election = this.elections.get(c);
    if (election !== undefined && r !== null && r.own && r.identity !== '') {
      election.tell(u, r.identity);
      // Another identity than most of the pool's upstreams report: this one serves another chain.
      if (election.chosen !== '' && r.identity !== election.chosen) r = { ...r, own: false };
    }
    if (r === null) {
      v.healthFails++;
      // One found on another chain stays so until a poll finds the right one.
      if (v.healthFails >= HEALTH_FAILS_TO_DOWN && before !== 'wrong_chain') v.state = 'down';
    } else if (!r.own) {
      v.healthFails = 0;
      v.lagging = false;
      v.state = 'wrong_chain';
      if (before !== 'wrong_chain') {
        // Once per transition; never the URL, which may hold a provider's secret.
        this.log.error(
          { event: 'upstream_wrong_chain', chain: path, upstream: u.name, serves: r.identity, from: before },
          `upstream ${u.name} of chain ${path} serves another chain (${r.identity}): taken out`,
        );
      }
    } else {
      v.healthFails = 0;
      const known = !Number.isNaN(r.number);
      // Its head is the one its socket pushed since the poll was sent, where that is higher (the report leaves it so);
      // judged against the best head the chain had when the poll was sent: no block a push brought in while the poll
      // was out (another upstream's, or its own) is held against an answer that may predate it.
      const head = known && v.pushedOver(r.number, sentAt) ? v.head! : r.number;
      if (known && head > best) best = head;
      v.lagging = known && best - head > c.route.maxLag;
      // A passing poll does not clear the circuit breaker's run of failed
      // requests: the head answering says nothing of whether calls do. An
      // upstream it brings back after the breaker opened is on trial: its next
      // failed request takes it out again, its next success clears the run.
      v.state = v.lagging ? 'down' : 'up';
      // Back from down: the node may have been restarted or reconfigured. If it refused batches, it is asked with one again.
      if (before === 'down' && v.state === 'up' && !v.takesBatches) v.takesBatches = true;
    }
    const behind = v.finalBehind;
    c.view.report(v, r, late, sentAt);
    v.settled(n, r !== null && r.own);
    // Its socket, if it has one, is held to the heads the polls see (head-sockets.ts: a quiet one is down).
    if (r !== null && r.own) this.sockets.polled(u, r.number);
    // Its finalized block went back while the chain's did not, or it is back where it was (chain-view.ts); where its
    // report reset the chain instead, the cache's cache_reset line says so.
    if (behind < 0 && v.finalBehind >= 0) {
      this.log.warn({ event: 'upstream_finalized_behind', chain: path, upstream: u.name, finalized: v.finalized, was: v.finalBehind }, 'upstream finalized block went back: out of traffic until it catches up');
    } else if (behind >= 0 && v.finalBehind < 0 && v.finalized >= behind) {
      this.log.info({ event: 'upstream_finalized_caught_up', chain: path, upstream: u.name, finalized: v.finalized }, 'upstream finalized block caught up');
    }
    this.metrics.upstream(path, u, best);
    if (before !== v.state && before !== 'unknown' && v.state !== 'wrong_chain') {
      this.log.warn({ event: 'upstream_state', chain: path, upstream: u.name, from: before, to: v.state, head: v.head, lagging: v.lagging }, 'upstream state changed');
    }
  }
}

/** One poll's outcome, before it counts: its report (null: none), its number, and whether it came later than the interval. */
interface Poll {
  readonly report: PollReport | null;
  readonly n: number;
  readonly late: boolean;
  /** The upstream throttled the poll: its answer (headers and body, for how long: throttle.ts retryAfterMs); null: it did not. */
  readonly throttle: PollThrottle | null;
  /** When it was sent (epoch ms). */
  readonly sentAt: number;
  /** The chain's best head when it was sent (ChainView.best; -1 none): what its answer is judged against, for lag. */
  readonly best: number;
}

/**
 * A pool's identity where the manifest names none: the one that more than
 * half of its upstreams report, settled once (at the first polls, or as soon
 * as a majority first agrees). An upstream that reports another is
 * wrong_chain; with no majority (one against one), nothing is settled.
 */
class Election {
  chosen = '';
  private readonly told = new Map<Upstream, string>();

  constructor(private readonly size: number) {}

  tell(u: Upstream, identity: string): void {
    if (this.chosen !== '') return;
    this.told.set(u, identity);
    const counts = new Map<string, number>();
    for (const id of this.told.values()) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const [id, k] of counts) if (k * 2 > this.size) this.chosen = id;
  }
}

/** Why a poll has no report; `throttle`: the upstream throttled it (its answer, for its Retry-After). */
export type PollFailure = { readonly kind: 'unreachable' | 'failing'; readonly reason: string; readonly throttle?: PollThrottle };

/** A throttle answer to a poll: its headers, and the throttle error's answer (a batch's throttled item) for Infura's backoff_seconds. */
export interface PollThrottle {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * One poll of one upstream with its chain's probe, as the poller and
 * `gateway check --probe` make it: its report, or why there is none. Reasons
 * are error codes and statuses, never an error's message, which may carry the
 * upstream's address.
 */
export async function pollOnce(
  route: RouteSpec,
  probe: ChainProbe,
  u: Upstream,
  timeoutMs: number,
  heads: boolean,
  lookups: readonly number[] = NONE,
): Promise<{ readonly report: PollReport } | { readonly failure: PollFailure }> {
  let requests = probe.requests(route, u, heads, lookups);
  let answers = await Promise.all(requests.map((r) => ask(u, r, timeoutMs)));
  // One object for a batch: a node that takes no batches. Asked call by call, now and from then on.
  if (requests.some((r, i) => r.batch === true && isDoc(answers[i]!) && !Array.isArray(answers[i]!.doc))) {
    u.view.takesBatches = false;
    requests = probe.requests(route, u, heads, lookups);
    answers = await Promise.all(requests.map((r) => ask(u, r, timeoutMs)));
  }
  const read = probe.read(route, answers.map((a) => (isDoc(a) ? a.doc : null)), heads);
  if (typeof read !== 'string') return { report: read };
  // The answer that was not one says why (a throttle first); else the reading does.
  for (const a of answers) if (!isDoc(a) && a.throttle !== undefined) return { failure: a };
  for (const a of answers) if (!isDoc(a)) return { failure: a };
  return { failure: { kind: 'failing', reason: read } };
}

/**
 * The probe as `gateway check --probe` prints it: null and why for no proper
 * answer; `{ wrong }` for an upstream of another chain; otherwise its head
 * (NaN when it reports no usable height).
 */
export async function probeWithReason(
  route: RouteSpec,
  probe: ChainProbe,
  u: Upstream,
  timeoutMs: number,
): Promise<{ readonly result: number | null | { readonly wrong: string }; readonly failure?: PollFailure }> {
  const out = await pollOnce(route, probe, u, timeoutMs, false);
  if ('failure' in out) return { result: null, failure: out.failure };
  const r = out.report;
  return { result: r.own ? r.number : { wrong: r.identity } };
}

type Answer = { readonly doc: Record<string, any> } | PollFailure;

function isDoc(a: Answer): a is { readonly doc: Record<string, any> } {
  return 'doc' in a;
}

/** The answer as a JSON object (or array); else why there is none: no answer in time, not a 200, or not JSON. */
async function ask(u: Upstream, req: ProbeRequest, timeout: number): Promise<Answer> {
  let status: number;
  let text: string;
  let got: IncomingHttpHeaders;
  try {
    const type = req.body === undefined ? null : { 'content-type': 'application/json' };
    const headers = { ...type, 'user-agent': HEALTH_AGENT, ...u.headers };
    u.budget?.spend(true, Date.now(), req.calls);
    const res = await u.pool.request({ path: req.path, method: req.method, headers, body: req.body, headersTimeout: timeout, bodyTimeout: timeout });
    status = res.statusCode;
    got = res.headers;
    text = await res.body.text();
  } catch (err) {
    return { kind: 'unreachable', reason: unreachable(err) };
  }
  if (status === 429) return { kind: 'failing', reason: 'throttled (HTTP 429)', throttle: { headers: got, body: text } };
  let doc: Record<string, any> | null = null;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed !== null && typeof parsed === 'object') doc = parsed as Record<string, any>;
  } catch {
    // below
  }
  // A provider's throttle in the answer, whatever its status: -32005, a provider's sentence... (a JSON-RPC error, in a batch's answers too), or Blockbook's {"error": ...}.
  const item = doc !== null && (status !== 200 || text.length <= MAX_THROTTLE_TEXT) && text.includes('"error"') ? throttleIn(doc) : undefined;
  if (item !== undefined) return { kind: 'failing', reason: 'throttled', throttle: { headers: got, body: item === doc ? text : JSON.stringify(item) } };
  if (status !== 200) return { kind: 'failing', reason: `HTTP ${status}` };
  if (doc !== null) return { doc };
  return { kind: 'failing', reason: 'the answer is not JSON' };
}

/** Longest poll answer looked at for a throttle: a throttle's answer is short (a batch's of a few calls too). */
const MAX_THROTTLE_TEXT = 8192;

/** The answer (a call's, or Blockbook's) or batch item whose error is a throttle (throttle.ts errorThrottled); undefined: none is. */
function throttleIn(doc: Record<string, any>): unknown {
  const throttles = (d: unknown): boolean => d !== null && typeof d === 'object' && errorThrottled((d as { error?: unknown }).error);
  return Array.isArray(doc) ? doc.find(throttles) : throttles(doc) ? doc : undefined;
}
