// One EVM chain's cache: what the chain's head and finalized block are, the
// answers kept for it, and the calls in flight that identical calls join.
//
// The rules that keep every answer right (README: "What is cached"):
//  - only a single call with an id, of a method the policy lists, whose
//    answer is a result that is not null (never an error, never null);
//  - an answer bound to the head is kept under the head epoch of the moment
//    the call was sent, and only if the upstream that answered was at the
//    chain's best head (number and hash) then and still is; any change of the
//    head's number or hash starts a new epoch and drops those entries;
//  - an answer addressed by block number is kept forever only once that block
//    is at or below the finalized block (the lowest the healthy upstreams
//    report; unknown means nothing is final);
//  - an answer addressed by hash (a block, a transaction, a receipt) is kept
//    forever only once its block is final and its hash is the canonical one
//    at that number, as an upstream at the head answers eth_getBlockByNumber;
//    a transaction not yet in a block is never kept;
//  - eth_blockNumber never goes backwards for a client.
import type { Logger } from '../log.ts';
import { HEALTH_AGENT, UpstreamGroup } from '../upstream.ts';
import type { Exchange } from '../exchange.ts';
import { answerSpans, hasDuplicateKeys, MAX_ANSWER_DEPTH, splitBatchAnswer } from '../json-scan.ts';
import { Forward, type ForwardResult, type ForwardTarget, type Verdict } from '../proxy.ts';
import type { CacheSpec, EvmRouteSpec } from '../types.ts';
import type { Upstream } from '../upstream.ts';
import { failFlight, MAX_HELD, NO_SINK, tagFlight, X_CACHE, X_CACHE_LOG, type FlightMember } from './common.ts';
import type { Failure } from '../envelope.ts';
import { mergeBatch, type BatchMerge, type MergeSlot } from '../guards/evm.ts';
import { ChainHead, quantity, type HeadProbe } from './head.ts';
import { SharedTier, type Parts } from './shared.ts';
import { isCacheable, scopeOf, type Located, type Scope } from './policy.ts';
import { CacheStats, type CacheStore, type Entry } from './store.ts';

const POLL_LATEST = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}');
const POLL_FINALIZED = Buffer.from('{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["finalized",false]}');
const POLL_SAFE = Buffer.from('{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["safe",false]}');
const POLL_TAG = Buffer.concat([Buffer.from('['), POLL_LATEST, Buffer.from(','), POLL_FINALIZED, Buffer.from(','), POLL_SAFE, Buffer.from(']')]);
const NULL = Buffer.from('null');
const EMPTY = Buffer.alloc(0);

export class EvmCache {
  readonly stats: CacheStats;
  readonly head: ChainHead;
  /** The highest eth_blockNumber any client has seen. */
  private served = -1;
  /** Keys of entries bound to the current epoch, dropped when it ends. */
  private headKeys = new Set<string>();
  private readonly flights = new Map<string, Flight>();
  /** Entries by hash waiting for the canonical hash of their (final) block: block number -> key -> the answer's block hash. */
  private readonly checking = new Map<number, Map<string, string>>();
  private readonly prefix: string;
  private readonly sharedPrefix: string;

  constructor(
    readonly route: EvmRouteSpec,
    readonly group: UpstreamGroup,
    readonly store: CacheStore,
    spec: CacheSpec,
    readonly log: Logger,
    readonly circuitOpen: (u: Upstream) => void,
    /** The Redis tier, with cache.redis: final and constant answers only. */
    private readonly shared: SharedTier | null = null,
  ) {
    this.stats = new CacheStats(route.path);
    this.prefix = `${route.listener}/${route.path} `;
    // In Redis, the chain id joins the key: replicas that share one Redis share only answers of the same chain.
    this.sharedPrefix = `evm ${route.chainId ?? '-'} `;
    this.head = new ChainHead(group, evmProbe(route.finality ?? null), spec.headPollMs, this.stats, () => this.newEpoch());
    this.batchMax = spec.batch;
    this.batchGroup = group;
  }

  start(): void {
    this.head.start();
  }

  stop(): void {
    this.head.stop();
  }

  private newEpoch(): void {
    for (const key of this.headKeys) this.store.delete(key);
    this.headKeys = new Set();
  }

  // ------------------------------------------------------------ serving

