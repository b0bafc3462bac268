// The forward layer's batches (issue 37: "cache.batch moves there"): held
// single JSON-RPC reads of one turn of the event loop that are bound for the
// same upstreams go to one of them as one JSON-RPC batch. A layer over the
// plain dispatch (dispatch.ts), under the pool where there is one (chains.ts),
// so every call has had its pool's decision (served tip, rewrite, routing by
// block, quorum legs, tries again) before it is held: only calls the pool
// sends to the same set of upstreams go together, and each still gets what
// it would have got alone (docs/upstreams.md, "Batches"; docs/cache.md):
//  - its own answer item, with its own id (the batch puts its place there,
//    and the item gets the call's id back);
//  - an item the node leaves out, or one that is not an answer, goes again
//    alone; an error item is that call's answer, judged by its pool;
//  - a batch that fails (a 5xx after the retries, a timeout) fails each call
//    as that failure fails a lone call, logged once for the batch;
//  - a 429 (or a provider's throttle) for the batch throttles the node
//    (upstreams/throttle.ts) and the batch goes to another node of the set, as
//    a lone call would; a throttle in one item sends that call elsewhere
//    alone, which marks the node throttled unless every other node says the
//    same (then it is the call's answer: forward-attempts.ts throttledInBody);
//  - an upstream that answers a batch with anything but a batch answer takes
//    no batches (Upstream.takesBatches, logged once): the calls go alone;
//  - a batch costs its calls against the upstreams' `rateLimit`: no batch
//    carries more calls than the room in the budgets of its set (issue 43),
//    the rest go in further batches, or alone once the room is one call.
// Held means a request with `hold` (a cache's flight, a pool's leg): nothing
// is streamed to a client from here. An EVM pool without the cache has the
// layer with batch 1 (only the calls of one client batch go together); a
// chain without it (one upstream and no cache, or a chain not EVM) pays
// nothing: chains.ts does not compose it.
import { held, JSON_HEADERS, type Attempt, type Call, type Dispatch, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget, type ThrottleSeen } from '../dispatch.ts';
import { ANY_DEPTH, CLOSE, COMMA, OPEN } from './scan.ts';
import { answerSpans, splitBatchAnswer } from './answer.ts';
import type { Logger } from '../observe/log.ts';
import type { Upstream, UpstreamGroup } from '../upstreams/upstream.ts';

/** Batches sent and the calls in them (the cache's gateway_cache_batches_total and _batched_total). */
export interface BatchCounts {
  batches: number;
  batched: number;
}

/** The set of upstreams a call may go to is a bit mask over its group's list: pools larger than this send calls alone. */
const MAX_SET = 30;

export class ForwardBatches {
  /** Where the batches are counted (chains.ts hands the cache's counters once the cache is made). */
  counts: BatchCounts = { batches: 0, batched: 0 };
  private held: Held[] = [];
  private flushing = false;
  /** Upstreams of the chain last seen taking no batches (each change is logged once). */
  private readonly refusing = new Set<Upstream>();

  constructor(
    /** The dispatch below: every request, a batch or a lone call, is one attempt through it. */
    private readonly next: Dispatch<ForwardTarget, Attempt>,
    private readonly chain: UpstreamGroup,
    /**
     * Most calls in one batch (cache.batch); 1: only the calls of one client
     * batch (one `together`) go together, as many as it has.
     */
    private readonly max: number,
    private readonly log: Logger,
    private readonly path: string,
  ) {}

  readonly dispatch: Dispatch<ForwardTarget, Attempt> = (target: HeldTarget, request: ForwardRequest, group = this.chain): Attempt => {
    // Streamed to a client, a write, or alone by the setting: as it is.
    const t = request.transport;
    if (t.hold !== true || !t.idempotent || (this.max <= 1 && request.calls.together === undefined)) return this.next(target, request as HeldRequest, group);
    return this.hold(target, request as HeldRequest, group) ?? this.next(target, request as HeldRequest, group);
  };

