// The cache of a Rosetta or Blockbook chain: identical reads in flight share
// one upstream call, and the answers the interface says may be kept are served
// from memory (README: "What is cached"). Such an answer has no id: it is kept
// as the bytes the upstream sent, with the headers that describe them.
//
// The rules are the EVM cache's (evm-cache.ts), with the interface deciding
// what an answer is worth keeping (DocRules.keep):
//  - only a 200 answer, and only from an upstream at the chain's best head
//    (number and hash) since before the call was sent;
//  - bound to the head: kept under the head epoch of the moment the call was
//    sent, dropped when the head's number or hash changes;
//  - in a block: forever once the block is final (the chain's finality depth
//    below the lowest head the usable upstreams report) and, when the call
//    named it by hash only, once its hash is the canonical one at that number
//    (as an upstream at the head answered for that number); until the head
//    moves before that.
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Exchange } from '../exchange.ts';
import type { Logger } from '../log.ts';
import { Forward, type ForwardRequest, type ForwardResult, type ForwardTarget } from '../proxy.ts';
import type { Upstream, UpstreamGroup } from '../upstream.ts';
import { ChainHead, type HeadProbe } from './head.ts';
import { SharedTier } from './shared.ts';
import { CacheStats, type CacheStore } from './store.ts';
import { failFlight, MAX_HELD, NO_SINK, tagFlight, X_CACHE, X_CACHE_LOG } from './common.ts';

/** What may be kept of an answer: bound to the head, or in block `number` (named by number, or by hash only). */
export type Keep = { readonly kind: 'head' } | { readonly kind: 'block'; readonly number: number; readonly hash: string; readonly byNumber: boolean };

export interface DocRules {
  /** Could the answer to `call` be kept forever (so worth asking the shared tier first)? */
  mayLast(call: unknown): boolean;
  /** What may be kept of a 200 answer to `call` (the interface's own description of it); null: nothing. */
  keep(call: unknown, body: Buffer, headers: IncomingHttpHeaders): Keep | null;
  /** Gives an exchange an answer: a coalesced one (upstream set) or one from memory (upstream null, status 200). */
  deliver(x: Exchange, status: number, headers: IncomingHttpHeaders, body: Buffer, upstream: Upstream | null): void;
}

/** Headers kept with an entry: those that describe its bytes. */
const KEPT_HEADERS = ['content-type', 'content-encoding', 'etag', 'last-modified', 'vary'];
const EMPTY = Buffer.alloc(0);

export class DocCache {
  readonly stats: CacheStats;
  readonly head: ChainHead;
  private headKeys = new Set<string>();
  private readonly flights = new Map<string, DocFlight>();
  private readonly prefix: string;
  private readonly sharedPrefix: string;

  constructor(
    route: { readonly path: string; readonly listener: string },
    readonly group: UpstreamGroup,
    readonly store: CacheStore,
    headPollMs: number,
    probe: HeadProbe,
    readonly rules: DocRules,
    readonly log: Logger,
    readonly circuitOpen: (u: Upstream) => void,
    /** The Redis tier, with cache.redis: final answers only. */
    private readonly shared: SharedTier | null,
    /** What makes a chain the same chain on other replicas (Rosetta: its network). */
    identity: string,
  ) {
    this.stats = new CacheStats(route.path);
    this.prefix = `${route.listener}/${route.path} `;
    this.sharedPrefix = `${identity} `;
    this.head = new ChainHead(group, probe, headPollMs, this.stats, () => {
      for (const key of this.headKeys) this.store.delete(key);
      this.headKeys = new Set();
    });
  }

  start(): void {
    this.head.start();
  }

  stop(): void {
    this.head.stop();
  }

