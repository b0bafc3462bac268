// Mempool transactions across a carrier switch (issue 46). While the union of
// a Blockbook chain's subscribed addresses moves to another upstream after a
// loss (socket-hub.ts), a transaction that reaches the mempool is announced by
// no socket: the old one is gone, the new one not yet subscribed. Mined ones
// come from the served blocks; mempool ones are read here once the new carrier
// holds the union, as Blockbook lists them: `address/<a>?details=txs` puts
// every unconfirmed transaction of the address first on page 1 (api/worker.go
// GetAddress), whatever `from`, which bounds only the confirmed ones, so
// `from` past the tip makes the page the mempool's alone.
//  - Notified: the txids recently notified per address, so that a
//    transaction the old carrier announced, or the new one announces as well
//    as the list, reaches each holder once.
//  - Replay: who held each address at the loss, and the bounded read;
//  - Mempool: the hub's side of both (a loss makes a replay, the next
//    carrier's whole union runs it).
import type { Logger } from '../../observe/log.ts';
import type { AddressClient } from './socket-address.ts';

/** Txids remembered per address: as many as a replay reads of one address, so what it reads it can tell apart. */
export const RECENT_TXS = 20;
/** Addresses a replay reads, in the order they were subscribed. */
export const REPLAY_ADDRESSES = 1000;
/** Reads under way at once. */
export const REPLAY_CONCURRENCY = 4;
/** No read starts past this, from the replay's start. */
export const REPLAY_MS = 30_000;

/**
 * The mempool txids recently notified for each address that had any (the
 * last RECENT_TXS an address): `true`, every holder then had it; otherwise the
 * clients a replay sent it to (weakly: a closed client is not kept).
 */
export class Notified {
  private readonly byAddress = new Map<string, Map<string, true | WeakSet<AddressClient>>>();

  /**
   * Of `to`, the clients not yet sent `txid` of `address`, recorded as sent:
   * an announcement's `to` is every holder (`all`), a replay's only those
   * that held the address before the loss.
   */
  take(address: string, txid: string, to: Iterable<AddressClient>, all: boolean): AddressClient[] {
    let txs = this.byAddress.get(address);
    const had = txs?.get(txid);
    if (had === true) return [];
    const out: AddressClient[] = [];
    for (const c of to) if (had?.has(c) !== true) out.push(c);
    if (txs === undefined) this.byAddress.set(address, (txs = new Map()));
    if (all) txs.set(txid, true);
    else if (had !== undefined) for (const c of out) had.add(c);
    else txs.set(txid, new WeakSet(out));
    if (txs.size > RECENT_TXS) txs.delete(txs.keys().next().value!);
    return out;
  }

  /** The address left the union: nothing of it is kept. */
  forget(address: string): void {
    this.byAddress.delete(address);
  }
}

/** A transaction as an address's list gives it. */
interface ListedTx {
  readonly txid?: unknown;
  readonly confirmations?: unknown;
  readonly vin?: readonly Record<string, unknown>[];
  readonly vout?: readonly Record<string, unknown>[];
}

/** What a replay needs of the hub. */
export interface ReplayHub {
  /** The gateway's own read through the chain's front (socket-fetch.ts). */
  get(rest: string, query?: string): Promise<unknown>;
  /** Who holds an address now. */
  holders(address: string): ReadonlySet<AddressClient> | undefined;
  /** The chain's best height (-1: none known): only the mempool is listed from the next one. */
  best(): number;
  /** The chain's largest pageSize (limits.maxPageSize). */
  readonly maxPageSize: number;
  readonly log: Logger;
}

/**
 * One switch's replay: made at the loss, with who held each address then, and
 * run once the new carrier holds the union. A client that replaces its set
 * meanwhile still held, since the loss, the addresses its new set keeps;
 * anyone else subscribed after the loss gets nothing replayed.
 */
export class Replay {
  private readonly held = new Map<string, Set<AddressClient>>();
  private stopped = false;

  constructor(byAddress: ReadonlyMap<string, ReadonlySet<AddressClient>>) {
    for (const [a, set] of byAddress) this.held.set(a, new Set(set));
  }

  /** `c` replaced `previous`: the addresses both hold were held by it since before the loss. */
  inherit(c: AddressClient, previous: AddressClient): void {
    for (const a of c.addresses) {
      const set = this.held.get(a);
      if (set?.has(previous) === true) set.add(c);
    }
  }

  /** `c` unsubscribed or closed: not kept. */
  forget(c: AddressClient): void {
    for (const a of c.addresses) this.held.get(a)?.delete(c);
  }

  /** A later loss's replay takes over: no read starts after this. */
  stop(): void {
    this.stopped = true;
  }

