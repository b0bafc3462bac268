// One call through a pool: its first attempt, at most one hedge beside it, and
// the tries again that its answer calls for (a null about data not final, a
// node that lacks the state). Each attempt (a leg) goes through the dispatch
// below the pool (a Forward of its own), held whole so that its answer can be
// judged before the client sees it; the first good answer wins and the other
// legs are cancelled. Only reads (as the chain's kind says: CallRules) are
// hedged or asked again after an answer, and what the flow adds to the first
// attempt ends by the call's deadline.
import { deliver, held, timeLeft, type Attempt, type Call, type Cancelable, type Dispatch, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget } from '../dispatch.ts';
import type { Upstream, UpstreamGroup } from '../upstreams/upstream.ts';
import type { PoolStats } from './stats.ts';
import { MAX_HELD } from '../upstreams/forward.ts';

type Buffered = Extract<ForwardResult, { kind: 'buffered' }>;

/** What a flow needs of its pool. */
export interface FlowHost {
  readonly stats: PoolStats;
  /** What the chain's kind says of its calls and their answers (EVM: kinds/evm/pool-rules.ts); null: every answer is taken as it comes, and a call is a read as its request says. */
  readonly rules: CallRules | null;
  /** The dispatch below the pool: each leg is one attempt through it. */
  readonly next: Dispatch<ForwardTarget, Attempt>;
  /** Is block `n` at or below the chain's finalized block? */
  isFinal(n: number): boolean;
  /** Archive upstreams that may take a call for state at `n`; null when there are none usable. */
  archiveFor(n: number, group: UpstreamGroup, tried: ReadonlySet<Upstream>): ((u: Upstream) => boolean) | null;
  /** A hedge may go now (within 10% of the chain's calls over the last minute). */
  takeHedge(): boolean;
  /** Learns the block hashes an answer to `method` carries (learn.ts). */
  learn?(method: string, body: Buffer): void;
  /** Told each call's time from its start to its outcome (for a hedge at p95). */
  record(ms: number): void;
}

export interface FlowPlan {
  readonly accept: ((u: Upstream) => boolean) | undefined;
  /** The block number the call is about, where known (-1: not known). */
  readonly block: number;
  /** ms after which a second upstream is asked too; -1: no hedge. */
  readonly hedgeAfterMs: number;
  /** Told the answer the client gets, before it goes (a pool learning which upstream made a filter). */
  readonly answered?: (r: Buffered) => void;
}

/** What a kind says of one of its calls, and of an answer to it, for a pool's flow. */
export interface CallRules {
  /** It changes nothing on a node, so it may be hedged, and asked of another upstream after a 5xx, a timeout or an answer. */
  read(call: Call): boolean;
  /** Whether a 2xx held whole is an answer of the kind to one call: else the attempt failed (retried, counted by the breaker), as an empty one does. */
  isAnswer(body: Buffer): boolean;
  /** Whether an answer says the upstream throttled the call, where the route's request says nothing of it (throttle.ts). */
  throttled(body: Buffer): boolean;
  /** ok, or why a read's 200 answer may be its node's and not the chain's (a null about data it has not seen, state it pruned); `final`: the block the call names is final. */
  judge(call: Call, body: Buffer, final: boolean): 'ok' | 'empty' | 'state';
}

/** Tries again at most, per call. */
const MAX_RETRIES = 2;

export class Flow implements Cancelable {
  private readonly legs: Leg[] = [];
  private readonly tried = new Set<Upstream>();
  private over = false;
  private retries = 0;
  private timer: NodeJS.Timeout | null = null;
  /** The call's one deadline (the request's), for the hedge and every try again. */
  private deadline: NodeJS.Timeout | null = null;
  /** The deadline has passed: nothing more is started, and what comes is the answer. */
  private expired = false;
  /** An answer that may be its node's only (a null, a "state is gone") while another node is asked: still the answer if that fails. */
  private kept: { readonly r: Buffered; readonly leg: Leg } | null = null;
  private readonly started = performance.now();
  /** The request as each leg sends it: held whole. */
  private readonly held: HeldRequest;
  /** The kind's rules for the call: null where there is none to ask (no call, or a kind whose answers a pool takes as they come). */
  private readonly rules: CallRules | null;
  /** It may be hedged and asked again: a read, as the kind says (as its request says, where there are no rules). */
  private readonly read: boolean;

  constructor(
    private readonly host: FlowHost,
    private readonly target: HeldTarget,
    private readonly request: ForwardRequest,
    private readonly group: UpstreamGroup,
    private readonly call: Call | null,
    private readonly plan: FlowPlan,
  ) {
    const rules = call === null ? null : host.rules;
    this.rules = rules;
    const t = request.transport;
    this.read = rules === null ? t.idempotent : t.idempotent && rules.read(call!);
    this.held = held(request, {
      // Only a read goes to another upstream after a 5xx or a timeout (a write only when it surely never arrived: upstreams/forward.ts).
      idempotent: this.read,
      maxBuffer: Math.max(t.maxBuffer, MAX_HELD),
      // A single call's 200 that is not an answer of its kind is a failed attempt (retried, counted by the breaker), as an empty one is.
      isAnswer: rules?.isAnswer,
      // A provider's throttle (the route's own check: EVM's -32005 in a 200, Blockbook's {"error"}; the kind's where a request came
      // without one): another upstream is asked (throttle.ts).
      throttled: t.throttled ?? rules?.throttled,
    });
  }

