// subscribeNewBlock's feed for one Blockbook chain: every block of the chain
// as the gateway serves it (the served tip on a pool, the head on one
// upstream: the chain view, whatever reports to it), each height once, in
// order, with no gap. Heights the view skipped between two observations (a
// poll that saw two blocks, a node's bulk sync that notified none) are filled:
// their hashes are read through the chain's front (socket-fetch.ts), once for
// all subscribers. Each block is serialized once, as websocket.go's
// WsNewBlock; a subscriber's notification is its subscribe message's id in
// front of it.
import type { ChainListener, ChainView } from '../../upstreams/chain-view.ts';
import type { Logger } from '../../observe/log.ts';

/** A gap the feed does not fill (a gateway cut off from every node for long): its subscribers are told to resync. */
export const MAX_GAP = 1024;
/** A fill that failed (no upstream answered) is tried again this much later, if no new head comes first. */
const RETRY_MS = 1000;
/** Blocks sent whose hashes are kept, to tell a reorg: a deeper one is sent again from the oldest kept. */
const KEPT = 256;

export interface BlockSubscriber {
  /** One block's `data` ({"height","hash","evmData"}), the same bytes for every subscriber. */
  block(data: string): void;
  /** Blocks from `first` on will not come (a gap past MAX_GAP): it is no longer subscribed (it may add itself again). */
  missed(first: number): void;
}

export class BlockFeed implements ChainListener {
  private readonly subs = new Set<BlockSubscriber>();
  /** The last height sent (or, before the first block, the head when the first subscriber came). */
  private last = -1;
  /** Hashes sent, by height (the last KEPT). */
  private readonly sent = new Map<number, string>();
  private running = false;
  private retry: NodeJS.Timeout | null = null;

  constructor(
    private readonly view: ChainView,
    private readonly pooled: boolean,
    /** A block's hash by height, as the chain serves it. */
    private readonly hashAt: (height: number) => Promise<string>,
    private readonly log: Logger,
  ) {
    view.listen(this);
  }

  /** The chain's head as served. */
  private head(): number {
    return this.pooled ? this.view.tip : this.view.number;
  }

  add(s: BlockSubscriber): void {
    // The first subscriber starts the feed at the head as it is: blocks after it are its.
    if (this.subs.size === 0 && !this.running) this.last = this.head();
    this.subs.add(s);
  }

  remove(s: BlockSubscriber): void {
    this.subs.delete(s);
  }

  get size(): number {
    return this.subs.size;
  }

  epoch(): void {
    this.run();
  }

  tip(): void {
    this.run();
  }

  reset(): void {
    // The chain went back (another chain's node, a revert): the feed follows from its head now.
    this.last = this.head();
    this.sent.clear();
  }

  canonical(): void {}

  private run(): void {
    if (this.running || this.subs.size === 0) return;
    this.running = true;
    void this.advance().finally(() => {
      this.running = false;
    });
  }

  private failed(height: number, err: unknown): void {
    this.log.warn({ event: 'ws_block_fill_failed', height, err: (err as Error).message }, 'a new block could not be read; tried again');
    this.retry ??= setTimeout(() => {
      this.retry = null;
      this.run();
    }, RETRY_MS).unref();
  }

  /**
   * Whether the block sent last is still the chain's: at the head, as the
   * view reports its hash; below a head that moved on, read again. If not (a
   * reorg), the feed goes back to the highest block sent that still is, so
   * the new branch is sent from there, as Blockbook notifies each block it
   * connects. false: a read failed (tried again later).
   */
  private async unwound(head: number): Promise<boolean> {
    const top = this.sent.get(this.last);
    if (top === undefined || head < this.last) return true;
    let h = this.last;
    try {
      const now = head === h ? (this.pooled ? this.view.hashAt(head) : this.view.hash) : await this.hashAt(h);
      if (now === '' || now === top) return true;
      for (h--; this.sent.has(h); h--) if ((await this.hashAt(h)) === this.sent.get(h)) break;
    } catch (err) {
      this.failed(h, err);
      return false;
    }
    for (const k of [...this.sent.keys()]) if (k > h) this.sent.delete(k);
    this.last = h;
    return true;
  }

  /** Sends every height after the last one sent up to the head, in order; a height not yet known stops it until the next head. */
  private async advance(): Promise<void> {
    // The block sent last is checked once a round, before the heights after it.
    if (!(await this.unwound(this.head()))) return;
    for (;;) {
      const head = this.head();
      if (this.subs.size === 0 || head <= this.last) return;
      if (this.last < 0) {
        this.last = head;
        return;
      }
      if (head - this.last > MAX_GAP) {
        const first = this.last + 1;
        this.last = head;
        const told = [...this.subs];
        this.subs.clear();
        for (const s of told) s.missed(first);
        return;
      }
      const h = this.last + 1;
      let hash: string;
      try {
        hash = await this.hashAt(h);
      } catch (err) {
        this.failed(h, err);
        return;
      }
      // The chain may have gone back meanwhile (a reset): what was fetched is no longer next.
      if (this.last !== h - 1) continue;
      this.last = h;
      this.sent.set(h, hash);
      if (this.sent.size > KEPT) this.sent.delete(this.sent.keys().next().value!);
      // websocket.go's WsNewBlock: evmData is null on a chain that is not EVM.
      const data = `{"height":${h},"hash":${JSON.stringify(hash)},"evmData":null}`;
      for (const s of this.subs) s.block(data);
    }
  }
}
