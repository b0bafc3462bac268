// One chain's live feed for its WebSocket subscribers: the blocks of the chain
// as the gateway serves it, each fetched once for every subscriber, and their
// logs, fetched once per block and filtered here.
//
// The head comes from the chain view (the poller's, the one head source): each
// change of the view's head wakes the feed, which follows the served tip on a
// pool and the view's head otherwise. The feed keeps the blocks it sent (the
// last KEEP) and sends what the chain added since, as geth's newHeads does:
//  - in ascending order, each block once; heights the head skipped are filled
//    (the new head's ancestors, walked back by parentHash);
//  - after a reorg (a block whose parent is not the block sent at that
//    height), the new branch from the first replaced height, the replaced
//    blocks' logs first sent again with "removed": true.
// Blocks and logs are asked through the chain's front, as clients' calls are
// (evm-fetch.ts): a block a client just fetched is not asked again.
// Nothing runs while the chain has no subscriber; each one starts after the
// head the gateway knew when it came (`after`), even while the feed is still
// sending older blocks (a gap being filled). A gap longer than MAX_FILL is not
// filled: each subscriber that misses blocks is told (`missed`), never left
// to believe it got them all.
import type { ChainListener, ChainView } from '../../upstreams/chain-view.ts';
import type { ClientTarget } from '../../exchange.ts';
import type { Dispatch } from '../../dispatch.ts';
import type { Logger } from '../../observe/log.ts';
import type { EvmRouteSpec } from '../../types.ts';
import { quantity } from '../../jsonrpc/scan.ts';
import { rpcCall } from './socket-fetch.ts';
import { matches, type LogFilter } from './socket-logs.ts';

/** Blocks kept to detect a reorg by: one deeper than this starts over from the new head. */
const KEEP = 256;
/** Heights filled at most in one go: a longer gap (a gateway cut off for long) starts over from the head, its subscribers told. */
const MAX_FILL = 1024;
/** After a fetch failed: try again this much later (the next head change tries too). */
const RETRY_MS = 500;

export type SubscriptionType = 'newHeads' | 'logs';

/** A subscription as the feed sees it: what it wants, and where its notifications go. */
export interface FeedSubscriber {
  readonly type: SubscriptionType;
  /** logs: the filter (null for newHeads). */
  readonly filter: LogFilter | null;
  /** Blocks sent by the feed before this subscriber came: their removed logs are not its business. */
  readonly since: number;
  /** The head the gateway knew when it came (ChainFeed.head): blocks up to it are not its. */
  readonly after: number;
  /** One notification's result (the same object for every subscriber it goes to). */
  notify(result: FeedResult): void;
  /** The feed will not send blocks from `first` on (a gap over MAX_FILL): the subscriber must resync. */
  missed(first: number): void;
}

/** One notification's result, serialized once for all the subscribers it goes to. */
export interface FeedResult {
  readonly json: string;
  /**
   * What a socket sends after the subscription id (evm-socket.ts), made by
   * the first subscription that sends it and let go once every subscriber
   * had it: one encoding per block (or log), not one per socket.
   */
  wire: Buffer | null;
}

interface Header {
  readonly number: number;
  readonly hash: string;
  readonly parentHash: string;
  /** The block as the node answers it, without its transaction list (geth's newHeads shape and more). */
  readonly result: FeedResult;
}

interface Log {
  readonly address: string;
  readonly topics: readonly string[];
  readonly result: FeedResult;
  /** The same log with "removed": true. */
  readonly removed: FeedResult;
}

const resultOf = (json: string): FeedResult => ({ json, wire: null });

interface Sent extends Header {
  /** Its logs, where a logs subscriber was there to want them (null: not fetched). */
  logs: readonly Log[] | null;
  /** Which emission it was (subscribers that came later never saw it). */
  readonly seq: number;
}

export class ChainFeed implements ChainListener {
  private readonly subs = new Set<FeedSubscriber>();
  private logSubs = 0;
  /** The blocks sent, ascending, contiguous. */
  private sent: Sent[] = [];
  /** The height the first subscriber came at (-1: take the head when it is known). */
  private base = -1;
  private seq = 0;
  private running = false;
  private again = false;
  private retry: NodeJS.Timeout | null = null;
  /** Bumped when the last subscriber leaves: a walk under way for the ones before stops. */
  private generation = 0;

