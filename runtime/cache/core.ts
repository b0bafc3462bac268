// One chain's cache core, the same for every interface: lookup, the calls in
// flight that identical calls join, and what may be kept, in memory and in
// the shared tier. Each interface supplies its rules (evm.ts, doc.ts): what
// takes part, in which scope, and how an answer is told; the core decides
// against the chain's view (chain-view.ts) whether it is still right.
//
// The rules (docs: the cache and its rules):
//  - a call joins a flight only if the flight started in the current epoch;
//    a flight that ends removes only itself from the table;
//  - an answer is kept only if its upstream passed the identity check before
//    the call was sent (no identity change or failed check since) and is still
//    usable when the answer comes; it goes to the shared tier (Redis) only
//    after its upstream's next poll, begun after the answer came, found it on
//    the chain's own identity again;
//  - bound to the head: kept under the epoch the call was sent in, and only
//    from an upstream at the chain's head since before then;
//  - forever: kept in the chain's namespace (identity and genesis), dropped
//    when the chain resets.
import type { Logger } from '../observe/log.ts';
import type { ChainListener, ChainView, ResetReason } from '../upstreams/chain-view.ts';
import { held, type Dispatch, type ForwardRequest, type ForwardResult, type HeldTarget } from '../dispatch.ts';
import type { Upstream, UpstreamGroup } from '../upstreams/upstream.ts';
import { tagFlight, type FlightMember } from './common.ts';
import { SharedTier, type Parts } from './shared.ts';
import { CacheStats, type CacheStore, type Entry } from './store.ts';
import { MAX_HELD } from '../upstreams/forward.ts';

/** What an interface's cache does with its flights' answers. */
export interface FlightLanding<D> {
  landed(f: Flight<D>, r: ForwardResult): void;
}

export class CacheCore implements ChainListener {
  readonly stats: CacheStats;
  /** Keys of entries bound to the current epoch, dropped when it ends. */
  private headKeys = new Set<string>();
  private readonly flights = new Map<string, Flight<unknown>>();
  /** Entries by hash in a final block whose canonical hash is not known yet: block number -> key -> the answer's block hash. */
  private readonly waiting = new Map<number, Map<string, string>>();

  constructor(
    readonly path: string,
    readonly group: UpstreamGroup,
    readonly store: CacheStore,
    readonly view: ChainView,
    readonly shared: SharedTier | null,
    readonly log: Logger,
    /**
     * Where the front's flights and the calls it does not take go: the
     * chain's layers below the front (the module's own, then the cache's
     * layer...). chains.ts sets it once they are composed.
     */
    public dispatch: Dispatch,
  ) {
    this.stats = new CacheStats(path);
    view.listen(this);
  }

  // ------------------------------------------------ the chain's view moved

  epoch(): void {
    for (const key of this.headKeys) this.store.delete(key);
    this.headKeys = new Set();
  }

  reset(reason: ResetReason): void {
    const dropped = this.store.dropForever(this.stats);
    this.waiting.clear();
    this.stats.resets[reason]++;
    this.log.warn(
      { event: 'cache_reset', chain: this.path, reason, dropped },
      reason === 'identity'
        ? "an upstream's identity changed: the chain's forever entries and eth_blockNumber's floor are dropped"
        : "the chain went back below its finalized block: the chain's forever entries and eth_blockNumber's floor are dropped",
    );
  }

  /** The canonical hash of a final block came in (a poll's lookup): the entries by hash in it are kept forever if theirs is it. */
  canonical(n: number, hash: string): void {
    const keys = this.waiting.get(n);
    if (keys === undefined) return;
    this.waiting.delete(n);
    for (const [key, h] of keys) {
      const e = this.store.peek(key);
      if (h !== hash || e === undefined || e.epoch !== this.view.epoch) continue;
      this.headKeys.delete(key);
      this.keepForever(key, e.prefix, e.suffix, e.number, null);
    }
  }

  // ------------------------------------------------ lookup and flights

  /** The entry for `key` if it is still right: bound to the current epoch, or forever in the chain's namespace. */
  hit(key: string): Entry | undefined {
    const e = this.store.get(key);
    if (e === undefined) return undefined;
    if (e.epoch === -1 ? e.ns === this.view.namespace : e.epoch === this.view.epoch) return e;
    this.store.delete(key);
    return undefined;
  }

  /** The flight for `key` a call may join: only one that started in the current epoch. */
  joinable(key: string): Flight<unknown> | undefined {
    const f = this.flights.get(key);
    return f !== undefined && f.epoch === this.view.epoch ? f : undefined;
  }

  open<D>(key: string, data: D, landing: FlightLanding<D>, request: ForwardRequest): Flight<D> {
    const v = this.view;
    const f = new Flight(this, key, data, landing, request, v.epoch, v.seq, v.trust);
    this.flights.set(key, f as Flight<unknown>);
    return f;
  }

