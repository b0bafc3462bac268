// Batches and the EVM cache: the calls of a client's batch take part one by
// one (CachedBatch), and the misses of one turn of the event loop may go
// upstream together, as one batch (MissQueue, cache.batch). Either way what
// goes upstream is the client's own request with other calls as its body,
// through the same forwarding as any call.
import type { Exchange } from '../exchange.ts';
import type { Failure } from '../envelope.ts';
import { mergeBatch, type MergeSlot } from '../guards/evm.ts';
import { MAX_ANSWER_DEPTH, splitBatchAnswer } from '../json-scan.ts';
import type { ForwardRequest, ForwardResult, ForwardTarget } from '../proxy.ts';
import { UpstreamGroup, type Upstream } from '../upstream.ts';
import { failFlight, NO_SINK, X_CACHE, X_CACHE_LOG, type FlightMember } from './common.ts';
import type { CacheCore, Flight } from './core.ts';
import type { EvmDecision } from '../guards/evm.ts';
import { isCacheable, type Scope } from './policy.ts';

/** What the EVM route hands its forwarder: the guard's decision on the call or batch. */
export type EvmCall = Extract<EvmDecision, { kind: 'forward' }>;
/** How the route makes the upstream request of a call or batch, as it would without a cache. */
export type BuildRequest = (x: Exchange, d: EvmCall) => ForwardRequest;

export interface EvmFlight {
  readonly method: string;
  readonly scope: Scope;
  /** The call's bytes, and where its id is in them (a batch of misses puts its own there). */
  readonly body: Buffer;
  readonly idStart: number;
  readonly idEnd: number;
}

/** The EVM cache, as its batches see it (evm.ts). */
export interface EvmCache {
  readonly core: CacheCore;
  readonly misses: MissQueue;
  take(m: FlightMember, method: string, b: Buffer, idStart: number, idEnd: number, template: ForwardRequest | null, x: Exchange, d: EvmCall, build: BuildRequest): boolean;
}

const OPEN = Buffer.from('[');
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']');
/** What mergeBatch is given when nothing else went upstream: every slot is ready. */
const EMPTY_BATCH = Buffer.from('[]');

/**
 * A client's batch: each call the cache takes by a single call's rules is
 * answered from memory, joins an identical call in flight or goes as a flight
 * of its own, and the other calls go upstream together, as one smaller batch.
 * The client gets one batch answer, in its own order, once every part is in.
 * False when no call takes part: the batch is forwarded as it is.
 */