  /**
   * Answers a single call from memory, or has it join an identical call in
   * flight, or sends it as a new flight. False when the call is not one the
   * cache takes: the caller forwards it as usual.
   */
  serve(x: Exchange, method: string, body: Buffer | string, idStart: number, idEnd: number): boolean {
    // Other methods (writes, status, the mempool) cost nothing more than this lookup.
    if (!isCacheable(method)) return false;
    return this.take(x, method, typeof body === 'string' ? Buffer.from(body) : body, idStart, idEnd);
  }

  /**
   * A client's batch (the calls the guard forwards, `methods` theirs in order):
   * each call the cache takes by a single call's rules is answered from memory,
   * joins an identical call in flight or goes as a flight of its own, and the
   * other calls go upstream together, as one smaller batch. The client gets one
   * batch answer, in its own order, once every part is in. Null when no call
   * takes part: the batch is forwarded as it is.
   */
  serveBatch(x: Exchange, body: Buffer | string, methods: readonly string[], merge: BatchMerge | null): CachedBatch | null {
    if (!methods.some(isCacheable)) return null;
    const b = typeof body === 'string' ? Buffer.from(body) : body;
    const items = splitBatchAnswer(b, MAX_ANSWER_DEPTH);
    if (items === null || items.length !== methods.length) return null;
    // The client's positions: the guard's own (refused calls answered in place), or one per call.
    const slots: MergeSlot[] = merge !== null ? merge.slots.slice() : items.map((it) => (it.id === null ? null : { forwardedId: it.id }));
    // The k-th call with an id answers in the k-th slot that waits for a forwarded answer.
    const at = new Array<number>(items.length).fill(-1);
    let slot = 0;
    for (let i = 0; i < items.length; i++) {
      if (items[i]!.id === null) continue;
      while (slot < slots.length && !isForwarded(slots[slot]!)) slot++;
      if (slot === slots.length) return null;
      at[i] = slot++;
    }
    const batch = new CachedBatch(x, slots);
    // The batch's misses go upstream together, as the client sent them (with cache.batch, with the turn's others).
    const gathered: Flight[] = [];
    this.gathering = gathered;
    const rest: Buffer[] = [];
    let restAnswered = false;
    try {
      for (let i = 0; i < items.length; i++) {
        const it = items[i]!;
        const call = b.subarray(it.start, it.end);
        // A notification (no answer, no slot) goes with the rest, as does a call the cache does not take.
        if (at[i] !== -1 && isCacheable(methods[i]!) && batch.take(this, at[i]!, methods[i]!, call)) continue;
        rest.push(call);
        if (at[i] !== -1) restAnswered = true;
      }
    } finally {
      // Sent even if taking a call apart threw: other clients may have joined them.
      this.gathering = null;
      if (this.batching) for (const f of gathered) this.enqueue(f);
      else this.together(gathered);
    }
    if (batch.parts === 0) return null;
    batch.rest = rest.length === 0 ? null : Buffer.concat([OPEN, ...rest.flatMap((c, k) => (k === 0 ? [c] : [COMMA, c])), CLOSE]);
    batch.restAnswered = restAnswered;
    return batch;
  }

