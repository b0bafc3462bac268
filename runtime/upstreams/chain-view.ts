// What the gateway knows of each chain as its usable upstreams tell it
// (ChainView), over each upstream's own view (UpstreamView, upstream-view.ts).
// One view, kept current by one poller (poller.ts) and by what real requests show (the
// circuit breaker, a node that refuses batches, canonical hashes the cache
// learns); health, routing, the cache, /status.json and /metrics all read it,
// and nothing else asks upstreams.
//
// The rules that make the cache's answers right live here, where the facts are:
//  - the chain's head is the highest head a usable upstream reports, its
//    finalized and safe blocks the lowest; any change of these ends the epoch
//    (up, down, or the same height with another hash), as soon as any one
//    upstream's report shows it: a slow upstream holds up no one;
//  - an upstream's identity (what it serves, and its genesis hash) is checked
//    in the same poll as its head: a head from an upstream of another chain is
//    never adopted. When an upstream's identity changes, the chain resets: its
//    forever entries go and the eth_blockNumber floor with them;
//  - an upstream's finalized block going backwards (a revert, a reset, a
//    resynced node, or one node behind a load balancer that lags the others;
//    where it is only head − finality depth, once the head is below the old
//    one) is the chain going back only where more than half of the usable
//    upstreams (the only one, alone) say so: then the chain resets. Short of
//    that, the upstream is behind (UpstreamView.finalBehind): out of the tip,
//    the chain's head and finality and routing until its finalized block is
//    back where it was (issue 43);
//  - the served tip (a pool's) and eth_blockNumber's floor (the cache's) go
//    back only when the chain does: a reset. One upstream's head going down,
//    or every upstream coming back behind, moves neither: they never go below
//    what a client was given;
//  - an upstream's head counts for the tip only while it is current: its last
//    poll answered with a usable height, within the poll interval, and the
//    one out now is not overdue. A stale one holds up no one;
//  - a head an upstream's socket pushes (`pushed`) is a report of its head
//    under the same rules, taken only while a poll has verified the upstream
//    and the socket serves what that poll found; a poll sent before a push
//    does not take its upstream's head back below it
//    (UpstreamView.pushedOver), nor is its lag judged below it (poller.ts).
import type { PollReport, UpstreamView } from './upstream-view.ts';

export type ResetReason = 'identity' | 'finalized_backwards';

/** What an upstream's socket says: what it serves (as a poll's report names it) and the head it announced. */
export interface HeadPush {
  readonly identity: string;
  /** The genesis block's hash ('' unknown). */
  readonly genesis: string;
  readonly number: number;
  readonly hash: string;
}

/** Canonical hashes of final blocks kept at most (the oldest learned go first). */
const MAX_CANONICAL = 8192;
/** Hashes whose block number is kept for routing, at most (the oldest learned go first). */
const MAX_NUMBERS = 16_384;
/** Heads whose hash is kept by number, at most (the oldest learned go first). */
const MAX_HEADS = 1024;
/** Final blocks whose canonical hash the next poll asks for, at most. */
const MAX_LOOKUPS = 16;

/** What follows a chain's view: the cache ends its epoch's entries, and resets. */
export interface ChainListener {
  epoch(): void;
  reset(reason: ResetReason): void;
  /** The canonical hash of final block `n` became known. */
  canonical(n: number, hash: string): void;
  /** The served tip moved (it may move without an epoch: a lagging upstream catching up). */
  tip?(): void;
  /** A poll's report was taken: an upstream's head or state may have changed (a pool's waiting calls look again). */
  heard?(): void;
}

interface Member {
  readonly view: UpstreamView;
  /** May take traffic but for a throttle: a throttled upstream's head still counts (upstream.ts). */
  readonly serving: boolean;
}