  /**
   * The call held until the end of the turn; null when it goes alone now (not
   * one call with an id, no upstream it may go to takes batches, a group of
   * more than MAX_SET). Its set is narrowed to the upstreams that take batches,
   * as the cache's batches of misses were.
   */
  private hold(target: HeldTarget, request: HeldRequest, group: UpstreamGroup): Held | null {
    const t = request.transport;
    const raw = t.body;
    // One call (a batch goes as it is), whose id its Call has (found once, by the guard as a rule).
    const call = request.calls.one;
    if (raw === null || call === undefined || call.body !== raw) return null;
    const idStart = call.idFrom;
    if (idStart === -1) return null;
    const body = typeof raw === 'string' ? Buffer.from(raw) : raw;
    if (group === this.chain) this.notice();
    const all = group.all;
    if (all.length > MAX_SET) return null;
    // The upstreams the call may go to now (its pool's routing, what it has tried), of those that take batches.
    let set = 0;
    for (let i = 0; i < all.length; i++) {
      const u = all[i]!;
      if (u.usable && u.takesBatches && !t.skip?.has(u) && (t.accept === undefined || t.accept(u))) set |= 1 << i;
    }
    if (set === 0) return null;
    const h = new Held(this, target, request, call, group, set, body, idStart, call.idTo);
    this.held.push(h);
    if (!this.flushing) {
      this.flushing = true;
      setImmediate(this.flush);
    }
    return h;
  }

  private readonly flush = (): void => {
    this.flushing = false;
    const all = this.held;
    this.held = [];
    // Bound for the same upstreams (the same group, the same set), and with cache.batch 1 of the same client batch.
    const bound = new Map<UpstreamGroup, Map<number, Map<object | undefined, Held[]>>>();
    for (const h of all) {
      if (h.cancelled) continue;
      let sets = bound.get(h.group);
      if (sets === undefined) bound.set(h.group, (sets = new Map()));
      let by = sets.get(h.set);
      if (by === undefined) sets.set(h.set, (by = new Map()));
      const k = this.max > 1 ? undefined : h.request.calls.together;
      const list = by.get(k);
      if (list === undefined) by.set(k, [h]);
      else list.push(h);
    }
    const size = this.max > 1 ? this.max : Infinity;
    for (const [group, sets] of bound) {
      for (const [set, by] of sets) {
        for (const list of by.values()) {
          for (let i = 0; i < list.length; ) {
            // No more calls than the set has room for in a budget (each batch sent takes its calls from one at once).
            const n = Math.min(size, list.length - i, room(group, set));
            if (n <= 1) {
              list[i++]!.alone();
              continue;
            }
            const part = n === list.length ? list : list.slice(i, i + n);
            i += n;
            new UpstreamBatch(this, part, group, set).start();
          }
        }
      }
    }
  };

  /** Sends `request` through the dispatch below. */
  send(target: HeldTarget, request: HeldRequest, group: UpstreamGroup): Attempt {
    return this.next(target, request, group);
  }

  /** `u` answered a batch with something else: it takes none from now on (until the poller sees it come back from down). */
  refused(u: Upstream): void {
    u.takesBatches = false;
    this.notice();
  }

  /** A batch failed: logged once, for all its calls. */
  failed(r: Exclude<ForwardResult, { kind: 'aborted' }>, u: Upstream | null, n: number): void {
    if (u === null) return;
    if (r.kind === 'buffered') this.log.warn({ event: 'upstream_bad_response', chain: this.path, upstream: u.name, status: r.status, calls: n }, 'upstream failed a batch of calls');
    else this.log.warn({ event: 'upstream_failed', chain: this.path, upstream: u.name, fail: r.kind === 'failed' ? r.fail : 'unavailable', calls: n }, 'upstream failed a batch of calls');
  }

