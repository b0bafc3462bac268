// What the gateway knows of the chain one upstream serves (UpstreamView),
// and what one poll of it found (PollReport). The chain's view over its
// upstreams, and the rules that keep the cache's answers right, are
// ChainView's (chain-view.ts).
import type { UpstreamState } from '../observe/series.ts';
import { UpstreamTally } from './tally.ts';

/** Answers waiting for their upstream's next identity check, per upstream, at most. */
const MAX_WAITING = 10_000;

/** What one poll of one upstream found. */
export interface PollReport {
  /** What the upstream serves ('' when the interface cannot tell), as the log and the cache's namespace name it. */
  readonly identity: string;
  /** Whether that is the chain the manifest names (true where it names none). */
  readonly own: boolean;
  /** The genesis block's hash, where the poll asks for it ('' unknown). */
  readonly genesis: string;
  /** The head's number (NaN: it answered, but with no usable height) and hash ('' unknown). */
  readonly number: number;
  readonly hash: string;
  /** Finalized and safe blocks (-1 unknown). */
  readonly finalized: number;
  /**
   * The finalized block is the head less the chain's finality depth, not a
   * block the node called final: it goes back with a head that dips, and that
   * is the chain going back only once the head is below the old one.
   */
  readonly finalizedByDepth?: boolean;
  readonly safe: number;
  /** Hashes of final blocks the poll was asked to look up, by number. */
  readonly canonical: readonly (readonly [number, string])[];
}

/** Everything the gateway knows of what one upstream serves. */
export class UpstreamView {
  state: UpstreamState = 'unknown';
  /** The manifest names what this upstream must serve: until a poll says it does, it takes no traffic. */
  verify = false;
  /** What it serves, and its genesis hash, as its last good poll said ('' never told). */
  identity = '';
  genesis = '';
  /** Head as the last good poll said (null: never told). */
  head: number | null = null;
  hash = '';
  /** Its head socket (head-sockets.ts): up (verified and subscribed), down (being opened again), or null: it has none. */
  socket: 'up' | 'down' | null = null;
  /** When its socket last told its head (Date.now(); 0: never): a poll sent before it knows an older head (ChainView.report). */
  pushedAt = 0;
  finalized = -1;
  safe = -1;
  /** More than maxLag blocks behind the chain's best head. */
  lagging = false;
  /**
   * Its finalized block went back, and the chain's did not (ChainView.report):
   * the highest finalized block it reported before, which it must reach again
   * to take traffic or count for the chain (-1: not behind).
   */
  finalBehind = -1;
  /** Most blocks it takes in one eth_getLogs call: the manifest's maxLogRange, lowered by what its errors say (kinds/evm/log-ranges.ts); null: none known. */
  maxLogRange: number | null = null;
  /** False once it answered a JSON-RPC batch with one object; asked call by call until it comes back from down. */
  takesBatches = true;
  healthFails = 0;
  /** The last poll came back, on the chain's own identity, with a usable height: its head counts for lag. */
  fresh = false;
  /** Its last poll took longer than the poll interval to answer, or the one out now has: its head may be old. */
  overdue = false;
  /** Polls that came back (answered or failed). */
  reports = 0;
  /** Attempts and their latency, for /metrics and the status page. */
  readonly tally = new UpstreamTally();
  /** Throttled (throttle.ts): no client traffic before this epoch ms (0: not throttled). */
  throttledUntil = 0;
  /** Throttles in a row with no answer between (the cooldown doubles with each), when the run's last cooldown began (epoch ms), and throttles ever. */
  throttleRun = 0;
  throttleSince = 0;
  throttledTotal = 0;
  /** Its last poll was throttled (poller.ts): until one answers, nothing more is known of it. */
  pollThrottled = false;
  /** Polls begun (whenVerified waits for one begun after it was asked). */
  begun = 0;
  /** Work waiting for the next poll that begins after it was queued: [poll number it waits for, what to run if that poll verifies]. */
  private readonly afterPoll: { readonly poll: number; readonly run: () => void }[] = [];

  /**
   * Its socket pushed a head at or above `n` after `asked` (Date.now() when a
   * poll that found `n` was sent): that poll's answer is older than the head
   * the view holds, which stands (ChainView.report), and its lag is judged
   * from that head (poller.ts).
   */
  pushedOver(n: number, asked: number): boolean {
    return this.pushedAt > asked && this.head !== null && n <= this.head;
  }

  /** Still in a throttle's cooldown; clears it once the cooldown is over. */
  get throttled(): boolean {
    if (this.throttledUntil === 0) return false;
    if (Date.now() < this.throttledUntil) return true;
    this.throttledUntil = 0;
    return false;
  }

  /**
   * A poll found it on its chain and told what it serves, and none found it on another since: what its socket pushes
   * may count (ChainView.pushed). A poll that failed or timed out leaves it so: it says nothing of which chain.
   */
  get verified(): boolean {
    return this.identity !== '' && this.state !== 'wrong_chain';
  }

  /** Its head is the chain's as of the last poll interval: the last poll answered on time with a usable height, and none is overdue. */
  get current(): boolean {
    return this.fresh && !this.overdue;
  }

  /** Runs `run` once a poll that begins from now on finds this upstream on its chain (dropped if it does not). */
  whenVerified(run: () => void): void {
    if (this.afterPoll.length >= MAX_WAITING) return;
    this.afterPoll.push({ poll: this.begun + 1, run });
  }

  /** A poll is over: what waited for it runs if it verified the identity, and is dropped if not. */
  settled(poll: number, ok: boolean): void {
    let n = 0;
    while (n < this.afterPoll.length && this.afterPoll[n]!.poll <= poll) n++;
    if (n === 0) return;
    const due = this.afterPoll.splice(0, n);
    if (ok) for (const w of due) w.run();
  }
}