/** A chain as its usable upstreams tell it. */
export class ChainView {
  /** The highest head a usable upstream reports, with its hash ('' when two at that height disagree). */
  number = -1;
  hash = '';
  /** Lowest finalized and safe block of the usable upstreams (-1 while one of them does not know). */
  finalized = -1;
  safe = -1;
  /** Ends with every change of the head, the finalized or safe block, and every reset. */
  epoch = 0;
  /** Reports settled so far. */
  seq = 0;
  /** Bumped by every change of an upstream's identity and every poll that finds another chain: an answer is kept only if it is the same after as before. */
  trust = 0;
  /** What forever entries are kept under: the identity and genesis the usable upstreams agree on ('' while they do not: nothing is kept forever). */
  namespace = '';
  headChanges = 0;
  resets = 0;
  /**
   * The served tip: the highest block that every usable upstream whose head
   * is current has (`all`, proxyd's common block) or that most of them have
   * (`majority`); -1 while none is known. It never goes backwards, but with
   * the chain itself (a reset).
   */
  tip = -1;
  /** The highest eth_blockNumber a client was given (the served tip never goes below it; both go back only with a reset). */
  private served = -1;
  /** Per upstream at the chain's head: the report that first saw it there. */
  private readonly atHeadSince = new Map<UpstreamView, number>();
  private readonly canonical = new Map<number, string>();
  private readonly lookups = new Set<number>();
  private readonly listeners: ChainListener[] = [];

  /** Hashes of the heads the polls reported, by block number (as the upstream wrote them). */
  private readonly heads = new Map<number, string>();
  /** Block numbers of hashes the gateway has seen (a block's own, a transaction's block), for routing by hash. */
  private readonly numbers = new Map<string, number>();

  constructor(
    private readonly members: readonly Member[],
    private readonly tipMode: 'all' | 'majority' = 'all',
  ) {}

  listen(l: ChainListener): void {
    this.listeners.push(l);
  }

  /**
   * A poll's report on one upstream (null: the poll failed, or found another
   * chain). Called for each upstream as its answer comes: the chain's view
   * moves at once, without waiting for the others. `late`: the answer took
   * longer than the poll interval (the head it names was old when it came).
   * `asked`: when the poll was sent (Date.now()).
   */
  report(v: UpstreamView, r: PollReport | null, late = false, asked = Date.now()): void {
    let reset: ResetReason | null = null;
    let took = false;
    v.reports++;
    v.overdue = late;
    v.fresh = r !== null && r.own && !Number.isNaN(r.number);
    if (r !== null && !r.own) this.trust++;
    if (r !== null) {
      if ((v.identity !== '' && r.identity !== v.identity) || (v.genesis !== '' && r.genesis !== '' && r.genesis !== v.genesis)) {
        reset = 'identity';
        this.trust++;
        v.head = null;
        v.pushedAt = 0;
        v.finalized = -1;
        v.finalBehind = -1;
      }
      v.identity = r.identity;
      if (r.genesis !== '') v.genesis = r.genesis;
      if (r.own) {
        // It went back below a block it called final: it is behind, until the chain's going back is what most say.
        const back = reset === null && r.finalized >= 0 && r.finalized < v.finalized && (r.finalizedByDepth !== true || r.number < v.finalized);
        if (back && v.finalized > v.finalBehind) v.finalBehind = v.finalized;
        // A head its socket pushed after this poll was sent is newer than the poll's, unless the poll's is higher.
        took = !Number.isNaN(r.number) && !v.pushedOver(r.number, asked);
        if (took) {
          v.head = r.number;
          v.hash = r.hash;
        }
        v.finalized = r.finalized;
        v.safe = r.safe;
        if (v.finalBehind >= 0 && r.finalized >= v.finalBehind) v.finalBehind = -1;
        // The chain itself went back below a block it called final: nothing kept as final can be trusted. Asked
        // again at each report of a behind one: the others may have gone down since, leaving it the only usable one.
        if (v.finalBehind >= 0 && this.finalityWentBack()) {
          reset = 'finalized_backwards';
          // What the others called final is of the old history: each is judged afresh by its next report.
          for (const m of this.members) {
            m.view.finalBehind = -1;
            if (m.view !== v) m.view.finalized = -1;
          }
        }
        for (const [n, hash] of r.canonical) this.learnCanonical(n, hash);
      }
    }
    if (reset !== null) this.reset(reset);
    this.took(r !== null && took ? r.hash : '', r?.number ?? Number.NaN, reset !== null);
  }

