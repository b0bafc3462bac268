// A pool: an EVM chain's several upstreams seen as one chain that only moves
// forward, whichever node answers (docs/upstreams.md: "Pool settings"). It
// wraps the dispatch chains.ts gives it (the forward batches over the plain
// dispatch, or the plain one), and each of its attempts goes through that:
// every upstream request of the chain, a route's or a cache miss's, is routed
// here, by the Call a layer above made of it (kinds/evm/call.ts) or, for a body
// that came without one, by reading the body once (call.ts).
//  - eth_blockNumber answers the served tip (chain-view.ts), never backwards;
//  - a call at `latest` goes to an upstream at or above the served tip whose
//    head is current (chain-view.ts, atTip), a call
//    that names block N (by number, or by a hash the gateway has seen) only to
//    an upstream whose head is at least N, a range (eth_getLogs) only to one
//    whose head covers its highest block; state older than pruneDepth blocks
//    goes to archive upstreams; with rewriteTags, the tags become the numbers
//    the gateway serves; a call about a block at or below the served tip
//    that no usable upstream has yet waits for one to reach it, within its
//    timeoutMs (wait), instead of taking a behind node's null;
//  - a null about data not final is asked of one other upstream at least as
//    far ahead, a node's "state is gone" of an archive node (flow.ts);
//  - hedged reads, broadcast transactions and quorum reads (flow.ts, fanout.ts);
//  - a batch is split into its calls, each of which goes this way alone (batch.ts).
import type { ChainView } from '../../upstreams/chain-view.ts';
import { forwardAs, JSON_HEADERS, NOTHING, timeLeft, type Attempt, type Cancelable, type Dispatch, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldTarget } from '../../dispatch.ts';
import { traitsOf } from './methods.ts';
import type { Logger } from '../../observe/log.ts';
import type { EvmRouteSpec } from '../../types.ts';
import type { Upstream, UpstreamGroup } from '../../upstreams/upstream.ts';
import { splitBatch } from '../../pool/batch.ts';
import { EVM_ENVELOPE } from './envelope.ts';
import { EVM_CALL_RULES } from './pool-rules.ts';
import { Call, ID_AT } from './call.ts';
import { callOf, rewriteTags, STATE_METHODS, type BlockRef } from './pool-call.ts';
import { broadcast, quorum } from './fanout.ts';
import { FilterPins } from './filters.ts';
import { Flow, type FlowHost, type FlowPlan } from '../../pool/flow.ts';
import { learnHashes } from './learn.ts';
import { HedgeBudget, LatencyWindow, PoolStats } from '../../pool/stats.ts';
import { allThrottled, throttledBeforeVerified } from '../../upstreams/throttle.ts';

export class Pool implements FlowHost {
  /** What the flow asks of an EVM call and its answer. */
  readonly rules = EVM_CALL_RULES;
  readonly stats: PoolStats;
  private readonly budget = new HedgeBudget();
  private readonly quorumMethods: ReadonlySet<string>;
  /** The last calls' times, for a hedge at p95. */
  private readonly times = new LatencyWindow();
  /** Which upstream made which filter: a filter's calls go to it only (filters.ts). */
  private readonly filters = new FilterPins();
  /** The calls waiting for an upstream to reach their block (wait): each looks again at every poll's report. */
  private readonly waiting = new Set<() => void>();

  constructor(
    private readonly route: EvmRouteSpec,
    private readonly group: UpstreamGroup,
    private readonly view: ChainView,
    private readonly log: Logger,
    /** The dispatch below the pool: every attempt goes out through it. */
    readonly next: Dispatch<ForwardTarget, Attempt>,
  ) {
    this.stats = new PoolStats(route.path, () => view.tip);
    this.quorumMethods = new Set(route.quorum?.methods ?? []);
    const none = (): void => undefined;
    // After the report is taken (not inside the poller's call): a waiting call may go out, or fail, at once.
    const wake = (): void => this.waiting.forEach((look) => look());
    view.listen({ epoch: none, reset: none, canonical: none, heard: () => void (this.waiting.size > 0 && queueMicrotask(wake)) });
  }

  readonly dispatch: Dispatch = (target, request, group = this.group) => {
    // A batch: each of its calls comes back here alone (batch.ts).
    const batch = splitBatch(this.dispatch, EVM_ENVELOPE, this.log, this.route.path, target, request);
    if (batch !== null) return batch;
    this.budget.call();
    return this.send(target, request, group, callOf(request));
  };