  /**
   * Answers a read from memory, or has it join an identical read in flight,
   * or sends it as a new flight. `key` says what makes two reads identical
   * (everything that reaches the upstream); `call` is what rules.keep reads.
   */
  serve(x: Exchange, key: string, request: ForwardRequest, call: unknown): void {
    const k = this.prefix + key;
    const e = this.store.get(k);
    if (e !== undefined) {
      if (e.epoch === -1 || e.epoch === this.head.epoch) {
        this.stats.hits++;
        x.cacheTag = X_CACHE.hit;
        x.cacheLog = X_CACHE_LOG.hit;
        this.rules.deliver(x, 200, e.headers ?? {}, e.prefix, null);
        return;
      }
      this.store.delete(k);
    }
    const flight = this.flights.get(k);
    if (flight !== undefined) return flight.join(x);
    const f = new DocFlight(this, k, call, this.head.epoch, this.head.seq, x);
    this.flights.set(k, f);
    const go = (): void => new Forward(this.group, { ...request, maxBuffer: MAX_HELD, classify: held(request.classify) }, f, this.circuitOpen).start();
    const shared = this.shared;
    if (shared === null || !shared.isUp || !this.rules.mayLast(call)) return go();
    // Maybe final: another replica may have kept it in Redis.
    void shared.get(SharedTier.key(this.sharedPrefix + k)).then((parts) => {
      try {
        if (parts === null) return go();
        const headers = JSON.parse(parts[0].toString('utf8')) as Record<string, string>;
        this.flights.delete(k);
        this.store.set(k, parts[1], EMPTY, -1, -1, this.stats, headers);
        f.fromShared(headers, parts[1]);
      } catch (err) {
        this.crashed(f);
        f.internal(err);
      }
    });
  }

  /** A flight is over: keep its answer if the rules allow. */
  landed(f: DocFlight, u: Upstream, headers: IncomingHttpHeaders, body: Buffer): void {
    this.flights.delete(f.key);
    const keep = this.rules.keep(f.call, body, headers);
    const head = this.head;
    // Sent under another head, or answered by an upstream not at the head: not kept.
    if (keep === null || f.epoch !== head.epoch || !head.atHead(u, f.seq)) return;
    let forever = false;
    if (keep.kind === 'block' && head.isFinal(keep.number)) {
      if (keep.byNumber) head.learnCanonical(keep.number, keep.hash);
      forever = head.canonicalHash(keep.number) === keep.hash;
    }
    const kept: Record<string, string> = {};
    for (const name of KEPT_HEADERS) {
      const v = headers[name];
      if (typeof v === 'string') kept[name] = v;
    }
    const e = this.store.set(f.key, Buffer.from(body), EMPTY, forever ? -1 : head.epoch, -1, this.stats, kept);
    if (forever) this.shared?.put(SharedTier.key(this.sharedPrefix + f.key), Buffer.from(JSON.stringify(kept)), body);
    if (e !== null && !forever) this.headKeys.add(f.key);
  }

  crashed(f: DocFlight): void {
    this.flights.delete(f.key);
  }
}

/** A flight holds every answer: what the route would stream is held too. */
function held(classify: ForwardRequest['classify']): ForwardRequest['classify'] {
  return (status, headers) => {
    const v = classify(status, headers);
    return v === 'stream' ? 'buffer' : v;
  };
}

/** One read in flight upstream and the clients waiting for its answer, the first of them included. */
class DocFlight implements ForwardTarget {
  readonly res = NO_SINK;
  private readonly members: Exchange[];

  constructor(
    private readonly cache: DocCache,
    readonly key: string,
    readonly call: unknown,
    /** The head epoch and the poll count when the call was sent. */
    readonly epoch: number,
    readonly seq: number,
    first: Exchange,
  ) {
    this.members = [first];
  }

  join(x: Exchange): void {
    this.members.push(x);
  }

  /** Answered from Redis: every client waiting gets it as a hit. */
  fromShared(headers: IncomingHttpHeaders, body: Buffer): void {
    const c = this.cache;
    c.stats.hits += this.members.length;
    c.stats.sharedHits++;
    for (const x of this.members) {
      x.cacheTag = X_CACHE.hit;
      x.cacheLog = X_CACHE_LOG.hit;
      x.later(() => c.rules.deliver(x, 200, headers, body, null));
    }
  }

  internal(err: unknown): void {
    for (const x of this.members) x.internal(err);
  }

  streamHead(): void {
    throw new Error('a flight never streams');
  }

  forwarded(r: ForwardResult): void {
    const c = this.cache;
    if (r.kind !== 'buffered') {
      c.crashed(this);
      tagFlight(this.members);
      failFlight(c.log, r, this.members);
      return;
    }
    tagFlight(this.members);
    this.members.forEach((x) => {
      x.upstream = r.upstream;
      try {
        c.rules.deliver(x, r.status, r.headers, r.body, r.upstream);
      } catch (err) {
        x.internal(err);
      }
    });
    c.stats.misses++;
    c.stats.coalesced += this.members.length - 1;
    try {
      if (r.status === 200) c.landed(this, r.upstream, r.headers, r.body);
      else c.crashed(this);
    } catch (err) {
      c.crashed(this);
      c.log.error({ event: 'internal_error', reqId: this.members[0]!.id, error: (err as Error)?.message }, 'internal error');
    }
  }
}