  /**
   * One call: from memory (a hit), joined to a flight, or sent as a new one.
   * False when the cache does not take it. `idStart`/`idEnd`: where the id is,
   * as the guard's fast path found it (a plain call: each key once, only the
   * four JSON-RPC keys); -1 to find it here.
   */
  take(m: FlightMember, method: string, b: Buffer, idStart = -1, idEnd = -1): boolean {
    // The key is the call as sent with its id cut out: a hit needs no parse.
    // (The guard has checked the body: one object, this one method; a body
    // that names id twice is forwarded as usual.)
    if (idStart < 0) {
      const spans = answerSpans(b, MAX_ANSWER_DEPTH);
      if (spans === null || spans.idStart === -1) return false;
      idStart = spans.idStart;
      idEnd = spans.idEnd;
    }
    const key = this.prefix + b.toString('latin1', 0, idStart) + '\u0000' + b.toString('latin1', idEnd);
    // The client's id as it sent it (a long number keeps all its digits).
    const idJson = b.toString('utf8', idStart, idEnd);
    const e = this.store.get(key);
    if (e !== undefined) {
      if (e.epoch === -1 || e.epoch === this.head.epoch) {
        this.stats.hits++;
        m.cacheTag = X_CACHE.hit;
        m.cacheLog = X_CACHE_LOG.hit;
        const n = e.number >= 0 ? this.blockNumber(e.number) : -1;
        m.send(200, n === -1 ? Buffer.concat([e.prefix, Buffer.from(idJson), e.suffix]) : numberAnswer(idJson, n));
        return true;
      }
      this.store.delete(key);
    }
    const flight = this.flights.get(key);
    if (flight !== undefined) {
      flight.join(m, idJson);
      return true;
    }
    let doc: { params?: unknown };
    try {
      doc = JSON.parse(b.toString('utf8')) as typeof doc;
    } catch {
      return false;
    }
    // Params that name a key twice may mean another block to the node than to JSON.parse: such a call is forwarded,
    // never kept or coalesced. Only a chain with validate: off sends them as they came (the guard's fast path reads
    // no params there); where params are checked, what reaches this point names every key once.
    if (!this.route.validate && hasDuplicateKeys(b, doc)) return false;
    const scope = scopeOf(method, doc.params);
    if (scope === null) return false;
    const f = new Flight(this, key, method, scope, this.head.epoch, this.head.seq, m, idJson, idStart, idEnd);
    this.flights.set(key, f);
    // An answer that may be final may be in Redis already: asked first, then the node.
    const shared = this.shared;
    if (shared !== null && shared.isUp && (scope.kind === 'forever' || scope.kind === 'hash' || (scope.kind === 'block' && this.head.isFinal(scope.number)))) {
      void shared.get(this.sharedKey(key)).then((parts) => f.afterShared(parts, b));
    } else f.start(b);
    return true;
  }

  private sharedKey(key: string): string {
    return SharedTier.key(this.sharedPrefix + key);
  }

  /** A flight answered from Redis: kept in memory for good (only final answers are ever put there). */
  sharedLanded(f: Flight, prefix: Buffer, suffix: Buffer): void {
    this.flights.delete(f.key);
    this.store.set(f.key, prefix, suffix, -1, -1, this.stats);
  }

  /** Keeps a final answer in Redis too. */
  private share(key: string, prefix: Buffer, suffix: Buffer): void {
    this.shared?.put(this.sharedKey(key), prefix, suffix);
  }

  /** The number to answer eth_blockNumber with: -1 to serve `n` as it is, else the higher one a client already saw. */
  blockNumber(n: number): number {
    if (n >= this.served) {
      this.served = n;
      return -1;
    }
    return this.served;
  }

  /** A flight is over: keep its answer if the rules allow (`result`: the answer's result, not null). */
  landed(f: Flight, u: Upstream, prefix: Buffer, suffix: Buffer, result: Buffer, number: number): void {
    this.flights.delete(f.key);
    const scope = f.scope;
    const head = this.head;
    if (scope.kind !== 'forever') {
      // Sent under another head, or answered by an upstream not at the head: not kept.
      if (f.epoch !== head.epoch || !head.atHead(u, f.seq)) return;
    }
    let forever = scope.kind === 'forever';
    let at: { number: number; hash: string } | null = null;
    if (scope.kind === 'block' && head.isFinal(scope.number)) {
      forever = true;
      // A final block by number: its hash is the canonical one, for answers by hash to check against.
      if (f.method === 'eth_getBlockByNumber') {
        const b = locate(result, 'block');
        if (b !== null && b.number === scope.number) head.learnCanonical(b.number, b.hash);
      }
    } else if (scope.kind === 'hash') {
      at = locate(result, scope.located);
      // A transaction not in a block yet (pending) is never kept: the mempool changes without the head moving.
      if (scope.located === 'tx' && at === null) return;
      if (at !== null && head.isFinal(at.number) && head.canonicalHash(at.number) === at.hash) {
        forever = true;
        at = null;
      }
    }
    const e = this.store.set(f.key, Buffer.from(prefix), Buffer.from(suffix), forever ? -1 : head.epoch, number, this.stats);
    if (forever) this.share(f.key, prefix, suffix);
    if (e === null || forever) return;
    this.headKeys.add(f.key);
    // By hash, in a final block whose canonical hash is not known yet: ask, and keep it forever if it is.
    if (at !== null && head.isFinal(at.number)) this.check(f.key, at.number, at.hash);
  }