  /** One call (or a body that is no call) on its way: answered here, fanned out, or one flow. */
  private send(target: HeldTarget, request: ForwardRequest, group: UpstreamGroup, call: Call | null): Cancelable {
    if (call !== null) {
      // With no usable upstream there is no served tip: the call fails as any other does then.
      if (call.method === 'eth_blockNumber' && this.view.tip >= 0 && group.all.some((u) => u.usable)) return this.tipAnswer(target, call);
      if (call.traits.broadcast && this.route.broadcast === 'all') {
        const usable = group.all.filter((u) => u.usable);
        if (usable.length > 1) return broadcast(this.next, request, group, usable, this.stats, (r) => target.forwarded(r));
      }
    }
    const planned = this.plan(call, group);
    if (planned.wait) return this.wait(target, request, group, call!);
    let plan: FlowPlan = planned;
    if (call !== null) {
      const q = this.route.quorum;
      if (q !== null && this.quorumMethods.has(call.method)) {
        const tip = this.view.tip;
        // Only upstreams able to serve the call's block: block routing and archive routing as for one upstream.
        const able = plan.accept ?? ((u: Upstream) => (u.view.head ?? -1) >= tip);
        const all = group.all.filter((u) => u.usable && able(u));
        const at = all.slice(0, q.of);
        // Too few able to serve it: no quorum can be had. Not one node's answer served as agreed, and not a call left without an answer.
        if (at.length < q.of) return this.tooFew(target, group, able, all.length, q.of);
        // In place of a node whose state is gone: the others, archive nodes first.
        const spare = all.slice(q.of).sort((a, b) => Number(b.archive) - Number(a.archive));
        return quorum(this.next, this.rewritten(request, call), group, at, spare, this.stats, this.log, this.route.path, call.idJson, (r) => target.forwarded(r));
      }
      plan = this.pinned(call, plan);
    }
    const flow = new Flow(this, target, call === null ? request : this.rewritten(request, call), group, call, plan);
    flow.start();
    return flow;
  }

  /**
   * A call about a block at or below the served tip that no usable upstream
   * has yet (the upstreams that set the tip went down, or came back behind):
   * it waits, within its timeoutMs, until a poll finds one that has it, and
   * goes then with what is left of that time. None in time: the gateway's
   * timeout, never a behind node's null for a block the chain has.
   */
  private wait(target: HeldTarget, request: ForwardRequest, group: UpstreamGroup, call: Call): Cancelable {
    this.stats.tipWaits++;
    let flow: Cancelable | null = null;
    const end = (): void => {
      clearTimeout(timer);
      this.waiting.delete(look);
    };
    const look = (): void => {
      if (this.plan(call, group).wait) return;
      end();
      flow = this.send(target, request, group, call);
    };
    const timer = setTimeout(() => {
      end();
      target.forwarded({ kind: 'failed', fail: group.all.some((u) => u.usable) ? 'timeout' : 'no-upstream', upstream: null });
    }, timeLeft(request.transport.deadline));
    timer.unref();
    this.waiting.add(look);
    return { cancel: () => (flow !== null ? flow.cancel() : end()) };
  }

  /** A filter's calls: the upstream that answered with a filter id is remembered, and the calls naming that id go to it only. */
  private pinned(call: Call, plan: FlowPlan): FlowPlan {
    const filter = traitsOf(call.method).filter;
    if (filter === null) return plan;
    if (filter === 'new') {
      return {
        ...plan,
        answered: (r) => {
          const id = r.status === 200 ? resultOf(r.body) : undefined;
          if (typeof id === 'string') this.filters.set(id, r.upstream);
        },
      };
    }
    const id = call.params[0];
    const u = this.filters.get(id);
    // Not known here (made before a restart, or forgotten): any upstream answers as its node would.
    const accept = u === undefined ? plan.accept : (o: Upstream) => o === u;
    return { ...plan, accept, answered: call.method === 'eth_uninstallFilter' ? () => this.filters.delete(id) : undefined };
  }

  /** With rewriteTags: the call with its tags as the block numbers the gateway serves. */
  private rewritten(request: ForwardRequest, call: Call): ForwardRequest {
    if (!this.route.rewriteTags) return request;
    const v = this.view;
    const body = rewriteTags(call, { latest: v.tip, safe: v.safe, finalized: v.finalized });
    // With a Call of its own bytes (its id where the gateway wrote it), so the layers below read it, not the bytes.
    return body === null ? request : forwardAs(request, { one: new Call(body, call.method, ID_AT, ID_AT + Buffer.byteLength(call.idJson)), together: request.calls.together }, body);
  }

  /** Where a call may go, and how long before a hedge; or that it waits for an upstream to reach its block. */
  private plan(call: Call | null, group: UpstreamGroup): FlowPlan & { readonly wait: boolean } {
    const v = this.view;
    let n = -1;
    // A range: its highest block.
    if (call !== null) n = call.from === undefined ? this.numberOf(call.block) : Math.max(this.numberOf(call.block), this.numberOf(call.from));
    else n = v.tip; // a body that is no call (a batch of notifications only, or one that does not parse): at least the served tip
    let accept: ((u: Upstream) => boolean) | undefined = n >= 0 ? (u) => (u.view.head ?? -1) >= n : undefined;
    // At the tip: only an upstream whose head is current (a stale one may still serve an older block).
    const atTip = n >= 0 && (call === null || call.block === 'latest');
    if (atTip) accept = (u) => v.atTip(u.view);
    // Old state: archive nodes only, where one is usable.
    if (call !== null && n >= 0 && STATE_METHODS.has(call.method) && v.number - n > this.route.pruneDepth) {
      accept = this.archiveFor(n, group, NO_TRIED) ?? accept;
    }
    let wait = false;
    if (accept !== undefined && !group.all.some((u) => u.usable && accept!(u))) {
      // A block at or below the served tip, as the call sends it (a number, a hash, or a tag rewritten to one): the
      // chain has it and a client may have been told of it. It waits for an upstream that has it (wait above).
      if (call !== null && n <= v.tip && (this.route.rewriteTags || (!isTag(call.block) && !isTag(call.from))) && group.all.some((u) => u.usable)) wait = true;
      // Above the tip (the polls have not seen it yet, or it is not there): the ones furthest ahead
      // (at the tip, of those whose head is current, where one is).
      else accept = furthest(group, atTip);
    }
    const hedge = this.route.hedge;
    // Only what the method traits table calls a read is hedged (kinds/evm/methods.ts; flow.ts asks again only reads too).
    const read = call !== null && traitsOf(call.method).read;
    const after = hedge === null || !read ? -1 : hedge.afterMs === 'p95' ? this.p95() : hedge.afterMs;
    return { accept, block: call !== null && typeof call.block === 'number' ? call.block : n, hedgeAfterMs: after, wait };
  }