  /** Logs each upstream of the chain that has stopped or started taking batches since the last look. */
  private notice(): void {
    const all = this.chain.all;
    for (const u of all) {
      if (u.takesBatches !== this.refusing.has(u)) continue;
      if (!u.takesBatches) {
        this.refusing.add(u);
        const none = all.every((o) => !o.takesBatches);
        const msg = none ? 'upstream takes no batches: calls now go one by one' : "upstream takes no batches: batches of calls now go to the chain's other upstreams";
        this.log.warn({ event: 'upstream_refused_batch', chain: this.path, upstream: u.name }, msg);
      } else {
        this.refusing.delete(u);
        this.log.info({ event: 'upstream_batches_again', chain: this.path, upstream: u.name }, 'upstream back from down: batches of calls go to it again');
      }
    }
  }
}

/**
 * The most calls one batch to the set (bits over `group.all`) may carry now:
 * the most room a usable upstream of it that takes batches has in its budget
 * (upstream-budget.ts; a batch costs its calls); unbounded when one has no
 * budget. A batch larger than this is split (issue 43).
 */
function room(group: UpstreamGroup, set: number): number {
  const all = group.all;
  let most = 0;
  for (let i = 0; i < all.length; i++) {
    const u = all[i]!;
    if ((set & (1 << i)) === 0 || !u.usable || !u.takesBatches) continue;
    if (u.budget === null) return Infinity;
    most = Math.max(most, u.budget.room());
  }
  return most;
}

/** One held call: until the end of its turn, then alone or in a batch. What the layer above sees of its attempt. */
class Held implements Attempt {
  cancelled = false;
  /** Sent alone: its own attempt. */
  private own: Attempt | null = null;
  /** Sent in a batch. */
  batch: UpstreamBatch | null = null;

  constructor(
    private readonly layer: ForwardBatches,
    readonly target: HeldTarget,
    readonly request: HeldRequest,
    readonly call: Call,
    readonly group: UpstreamGroup,
    /** The upstreams it may go to, as bits over `group.all`. */
    readonly set: number,
    readonly body: Buffer,
    readonly idStart: number,
    readonly idEnd: number,
  ) {}

  get upstream(): Upstream | null {
    return this.own?.upstream ?? this.batch?.upstream ?? null;
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.own?.cancel();
    this.batch?.gone();
  }

  /** Through the dispatch below on its own, as it came (`skip`: upstreams it must not go to now; `seen`: the throttle one of them answered it with). */
  alone(skip?: ReadonlySet<Upstream>, seen?: ThrottleSeen): void {
    this.batch = null;
    const r = this.request;
    const was = r.transport.skip;
    this.own = this.layer.send(this.target, skip === undefined ? r : held(r, { skip: was === undefined ? skip : new Set([...was, ...skip]), throttledIn: seen }), this.group);
  }

  /** Its answer item with the id the call came with, in place of its place in the batch. */
  withOwnId(item: Buffer): Buffer {
    const s = answerSpans(item, ANY_DEPTH);
    if (s === null || s.idStart === -1) return item;
    return Buffer.concat([item.subarray(0, s.idStart), this.body.subarray(this.idStart, this.idEnd), item.subarray(s.idEnd)]);
  }

  /** Its outcome, unless it was cancelled. */
  forwarded(r: ForwardResult): void {
    if (!this.cancelled) this.target.forwarded(r);
  }
}

/** Calls bound for the same upstreams, in one upstream request: each gets its own item of the answer. */
class UpstreamBatch implements HeldTarget {
  private attempt: Attempt | null = null;
  private left: number;
  /** When it was sent (epoch ms), for a throttle in one of its items (throttle.ts). */
  private sentAt = 0;

  constructor(
    private readonly layer: ForwardBatches,
    private readonly calls: readonly Held[],
    private readonly group: UpstreamGroup,
    private readonly set: number,
  ) {
    this.left = calls.length;
  }

  get upstream(): Upstream | null {
    return this.attempt?.upstream ?? null;
  }