  /** A flight is over: it leaves the table, unless a newer flight for the same key took its place. */
  close(f: Flight<unknown>): void {
    if (this.flights.get(f.key) === f) this.flights.delete(f.key);
  }

  /** Sends a flight's call upstream: the client's own request, held whole, through the same forwarding as any call. */
  send(target: HeldTarget, request: ForwardRequest, group: UpstreamGroup = this.group): void {
    this.dispatch(target, held(request, { maxBuffer: MAX_HELD }), group);
  }

  // ------------------------------------------------ keeping

  /** Whether `u`'s answer to `f` may be kept at all: no identity change or failed check since it was sent, and `u` still usable. */
  trusted(f: Flight<unknown>, u: Upstream): boolean {
    return f.trust === this.view.trust && u.usable;
  }

  /** Whether it may be kept bound to the head: sent in this epoch, by an upstream at the head since before then. */
  current(f: Flight<unknown>, u: Upstream): boolean {
    return f.epoch === this.view.epoch && this.view.atHead(u.view, f.seq);
  }

  /** Keeps an answer until the epoch ends. */
  keepForHead(key: string, prefix: Buffer, suffix: Buffer, number: number, headers?: Readonly<Record<string, string>>): Entry | null {
    const e = this.store.set(key, prefix, suffix, this.view.epoch, '', number, this.stats, headers);
    if (e !== null) this.headKeys.add(key);
    return e;
  }

  /**
   * Keeps an answer forever in the chain's namespace (not at all while the
   * usable upstreams do not agree on one), and in the shared tier once `u`
   * (null: already checked) passes its next identity check.
   */
  keepForever(key: string, prefix: Buffer, suffix: Buffer, number: number, u: Upstream | null, headers?: Readonly<Record<string, string>>): void {
    const ns = this.view.namespace;
    if (ns === '') return;
    const e = this.store.set(key, prefix, suffix, -1, ns, number, this.stats, headers);
    const shared = this.shared;
    if (shared === null || e === null) return;
    const put = (): void => {
      // A reset since: not shared (the entry went with it).
      if (this.view.namespace === ns && this.store.peek(key) === e) shared.put(SharedTier.key(`${ns} ${key}`), headers === undefined ? e.prefix : Buffer.from(JSON.stringify(headers)), headers === undefined ? e.suffix : e.prefix);
    };
    if (u === null) put();
    else u.view.whenVerified(put);
  }

  /** An answer by hash in final block `n` whose canonical hash is not known yet: kept forever once a poll tells it, if it is `hash`. */
  awaitCanonical(key: string, n: number, hash: string): void {
    let keys = this.waiting.get(n);
    if (keys === undefined) {
      if (this.waiting.size >= MAX_WAITING_BLOCKS) return;
      this.waiting.set(n, (keys = new Map()));
    }
    keys.set(key, hash);
    this.view.lookUp(n);
  }

  /** The shared tier's entry for a call that may be final, or null (no tier, no namespace yet, not there). */
  sharedGet(key: string): Promise<Parts | null> | null {
    const shared = this.shared;
    const ns = this.view.namespace;
    if (shared === null || !shared.isUp || ns === '') return null;
    return shared.get(SharedTier.key(`${ns} ${key}`));
  }
}

/** Final blocks with entries waiting for their canonical hash, at most. */
const MAX_WAITING_BLOCKS = 64;

/** One call in flight upstream (held whole) and the clients waiting for its answer, the first of them included. */
export class Flight<D> implements HeldTarget {
  readonly members: FlightMember[] = [];
  /** Each member's id as it wrote it (EVM; '' elsewhere). */
  readonly ids: string[] = [];

  constructor(
    readonly core: CacheCore,
    readonly key: string,
    /** What the interface's cache knows of the call. */
    readonly data: D,
    private readonly landing: FlightLanding<D>,
    /** The first client's request: what goes upstream. */
    readonly request: ForwardRequest,
    /** The chain's epoch, report count and trust when the call was sent. */
    readonly epoch: number,
    readonly seq: number,
    readonly trust: number,
  ) {}

  join(m: FlightMember, idJson: string): void {
    this.members.push(m);
    this.ids.push(idJson);
  }

  get firstId(): string {
    return this.members[0]!.id;
  }

  /** Upstream on its own. */
  send(): void {
    this.core.send(this, this.request);
  }

  forwarded(r: ForwardResult): void {
    try {
      this.landing.landed(this, r);
    } catch (err) {
      this.crashed(err);
    }
  }

  crashed(err: unknown): void {
    this.core.close(this as Flight<unknown>);
    for (const m of this.members) m.internal(err);
  }

  /** The node's answer was not one: every client gets the interface's bad-response failure (logged by the caller). */
  badResponse(u: Upstream): void {
    this.core.close(this as Flight<unknown>);
    tagFlight(this.members);
    for (const m of this.members) {
      m.upstream = u;
      m.fail('bad-response');
    }
  }
}