  /** The block number a block reference names, as the gateway serves it (-1: not known). */
  private numberOf(b: BlockRef): number {
    const v = this.view;
    if (typeof b === 'number') return b;
    if (b === 'latest') return v.tip;
    if (b === 'safe') return v.safe;
    if (b === 'finalized') return v.finalized;
    return b === null || b === 'pending' ? -1 : v.numberOf(b.hash);
  }

  archiveFor(n: number, group: UpstreamGroup, tried: ReadonlySet<Upstream>): ((u: Upstream) => boolean) | null {
    const ok = (u: Upstream) => u.archive && (u.view.head ?? -1) >= n;
    return group.all.some((u) => u.usable && !tried.has(u) && ok(u)) ? ok : null;
  }

  isFinal(n: number): boolean {
    return this.view.isFinal(n);
  }

  takeHedge(): boolean {
    return this.budget.take();
  }

  learn(method: string, body: Buffer): void {
    learnHashes(method, body, (hash, n) => this.view.learnNumber(hash, n));
  }

  /**
   * A quorum call with fewer than `of` usable upstreams at the served tip: no
   * upstream can take it (as when none is usable). When those that could vote
   * but for a throttle (or a budget out of room, or a throttle before their
   * first good poll) would make up the quorum, the client gets "every
   * upstream throttled", with the seconds until the soonest is free again
   * (throttle.ts).
   */
  private tooFew(target: HeldTarget, group: UpstreamGroup, able: (u: Upstream) => boolean, usable: number, of: number): Cancelable {
    this.stats.quorum.short++;
    let waiting = 0;
    // One throttled before its first good poll has no head yet to judge by: it waits for that poll whatever the call's block.
    for (const u of group.all) if (!u.usable && (throttledBeforeVerified(u) || (u.serving && able(u)))) waiting++;
    const r = usable + waiting >= of ? allThrottled(group, able, null) : null;
    queueMicrotask(() => target.forwarded(r ?? { kind: 'failed', fail: 'no-upstream', upstream: null }));
    return NOTHING;
  }

  /** eth_blockNumber from the served tip: one chain that never goes backwards, whichever node would have answered. */
  private tipAnswer(target: HeldTarget, call: Call): Cancelable {
    this.stats.tipAnswers++;
    const tip = this.view.tip;
    const at = this.group.all.find((u) => u.usable && (u.view.head ?? -1) >= tip) ?? this.group.all[0]!;
    const body = Buffer.from(`{"jsonrpc":"2.0","id":${call.idJson},"result":"0x${tip.toString(16)}"}`);
    const r: ForwardResult = { kind: 'buffered', upstream: at, status: 200, headers: JSON_HEADERS, body };
    queueMicrotask(() => target.forwarded(r));
    return NOTHING;
  }

  /** A call's time, for p95 hedging. */
  record(ms: number): void {
    this.times.record(ms);
  }

  private p95(): number {
    return this.times.p95();
  }
}

const NO_TRIED: ReadonlySet<Upstream> = new Set();

/** A tag the upstream resolves itself (a range's absent end is `latest`). */
const isTag = (b: BlockRef | undefined): boolean => typeof b === 'string';

/** The usable upstreams with the highest head the polls saw (undefined: no head known, any); `current`: of those whose head is current, where one is. */
function furthest(group: UpstreamGroup, current: boolean): ((u: Upstream) => boolean) | undefined {
  const only = current && group.all.some((u) => u.usable && u.view.current);
  let best = -1;
  for (const u of group.all) if (u.usable && (!only || u.view.current) && (u.view.head ?? -1) > best) best = u.view.head ?? -1;
  return best < 0 ? undefined : (u) => (!only || u.view.current) && (u.view.head ?? -1) >= best;
}
/** A JSON-RPC answer's result (undefined: none, or not JSON). */
function resultOf(body: Buffer): unknown {
  try {
    return (JSON.parse(body.toString('utf8')) as { result?: unknown }).result;
  } catch {
    return undefined;
  }
}