  /** Learns the canonical hash of final block `n` from an upstream at the head, then keeps forever the entries by hash in it. */
  private check(key: string, n: number, hash: string): void {
    let waiting = this.checking.get(n);
    if (waiting !== undefined) return void waiting.set(key, hash);
    if (this.checking.size >= MAX_CHECKS) return;
    waiting = new Map([[key, hash]]);
    this.checking.set(n, waiting);
    const head = this.head;
    const seq = head.seq;
    const u = this.group.all.find((v) => v.usable && head.atHead(v, seq));
    const done = (): void => {
      this.checking.delete(n);
      const canonical = head.canonicalHash(n);
      if (canonical === undefined) return;
      for (const [k, h] of waiting) {
        const e = this.store.peek(k);
        if (h !== canonical || e === undefined || e.epoch !== head.epoch) continue;
        this.store.set(k, e.prefix, e.suffix, -1, e.number, this.stats);
        this.headKeys.delete(k);
        this.share(k, e.prefix, e.suffix);
      }
    };
    if (u === undefined) return done();
    u.pool
      .request({
        path: u.rpcPath,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': HEALTH_AGENT, ...u.headers },
        body: `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x${n.toString(16)}",false]}`,
        headersTimeout: this.route.limits.timeoutMs,
        bodyTimeout: this.route.limits.timeoutMs,
      })
      .then(async (res) => {
        const doc = (await res.body.json()) as { result?: { number?: unknown; hash?: unknown } | null };
        const b = doc?.result;
        // Only from an upstream still at the head: its chain is the chain.
        if (res.statusCode === 200 && quantity(b?.number) === n && typeof b?.hash === 'string' && head.atHead(u, seq)) head.learnCanonical(n, b.hash);
      })
      .catch(() => undefined)
      .finally(done);
  }

  crashed(f: Flight): void {
    this.flights.delete(f.key);
  }

  // ------------------------------------------------------------ misses sent together

  /** At most this many misses of one turn go upstream in one batch (cache.batch); 1: each alone. */
  readonly batchMax: number;
  /** The upstreams batches of misses go to, those that take batches (Upstream.takesBatches); null once none is left. */
  private batchGroup: UpstreamGroup | null;
  /** While a client's batch is taken apart: its new flights, sent together after. */
  gathering: Flight[] | null = null;
  /** Misses of this turn of the event loop, sent when it ends. */
  private queued: Flight[] = [];
  private flushing = false;

  /** Whether the misses of a turn wait for each other (cache.batch, and an upstream left that takes batches). */
  get batching(): boolean {
    return this.batchMax > 1 && this.batchTakers() !== null;
  }

  /** Holds a miss until the end of this turn of the event loop, to go with the others. */
  enqueue(f: Flight): void {
    this.queued.push(f);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.flushing = false;
    const all = this.queued;
    this.queued = [];
    for (let i = 0; i < all.length; i += this.batchMax) this.together(all.slice(i, i + this.batchMax));
  };

  /** Misses sent as one batch, to an upstream that takes batches; each alone when there is none (or one miss). */
  together(flights: Flight[]): void {
    const g = this.batchTakers();
    if (flights.length > 1 && g !== null && g.all.some((u) => u.usable)) new MissBatch(this, flights, g).start();
    else for (const f of flights) f.send();
  }

  /**
   * The chain's upstreams that take batches (Upstream.takesBatches, learned by a batch of misses, the health check or
   * the head poll; an upstream back from down is asked again), null when none does. Each change is logged once.
   */
  private batchTakers(): UpstreamGroup | null {
    const all = this.group.all;
    const g = this.batchGroup;
    let takers = 0;
    for (const u of all) if (u.takesBatches) takers++;
    // The same upstreams as last time: the group holds only those that took batches when it was made.
    if (g === null ? takers === 0 : takers === g.all.length && g.all.every((u) => u.takesBatches)) return g;
    const had = new Set(g?.all);
    this.batchGroup = takers === 0 ? null : takers === all.length ? this.group : new UpstreamGroup(all.filter((u) => u.takesBatches));
    for (const u of all) {
      if (!u.takesBatches && had.has(u)) {
        const msg = takers === 0 ? 'upstream takes no batches: cache misses now go one by one' : "upstream takes no batches: batches of cache misses now go to the chain's other upstreams";
        this.log.warn({ event: 'upstream_refused_batch', chain: this.route.path, upstream: u.name }, msg);
      } else if (u.takesBatches && !had.has(u)) {
        this.log.info({ event: 'upstream_batches_again', chain: this.route.path, upstream: u.name }, 'upstream back from down: batches of cache misses go to it again');
      }
    }
    return this.batchGroup;
  }

