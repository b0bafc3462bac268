// subscribeAddresses and subscribeFiatRates of every socket on one Blockbook
// chain, multiplexed (issue 46): the union of the clients' addresses and one
// fiat subscription are carried by ONE upstream socket (socket-upstream.ts),
// whatever the number of clients; each notification goes only to the clients
// whose sets hold its address, under each one's own subscribe id.
//
// - Mempool transactions come from the carrying upstream's socket.
// - Mined transactions (newBlockTxs) come from the chain's blocks as the
//   gateway serves them (the block feed, socket-blocks.ts): each block is read
//   through the chain's front and every transaction touching an address a
//   newBlockTxs client holds is sent, as websocket.go's publishNewBlockTxsByAddr
//   does. So one is never missed when the carrier changes, and never sent
//   before its block is the chain's.
// - Failover: when the carrier is lost, or its upstream no longer serves the
//   chain (down, behind, another chain: its mempool is not the chain's), the
//   union is subscribed on another usable upstream (the lost one last), with
//   backoff while none takes it.
// - Addresses are matched as Blockbook matches them, by what they stand for
//   (its address descriptor), not by their spelling (addressKey).
// - The union is at most what ONE upstream socket takes (1,000 addresses),
//   not split across upstreams: the carrier's failover moves all of it to
//   one other upstream, which could not take a union of several sockets.
import type { Logger } from '../../observe/log.ts';
import type { ChainListener, ChainView } from '../../upstreams/chain-view.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import type { BlockFeed, BlockSubscriber } from './socket-blocks.ts';
import { Carrier, MAX_UPSTREAM_ADDRESSES, type CarriedEvents } from './socket-upstream.ts';

/** A socket's address subscription. */
export interface AddressClient {
  /** Its subscribe message's id, which its notifications carry. */
  readonly idJson: string;
  readonly addresses: ReadonlySet<string>;
  readonly newBlockTxs: boolean;
  /** One notification's whole text. */
  notify(text: string): void;
}

/** A socket's fiat rates subscription: one currency (lower case), or all (null). */
export interface FiatClient {
  readonly idJson: string;
  readonly currency: string | null;
  notify(text: string): void;
}

const BACKOFF_MS = [200, 500, 1000, 2000, 5000];

const BECH32 = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

/** Whether a lower-case string is bech32 or bech32m with a valid checksum (BIP 173, BIP 350). */
function isBech32(s: string): boolean {
  const sep = s.lastIndexOf('1');
  if (sep < 1 || s.length - sep < 7 || s.length > 90) return false;
  let chk = 1;
  const step = (v: number): void => {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GEN[i]!;
  };
  for (let i = 0; i < sep; i++) step(s.charCodeAt(i) >> 5);
  step(0);
  for (let i = 0; i < sep; i++) step(s.charCodeAt(i) & 31);
  for (let i = sep + 1; i < s.length; i++) {
    const v = BECH32.indexOf(s[i]!);
    if (v < 0) return false;
    step(v);
  }
  return chk === 1 || chk === 0x2bc830a3;
}

/**
 * An address as Blockbook tells addresses apart (by its descriptor): a
 * bech32 address in upper case is its lower-case self, an EVM 0x address is
 * the same in any case. Anything else (base58, an xpub) is kept as written:
 * its case is part of it. Applied to a client's addresses as it subscribes
 * and to each notification's, so each is matched once, by this key.
 */
export function addressKey(a: string): string {
  if (/^0x[0-9a-fA-F]{40}$/.test(a)) return a.toLowerCase();
  const lower = a.toLowerCase();
  // Bech32 is all of one case (BIP 173): upper case is the lower-case address; mixed case is no bech32.
  return lower !== a && a === a.toUpperCase() && isBech32(lower) ? lower : a;
}

interface BlockTx {
  readonly txid?: unknown;
  readonly vin?: readonly { readonly addresses?: unknown }[];
  readonly vout?: readonly { readonly addresses?: unknown }[];
}

/** The addresses a transaction of a block touches (its inputs' and outputs'): by key (addressKey), as the block writes each. */
function addressesOf(tx: BlockTx): Map<string, string> {
  const out = new Map<string, string>();
  for (const io of [...(tx.vin ?? []), ...(tx.vout ?? [])]) if (Array.isArray(io.addresses)) for (const a of io.addresses) if (typeof a === 'string') out.set(addressKey(a), a);
  return out;
}

export class SubscriptionHub {
  /** Who holds each address: the union is its keys. */
  private readonly byAddress = new Map<string, Set<AddressClient>>();
  private readonly fiatClients = new Set<FiatClient>();
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

  private carrier: Carrier | null = null;
  /** What the carrier was last given: the address list (joined) and the fiat subscription. */
  private sentAddresses = '';
  private sentFiat = false;
  /** The upstream whose socket was lost last: tried after the others. */
  private lastLost: Upstream | null = null;
  private dirty = false;
  private running = false;
  private failures = 0;
  /** What the carrier tells: notifications, and that it is lost. */
  private readonly events: CarriedEvents = {
    address: (address, data) => this.address(address, data),
    fiat: (data) => this.fiat(data),
    lost: () => {
      const c = this.carrier;
      if (c === null) return;
      this.log.warn({ event: 'ws_upstream_lost', upstream: c.upstream.name }, "the upstream socket carrying the chain's subscriptions is lost; another upstream takes them");
      this.lastLost = c.upstream;
      this.carrier = null;
      this.sentAddresses = '';
      this.sentFiat = false;
      this.sync();
    },
  };