  /**
   * Reads, REPLAY_CONCURRENCY at a time, the mempool transactions of the
   * first REPLAY_ADDRESSES addresses still held by a client that held them
   * at the loss (no read starts past REPLAY_MS), and sends each that
   * Notified has not seen to those clients, as Blockbook's notification.
   */
  async run(hub: ReplayHub, notified: Notified, upstream: string): Promise<void> {
    const due = performance.now() + REPLAY_MS;
    const query = `details=txs&pageSize=${Math.min(RECENT_TXS, hub.maxPageSize)}&from=${hub.best() + 1}`;
    const pending = [...this.held.keys()].filter((a) => this.before(hub, a).length > 0);
    const todo = pending.slice(0, REPLAY_ADDRESSES);
    let read = 0;
    let sent = 0;
    let failed = 0;
    const next = async (): Promise<void> => {
      for (let a = todo.shift(); a !== undefined && !this.stopped && performance.now() < due; a = todo.shift()) {
        read++;
        try {
          const doc = await hub.get(`address/${encodeURIComponent(a)}`, query);
          sent += this.send(hub, notified, a, doc);
        } catch (err) {
          failed++;
          hub.log.debug({ event: 'ws_mempool_replay_read_failed', err: (err as Error).message }, "an address's mempool could not be read after the carrier switch");
        }
      }
    };
    await Promise.all(Array.from({ length: REPLAY_CONCURRENCY }, next));
    hub.log.info({ event: 'ws_mempool_replayed', upstream, addresses: pending.length, read, failed, sent, stopped: this.stopped }, 'mempool transactions announced during the carrier switch were read and sent');
  }

  /** The clients that held `a` at the loss and hold it still. */
  private before(hub: ReplayHub, a: string): AddressClient[] {
    const now = hub.holders(a);
    return now === undefined ? [] : [...this.held.get(a)!].filter((c) => now.has(c));
  }

  /** The unconfirmed transactions of `a`'s list to those of its holders that had it before the loss: how many notifications. */
  private send(hub: ReplayHub, notified: Notified, a: string, doc: unknown): number {
    const { address, transactions } = (doc ?? {}) as { address?: unknown; transactions?: unknown };
    if (!Array.isArray(transactions)) return 0;
    // Blockbook names the address as its descriptor reads back, as its notification does.
    const written = JSON.stringify(typeof address === 'string' ? address : a);
    let n = 0;
    // An older Blockbook lists the whole mempool part on page 1, past pageSize: its first RECENT_TXS, as a newer one gives.
    for (const tx of (transactions as ListedTx[]).slice(0, RECENT_TXS)) {
      if (typeof tx?.txid !== 'string' || tx.confirmations !== 0) continue;
      const to = notified.take(a, tx.txid, this.before(hub, a), false);
      if (to.length === 0) continue;
      // The list marks the inputs and outputs of its own address (isOwn); a notification, one text for all, does not.
      for (const io of [...(tx.vin ?? []), ...(tx.vout ?? [])]) delete io.isOwn;
      const data = `{"address":${written},"tx":${JSON.stringify(tx)}}`;
      for (const c of to) c.notify(`{"id":${c.idJson},"data":${data}}`);
      n += to.length;
    }
    return n;
  }
}

/** The hub's mempool side: what was notified, the replay a loss leaves (pending), and the one running. */
export class Mempool {
  readonly notified = new Notified();
  private pending: Replay | null = null;
  private running: Replay | null = null;

  constructor(private readonly hub: ReplayHub) {}

  /** The carrier was lost while carrying the addresses `byAddress`'s clients hold: a replay of them waits for the next (it covers a running one's). */
  lost(byAddress: ReadonlyMap<string, ReadonlySet<AddressClient>>): void {
    this.running?.stop();
    this.pending = new Replay(byAddress);
  }

  /** No address is held any more: nothing to replay. */
  clear(): void {
    this.pending = null;
  }

  /** `c` replaced `previous` (if any): the addresses both hold, it held before a loss if `previous` did. */
  replaced(c: AddressClient, previous: AddressClient | null): void {
    if (previous === null) return;
    this.pending?.inherit(c, previous);
    this.running?.inherit(c, previous);
  }

  /** `c` unsubscribed, replaced or closed: no replay keeps it. */
  left(c: AddressClient): void {
    this.pending?.forget(c);
    this.running?.forget(c);
  }

  /** The union is carried whole by `upstream`: a pending replay runs. */
  carried(upstream: string): void {
    const r = this.pending;
    if (r === null) return;
    this.pending = null;
    this.running = r;
    void r
      .run(this.hub, this.notified, upstream)
      .catch((err: unknown) => this.hub.log.warn({ event: 'ws_mempool_replay_failed', err: (err as Error).message }, 'the mempool replay after a carrier switch failed'))
      .finally(() => {
        if (this.running === r) this.running = null;
      });
  }
}
