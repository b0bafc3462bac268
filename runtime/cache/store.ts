// The cache's memory: one LRU over every chain's entries, bounded in bytes.
// An entry is the node's answer as it came, cut around its `id`, so a hit is
// served as prefix + the client's id + suffix, with no parse and no copy of
// the answer.

/** Counters of one chain, for /metrics. */
export class CacheStats {
  hits = 0;
  misses = 0;
  coalesced = 0;
  evictions = 0;
  bytes = 0;
  /** The head and finalized block the chain's cache knows (-1: unknown). */
  head = -1;
  finalized = -1;
  /** Head changes seen (number or hash): each ends an epoch. */
  headChanges = 0;
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
  /** eth_blockNumber's number, so a client never sees it go backwards. */
  readonly number: number;
  readonly size: number;
  /** Rosetta and Blockbook: the headers that describe the bytes (content-type, content-encoding...). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** Bytes an entry costs beyond its answer: the key, the Map's slot, the object. */
const OVERHEAD = 160;

export class CacheStore {
  /** Insertion order is recency: a hit moves its entry to the end. */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get size(): number {
    return this.bytes;
  }

  get(key: string): Entry | undefined {
    const e = this.entries.get(key);
    if (e !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, e);
    }
    return e;
  }

  /** The entry without touching its recency. */
  peek(key: string): Entry | undefined {
    return this.entries.get(key);
  }

  set(key: string, prefix: Buffer, suffix: Buffer, epoch: number, number: number, owner: CacheStats, headers?: Readonly<Record<string, string>>): Entry | null {
    const size = prefix.length + suffix.length + key.length * 2 + OVERHEAD;
    // One entry may take at most a quarter of the budget, so one big block cannot flush everything.
    if (size > this.maxBytes / 4) return null;
    this.delete(key);
    const e: Entry = headers === undefined ? { owner, prefix, suffix, epoch, number, size } : { owner, prefix, suffix, epoch, number, size, headers };
    this.entries.set(key, e);
    this.bytes += size;
    owner.bytes += size;
    while (this.bytes > this.maxBytes) {
      const oldest = this.entries.keys().next().value as string;
      const o = this.entries.get(oldest)!;
      this.remove(oldest, o);
      o.owner.evictions++;
    }
    return e;
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