  /** Sends a call or a batch of them to the chain's upstreams; `to` gets the answer held whole. */
  upstream(body: Buffer, requestId: string, to: ForwardTarget, group: UpstreamGroup = this.group): void {
    new Forward(
      group,
      {
        method: 'POST',
        path: rpcPath,
        headers: ['content-type', 'application/json', 'x-request-id', requestId],
        body,
        idempotent: true,
        retries: this.route.retries,
        maxBuffer: MAX_HELD,
        timeoutMs: this.route.limits.timeoutMs,
        emptyOk: false,
        classify,
      },
      to,
      this.circuitOpen,
    ).start();
  }

  /** An upstream answered a batch of misses with something else: it gets no more batches (the chain's others still do). */
  batchRefused(u: Upstream): void {
    u.takesBatches = false;
    this.batchTakers();
  }
}

/**
 * A client's batch with calls the cache takes: their answers (from memory or
 * from their flights) and the rest's answer (the calls the cache does not take,
 * sent upstream together by the route) are put back in the client's order,
 * and sent once all are in. The first failure fails the whole batch in the
 * interface's envelope, as a failed batch does when forwarded whole.
 */
export class CachedBatch {
  /** The calls the cache does not take, as one batch for the route to send; null when there are none. */
  rest: Buffer | null = null;
  /** Whether the rest has a call with an id (else the node answers it with no body). */
  restAnswered = false;
  /** Calls the cache took. */
  parts = 0;
  /** Parts and the rest still to come, plus one until the route has sent the rest. */
  private pending = 1;
  private restBody: Buffer | null = null;
  /** What X-Cache says of the whole batch: 0 every call from memory, 1 some joined a call in flight, 2 some went upstream for it. */
  private went = 0;

  constructor(
    readonly x: Exchange,
    /** The client's calls in order: ready answers (refusals, then the parts' own), or forwarded ids. */
    private readonly slots: MergeSlot[],
  ) {}

  take(cache: EvmCache, slot: number, method: string, call: Buffer): boolean {
    this.pending++;
    if (cache.take(new BatchCall(this, slot), method, call)) {
      this.parts++;
      return true;
    }
    this.pending--;
    return false;
  }

  /** The route sent the rest (or there was none): the batch is answered once the parts are in. */
  sent(): void {
    if (this.rest !== null) this.pending++;
    this.settle();
  }

  /** A part's answer (a JSON-RPC answer object), and what X-Cache said of it. */
  answered(slot: number, body: string | Buffer, tag: readonly string[] | null): void {
    this.slots[slot] = { ready: body };
    const went = tag === X_CACHE.miss ? 2 : tag === X_CACHE.coalesced ? 1 : 0;
    if (went > this.went) this.went = went;
    this.settle();
  }

  /** The node's answer to the rest (any 2xx; the route fails the rest's other answers). */
  restAnswer(body: Buffer): void {
    this.restBody = body;
    this.went = 2;
    this.settle();
  }