  constructor(
    private readonly route: EvmRouteSpec,
    private readonly view: ChainView,
    /** The chain's front (the layers under admission): where its block and log fetches go, as clients' calls do. */
    private readonly front: Dispatch<ClientTarget>,
    private readonly pooled: boolean,
    private readonly log: Logger,
  ) {
    view.listen(this);
  }

  get size(): number {
    return this.subs.size;
  }

  /** The head and the view's epoch the last walk went up to: until one of them changes, there is nothing to fetch. */
  private walked = { target: -1, epoch: -1 };

  /** The emission count now: a subscriber made now passes it as `since`. */
  get now(): number {
    return this.seq;
  }

  /** The head subscribers follow, as the gateway knows it now: a subscriber made now passes it as `after`. */
  get head(): number {
    return this.target();
  }

  add(s: FeedSubscriber): void {
    if (this.subs.size === 0) {
      this.sent = [];
      this.base = this.target();
    }
    this.subs.add(s);
    if (s.type === 'logs') this.logSubs++;
    this.kick();
  }

  remove(s: FeedSubscriber): void {
    if (!this.subs.delete(s)) return;
    if (s.type === 'logs') this.logSubs--;
    if (this.subs.size === 0) {
      // Nothing is held upstream: the poller goes on for the chain anyway. What was sent is forgotten.
      this.sent = [];
      this.walked = { target: -1, epoch: -1 };
      this.generation++;
      if (this.retry !== null) clearTimeout(this.retry);
      this.retry = null;
    }
  }

  // ------------------------------------------------------- ChainListener

  epoch(): void {
    if (this.subs.size > 0) this.kick();
  }
  reset(): void {
    if (this.subs.size > 0) this.kick();
  }
  canonical(): void {}
  tip(): void {
    if (this.pooled && this.subs.size > 0) this.kick();
  }

  // ------------------------------------------------------------- the walk

  /** The head subscribers follow: the served tip on a pool, the view's head on one upstream. */
  private target(): number {
    return this.pooled ? this.view.tip : this.view.number;
  }