  /** Each poll's report: a carrier whose upstream no longer serves the chain gives the union to one that does. */
  private readonly watch: ChainListener = {
    epoch: () => {},
    reset: () => this.recheck(),
    canonical: () => {},
    heard: () => this.recheck(),
  };

  constructor(
    /** The chain's upstreams: each one's socket (Upstream.socket) is shared with its heads. */
    private readonly upstreams: readonly Upstream[],
    private readonly blocks: BlockFeed,
    view: ChainView,
    /** The gateway's own read through the chain's front (socket-fetch.ts). */
    private readonly get: (rest: string, query?: string) => Promise<unknown>,
    private readonly log: Logger,
  ) {
    view.listen(this.watch);
  }

  private recheck(): void {
    const c = this.carrier;
    if (c === null || c.upstream.serving || !this.upstreams.some((u) => u.serving)) return;
    this.log.warn({ event: 'ws_upstream_not_serving', upstream: c.upstream.name }, "the upstream carrying the chain's subscriptions no longer serves the chain; another upstream takes them");
    // Its socket is fine: what it carried is unsubscribed there (its heads keep it), and it is tried last.
    this.dropCarrier(false);
    this.lastLost = c.upstream;
    this.sync();
  }

  /**
   * Sets (or replaces) a client's addresses. An error message when the
   * chain's union would pass what one upstream socket carries.
   */
  setAddresses(c: AddressClient, previous: AddressClient | null): string | null {
    let added = 0;
    for (const a of c.addresses) if (!this.byAddress.has(a) && !previous?.addresses.has(a)) added++;
    if (this.byAddress.size + added > MAX_UPSTREAM_ADDRESSES) return `addresses max ${MAX_UPSTREAM_ADDRESSES} on this chain, for all clients together`;
    if (previous !== null) this.unindex(previous);
    for (const a of c.addresses) {
      let set = this.byAddress.get(a);
      if (set === undefined) this.byAddress.set(a, (set = new Set()));
      set.add(c);
    }
    if (c.newBlockTxs && this.mined++ === 0) this.blocks.add(this.blockSub);
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

  private unindex(c: AddressClient): void {
    for (const a of c.addresses) {
      const set = this.byAddress.get(a);
      if (set === undefined) continue;
      set.delete(c);
      if (set.size === 0) this.byAddress.delete(a);
    }
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
      if (this.byAddress.size === 0 && this.fiatClients.size === 0) {
        // Nothing to carry: the upstream socket is closed.
        this.dropCarrier(false);
        continue;
      }
      try {
        const c = (this.carrier ??= this.connect());
        const list = [...this.byAddress.keys()];
        const joined = list.join('\n');
        // What a carrier lost meanwhile was given counts for nothing: the next one is given all of it.
        if (joined !== this.sentAddresses) {
          await c.addresses(list);
          if (this.carrier === c) this.sentAddresses = joined;
        }
        const fiat = this.fiatClients.size > 0;
        if (fiat !== this.sentFiat) {
          await c.fiatRates(fiat);
          if (this.carrier === c) this.sentFiat = fiat;
        }
        this.failures = 0;
      } catch (err) {
        this.log.warn({ event: 'ws_upstream_subscribe_failed', upstream: this.carrier?.upstream.name, err: (err as Error).message }, 'the subscriptions could not be carried upstream; another upstream is tried');
        this.dropCarrier(true);
        this.dirty = true;
        const wait = BACKOFF_MS[Math.min(this.failures++, BACKOFF_MS.length - 1)]!;
        await new Promise((r) => setTimeout(r, wait).unref());
      }
    }
    this.running = false;
  }

  /** A carrier on the live socket of the first usable upstream, the last one lost after the others. */
  private connect(): Carrier {
    const live = this.upstreams.filter((u) => u.usable && u.socket?.live === true);
    const u = live.find((x) => x !== this.lastLost) ?? live[0];
    if (u === undefined) throw new Error('no upstream socket is live');
    return new Carrier(u, u.socket!, this.events);
  }

  /** The carrier given up: what it carried is unsubscribed there (its heads keep the socket). */
  private dropCarrier(failed: boolean): void {
    const c = this.carrier;
    if (c === null) return;
    if (failed) this.lastLost = c.upstream;
    this.carrier = null;
    c.close({ addresses: !failed && this.sentAddresses !== '', fiat: !failed && this.sentFiat });
    this.sentAddresses = '';
    this.sentFiat = false;
  }

  // -------------------------------------------------------- notifications

  /** A mempool transaction of `address`: to every client that holds it. */
  private address(address: string, data: string): void {
    const set = this.byAddress.get(addressKey(address));
    if (set === undefined) return;
    for (const c of set) c.notify(`{"id":${c.idJson},"data":${data}}`);
  }

  /** Every rate: to a client of all of them as it is, to one of a currency its own rate (none if the ticker lacks it), as websocket.go's broadcastTicker. */
  private fiat(data: string): void {
    const rates = (JSON.parse(data) as { rates?: Record<string, unknown> }).rates ?? {};
    const byCurrency = new Map<string, string | null>();
    for (const c of this.fiatClients) {
      if (c.currency === null) {
        c.notify(`{"id":${c.idJson},"data":${data}}`);
        continue;
      }
      let one = byCurrency.get(c.currency);
      if (one === undefined) {
        const r = rates[c.currency];
        byCurrency.set(c.currency, (one = r === undefined ? null : JSON.stringify({ rates: { [c.currency]: r } })));
      }
      if (one !== null) c.notify(`{"id":${c.idJson},"data":${one}}`);
    }
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
