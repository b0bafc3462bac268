// Least-recently-used eviction as CLOCK does it (second chance), over a Map
// kept in the order its entries came. A read only marks its entry used; the
// hand walks the entries in order, unmarking the used ones it passes, and
// names the first one it finds unmarked.
//
// Why not move a read entry to the end of the Map (delete, then set), the
// usual way: V8's Map leaves a deleted entry in its bucket's chain until the
// table is next rebuilt, so a hot key deleted and set again on every read
// makes its own chain thousands of entries long. Measured at 100,000 entries:
// ~33 us a read that way, ~10 ns a read here; the cache's hit path ran at 1/7
// of its speed (bench/RESULTS.md, "hit-big").

/** What the clock reads of an entry: whether it was read since the hand last passed it. */
export interface Marked {
  used: boolean;
}

export class Clock<K, V extends Marked> {
  /** Where the next search starts; null: at the beginning of the Map. */
  private hand: Iterator<[K, V]> | null = null;

  constructor(private readonly entries: Map<K, V>) {}

  /**
   * The entry to evict: the first from the hand on not read since the hand
   * last passed it. The caller deletes it. The Map must not be empty; a round
   * over it unmarks every entry, so the search ends within two.
   */
  victim(): [K, V] {
    if (this.entries.size === 0) throw new Error('Clock.victim: nothing to evict');
    for (;;) {
      this.hand ??= this.entries.entries();
      const next = this.hand.next();
      if (next.done === true) {
        this.hand = null;
        continue;
      }
      const e = next.value[1];
      if (!e.used) return next.value;
      e.used = false;
    }
  }
}