  start(): void {
    this.deadline = setTimeout(this.expire, timeLeft(this.request.transport.deadline));
    this.deadline.unref();
    this.launch(this.plan.accept, false);
    if (this.plan.hedgeAfterMs >= 0) {
      this.timer = setTimeout(this.hedge, this.plan.hedgeAfterMs);
      this.timer.unref();
    }
  }

  cancel(): void {
    this.over = true;
    this.end();
  }

  private launch(accept: ((u: Upstream) => boolean) | undefined, hedge: boolean): void {
    const leg = new Leg(this, hedge);
    this.legs.push(leg);
    leg.start(this.host.next, this.group, held(this.held, { accept, skip: this.tried }));
    const u = leg.forward?.upstream;
    if (u) this.tried.add(u);
  }

  private readonly hedge = (): void => {
    this.timer = null;
    if (this.over || this.expired || this.legs.length !== 1 || this.legs[0]!.done) return;
    if (!this.host.takeHedge()) return void this.host.stats.hedges.capped++;
    this.host.stats.hedges.sent++;
    // The first leg's upstream, where it was not known at its start (held for a batch below: jsonrpc/forward-batch.ts).
    const first = this.legs[0]!.forward?.upstream;
    if (first) this.tried.add(first);
    this.launch(this.plan.accept, true);
  };

  /**
   * The call's timeoutMs is over: what it has (a null kept while asking
   * again), else the gateway's timeout. The first attempt alone ends by
   * itself: its retries after a failure (a 5xx, a timeout) share its
   * deadline, which is this one (upstreams/forward-attempts.ts), and the gateway's timeout it
   * ends with counts against the upstream.
   */
  private readonly expire = (): void => {
    this.deadline = null;
    this.expired = true;
    if (this.over) return;
    if (this.kept !== null) return this.finish(this.kept.r, this.kept.leg);
    if (this.legs.length === 1) return;
    const first = this.legs[0]!;
    this.finish({ kind: 'failed', fail: 'timeout', upstream: first.forward?.upstream ?? null }, first);
  };

  /** A leg's outcome: the answer the client gets, or a try again elsewhere. */
  done(leg: Leg, r: ForwardResult): void {
    if (this.over) return;
    if (r.upstream !== null) this.tried.add(r.upstream);
    const running = this.legs.some((l) => !l.done);
    // A failed leg waits for the other, if one is still out; a failed try again gives way to the null it was to improve on.
    if (r.kind !== 'buffered' || (r.status >= 500 && this.kept !== null)) {
      if (running) return;
      return this.kept !== null ? this.finish(this.kept.r, this.kept.leg) : this.finish(r, leg);
    }
    const why = this.retries < MAX_RETRIES && !this.expired ? this.judge(r) : 'ok';
    if (why !== 'ok') {
      // The other leg (a hedge beside this one) still asks another node, which may have the data: this answer waits for it.
      if (running) {
        this.kept ??= { r, leg };
        return;
      }
      let accept: ((u: Upstream) => boolean) | undefined = this.againFor(why, r.upstream);
      // None known to be far enough ahead (the polls lag the chain): any other may have it by now.
      if (!this.group.hasOther(r.upstream, this.tried, accept)) accept = undefined;
      if (this.group.hasOther(r.upstream, this.tried, accept)) {
        this.retries++;
        this.host.stats.retries[why]++;
        if (why === 'empty') this.kept ??= { r, leg };
        this.launch(accept, false);
        return;
      }
    }
    this.finish(r, leg);
  }

  /** ok, or why the answer may be this node's and not the chain's: as the kind judges a read's 200 (a write's answer is final, whatever it says: it is never sent twice). */
  private judge(r: Buffered): 'ok' | 'empty' | 'state' {
    const rules = this.rules;
    if (rules === null || !this.read || r.status !== 200) return 'ok';
    const n = this.plan.block;
    return rules.judge(this.call!, r.body, n >= 0 && this.host.isFinal(n));
  }

  /** Which upstreams may be asked again: one whose head is at least as high (empty), an archive node or one ahead (state). */
  private againFor(why: 'empty' | 'state', u: Upstream): (o: Upstream) => boolean {
    const head = u.view.head ?? -1;
    if (why === 'empty') return (o) => (o.view.head ?? -1) >= head;
    const n = this.plan.block >= 0 ? this.plan.block : head;
    return this.host.archiveFor(n, this.group, this.tried) ?? ((o) => (o.view.head ?? -1) >= n);
  }

  private finish(r: ForwardResult, leg: Leg): void {
    this.over = true;
    this.host.record(performance.now() - this.started);
    if (r.kind === 'buffered' && r.status === 200 && this.call !== null) this.host.learn?.(this.call.method, r.body);
    if (leg.hedge && r.kind === 'buffered') this.host.stats.hedges.won++;
    this.end();
    if (r.kind === 'buffered') this.plan.answered?.(r);
    deliver(this.target, this.request, r);
  }

  private end(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.deadline !== null) clearTimeout(this.deadline);
    this.deadline = null;
    for (const l of this.legs) if (!l.done) l.forward?.cancel();
  }
}

/** One attempt of a flow, to one upstream (through the dispatch below: a Forward, with no retries of its own beyond the route's). */
class Leg implements HeldTarget {
  forward: Attempt | null = null;
  done = false;

  constructor(
    private readonly flow: Flow,
    readonly hedge: boolean,
  ) {}

  start(next: Dispatch<ForwardTarget, Attempt>, group: UpstreamGroup, request: HeldRequest): void {
    this.forward = next(this, request, group);
  }

  forwarded(r: ForwardResult): void {
    this.done = true;
    this.flow.done(this, r);
  }
}
