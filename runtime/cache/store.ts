// The cache's memory: one store over every chain's entries, bounded in bytes,
// evicting the least recently used as CLOCK does (cache/clock.ts): a hit only marks
// its entry used, and nothing moves in the Map.
//
// An entry is the node's answer as it came, cut around its `id` (EVM), so a
// hit is served as prefix + the client's id + suffix, with no parse and no
// copy of the answer.
//
// An entry owns its bytes: they are copied out of the buffer they came in,
// into memory of their own. Node's small Buffers are slices of shared 8 KiB
// slabs (the answer a socket read, Buffer.concat's pool), and a kept slice
// keeps its whole slab alive: kept as they came, small entries held up to 18x
// what the store counted. Copied, `maxBytes` bounds what the store keeps alive.

import { Clock } from './clock.ts';

/** Counters of one chain, for /metrics. */
export class CacheStats {
  hits = 0;
  misses = 0;
  coalesced = 0;
  evictions = 0;
  bytes = 0;
  /** Resets (forever entries dropped), by reason. */
  readonly resets = { identity: 0, finalized_backwards: 0 };
  /** Hits served from the shared tier (Redis), another replica's answer. */
  sharedHits = 0;
  /** Misses that went upstream inside a batch (cache.batch), and the batches. */
  batched = 0;
  batches = 0;
  constructor(readonly chain: string) {}
}

export interface Entry {
  readonly owner: CacheStats;
  readonly prefix: Buffer;
  readonly suffix: Buffer;
  /** The chain's head epoch it is bound to, or -1 for an entry that holds forever. */
  readonly epoch: number;
  /** A forever entry's namespace: the chain's identity and genesis it was kept under ('' for others). */
  readonly ns: string;
  /** eth_blockNumber's number, so a client never sees it go backwards. */
  readonly number: number;
  readonly size: number;
  /** Rosetta and Blockbook: the headers that describe the bytes (content-type, content-encoding...). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Read since the clock's hand last passed it (cache/clock.ts). */
  used: boolean;
}

/** Bytes an entry costs beyond its answer: the key, the Map's slot, the object. */
const OVERHEAD = 160;

export class CacheStore {
  /** In the order they came (never reordered: see above). */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private readonly clock = new Clock(this.entries);

  constructor(private readonly maxBytes: number) {}

  get size(): number {
    return this.bytes;
  }

  get(key: string): Entry | undefined {
    const e = this.entries.get(key);
    if (e !== undefined) e.used = true;
    return e;
  }

  /** The entry without touching its recency. */
  peek(key: string): Entry | undefined {
    return this.entries.get(key);
  }

  /**
   * Keeps an answer (its bytes copied into memory of their own); null when it
   * is too large to keep (one entry may take at most a quarter of the budget,
   * so one big block cannot flush everything).
   */
  set(key: string, prefix: Buffer, suffix: Buffer, epoch: number, ns: string, number: number, owner: CacheStats, headers?: Readonly<Record<string, string>>): Entry | null {
    const size = prefix.length + suffix.length + key.length * 2 + OVERHEAD;
    if (size > this.maxBytes / 4) return null;
    this.delete(key);
    const own = Buffer.allocUnsafeSlow(prefix.length + suffix.length);
    prefix.copy(own, 0);
    suffix.copy(own, prefix.length);
    const p = own.subarray(0, prefix.length);
    const s = own.subarray(prefix.length);
    // Marked used while it makes room, so that it is never what it makes room for; unmarked after.
    const e: Entry = headers === undefined ? { owner, prefix: p, suffix: s, epoch, ns, number, size, used: true } : { owner, prefix: p, suffix: s, epoch, ns, number, size, headers, used: true };
    this.entries.set(key, e);
    this.bytes += size;
    owner.bytes += size;
    while (this.bytes > this.maxBytes) this.evictOne();
    e.used = false;
    return e;
  }

  private evictOne(): void {
    const [key, o] = this.clock.victim();
    this.remove(key, o);
    o.owner.evictions++;
  }

  /** Drops every forever entry of one chain (its identity changed, or it went back below its finalized block). */
  dropForever(owner: CacheStats): number {
    let n = 0;
    for (const [key, e] of this.entries) {
      if (e.owner === owner && e.epoch === -1) {
        this.remove(key, e);
        n++;
      }
    }
    return n;
  }

  delete(key: string): void {
    const e = this.entries.get(key);
    if (e !== undefined) this.remove(key, e);
  }

  private remove(key: string, e: Entry): void {
    this.entries.delete(key);
    this.bytes -= e.size;
    e.owner.bytes -= e.size;
  }
}
