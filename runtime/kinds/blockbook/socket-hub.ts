// subscribeAddresses and subscribeFiatRates of every socket on one Blockbook
// chain, multiplexed (issue 46): the union of the clients' addresses and one
// fiat subscription are carried by ONE upstream (socket-upstream.ts), whatever
// the number of clients; each notification goes only to the clients whose sets
// hold its address (matched as Blockbook matches them: addressKey), under each
// one's own subscribe id.
// - The union is carried in shards of at most 1,000 addresses (Blockbook's
//   limit a socket, socket-shards.ts): the first on the upstream's head socket,
//   each further one on a socket of its own to it (ShardSocket), opened only
//   while needed. One no longer needed is emptied at once and closed after
//   websocket.spareSocketMs unneeded: a client crossing a 1,000-address
//   boundary back and forth opens no socket to the provider per subscribe.
// - Two bounds keep one client from taking the feature from the others: the
//   chain's union (websocket.maxAddresses) and each API key's distinct
//   addresses over its sockets (websocket.maxAddressesPerKey, by the key's id).
//   A subscribe over either is refused with the bound; the client's set stays.
// - Mempool transactions come from the carrier's sockets; mined ones
//   (newBlockTxs) from the chain's blocks as the gateway serves them (the block
//   feed, socket-blocks.ts), as websocket.go's publishNewBlockTxsByAddr sends
//   them: none is missed when the carrier changes, or sent before its block.
// - Failover: when any of the carrier's sockets is lost, or its upstream no
//   longer serves the chain, every shard moves to another usable upstream (the
//   lost one last), with backoff while none takes it; what reached the mempool
//   meanwhile is read then, each transaction sent once (socket-replay.ts).
import type { Logger } from '../../observe/log.ts';
import type { ChainListener, ChainView } from '../../upstreams/chain-view.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import type { BlockFeed, BlockSubscriber } from './socket-blocks.ts';
import type { BlockbookRouteSpec } from '../../types.ts';
import { socketUrl } from '../../upstreams/head-sockets.ts';
import { addressesOf, addressKey, fiatToClients, type AddressClient, type BlockTx, type FiatClient } from './socket-address.ts';
import { Mempool } from './socket-replay.ts';
import { Shards } from './socket-shards.ts';
import { blockbookSocketUrl, Carrier, MAX_UPSTREAM_ADDRESSES, ShardSocket } from './socket-upstream.ts';

const BACKOFF_MS = [200, 500, 1000, 2000, 5000];

/** The chain's bounds on subscribed addresses (the Blockbook chain's `websocket` settings). */
export interface AddressBounds {
  /** The union of every client's addresses: its shards are at most ceil(this / 1,000) sockets to the carrying upstream. */
  readonly maxAddresses: number;
  /** One API key's distinct addresses, over all its sockets on the chain. */
  readonly maxAddressesPerKey: number;
  /** How long a shard's socket the union no longer needs is kept, emptied, for it to grow back into. */
  readonly spareSocketMs: number;
}

/** One shard's carrier: shard 0's on the upstream's head socket, each other's on a ShardSocket of its own. */
interface Lane {
  readonly carrier: Carrier;
  readonly socket: ShardSocket | null;
  /** The address list last sent (joined). */
  sent: string;
  /** What the upstream took (its last answered list), and that with what was sent since: what it may notify. */
  carried: ReadonlySet<string>;
  asked: ReadonlySet<string>;
}

export class SubscriptionHub {
  /** Who holds each address: the union is its keys. */
  private readonly byAddress = new Map<string, Set<AddressClient>>();
  /** Each API key's addresses (by its id), with how many of its sockets hold each: its share is the map's size. */
  private readonly byKey = new Map<string, Map<string, number>>();
  /** Which of the carrier's sockets holds each address of the union. */
  private readonly shards = new Shards(MAX_UPSTREAM_ADDRESSES);
  private readonly fiatClients = new Set<FiatClient>();
  /** What each address's holders were sent from the mempool, and what a loss leaves to read. */
  private readonly mempool: Mempool;
  /** Clients with newBlockTxs: while there are any, the hub follows the block feed. */
  private mined = 0;
  private readonly blockSub: BlockSubscriber = {
    block: (data) => {
      const { height, hash } = JSON.parse(data) as { height: number; hash: string };
      // One block after the other, in the feed's order.
      this.minedQueue = this.minedQueue.then(() => this.minedIn(hash)).catch((err: unknown) => this.log.warn({ event: 'ws_block_txs_failed', height, err: (err as Error).message }, "a block's transactions could not be read"));
    },
    // Past a gap the feed does not fill, the hub follows the chain again from its head (the blocks between are not read).
    missed: () => {
      if (this.mined > 0) this.blocks.add(this.blockSub);
    },
  };
  private minedQueue: Promise<void> = Promise.resolve();