  private settle(): void {
    if (--this.pending !== 0) return;
    const x = this.x;
    // Already answered (the rest failed) or the client went away: nothing more to send.
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

/** What mergeBatch is given when nothing else went upstream: every slot is ready. */
const EMPTY_BATCH = Buffer.from('[]');

function isForwarded(slot: MergeSlot): boolean {
  return slot !== null && 'forwardedId' in slot;
}

/** Several misses in one upstream request: each flight gets its own item of the answer, as if it had gone alone. */
class MissBatch implements ForwardTarget {
  readonly res = NO_SINK;

  constructor(
    private readonly cache: EvmCache,
    private readonly flights: readonly Flight[],
    /** The chain's upstreams that take batches. */
    private readonly group: UpstreamGroup,
  ) {}

  start(): void {
    const c = this.cache;
    const parts: Buffer[] = [OPEN];
    this.flights.forEach((f, i) => {
      if (i > 0) parts.push(COMMA);
      parts.push(f.body.subarray(0, f.idStart), Buffer.from(String(i)), f.body.subarray(f.idEnd));
    });
    parts.push(CLOSE);
    c.stats.batches++;
    c.stats.batched += this.flights.length;
    c.upstream(Buffer.concat(parts), this.flights[0]!.firstId, this, this.group);
  }

  streamHead(): void {
    throw new Error('a flight never streams');
  }

  forwarded(r: ForwardResult): void {
    const flights = this.flights;
    if (r.kind !== 'buffered') {
      // One failure, logged once, for every client waiting on the batch.
      failFlight(this.cache.log, r, flights.flatMap((f) => f.end()));
      return;
    }
    if (r.status >= 500) {
      // The node failed (after the retries): every call in the batch fails as a lone call's bad answer would, logged once.
      this.cache.log.warn({ event: 'upstream_bad_response', chain: this.cache.route.path, upstream: r.upstream.name, status: r.status, reqId: flights[0]!.firstId }, 'upstream failed a batch of cache misses');
      for (const f of flights) f.badResponse(r.upstream);
      return;
    }
    const items = r.status === 200 ? splitBatchAnswer(r.body, MAX_ANSWER_DEPTH) : null;
    // Not a batch answer (a node that takes no batches answers one error, or a 4xx): each goes alone, and so do later
    // misses. A 429 is the node's rate limit, not a refusal of batches: each goes alone this time only.
    if (items === null) {
      if (r.status !== 429) this.cache.batchRefused(r.upstream);
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

const OPEN = Buffer.from('[');
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']');

/** Canonical-hash lookups in flight at most. */
const MAX_CHECKS = 64;

/** The block an answer says it is in: a block's number and hash, a transaction's blockNumber and blockHash; null when it has none. */
function locate(result: Buffer, located: Located): { number: number; hash: string } | null {
  let r: { number?: unknown; hash?: unknown; blockNumber?: unknown; blockHash?: unknown };
  try {
    r = JSON.parse(result.toString('utf8')) as typeof r;
  } catch {
    return null;
  }
  if (r === null || typeof r !== 'object') return null;
  const number = quantity(located === 'block' ? r.number : r.blockNumber);
  const hash = located === 'block' ? r.hash : r.blockHash;
  return number >= 0 && typeof hash === 'string' ? { number, hash } : null;
}

/**
 * How an EVM chain's head is asked for: the latest block, and the finalized and
 * safe ones (or, with `depth`, the finalized block is that many below the
 * latest, and there is no safe one). A node without the safe tag answers it
 * with an error: its safe block stays unknown.
 */
function evmProbe(depth: number | null): HeadProbe {
  const body = depth === null ? POLL_TAG : POLL_LATEST;
  return {
    request: (u) => ({ path: u.rpcPath, method: 'POST', body }),
    // With the tag, the poll is a batch: for a node that takes none, the two calls apart.
    ...(depth === null
      ? {
          apart: (u: Upstream) => [
            { path: u.rpcPath, method: 'POST' as const, body: POLL_LATEST },
            { path: u.rpcPath, method: 'POST' as const, body: POLL_FINALIZED },
            { path: u.rpcPath, method: 'POST' as const, body: POLL_SAFE },
          ],
        }
      : {}),
    read(doc) {
      const answers = (Array.isArray(doc) ? doc : [doc]) as { id?: unknown; result?: { number?: unknown; hash?: unknown } | null }[];
      const latest = answers.find((a) => a?.id === 1)?.result;
      const number = quantity(latest?.number);
      if (number < 0 || typeof latest?.hash !== 'string') return null;
      if (depth !== null) return { number, hash: latest.hash, finalized: number - depth };
      const tag = (id: number) => quantity(answers.find((a) => a?.id === id)?.result?.number);
      return { number, hash: latest.hash, finalized: tag(2), safe: tag(3) };
    },
  };
}

/** One call in flight upstream and the clients waiting for its answer, the first of them included. */
class Flight implements ForwardTarget {
  readonly res = NO_SINK;
  /** The clients waiting for the answer, and each one's id as it wrote it. */
  readonly waiting: FlightMember[] = [];
  private readonly ids: string[] = [];
  /** The call's bytes, once started. */
  body: Buffer = EMPTY;

  constructor(
    private readonly cache: EvmCache,
    readonly key: string,
    readonly method: string,
    readonly scope: Scope,
    /** The head epoch and the poll count when the call was sent. */
    readonly epoch: number,
    readonly seq: number,
    first: FlightMember,
    idJson: string,
    /** Where the client's id is in the call's bytes (a batch puts its own there). */
    readonly idStart: number,
    readonly idEnd: number,
  ) {
    this.join(first, idJson);
  }

  get firstId(): string {
    return this.waiting[0]!.id;
  }

  join(x: FlightMember, idJson: string): void {
    this.waiting.push(x);
    this.ids.push(idJson);
  }

  /** Redis answered: from there, or on to the node. */
  afterShared(parts: Parts | null, body: Buffer): void {
    try {
      if (parts === null) this.start(body);
      else this.fromShared(parts[0], parts[1]);
    } catch (err) {
      this.crashed(err);
    }
  }

  /** Answered from Redis: every client waiting gets it as a hit. */
  private fromShared(prefix: Buffer, suffix: Buffer): void {
    const c = this.cache;
    c.sharedLanded(this, prefix, suffix);
    c.stats.hits += this.waiting.length;
    c.stats.sharedHits++;
    this.waiting.forEach((x, i) => {
      x.later(() => {
        x.cacheTag = X_CACHE.hit;
        x.cacheLog = X_CACHE_LOG.hit;
        x.send(200, Buffer.concat([prefix, Buffer.from(this.ids[i]!), suffix]));
      });
    });
  }

  start(body: Buffer): void {
    this.body = body;
    const gathering = this.cache.gathering;
    if (gathering !== null) gathering.push(this);
    else if (this.cache.batching) this.cache.enqueue(this);
    else this.send();
  }

  /** Upstream on its own. */
  send(): void {
    this.cache.upstream(this.body, this.firstId, this);
  }

  streamHead(): void {
    throw new Error('a flight never streams');
  }

  forwarded(r: ForwardResult): void {
    try {
      this.land(r);
    } catch (err) {
      this.crashed(err);
    }
  }

  /** The flight is over without an answer to keep: its clients, told MISS (the first) or COALESCED. */
  end(): readonly FlightMember[] {
    this.cache.crashed(this);
    tagFlight(this.waiting);
    return this.waiting;
  }

  /** The node's answer was not one: every client gets the interface's bad-response failure (logged by the caller). */
  badResponse(u: Upstream): void {
    for (const x of this.end()) {
      x.upstream = u;
      x.fail('bad-response');
    }
  }

  private crashed(err: unknown): void {
    this.cache.crashed(this);
    for (const x of this.waiting) x.internal(err);
  }

  private land(r: ForwardResult): void {
    const c = this.cache;
    if (r.kind !== 'buffered') return failFlight(c.log, r, this.end());
    const u = r.upstream;
    const body = r.body;
    const spans = answerSpans(body, MAX_ANSWER_DEPTH);
    if (spans === null || spans.idStart === -1) {
      c.log.warn({ event: 'upstream_bad_response', upstream: u.name, status: r.status, reqId: this.firstId }, 'upstream answer is not JSON-RPC');
      return this.badResponse(u);
    }
    const prefix = body.subarray(0, spans.idStart);
    const suffix = body.subarray(spans.idEnd);
    const result = spans.resultStart === -1 ? null : body.subarray(spans.resultStart, spans.resultEnd);
    const ok = r.status === 200 && !spans.hasError && result !== null && !result.equals(NULL);
    // eth_blockNumber: what this answer says, and what the clients get.
    let number = -1;
    let served = -1;
    if (ok && this.method === 'eth_blockNumber') {
      number = quantity(JSON.parse(result.toString('latin1')));
      served = number < 0 ? -1 : c.blockNumber(number);
    }
    tagFlight(this.waiting);
    this.waiting.forEach((x, i) => {
      x.upstream = u;
      const idJson = this.ids[i]!;
      if (served !== -1) x.send(200, numberAnswer(idJson, served));
      else x.send(r.status, Buffer.concat([prefix, Buffer.from(idJson), suffix]));
    });
    c.stats.misses++;
    c.stats.coalesced += this.waiting.length - 1;
    if (ok && served === -1) c.landed(this, u, prefix, suffix, result, number);
    else c.crashed(this);
  }
}

function rpcPath(u: Upstream): string {
  return u.rpcPath;
}

/** A flight holds every answer; 5xx and error pages are failed attempts, retried where safe. */
function classify(status: number, h: Record<string, string | string[] | undefined>): Verdict {
  const ct = h['content-type'];
  return status >= 500 || (typeof ct === 'string' && ct.indexOf('html') !== -1) ? 'bad' : 'buffer';
}

function numberAnswer(idJson: string, n: number): string {
  return `{"jsonrpc":"2.0","id":${idJson},"result":"0x${n.toString(16)}"}`;
}

export type { Entry };
export { CacheStats };
