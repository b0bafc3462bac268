// The union of a Blockbook chain's subscribed addresses, split in shards of
// at most one upstream socket's worth (Blockbook's 1,000 addresses a socket):
// shard 0 rides the carrying upstream's head socket, each further shard a
// socket of its own to the same upstream (socket-hub.ts). The assignment is
// stable, so that one client's change resends one shard, not the whole union:
//  - a new address goes to the first shard with room, else to a new shard;
//  - a removed one leaves its shard, and then, while the last shard's
//    addresses fit in the room of the others, they move there and the last
//    shard goes: the union is always in as few shards as it needs
//    (ceil(size / per shard)), so an extra socket closes once the union
//    shrinks back. Only such a move changes an address's shard.

export class Shards {
  /** Each address's shard. */
  private readonly shardOf = new Map<string, number>();
  private readonly sets: Set<string>[] = [];

  constructor(
    /** Most addresses a shard holds. */
    readonly perShard: number,
  ) {}

  /** Shards in use: ceil(addresses / perShard). */
  get count(): number {
    return this.sets.length;
  }

  /** Addresses in all shards. */
  get size(): number {
    return this.shardOf.size;
  }

  /** The shard holding `address`, or undefined. */
  of(address: string): number | undefined {
    return this.shardOf.get(address);
  }

  /** Shard i's addresses, in the order they came. */
  list(i: number): string[] {
    return [...(this.sets[i] ?? [])];
  }

  add(address: string): void {
    if (this.shardOf.has(address)) return;
    let i = this.sets.findIndex((s) => s.size < this.perShard);
    if (i < 0) i = this.sets.push(new Set()) - 1;
    this.sets[i]!.add(address);
    this.shardOf.set(address, i);
  }

  remove(address: string): void {
    const i = this.shardOf.get(address);
    if (i === undefined) return;
    this.shardOf.delete(address);
    this.sets[i]!.delete(address);
    this.compact();
  }

  /** While the last shard fits in the others' room, its addresses move there (lowest shards first) and it goes. */
  private compact(): void {
    while (this.sets.length > 0 && this.shardOf.size <= this.perShard * (this.sets.length - 1)) {
      const last = this.sets.pop()!;
      let i = 0;
      for (const a of last) {
        while (this.sets[i]!.size >= this.perShard) i++;
        this.sets[i]!.add(a);
        this.shardOf.set(a, i);
      }
    }
  }
}