  /** The upstream carrying the chain's subscriptions (null: none yet, or given up), and its sockets, one per shard. */
  private carrying: Upstream | null = null;
  private lanes: Lane[] = [];
  /** Since when lanes past the union's need have been spares (null: none), and the pass that closes them. */
  private spareSince: number | null = null;
  private spareTimer: ReturnType<typeof setTimeout> | null = null;
  /** Whether the fiat subscription was taken (on shard 0's socket). */
  private sentFiat = false;
  /** The upstream whose socket was lost last: tried after the others. */
  private lastLost: Upstream | null = null;
  private dirty = false;
  private running = false;
  private failures = 0;

  /** Each poll's report: a carrier whose upstream no longer serves the chain gives the union to one that does. */
  private readonly watch: ChainListener = {
    epoch: () => {},
    reset: () => this.recheck(),
    canonical: () => {},
    heard: () => this.recheck(),
  };

  constructor(
    /** The chain: its upstreams' socket URLs, for the shards past the first. */
    private readonly route: BlockbookRouteSpec,
    private readonly bounds: AddressBounds,
    /** The chain's upstreams, in the route's order: each one's head socket (Upstream.socket) carries shard 0 beside its heads. */
    private readonly upstreams: readonly Upstream[],
    private readonly blocks: BlockFeed,
    view: ChainView,
    /** The gateway's own read through the chain's front (socket-fetch.ts). */
    private readonly get: (rest: string, query?: string) => Promise<unknown>,
    private readonly log: Logger,
  ) {
    view.listen(this.watch);
    this.mempool = new Mempool({ get, holders: (a) => this.byAddress.get(a), best: () => view.best(), maxPageSize: route.limits.maxPageSize, log });
  }

  private recheck(): void {
    const u = this.carrying;
    if (u === null || u.serving || !this.upstreams.some((x) => x.serving)) return;
    this.log.warn({ event: 'ws_upstream_not_serving', upstream: u.name }, "the upstream carrying the chain's subscriptions no longer serves the chain; another upstream takes them");
    // Its head socket is fine: what it carried is unsubscribed there (its heads keep it), and it is tried last.
    this.lose(u);
    this.sync();
  }

  /**
   * Sets (or replaces) a client's addresses. An error message, and nothing
   * changed, when the client's key would hold more than its share of the
   * chain's addresses, or the chain's union would pass its bound.
   */
  setAddresses(c: AddressClient, previous: AddressClient | null): string | null {
    // What the key and the union would hold: the new set's addresses they lack, less those only the previous set held.
    const held = this.byKey.get(c.key);
    let share = held?.size ?? 0;
    let union = this.byAddress.size;
    for (const a of c.addresses) {
      if (held?.has(a) !== true) share++;
      if (!this.byAddress.has(a)) union++;
    }
    if (previous !== null) {
      for (const a of previous.addresses) {
        if (c.addresses.has(a)) continue;
        if (held?.get(a) === 1) share--;
        if (this.byAddress.get(a)?.size === 1) union--;
      }
    }
    if (share > this.bounds.maxAddressesPerKey) return `addresses max ${this.bounds.maxAddressesPerKey} per API key on this chain, all its sockets together`;
    if (union > this.bounds.maxAddresses) return `addresses max ${this.bounds.maxAddresses} on this chain, for all clients together`;
    // The new set first: an address in both stays where it is (no shard changes for it).
    this.index(c);
    this.mempool.replaced(c, previous);
    if (previous !== null) this.unindex(previous);
    this.sync();
    return null;
  }

  removeAddresses(c: AddressClient): void {
    this.unindex(c);
    this.sync();
  }

  addFiat(c: FiatClient): void {
    this.fiatClients.add(c);
    this.sync();
  }

  removeFiat(c: FiatClient): void {
    if (this.fiatClients.delete(c)) this.sync();
  }

  private index(c: AddressClient): void {
    let held = this.byKey.get(c.key);
    if (held === undefined) this.byKey.set(c.key, (held = new Map()));
    for (const a of c.addresses) {
      let set = this.byAddress.get(a);
      if (set === undefined) {
        this.byAddress.set(a, (set = new Set()));
        this.shards.add(a);
      }
      set.add(c);
      held.set(a, (held.get(a) ?? 0) + 1);
    }
    if (c.newBlockTxs && this.mined++ === 0) this.blocks.add(this.blockSub);
  }