export function serveBatch(cache: EvmCache, x: Exchange, d: EvmCall, build: BuildRequest): boolean {
  const methods = d.methods!;
  const b = typeof d.body === 'string' ? Buffer.from(d.body) : d.body;
  const items = splitBatchAnswer(b, MAX_ANSWER_DEPTH);
  if (items === null || items.length !== methods.length) return false;
  // The client's positions: the guard's own (refused calls answered in place), or one per call.
  const slots: MergeSlot[] = d.merge !== null ? d.merge.slots.slice() : items.map((it) => (it.id === null ? null : { forwardedId: it.id }));
  // The k-th call with an id answers in the k-th slot that waits for a forwarded answer.
  const at = new Array<number>(items.length).fill(-1);
  let slot = 0;
  for (let i = 0; i < items.length; i++) {
    if (items[i]!.id === null) continue;
    while (slot < slots.length && !isForwarded(slots[slot]!)) slot++;
    if (slot === slots.length) return false;
    at[i] = slot++;
  }
  const template = build(x, d);
  const batch = new CachedBatch(x, slots);
  const rest: Buffer[] = [];
  let restAnswered = false;
  const misses = cache.misses;
  // The batch's misses go upstream together, as the client sent them (with cache.batch, with the turn's others).
  misses.gather();
  try {
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      const call = b.subarray(it.start, it.end);
      // A notification (no answer, no slot) goes with the rest, as does a call the cache does not take.
      if (at[i] !== -1 && isCacheable(methods[i]!) && batch.take(cache, at[i]!, methods[i]!, call, template, x, d, build)) continue;
      rest.push(call);
      if (at[i] !== -1) restAnswered = true;
    }
  } finally {
    // Sent even if taking a call apart threw: other clients may have joined them.
    misses.release();
  }
  if (batch.parts === 0) return false;
  if (rest.length > 0) {
    const body = Buffer.concat([OPEN, ...rest.flatMap((c, k) => (k === 0 ? [c] : [COMMA, c])), CLOSE]);
    batch.expectRest();
    cache.core.send(new RestPart(batch, cache), { ...template, body, emptyOk: !restAnswered });
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

  constructor(
    readonly x: Exchange,
    /** The client's calls in order: ready answers (refusals, then the parts' own), or forwarded ids. */
    private readonly slots: MergeSlot[],
  ) {}

  take(cache: EvmCache, slot: number, method: string, call: Buffer, template: ForwardRequest, x: Exchange, d: EvmCall, build: BuildRequest): boolean {
    this.pending++;
    if (cache.take(new BatchCall(this, slot), method, call, -1, -1, template, x, d, build)) {
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

  /** The node's answer to the rest. */
  restAnswer(body: Buffer): void {
    this.restBody = body;
    this.went = 2;
    this.settle();
  }

  private settle(): void {
    if (--this.pending !== 0) return;
    const x = this.x;
    // Already answered (a part failed) or the client went away: nothing more to send.
    if (x.res.headersSent || x.res.destroyed) return;
    const tag = this.went === 2 ? 'miss' : this.went === 1 ? 'coalesced' : 'hit';
    x.cacheTag = X_CACHE[tag];
    x.cacheLog = X_CACHE_LOG[tag];
    const merged = mergeBatch({ slots: this.slots }, this.restBody ?? EMPTY_BATCH);
    if (merged === null) {
      x.host.log.warn({ event: 'upstream_bad_response', upstream: x.upstream?.name, reqId: x.id }, 'upstream answer is not JSON-RPC');
      return x.fail('bad-response');
    }
    x.send(200, merged);
  }

  /** A part failed: the whole batch does, once (X-Cache as that part's: it went upstream or joined a call that did). */
  fail(f: Failure, tag: readonly string[] | null): void {
    const x = this.x;
    if (x.res.headersSent || x.res.destroyed) return;
    const t = tag === X_CACHE.coalesced && this.went < 2 ? 'coalesced' : 'miss';
    x.cacheTag = X_CACHE[t];
    x.cacheLog = X_CACHE_LOG[t];
    x.fail(f);
  }
}

/** The calls of a client's batch the cache does not take, sent upstream together: their answers join the others'. */
class RestPart implements ForwardTarget {
  readonly res = NO_SINK;

  constructor(
    private readonly batch: CachedBatch,
    private readonly cache: EvmCache,
  ) {}

  streamHead(): void {
    throw new Error('held whole');
  }

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

/**
 * The misses of one turn of the event loop, sent as batches of up to
 * `cache.batch` to the chain's upstreams that take batches (Upstream.takesBatches,
 * learned by a batch of misses or a poll; an upstream back from down is asked
 * again); each alone with `batch: 1`, or when none takes batches.
 */
export class MissQueue {
  private queued: Flight<EvmFlight>[] = [];
  private flushing = false;
  /** While a client's batch is taken apart: its misses, sent together after. */
  private gathering: Flight<EvmFlight>[] | null = null;
  private takers: UpstreamGroup | null;

  constructor(
    private readonly cache: EvmCache,
    private readonly max: number,
  ) {
    this.takers = cache.core.group;
  }

  add(f: Flight<EvmFlight>): void {
    if (this.gathering !== null) return void this.gathering.push(f);
    if (!this.batching) return f.send();
    this.queued.push(f);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(this.flush);
  }

  gather(): void {
    this.gathering = [];
  }

  release(): void {
    const gathered = this.gathering ?? [];
    this.gathering = null;
    if (this.batching) for (const f of gathered) this.add(f);
    else this.together(gathered);
  }

  private get batching(): boolean {
    return this.max > 1 && this.batchTakers() !== null;
  }

  private readonly flush = (): void => {
    this.flushing = false;
    const all = this.queued;
    this.queued = [];
    for (let i = 0; i < all.length; i += this.max) this.together(all.slice(i, i + this.max));
  };

  private together(flights: Flight<EvmFlight>[]): void {
    const g = this.batchTakers();
    if (flights.length > 1 && g !== null && g.all.some((u) => u.usable)) new MissBatch(this.cache, flights, g, this).start();
    else for (const f of flights) f.send();
  }

  /** The chain's upstreams that take batches, null when none does. Each change is logged once. */
  private batchTakers(): UpstreamGroup | null {
    const all = this.cache.core.group.all;
    const g = this.takers;
    let n = 0;
    for (const u of all) if (u.takesBatches) n++;
    // The same upstreams as last time: the group holds only those that took batches when it was made.
    if (g === null ? n === 0 : n === g.all.length && g.all.every((u) => u.takesBatches)) return g;
    const had = new Set(g?.all);
    this.takers = n === 0 ? null : n === all.length ? this.cache.core.group : new UpstreamGroup(all.filter((u) => u.takesBatches));
    const log = this.cache.core.log;
    const chain = this.cache.core.path;
    for (const u of all) {
      if (!u.takesBatches && had.has(u)) {
        const msg = n === 0 ? 'upstream takes no batches: cache misses now go one by one' : "upstream takes no batches: batches of cache misses now go to the chain's other upstreams";
        log.warn({ event: 'upstream_refused_batch', chain, upstream: u.name }, msg);
      } else if (u.takesBatches && !had.has(u)) {
        log.info({ event: 'upstream_batches_again', chain, upstream: u.name }, 'upstream back from down: batches of cache misses go to it again');
      }
    }
    return this.takers;
  }

  refused(u: Upstream): void {
    u.takesBatches = false;
    this.batchTakers();
  }
}

/** Several misses in one upstream request: each flight gets its own item of the answer, as if it had gone alone. */
class MissBatch implements ForwardTarget {
  readonly res = NO_SINK;

  constructor(
    private readonly cache: EvmCache,
    private readonly flights: readonly Flight<EvmFlight>[],
    private readonly group: UpstreamGroup,
    private readonly queue: MissQueue,
  ) {}

  start(): void {
    const parts: Buffer[] = [OPEN];
    this.flights.forEach((f, i) => {
      if (i > 0) parts.push(COMMA);
      const d = f.data;
      parts.push(d.body.subarray(0, d.idStart), Buffer.from(String(i)), d.body.subarray(d.idEnd));
    });
    parts.push(CLOSE);
    const core = this.cache.core;
    core.stats.batches++;
    core.stats.batched += this.flights.length;
    core.send(this, { ...this.flights[0]!.request, body: Buffer.concat(parts) }, this.group);
  }

  streamHead(): void {
    throw new Error('a flight never streams');
  }

  forwarded(r: ForwardResult): void {
    const flights = this.flights;
    const core = this.cache.core;
    if (r.kind !== 'buffered') {
      for (const f of flights) core.close(f as Flight<unknown>);
      // One failure, logged once, for every client waiting on the batch.
      const members = flights.flatMap((f) => f.members);
      flights.forEach((f) => f.members.forEach((m, i) => ((m.cacheTag = i === 0 ? X_CACHE.miss : X_CACHE.coalesced), (m.cacheLog = i === 0 ? X_CACHE_LOG.miss : X_CACHE_LOG.coalesced))));
      return failFlight(core.log, r, members);
    }
    if (r.status >= 500) {
      // The node failed (after the retries): every call in the batch fails as a lone call's bad answer would, logged once.
      core.log.warn({ event: 'upstream_bad_response', chain: core.path, upstream: r.upstream.name, status: r.status, reqId: flights[0]!.firstId }, 'upstream failed a batch of cache misses');
      for (const f of flights) f.badResponse(r.upstream);
      return;
    }
    const items = r.status === 200 ? splitBatchAnswer(r.body, MAX_ANSWER_DEPTH) : null;
    // Not a batch answer (a node that takes no batches answers one error, or a 4xx): each goes alone, and so do later
    // misses. A 429 is the node's rate limit, not a refusal of batches: each goes alone this time only.
    if (items === null) {
      if (r.status !== 429) this.queue.refused(r.upstream);
      for (const f of flights) f.send();
      return;
    }
    const got = new Array<Buffer | undefined>(flights.length);
    for (const it of items) {
      const i = it.id === null ? -1 : Number(it.id);
      if (Number.isInteger(i) && i >= 0 && i < got.length && got[i] === undefined) got[i] = r.body.subarray(it.start, it.end);
    }
    flights.forEach((f, i) => {
      const item = got[i];
      // An item the node left out: that call goes alone.
      if (item === undefined) f.send();
      else f.forwarded({ kind: 'buffered', upstream: r.upstream, status: 200, headers: r.headers, body: item });
    });
  }
}
