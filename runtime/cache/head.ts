// A chain's head as its cache knows it: every usable upstream is polled for
// its head (number and hash) and its finalized (and safe) block; the chain's
// head is the highest any of them reports, its finalized and safe blocks the
// lowest. Any change of the head's number or hash, or of the finalized or safe
// block, starts a new epoch: answers bound to the head (those at `latest`,
// `safe` and `finalized` among them) carry the epoch they were kept under and
// die with it, so an answer for a tag never outlives the block it resolved to.
//
// Each interface says how to ask (HeadProbe); the rules are the same for all.
import type { Upstream, UpstreamGroup } from '../upstream.ts';
import { HEALTH_AGENT } from '../upstream.ts';
import type { CacheStats } from './store.ts';

/** An upstream's head and finalized block as the last poll saw them (finalized -1: unknown). */
export interface HeadReport {
  readonly number: number;
  readonly hash: string;
  readonly finalized: number;
  /** Its `safe` block, where the interface has one (-1 or absent: unknown). */
  readonly safe?: number;
}

/** How to ask one upstream of an interface where its head is. */
export interface HeadProbe {
  request(u: Upstream): { readonly path: string; readonly method: 'GET' | 'POST'; readonly body?: Buffer | string };
  /** The report in an answer, or null when it has none (the upstream then counts as not at the head). */
  read(doc: unknown): HeadReport | null;
  /**
   * Where `request` is a batch: the same calls one by one, for an upstream that
   * answered the batch with a single object (it takes no batches); their
   * answers, in an array, are what `read` gets.
   */
  apart?(u: Upstream): readonly { readonly path: string; readonly method: 'GET' | 'POST'; readonly body?: Buffer | string }[];
}

/** Canonical hashes of final blocks kept at most (the oldest learned go first). */
const MAX_CANONICAL = 8192;

export class ChainHead {
  /** The chain's best head: the highest number any usable upstream reports, with its hash ('' when they disagree). */
  number = -1;
  hash = '';
  /** Bumped whenever the head's number or hash, or the finalized or safe block, changes: entries bound to the head carry it. */
  epoch = 0;
  /** Lowest finalized block of the usable upstreams; -1 while unknown (then nothing is final). */
  finalized = -1;
  /** Lowest safe block of the usable upstreams; -1 while one of them reports none. */
  safe = -1;
  /** Polls settled so far. */
  seq = 0;
  private readonly heads = new Map<Upstream, HeadReport>();
  /** Per upstream at the chain's head: the poll that first saw it there (it may have answered from an older head before). */
  private readonly atHeadSince = new Map<Upstream, number>();
  /** Hash of a final block by its number, as an upstream at the head answered it. */
  private readonly canonical = new Map<number, string>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;

  constructor(
    private readonly group: UpstreamGroup,
    private readonly probe: HeadProbe,
    private readonly pollMs: number,
    private readonly stats: CacheStats,
    /** Called when an epoch ends, before the next answer is kept. */
    private readonly onEpoch: () => void,
  ) {}

  start(): void {
    void this.poll();
    this.timer = setInterval(() => void this.poll(), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** Asks every usable upstream for its head (and finalized block); never overlaps itself. */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      await Promise.all(this.group.all.map((u) => this.ask(u)));
      this.settle();
    } finally {
      this.polling = false;
    }
  }

  private async ask(u: Upstream): Promise<void> {
    if (!u.usable) return void this.heads.delete(u);
    try {
      const apart = this.probe.apart?.(u);
      let doc: unknown;
      if (apart !== undefined && !u.takesBatches) doc = await Promise.all(apart.map((r) => this.send(u, r)));
      else {
        doc = await this.send(u, this.probe.request(u));
        // One object for a batch: a node that takes no batches. Asked call by call, now and from then on.
        if (apart !== undefined && doc !== null && !Array.isArray(doc)) {
          u.takesBatches = false;
          doc = await Promise.all(apart.map((r) => this.send(u, r)));
        }
      }
      const report = doc === null ? null : this.probe.read(doc);
      if (report === null || report.number < 0 || report.hash === '') this.heads.delete(u);
      else this.heads.set(u, report);
    } catch {
      this.heads.delete(u);
    }
  }

  /** One poll request; its answer as JSON, or null unless HTTP 200. */
  private async send(u: Upstream, r: ReturnType<HeadProbe['request']>): Promise<unknown> {
    const res = await u.pool.request({
      path: r.path,
      method: r.method,
      headers: { 'content-type': 'application/json', 'user-agent': HEALTH_AGENT, ...u.headers },
      body: r.body,
      headersTimeout: this.pollMs * 2,
      bodyTimeout: this.pollMs * 2,
    });
    const doc = (await res.body.json()) as unknown;
    return res.statusCode === 200 ? doc : null;
  }

  /** The chain's head and finalized block from what each usable upstream reported. */
  private settle(): void {
    let number = -1;
    let hash = '';
    let finalized = Number.MAX_SAFE_INTEGER;
    let safe = Number.MAX_SAFE_INTEGER;
    let known = 0;
    for (const [u, h] of this.heads) {
      if (!u.usable) continue;
      known++;
      if (h.number > number) {
        number = h.number;
        hash = h.hash;
      } else if (h.number === number && h.hash !== hash) hash = ''; // they disagree: no upstream is "at the head"
      finalized = Math.min(finalized, h.finalized);
      safe = Math.min(safe, h.safe ?? -1);
    }
    finalized = known === 0 || finalized < 0 ? -1 : finalized;
    safe = known === 0 || safe < 0 ? -1 : safe;
    // The tags can move while the head stays (a checkpoint finalized in a slot without a block): their answers go too.
    const tagsMoved = finalized !== this.finalized || safe !== this.safe;
    this.finalized = finalized;
    this.safe = safe;
    this.stats.finalized = finalized;
    if (number !== this.number || hash !== this.hash) {
      this.number = number;
      this.hash = hash;
      this.stats.head = number;
      this.stats.headChanges++;
      this.epoch++;
      this.onEpoch();
    } else if (tagsMoved) {
      this.epoch++;
      this.onEpoch();
    }
    this.seq++;
    for (const u of this.group.all) {
      const h = this.heads.get(u);
      const at = h !== undefined && u.usable && hash !== '' && h.number === number && h.hash === hash;
      if (!at) this.atHeadSince.delete(u);
      else if (!this.atHeadSince.has(u)) this.atHeadSince.set(u, this.seq);
    }
  }

  /** Was `u` at the chain's best head (same number, same hash) already before poll `seq`, and still is? */
  atHead(u: Upstream, seq: number): boolean {
    const since = this.atHeadSince.get(u);
    return since !== undefined && since <= seq;
  }

  /** Is block `n` at or below the finalized block? */
  isFinal(n: number): boolean {
    return this.finalized >= 0 && n <= this.finalized;
  }

  /** The canonical hash of final block `n` if an upstream at the head told it; undefined when unknown. */
  canonicalHash(n: number): string | undefined {
    return this.canonical.get(n);
  }

  /** Records the hash of block `n` as an upstream at the head answered it by number (only final blocks: they cannot change). */
  learnCanonical(n: number, hash: string): void {
    if (!this.isFinal(n) || this.canonical.has(n)) return;
    this.canonical.set(n, hash);
    if (this.canonical.size > MAX_CANONICAL) this.canonical.delete(this.canonical.keys().next().value!);
  }
}

/** A JSON-RPC QUANTITY as a number (-1 when it is not one that fits). */
export function quantity(v: unknown): number {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,13}$/.test(v)) return -1;
  return Number.parseInt(v, 16);
}