  private unindex(c: AddressClient): void {
    const held = this.byKey.get(c.key);
    for (const a of c.addresses) {
      const set = this.byAddress.get(a);
      if (set === undefined || !set.delete(c)) continue;
      if (set.size === 0) {
        this.byAddress.delete(a);
        this.shards.remove(a);
        this.mempool.notified.forget(a);
      }
      const n = held!.get(a)! - 1;
      if (n > 0) held!.set(a, n);
      else held!.delete(a);
    }
    if (held?.size === 0) this.byKey.delete(c.key);
    this.mempool.left(c);
    if (c.newBlockTxs && --this.mined === 0) this.blocks.remove(this.blockSub);
  }

  // ------------------------------------------------------------ upstream

  /** Brings the carrier to what the clients hold now; one change at a time, the newest state winning. */
  private sync(): void {
    this.dirty = true;
    if (!this.running) void this.run();
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.dirty) {
      this.dirty = false;
      if (this.shards.size === 0 && this.fiatClients.size === 0) {
        // Nothing to carry: unsubscribed upstream.
        this.dropCarrier();
        this.mempool.clear();
        continue;
      }
      try {
        if (await this.carry()) this.mempool.carried(this.carrying!.name);
        this.failures = 0;
      } catch (err) {
        this.log.warn({ event: 'ws_upstream_subscribe_failed', upstream: this.carrying?.name, err: (err as Error).message }, 'the subscriptions could not be carried upstream; another upstream is tried');
        this.lose(this.carrying);
        this.dirty = true;
        const wait = BACKOFF_MS[Math.min(this.failures++, BACKOFF_MS.length - 1)]!;
        await new Promise((r) => setTimeout(r, wait).unref());
      }
    }
    this.running = false;
  }

  /**
   * One pass: each shard on its socket to the carrying upstream (one picked
   * if none), the fiat subscription on the first, and shards the union no
   * longer needs emptied, last, once the others carry their addresses. What a
   * carrier lost meanwhile was given counts for nothing: the pass ends, and
   * the next one gives the next carrier all of it. Whether `u` carries it all.
   */
  private async carry(): Promise<boolean> {
    const u = (this.carrying ??= this.pick());
    const fiat = this.fiatClients.size > 0;
    const needed = Math.max(this.shards.count, fiat ? 1 : 0);
    for (let i = 0; i < needed; i++) {
      let lane = this.lanes[i];
      if (lane === undefined) {
        const opened = await this.open(u, i);
        if (this.carrying !== u) return (this.close(opened, false), false);
        this.lanes[i] = lane = opened;
      }
      const list = this.shards.list(i);
      const joined = list.join('\n');
      if (joined === lane.sent) continue;
      lane.sent = joined;
      lane.asked = new Set([...lane.carried, ...list]);
      await lane.carrier.addresses(list);
      if (this.lanes[i] !== lane) return false;
      lane.carried = lane.asked = new Set(list);
    }
    if (fiat !== this.sentFiat) {
      await this.lanes[0]!.carrier.fiatRates(fiat);
      if (this.carrying !== u) return false;
      this.sentFiat = fiat;
    }
    await this.spare(u, needed);
    return this.carrying === u;
  }

  /** The lanes past `needed`: emptied now (their addresses are carried by the lower ones), closed once spares for spareSocketMs. */
  private async spare(u: Upstream, needed: number): Promise<void> {
    if (this.lanes.length <= needed) return void (this.spareSince = null);
    const now = performance.now();
    if (this.spareSince !== null && now - this.spareSince >= this.bounds.spareSocketMs) {
      while (this.lanes.length > needed) this.close(this.lanes.pop()!, false);
      return void (this.spareSince = null);
    }
    this.spareSince ??= now;
    this.spareTimer ??= setTimeout(() => ((this.spareTimer = null), this.sync()), this.bounds.spareSocketMs - (now - this.spareSince) + 1).unref();
    for (let i = needed; i < this.lanes.length; i++) {
      const lane = this.lanes[i]!;
      if (lane.sent === '') continue;
      lane.sent = ''; // sent again whole if the union grows back into it
      await lane.carrier.addresses([]);
      if (this.carrying !== u || this.lanes[i] !== lane) return;
      lane.carried = lane.asked = new Set();
    }
  }

  /** The live head socket of the first usable upstream, the last one lost after the others. */
  private pick(): Upstream {
    const live = this.upstreams.filter((u) => u.usable && u.socket?.live === true);
    const u = live.find((x) => x !== this.lastLost) ?? live[0];
    if (u === undefined) throw new Error('no upstream socket is live');
    return u;
  }

  /** Shard i's carrier on `u`: its head socket for shard 0, a socket of its own (once it serves the chain) for another. */
  private async open(u: Upstream, i: number): Promise<Lane> {
    let socket: ShardSocket | null = null;
    if (i > 0) {
      socket = new ShardSocket(u, socketUrl(this.route.upstreams[this.upstreams.indexOf(u)]!, this.route, blockbookSocketUrl)!, this.route.limits.timeoutMs);
      try {
        await socket.ready;
      } catch (err) {
        socket.close();
        throw err;
      }
    }
    let lane: Lane | null = null;
    const carrier = new Carrier(u, socket ?? u.socket!, {
      address: (address, txid, data) => this.address(lane!, address, txid, data),
      fiat: (data) => fiatToClients(this.fiatClients, data),
      lost: () => {
        if (!this.lanes.includes(lane!)) return;
        this.log.warn({ event: 'ws_upstream_lost', upstream: u.name, shard: i }, "an upstream socket carrying the chain's subscriptions is lost; another upstream takes them all");
        this.lose(u);
        this.sync();
      },
    });
    lane = { carrier, socket, sent: '', carried: new Set(), asked: new Set() };
    return lane;
  }

  /** The carrier lost (tried last): if it carried addresses, what reached the mempool meanwhile is read once another does. */
  private lose(u: Upstream | null): void {
    if (this.lanes.some((l) => l.carried.size > 0)) this.mempool.lost(this.byAddress);
    if (u !== null) this.lastLost = u;
    this.dropCarrier();
  }

  /** The carrier given up: what shard 0 carried is unsubscribed on the head socket (its heads keep it), the other shards' sockets closed. */
  private dropCarrier(): void {
    const lanes = this.lanes;
    this.lanes = [];
    this.carrying = null;
    this.spareSince = null;
    lanes.forEach((lane, i) => this.close(lane, i === 0 && this.sentFiat));
    this.sentFiat = false;
  }

  private close(lane: Lane, fiat: boolean): void {
    lane.carrier.close({ addresses: lane.socket === null && lane.sent !== '', fiat });
    lane.socket?.close();
  }

  // -------------------------------------------------------- notifications

  /**
   * A mempool transaction of `address` on `lane`'s socket: to every client
   * that holds it. An address moving to another shard (the union shrank) is
   * on two sockets a moment: the one it left tells until the other has taken
   * it, so the client gets it once, neither twice nor not at all.
   */
  private address(lane: Lane, address: string, txid: string, data: string): void {
    const key = addressKey(address);
    if (!lane.asked.has(key)) return;
    const owner = this.lanes[this.shards.of(key) ?? -1];
    if (owner !== lane ? owner?.carried.has(key) === true : !lane.carried.has(key) && this.lanes.some((l) => l !== lane && l.asked.has(key))) return;
    const set = this.byAddress.get(key);
    if (set === undefined) return;
    for (const c of this.mempool.notified.take(key, txid, set, true)) c.notify(`{"id":${c.idJson},"data":${data}}`);
  }

  /** The transactions of the block `hash` that touch an address a newBlockTxs client holds, each as Blockbook sends it. */
  private async minedIn(hash: string): Promise<void> {
    if (this.mined === 0) return;
    for (let page = 1, pages = 1; page <= pages; page++) {
      const b = (await this.get(`block/${hash}`, page === 1 ? '' : `page=${page}`)) as { totalPages?: unknown; txs?: readonly BlockTx[] };
      if (typeof b.totalPages === 'number') pages = b.totalPages;
      for (const tx of b.txs ?? []) {
        const to: [string, string, AddressClient[]][] = [];
        for (const [a, written] of addressesOf(tx)) {
          const clients = [...(this.byAddress.get(a) ?? [])].filter((c) => c.newBlockTxs);
          if (clients.length > 0) to.push([a, written, clients]);
        }
        if (to.length === 0 || typeof tx.txid !== 'string') continue;
        // The transaction as its own endpoint gives it (websocket.go sends the full api.Tx), read once for all.
        const full = JSON.stringify(await this.get(`tx/${tx.txid}`));
        for (const [a, written, clients] of to) {
          const data = `{"address":${JSON.stringify(written)},"tx":${full}}`;
          // Unsubscribed while the transaction was read: not sent.
          for (const c of clients) if (this.byAddress.get(a)?.has(c) === true) c.notify(`{"id":${c.idJson},"data":${data}}`);
        }
      }
    }
  }
}
