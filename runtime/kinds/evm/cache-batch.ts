// A client's batch and the EVM cache's front: its calls take part one by one
// (CachedBatch); the calls the cache does not take go on together, as the
// client's own request with those Calls (their bytes joined only where they
// are sent as one body), through the same layers below the front as any call.
// The batch's merge plan is the front's: where a layer below splits the rest
// again (the pool, the ranges layer), each call's answer lands in its slot
// (ItemsTaker), and the client's answer is joined once, here.
import type { ClientTarget } from '../../exchange.ts';
import type { Failure } from '../../envelope.ts';
import { mergeBatch } from '../../jsonrpc/batch-merge.ts';
import { forwardAs, type Call as SeamCall, type ForwardRequest, type ForwardResult, type HeldTarget, type ItemsTaker } from '../../dispatch.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import { releaseHeld } from '../../upstreams/forward.ts';
import { Call, type MergeSlot } from './call.ts';
import { X_CACHE, X_CACHE_LOG, type FlightMember } from '../../cache/common.ts';
import { isCacheable } from './cache-policy.ts';
import type { EvmCache } from './cache-types.ts';
import type { Logger } from '../../observe/log.ts';

/** What mergeBatch is given when nothing else went upstream: every slot is ready. */
const EMPTY_BATCH = Buffer.from('[]');

/**
 * A client's batch: each call the cache takes by a single call's rules is
 * answered from memory, joins an identical call in flight or goes as a flight
 * of its own, and the other calls go upstream together, as one smaller batch.
 * The client gets one batch answer, in its own order, once every part is in.
 * False when no call takes part: the batch is forwarded as it is. `calls`:
 * the guard's (each its own bytes and id: nothing is parsed again).
 */
export function serveBatch(cache: EvmCache, x: ClientTarget, calls: readonly SeamCall[], request: ForwardRequest): boolean {
  const items: Call[] = [];
  for (const c of calls) if (c instanceof Call) items.push(c);
  if (items.length !== calls.length || items.length === 0) return false;
  // The client's positions: the guard's own (refused calls answered in place), or one per call.
  const merge = items[0]!.merge;
  const slots: MergeSlot[] = merge !== null ? merge.slots.slice() : items.map((c) => (c.notification ? null : { forwardedId: c.idJson }));
  // The k-th call with an id answers in the k-th slot that waits for a forwarded answer.
  const at = new Array<number>(items.length).fill(-1);
  let slot = 0;
  for (let i = 0; i < items.length; i++) {
    if (items[i]!.notification) continue;
    while (slot < slots.length && !isForwarded(slots[slot]!)) slot++;
    if (slot === slots.length) return false;
    at[i] = slot++;
  }
  // The batch's misses go upstream together, as the client sent them (with cache.batch, with the turn's others): the
  // forward layer holds them till the end of the turn and sends those bound for the same upstreams as one batch.
  const batch = new CachedBatch(x, slots, cache.core.log);
  const restCalls: Call[] = [];
  for (let i = 0; i < items.length; i++) {
    const c = items[i]!;
    // A notification (no answer, no slot) goes with the rest, as does a call the cache does not take.
    if (at[i] !== -1 && isCacheable(c.method) && batch.take(cache, at[i]!, c, request)) continue;
    restCalls.push(c);
    if (at[i] !== -1) batch.restSlots.push(at[i]!);
  }
  if (batch.parts === 0) return false;
  if (restCalls.length > 0) {
    batch.expectRest();
    // The rest goes on as the guard's Calls, not joined: a layer below that splits a batch (the ranges layer, the pool)
    // sends them one by one, and only where it is sent whole are their bytes joined (dispatch.ts sentBody).
    cache.core.send(new RestPart(batch, cache), forwardAs(request, { batch: restCalls, together: x }, null, { emptyOk: batch.restSlots.length === 0 }));
  }
  batch.sent();
  return true;
}

function isForwarded(slot: MergeSlot): boolean {
  return slot !== null && 'forwardedId' in slot;
}

/**
 * A client's batch with calls the cache takes: their answers and the rest's
 * answer are put back in the client's order and sent once all are in. The
 * first failure fails the whole batch in the interface's envelope, as a
 * failed batch does when forwarded whole.
 */
class CachedBatch {
  /** Calls the cache took. */
  parts = 0;
  /** Parts and the rest still to come, plus one until the batch is sent. */
  private pending = 1;
  private restBody: Buffer | null = null;
  /** What X-Cache says of the whole batch: 0 every call from memory, 1 some joined a call in flight, 2 some went upstream for it. */
  private went = 0;
  /** The slots of the rest's calls with an id, in the rest's order. */
  readonly restSlots: number[] = [];
  /** Bytes of the rest's answers held in the slots, counted under forward.ts's MAX_HELD_BYTES until the client has the answer. */
  private held = 0;

  constructor(
    readonly x: ClientTarget,
    /** The client's calls in order: ready answers (refusals, then the parts' own), or forwarded ids. */
    private readonly slots: MergeSlot[],
    private readonly log: Logger,
  ) {}

  take(cache: EvmCache, slot: number, call: Call, request: ForwardRequest): boolean {
    this.pending++;
    // Its flight's request is its own, with the batch's transport, one of the client's batch (`together`).
    if (cache.take(new BatchCall(this, slot), call, request, this.x)) {
      this.parts++;
      return true;
    }
    this.pending--;
    return false;
  }