  /**
   * A head an upstream's socket announced (head-sockets.ts; any kind's socket
   * may call it): a report of the upstream's head as a poll's is, so the
   * head, the epoch, the served tip and every feed move at once. It counts
   * only for an upstream a poll verified on the chain (UpstreamView.verified),
   * from a socket that serves what the polls found (its identity, and its
   * genesis where polls ask it). Whether it counted.
   */
  pushed(v: UpstreamView, p: HeadPush): boolean {
    if (!v.verified || p.identity !== v.identity || (v.genesis !== '' && p.genesis.toLowerCase() !== v.genesis.toLowerCase())) return false;
    v.pushedAt = Date.now();
    if (p.number === v.head && p.hash === v.hash) return true;
    v.head = p.number;
    v.hash = p.hash;
    this.took(p.hash, p.number, false);
    return true;
  }

  /** A report's head was taken (`hash` '' : none, or none known): the chain's head, epoch and tip follow. */
  private took(hash: string, n: number, back: boolean): void {
    if (hash !== '') {
      this.learnNumber(hash, n);
      this.learnHead(n, hash);
    }
    this.settle();
    this.settleTip(back);
    for (const l of this.listeners) l.heard?.();
  }

  /**
   * Whether the chain's finalized block went back: more than half of the
   * usable upstreams, the behind ones among them, are behind (one alone is).
   */
  private finalityWentBack(): boolean {
    let usable = 0;
    let behind = 0;
    for (const m of this.members) {
      if (m.view.finalBehind >= 0) behind++;
      else if (!m.serving) continue;
      usable++;
    }
    return behind * 2 > usable;
  }

  /** An upstream's poll has been out longer than the poll interval: its head is left out of the tip until it answers on time. */
  pollOverdue(v: UpstreamView): void {
    if (v.overdue) return;
    v.overdue = true;
    this.settleTip(false);
  }

  /**
   * The served tip from the heads of the usable upstreams that are current
   * (of all usable ones while none is). It moves back only when the chain
   * itself did (`back`: a reset); otherwise it never goes below itself or the
   * eth_blockNumber a client was given.
   */
  private settleTip(back: boolean): void {
    let heads: number[] = [];
    const stale: number[] = [];
    for (const m of this.members) {
      if (!m.serving) continue;
      const v = m.view;
      // One that may take traffic but has not answered a poll yet, and is not overdue: the tip waits for it.
      if (v.reports === 0 && !v.overdue) return;
      if (v.head !== null) (v.current ? heads : stale).push(v.head);
    }
    if (heads.length === 0) heads = stale;
    if (heads.length === 0) return;
    heads.sort((a, b) => b - a);
    const t = this.tipMode === 'all' ? heads[heads.length - 1]! : heads[Math.floor(heads.length / 2)]!;
    const tip = back ? t : Math.max(t, this.tip, this.served);
    if (tip !== this.tip) {
      this.tip = tip;
      for (const l of this.listeners) l.tip?.();
    }
  }

  /** Whether an upstream may take a call at the served tip: its head is current (see UpstreamView.current) and at or above the tip. */
  atTip(v: UpstreamView): boolean {
    return v.current && v.head !== null && v.head >= this.tip;
  }

  /** The hash of block `n` as the last poll that found an upstream's head there reported it ('' not known). */
  hashAt(n: number): string {
    return this.heads.get(n) ?? '';
  }

  private learnHead(n: number, hash: string): void {
    // A reorg reports another hash at the same height: the newest is kept, as the newest learned.
    this.heads.delete(n);
    this.heads.set(n, hash);
    if (this.heads.size > MAX_HEADS) this.heads.delete(this.heads.keys().next().value!);
  }

  /** The block number of a block hash the gateway has seen, or -1. */
  numberOf(hash: string): number {
    return this.numbers.get(hash.toLowerCase()) ?? -1;
  }

  learnNumber(hash: string, n: number): void {
    const h = hash.toLowerCase();
    if (this.numbers.has(h)) return;
    this.numbers.set(h, n);
    if (this.numbers.size > MAX_NUMBERS) this.numbers.delete(this.numbers.keys().next().value!);
  }