  private kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.run();
  }

  private async run(): Promise<void> {
    // The view tells its listeners before it has settled everything (the tip comes after the epoch): read it after.
    await Promise.resolve();
    try {
      do {
        this.again = false;
        await this.step();
      } while (this.again && this.subs.size > 0);
    } catch (err) {
      this.log.warn({ event: 'ws_feed_retry', chain: this.route.path, error: (err as Error).message }, 'subscription feed: fetch failed, trying again');
      if (this.retry === null && this.subs.size > 0) {
        this.retry = setTimeout(() => {
          this.retry = null;
          if (this.subs.size > 0) this.kick();
        }, RETRY_MS);
        this.retry.unref();
      }
    } finally {
      this.running = false;
    }
    // A head change that came while the last fetch failed: it is tried again by the timer.
  }

  private at(n: number): Sent | undefined {
    const first = this.sent[0];
    return first === undefined ? undefined : this.sent[n - first.number];
  }

  private async step(): Promise<void> {
    if (this.subs.size === 0) return;
    const t = this.target();
    if (t < 0) return;
    const gen = this.generation;
    if (this.sent.length === 0) {
      // The first subscriber's starting point: the head when it came, not sent.
      const n = this.base >= 0 && this.base <= t ? this.base : t;
      const h = await this.byNumber(n);
      if (gen !== this.generation || this.sent.length > 0) return;
      this.sent = [{ ...h, logs: null, seq: this.seq }];
    }
    // Nothing moved since the last walk (a subscriber joining wakes the feed too): no fetch at all, so what the
    // gateway asks of its upstreams does not grow with subscribers coming and going.
    const epoch = this.view.epoch;
    if (t === this.walked.target && epoch === this.walked.epoch) return;
    const top = this.sent[this.sent.length - 1]!;
    const head = await this.byNumber(t);
    if (gen !== this.generation) return;
    if (head.number <= top.number && this.at(head.number)?.hash === head.hash) {
      this.walked = { target: t, epoch };
      return; // nothing new (or the view is behind what was sent)
    }
    // The new head's branch, down to a block sent (its parent is what was sent at that height).
    const branch: Header[] = [head];
    let cur = head;
    for (;;) {
      const below = this.at(cur.number - 1);
      if (below !== undefined && below.hash === cur.parentHash) break;
      // Below what is kept, or too long a gap: start over from here.
      if ((below === undefined && cur.number - 1 < this.sent[0]!.number) || branch.length >= MAX_FILL) break;
      cur = await this.byHash(cur.parentHash);
      if (gen !== this.generation) return;
      branch.unshift(cur);
    }
    const first = branch[0]!.number;
    const firstKept = this.sent[0]!.number;
    // A gap the walk gave up on (over MAX_FILL): whoever should have had the blocks between is told which it missed.
    if (first > top.number + 1) {
      for (const s of [...this.subs]) if (s.after < first - 1) s.missed(Math.max(top.number, s.after) + 1);
      if (gen !== this.generation) return;
    }
    // Sent blocks the branch replaces: their logs are taken back, newest block last.
    const cut = Math.max(0, Math.min(this.sent.length, first - firstKept));
    const replaced = this.sent.slice(cut);
    this.sent = first < firstKept || first > top.number + 1 ? [] : this.sent.slice(0, cut);
    for (const r of replaced) if (r.logs !== null) this.sendLogs(r.logs, true, r.seq, r.number);
    for (const h of branch) {
      const logs = this.logSubs > 0 ? await this.logsOf(h) : null;
      if (gen !== this.generation) return;
      const s: Sent = { ...h, logs, seq: ++this.seq };
      this.sent.push(s);
      if (this.sent.length > KEEP) this.sent.shift();
      this.sendHead(s);
      if (logs !== null) this.sendLogs(logs, false, s.seq, s.number);
    }
    this.walked = { target: t, epoch };
  }

  private sendHead(h: Sent): void {
    for (const s of this.subs) if (s.type === 'newHeads' && h.number > s.after) s.notify(h.result);
    h.result.wire = null;
  }

  private sendLogs(logs: readonly Log[], removed: boolean, seq: number, number: number): void {
    if (logs.length === 0) return;
    for (const s of this.subs) {
      if (s.type !== 'logs' || (removed ? s.since >= seq : number <= s.after)) continue;
      for (const l of logs) if (matches(s.filter!, l.address, l.topics)) s.notify(removed ? l.removed : l.result);
    }
    for (const l of logs) (removed ? l.removed : l.result).wire = null;
  }

  // ------------------------------------------------------------ fetching

  private async byNumber(n: number): Promise<Header> {
    return this.header(await rpcCall(this.front, this.route, 'eth_getBlockByNumber', `["0x${n.toString(16)}",false]`), `block ${n}`);
  }

  private async byHash(hash: string): Promise<Header> {
    return this.header(await rpcCall(this.front, this.route, 'eth_getBlockByHash', `[${JSON.stringify(hash)},false]`), `block ${hash}`);
  }

  private header(v: unknown, what: string): Header {
    if (v === null || typeof v !== 'object') throw new Error(`${what}: the node does not have it (yet)`);
    const b = { ...(v as Record<string, unknown>) };
    const number = quantity(b.number);
    if (number < 0 || typeof b.hash !== 'string' || typeof b.parentHash !== 'string') throw new Error(`${what}: not a block`);
    delete b.transactions;
    return { number, hash: b.hash.toLowerCase(), parentHash: b.parentHash.toLowerCase(), result: resultOf(JSON.stringify(b)) };
  }

  private async logsOf(h: Header): Promise<Log[]> {
    const v = await rpcCall(this.front, this.route, 'eth_getLogs', `[{"blockHash":${JSON.stringify(h.hash)}}]`);
    if (!Array.isArray(v)) throw new Error(`logs of ${h.hash}: not a list`);
    return v.map((l: Record<string, unknown>) => {
      const topics = Array.isArray(l.topics) ? (l.topics as unknown[]).map((t) => String(t).toLowerCase()) : [];
      return { address: String(l.address).toLowerCase(), topics, result: resultOf(JSON.stringify(l)), removed: resultOf(JSON.stringify({ ...l, removed: true })) };
    });
  }
}