  expectRest(): void {
    this.pending++;
  }

  sent(): void {
    this.settle();
  }

  answered(slot: number, body: string | Buffer, tag: readonly string[] | null): void {
    this.slots[slot] = { ready: body };
    const went = tag === X_CACHE.miss ? 2 : tag === X_CACHE.coalesced ? 1 : 0;
    if (went > this.went) this.went = went;
    this.settle();
  }

  /** The node's answer to the rest, sent whole: merged by the calls' ids. */
  restAnswer(body: Buffer): void {
    this.restBody = body;
    this.went = 2;
    this.settle();
  }

  /** The rest's answers, each call's in its slot (a layer below split the rest: ItemsTaker), `held` bytes counted. */
  restItems(items: readonly (Buffer | readonly Buffer[])[], held: number): void {
    this.held += held;
    // Already answered (a part failed) or the client went away: the batch will not settle, so the bytes go now.
    if (this.x.res.headersSent || this.x.res.destroyed) return this.release();
    // One answer per call with an id, as the splitter gives them; anything else is no answer to this rest.
    if (items.length !== this.restSlots.length) {
      this.log.warn({ event: 'upstream_bad_response', upstream: this.x.upstream?.name, reqId: this.x.id }, 'upstream answer is not JSON-RPC');
      return this.fail('bad-response', X_CACHE.miss);
    }
    items.forEach((it, k) => (this.slots[this.restSlots[k]!] = { ready: Buffer.isBuffer(it) ? it : Buffer.concat(it as readonly Buffer[]) }));
    this.went = 2;
    this.settle();
  }

  /** The answers held for the client are let go: counted no more under MAX_HELD_BYTES. */
  private release(): void {
    releaseHeld(this.held);
    this.held = 0;
  }

  private settle(): void {
    if (--this.pending !== 0) return;
    const x = this.x;
    // Already answered (a part failed) or the client went away: nothing more to send.
    if (x.res.headersSent || x.res.destroyed) return this.release();
    const tag = this.went === 2 ? 'miss' : this.went === 1 ? 'coalesced' : 'hit';
    x.cacheTag = X_CACHE[tag];
    x.cacheLog = X_CACHE_LOG[tag];
    const merged = mergeBatch({ slots: this.slots }, this.restBody ?? EMPTY_BATCH);
    this.release();
    if (merged === null) {
      this.log.warn({ event: 'upstream_bad_response', upstream: x.upstream?.name, reqId: x.id }, 'upstream answer is not JSON-RPC');
      return x.fail('bad-response');
    }
    x.send(200, merged);
  }

  /** A part failed: the whole batch does, once (X-Cache as that part's: it went upstream or joined a call that did). */
  fail(f: Failure, tag: readonly string[] | null): void {
    this.release();
    const x = this.x;
    if (x.res.headersSent || x.res.destroyed) return;
    const t = tag === X_CACHE.coalesced && this.went < 2 ? 'coalesced' : 'miss';
    x.cacheTag = X_CACHE[t];
    x.cacheLog = X_CACHE_LOG[t];
    x.fail(f);
  }
}

/** The calls of a client's batch the cache does not take, sent on together: their answers join the others'. */
class RestPart implements HeldTarget, ItemsTaker {
  readonly takesItems = true;

  constructor(
    private readonly batch: CachedBatch,
    private readonly cache: EvmCache,
  ) {}

  forwarded(r: ForwardResult): void {
    const x = this.batch.x;
    x.later(() => {
      if (r.upstream !== null) x.upstream = r.upstream;
      if (r.kind === 'buffered' && r.status >= 200 && r.status < 300) return this.batch.restAnswer(r.body);
      if (r.kind === 'buffered') this.cache.core.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: x.id }, 'upstream answer is not JSON-RPC');
      else if (r.upstream) this.cache.core.log.warn({ event: 'upstream_failed', chain: r.upstream.chain, upstream: r.upstream.name, fail: r.kind === 'failed' ? r.fail : 'unavailable', reqId: x.id }, 'upstream failed');
      this.batch.fail(r.kind === 'failed' ? r.fail : r.kind === 'buffered' ? 'bad-response' : 'unavailable', X_CACHE.miss);
    });
  }

  takeItems(u: Upstream, items: readonly (Buffer | readonly Buffer[])[], held: number): void {
    const x = this.batch.x;
    x.upstream = u;
    x.later(() => this.batch.restItems(items, held));
  }
}

/** One call of a client's batch, waiting as a flight's member: its answer goes to its slot. */
class BatchCall implements FlightMember {
  cacheTag: readonly string[] | null = null;
  cacheLog = '';

  constructor(
    private readonly batch: CachedBatch,
    private readonly slot: number,
  ) {}

  get id(): string {
    return this.batch.x.id;
  }

  get upstream(): Upstream | null {
    return this.batch.x.upstream;
  }

  set upstream(u: Upstream | null) {
    if (u !== null) this.batch.x.upstream = u;
  }

  send(_status: number, body: string | Buffer): void {
    this.batch.answered(this.slot, body, this.cacheTag);
  }

  fail(f: Failure): void {
    this.batch.fail(f, this.cacheTag);
  }

  internal(err: unknown): void {
    this.batch.x.internal(err);
  }

  later(step: () => void): void {
    this.batch.x.later(step);
  }
}