  /** The best head among the usable upstreams (-1: none), for lag. */
  best(): number {
    let best = -1;
    for (const m of this.members) {
      const v = m.view;
      if (v.fresh && v.head !== null && v.head > best) best = v.head;
    }
    return best;
  }

  /** The chain's head and finality from what each usable upstream last reported; ends the epoch on any change. */
  settle(): void {
    let number = -1;
    let hash = '';
    let finalized = Number.MAX_SAFE_INTEGER;
    let safe = Number.MAX_SAFE_INTEGER;
    let known = 0;
    let ns: string | null = null;
    for (const m of this.members) {
      const v = m.view;
      if (!m.serving || v.head === null) continue;
      known++;
      // A head without its hash (a poll for health alone) counts for the number; no upstream is "at" it.
      if (v.head > number) {
        number = v.head;
        hash = v.hash;
      } else if (v.head === number && v.hash !== hash) hash = ''; // they disagree: no upstream is "at the head"
      finalized = Math.min(finalized, v.finalized);
      safe = Math.min(safe, v.safe);
      const mine = v.identity === '' || v.genesis === '' ? '' : `${v.identity} ${v.genesis}`;
      ns = ns === null || ns === mine ? mine : '';
    }
    finalized = known === 0 || finalized < 0 ? -1 : finalized;
    safe = known === 0 || safe < 0 ? -1 : safe;
    this.namespace = ns ?? '';
    const moved = number !== this.number || hash !== this.hash;
    if (moved) this.headChanges++;
    if (moved || finalized !== this.finalized || safe !== this.safe) {
      this.number = number;
      this.hash = hash;
      this.finalized = finalized;
      this.safe = safe;
      this.endEpoch();
    }
    this.seq++;
    for (const m of this.members) {
      const v = m.view;
      const at = m.serving && v.head === number && hash !== '' && v.hash === hash;
      if (!at) this.atHeadSince.delete(v);
      else if (!this.atHeadSince.has(v)) this.atHeadSince.set(v, this.seq);
    }
  }

  private endEpoch(): void {
    this.epoch++;
    for (const l of this.listeners) l.epoch();
  }

  private reset(reason: ResetReason): void {
    this.resets++;
    this.canonical.clear();
    this.lookups.clear();
    this.served = -1;
    for (const l of this.listeners) l.reset(reason);
    this.endEpoch();
  }

  /** Was this upstream at the chain's best head (same number, same hash) already at report `seq`, and still is? */
  atHead(v: UpstreamView, seq: number): boolean {
    const since = this.atHeadSince.get(v);
    return since !== undefined && since <= seq;
  }

  isFinal(n: number): boolean {
    return this.finalized >= 0 && n <= this.finalized;
  }

  /** The canonical hash of final block `n`, if known (undefined: not known yet; asked for by the next poll). */
  canonicalHash(n: number): string | undefined {
    return this.canonical.get(n);
  }

  learnCanonical(n: number, hash: string): void {
    this.lookups.delete(n);
    if (!this.isFinal(n) || this.canonical.has(n)) return;
    this.canonical.set(n, hash);
    if (this.canonical.size > MAX_CANONICAL) this.canonical.delete(this.canonical.keys().next().value!);
    for (const l of this.listeners) l.canonical(n, hash);
  }

  /** Asks the next poll of an upstream at the head for final block `n`'s hash. */
  lookUp(n: number): void {
    if (this.lookups.size < MAX_LOOKUPS && this.isFinal(n) && !this.canonical.has(n)) this.lookups.add(n);
  }

  /** The lookups the next poll carries (only an upstream at the head answers them). */
  pendingLookups(v: UpstreamView): readonly number[] {
    return this.lookups.size === 0 || !this.atHead(v, this.seq) ? NONE : [...this.lookups];
  }

  /** What eth_blockNumber answers for a node's `n`: -1 to pass it on as it is, else the higher number a client already saw. */
  blockNumber(n: number): number {
    if (n >= this.served) {
      this.served = n;
      return -1;
    }
    return this.served;
  }
}

const NONE: readonly number[] = [];
