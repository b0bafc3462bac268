// A readers-writer gate in front of one anvil, so that a change of its chain
// is atomic for everyone who reads it. anvil_reorg is not: it unwinds the top
// blocks and then mines their replacements, and a read in between sees the
// head lower by the reorg's depth and the unwound transactions gone (seen in
// issue 33's oracle: eth_blockNumber 0x4e right after 0x50, mid-reorg). A real
// node switches to the new branch in one step. With the gate, every read
// (the pool stand-ins' calls to anvil, the oracle's own) runs while no change
// does, and a change (anvil_mine, anvil_reorg) waits for the reads in flight,
// holds new ones back, and lets them go once it is done. Single process only:
// the readers and the writer share this object.
export class AnvilGate {
  private readers = 0;
  /** Settles when the change under way is done; null when none is. */
  private change: Promise<void> | null = null;
  private drained: (() => void) | null = null;

  /** Runs a read of anvil when no change is under way. */
  async read<T>(fn: () => Promise<T>): Promise<T> {
    while (this.change !== null) await this.change;
    this.readers++;
    try {
      return await fn();
    } finally {
      this.readers--;
      if (this.readers === 0 && this.drained !== null) this.drained();
    }
  }

  /** Runs a change of anvil's chain with no read in flight. */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.change !== null) await this.change;
    let done!: () => void;
    this.change = new Promise<void>((r) => (done = r));
    try {
      if (this.readers > 0) await new Promise<void>((r) => (this.drained = r));
      this.drained = null;
      return await fn();
    } finally {
      this.change = null;
      done();
    }
  }
}

/** A gate that never holds anything back (for a stand-in used without the oracle's miner). */
export const OPEN_GATE: Pick<AnvilGate, 'read'> = { read: (fn) => fn() };