  start(): void {
    const calls = this.calls;
    const parts: Buffer[] = [OPEN];
    let deadline = Infinity;
    let retries = Infinity;
    let maxBuffer = 0;
    calls.forEach((h, i) => {
      h.batch = this;
      if (i > 0) parts.push(COMMA);
      // The call's bytes with its place in the batch as its id.
      parts.push(h.body.subarray(0, h.idStart), Buffer.from(String(i)), h.body.subarray(h.idEnd));
      const r = h.request.transport;
      deadline = Math.min(deadline, r.deadline);
      retries = Math.min(retries, r.retries);
      maxBuffer += r.maxBuffer;
    });
    parts.push(CLOSE);
    const first = calls[0]!.request.transport;
    const { set, group } = this;
    const counts = this.layer.counts;
    counts.batches++;
    counts.batched += calls.length;
    // The held calls, as one batch (its body carries each with its place as its id): the dispatch below reads only its transport.
    const request: HeldRequest = {
      calls: { batch: calls.map((h) => h.call) },
      transport: {
        ...first,
        hold: true,
        body: Buffer.concat(parts),
        deadline,
        retries,
        maxBuffer,
        cost: calls.length,
        emptyOk: false,
        // Any upstream of the set that takes batches (the set already leaves out what each call must not go to).
        accept: (u) => u.takesBatches && (set & (1 << group.all.indexOf(u))) !== 0,
        skip: undefined,
        // A batch answer, or one answer object (a node that takes no batches says so in one); a pool's check otherwise.
        isAnswer: first.isAnswer === undefined ? undefined : (b) => splitBatchAnswer(b, ANY_DEPTH) !== null || first.isAnswer!(b),
      },
    };
    this.sentAt = Date.now();
    this.attempt = this.layer.send(this, request, group);
  }

  /** A call was cancelled: once none is left, neither is the batch. */
  gone(): void {
    if (--this.left === 0) this.attempt?.cancel();
  }

  forwarded(r: ForwardResult): void {
    const calls = this.calls;
    // Every call was cancelled (their clients went away, a hedge won): nothing to tell anyone.
    if (r.kind === 'aborted') return;
    if (r.kind !== 'buffered' || r.status >= 500) {
      // The batch failed (after the retries): each call as that failure fails a lone call, logged once here.
      this.layer.failed(r, r.upstream, calls.length);
      const out: ForwardResult = r.kind === 'failed' ? { ...r, logged: true } : { kind: 'failed', fail: 'bad-response', upstream: r.upstream, logged: true };
      for (const h of calls) h.forwarded(out);
      return;
    }
    const u = r.upstream;
    const items = r.status === 200 ? splitBatchAnswer(r.body, ANY_DEPTH) : null;
    // Not a batch answer (one error object, a 4xx): the node takes no batches; each call goes alone.
    if (items === null) {
      this.layer.refused(u);
      for (const h of calls) if (!h.cancelled) h.alone();
      return;
    }
    const got = new Array<Buffer | undefined>(calls.length);
    for (const it of items) {
      const i = it.id === null ? -1 : Number(it.id);
      if (Number.isInteger(i) && i >= 0 && i < got.length && got[i] === undefined) got[i] = r.body.subarray(it.start, it.end);
    }
    let throttledAt: Set<Upstream> | null = null;
    const sentAt = this.sentAt;
    calls.forEach((h, i) => {
      if (h.cancelled) return;
      const item = got[i];
      const req = h.request.transport;
      // Left out, or not an answer: that call goes alone.
      if (item === undefined || req.isAnswer?.(item) === false) return h.alone();
      if (item.length > req.maxBuffer) return h.forwarded({ kind: 'failed', fail: 'bad-response', upstream: u });
      if (req.throttled?.(item) === true) {
        // The node throttled this call: it goes elsewhere alone, where the throttle is marked unless every other upstream says the same (upstreams/forward.ts).
        throttledAt ??= new Set([u]);
        return h.alone(throttledAt, { u, headers: r.headers, sentAt, body: h.withOwnId(item) });
      }
      h.forwarded({ kind: 'buffered', upstream: u, status: 200, headers: JSON_HEADERS, body: h.withOwnId(item) });
    });
  }
}
