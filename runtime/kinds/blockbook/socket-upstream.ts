// Blockbook's side of its upstreams' sockets (issue 46). Each upstream has ONE
// head socket, the gateway's own, held by upstreams/head-sockets.ts as every
// kind's is (reconnects with backoff, the quiet check, the identity check):
//  - blockbookHeadSocket: what it sends once open (getInfo, which names the
//    coin it serves as /status's `blockbook.coin` does, and
//    subscribeNewBlock) and how its answers and new blocks read;
//  - Carrier: the chain's address and fiat subscriptions on that same socket
//    (socket-hub.ts), one union for all clients, whatever their number, or on
//  - ShardSocket: one more socket to the same upstream for each further
//    1,000 addresses of the union (socket-shards.ts), opened by the hub only
//    while the union is that large, and checked to serve the upstream's coin.
// Its URL is the upstream's `ws:`, else its base's host with /websocket
// (beside Blockbook's /api); its headers are the upstream's (credentials
// included), never a client's.
//
// Blockbook keeps one address set and one fiat subscription per socket, each
// under the id of the message that made it: subscribing again replaces them,
// so the union is sent whole on every change (Blockbook's own limits: 1,000
// addresses a socket).
import WebSocket from 'ws';
import type { HeadSocketProbe, SocketNews } from '../../upstreams/probe.ts';
import type { SocketUser, UpstreamSocket } from '../../upstreams/upstream-socket.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import { socketFailure, upstreamWebSocket } from '../../upstreams/head-sockets.ts';
import { MAX_MERGE_BYTES } from '../common.ts';

/** Blockbook's maxWebsocketSubscribeAddresses: addresses one socket may subscribe. */
export const MAX_UPSTREAM_ADDRESSES = 1000;
/** An answer the upstream owes: past this the carrier is treated as lost. */
const ANSWER_MS = 10_000;
/** A shard's socket is pinged this often; one whose peer answered no ping in between is dead (no heads tell it, as the head socket's do). */
const PING_MS = 30_000;

// The ids of the gateway's messages: the heads' two, and the carrier's prefixes (each request adds a sequence number).
const ID_INFO = 'i';
const ID_BLOCKS = 'b';
const ADDRESSES = 'a';
const FIAT = 'f';

const GET_INFO = `{"id":"${ID_INFO}","method":"getInfo","params":{}}`;
const HELLO = [GET_INFO, `{"id":"${ID_BLOCKS}","method":"subscribeNewBlock","params":{}}`] as const;

/** The socket of a Blockbook upstream without `ws:`: its base (`…/api`) host and prefix, with /websocket (credentials go as its headers). */
export function blockbookSocketUrl(base: URL): string {
  return `${base.protocol === 'https:' ? 'wss:' : 'ws:'}//${base.host}${base.pathname.replace(/\/+$/, '').replace(/\/api$/, '')}/websocket`;
}

/** What getInfo's `name` says a socket serves, as the upstream's polls name it (module.ts: /status's coin). */
const coinOf = (name: string): string => `coin ${name}`;

function errorOf(data: unknown): string | null {
  const e = (data as { error?: { message?: unknown } } | null)?.error;
  return e === undefined ? null : typeof e?.message === 'string' ? e.message : 'refused';
}

export const blockbookHeadSocket: HeadSocketProbe<'blockbook'> = {
  defaultUrl: blockbookSocketUrl,
  // The answers relayed on it (socket-relay.ts: a block of up to 10,000 transactions, the mempool's filters) are held as the
  // gateway's own REST reads are: a longer one closes the socket (1009), to be opened again.
  maxMessageBytes: MAX_MERGE_BYTES,
  hello: () => HELLO,
  read(_route, m): SocketNews | null {
    const d = m.data as Record<string, unknown> | null | undefined;
    if (m.id === ID_INFO) return typeof d?.name === 'string' ? { identity: coinOf(d.name) } : { refused: errorOf(d) ?? 'getInfo names no coin' };
    if (m.id !== ID_BLOCKS || d === null || typeof d !== 'object') return null;
    if (typeof d.height === 'number' && typeof d.hash === 'string') return Number.isSafeInteger(d.height) && d.height >= 0 ? { head: d.height, hash: d.hash } : null;
    return d.subscribed === true ? { subscribed: true } : { refused: errorOf(d) ?? 'subscribeNewBlock refused' };
  },
};

/** What the subscriptions' carrier is told (socket-hub.ts). */
export interface CarriedEvents {
  /** A mempool transaction of a subscribed address: its address, its txid, and the notification's `data` text. */
  address(address: string, txid: string, data: string): void;
  /** A fiat rates notification's `data` (all currencies). */
  fiat(data: string): void;
  /** The socket went down, or an answer never came: what was subscribed on it is gone. */
  lost(): void;
}

/** The chain's subscriptions on one upstream's socket, beside its heads: from attach to close. */
export class Carrier implements SocketUser {
  private readonly waiting = new Map<string, { done: (data: unknown) => void; fail: (err: Error) => void; timer: NodeJS.Timeout }>();
  private seq = 0;
  /** Given up or lost: it tells nothing more. */
  private gone = false;

  constructor(
    readonly upstream: Upstream,
    private readonly socket: UpstreamSocket,
    private readonly events: CarriedEvents,
  ) {
    socket.attach(this);
  }

  /** The socket's address set, replaced whole (empty: unsubscribed). */
  addresses(list: readonly string[]): Promise<void> {
    return (list.length === 0 ? this.ask(ADDRESSES, 'unsubscribeAddresses', {}) : this.ask(ADDRESSES, 'subscribeAddresses', { addresses: list })).then(checked);
  }

  /** Every fiat rate (one subscription for all clients), or none. */
  fiatRates(on: boolean): Promise<void> {
    return this.ask(FIAT, on ? 'subscribeFiatRates' : 'unsubscribeFiatRates', {}).then(checked);
  }

  /**
   * Given up by the hub: nothing more is told. What it subscribed (`left`) is
   * unsubscribed first, its answers awaited: the socket stays (its heads keep
   * it), and another upstream's notifications are none of its own.
   */
  close(left: { readonly addresses: boolean; readonly fiat: boolean }): void {
    if (this.gone) return;
    const asks = [left.addresses ? this.addresses([]) : null, left.fiat ? this.fiatRates(false) : null];
    this.gone = true;
    const end = (): void => this.end();
    void Promise.allSettled(asks).then(end);
  }

  down(): void {
    this.lose();
  }

  /** One request under `id` (a subscription's: its notifications carry it); resolves with the answer's data. */
  private ask(id: string, method: string, params: object): Promise<unknown> {
    return new Promise((resolve, reject) => {
      // A subscription's notifications come under its id; its answer is told apart by a sequence number it carries.
      const key = `${id}${++this.seq}`;
      if (!this.socket.send(JSON.stringify({ id: key, method, params }))) return reject(new Error('the upstream socket is not live'));
      const timer = setTimeout(() => {
        this.waiting.delete(key);
        reject(new Error(`${method}: no answer`));
        this.lose();
      }, ANSWER_MS).unref();
      this.waiting.set(key, { done: resolve, fail: reject, timer });
    });
  }

  message(m: Record<string, unknown>): void {
    if (typeof m.id !== 'string') return;
    const w = this.waiting.get(m.id);
    if (w !== undefined) {
      this.waiting.delete(m.id);
      clearTimeout(w.timer);
      return w.done(m.data);
    }
    if (this.gone) return;
    const d = m.data as { address?: unknown; tx?: { txid?: unknown; confirmations?: unknown }; rates?: unknown } | null;
    if (d === null || typeof d !== 'object') return;
    switch (m.id[0]) {
      case ADDRESSES:
        // A mined transaction is found from its block (socket-hub.ts), under the chain's served tip; a Blockbook that
        // also notifies it here is not followed, so no client gets it twice.
        if (typeof d.address === 'string' && typeof d.tx?.txid === 'string' && !(typeof d.tx.confirmations === 'number' && d.tx.confirmations > 0)) this.events.address(d.address, d.tx.txid, JSON.stringify(d));
        return;
      case FIAT:
        if (d.rates !== undefined) this.events.fiat(JSON.stringify(d));
        return;
    }
  }

  /** Lost while carrying (not once given up): the hub is told. */
  private lose(): void {
    const carrying = !this.gone;
    this.end();
    if (carrying) this.events.lost();
  }

  private end(): void {
    this.gone = true;
    this.socket.detach(this);
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.fail(new Error('the upstream socket is gone'));
    }
    this.waiting.clear();
  }
}

/** A subscription's answer: {"subscribed": true|false}, or Blockbook's error. */
function checked(data: unknown): void {
  const e = errorOf(data);
  if (e !== null) throw new Error(e);
}

/**
 * One more socket to an upstream, for a shard of the chain's addresses past
 * the first (which rides the upstream's head socket): the head socket's URL
 * and headers, never a client's. It is live once its getInfo names the coin
 * the upstream's polls verified (a load balancer may put it on another node
 * than the head socket's); `ready` settles then, or rejects when it fails,
 * closes or does not tell in time. It is not opened again: a lost shard
 * socket is the carrier lost (socket-hub.ts moves every shard). It carries
 * no heads that would show it quiet, so it is pinged: a peer that answers
 * no ping for an interval is dropped.
 */
export class ShardSocket implements UpstreamSocket {
  private readonly ws: WebSocket;
  private readonly users = new Set<SocketUser>();
  private on = false;
  readonly ready: Promise<void>;

  constructor(u: Upstream, url: string, timeoutMs: number, pingMs = PING_MS) {
    this.ws = upstreamWebSocket(u, url, timeoutMs, MAX_MERGE_BYTES);
    const ws = this.ws;
    this.ready = new Promise((resolve, reject) => {
      // Codes only: an error's message may carry the URL (a provider's key).
      let reason = '';
      let pings: NodeJS.Timeout | undefined;
      const timer = setTimeout(() => {
        reason ||= 'getInfo: no answer';
        ws.terminate();
      }, ANSWER_MS).unref();
      ws.on('open', () => ws.send(GET_INFO));
      ws.on('error', (err: Error) => {
        reason ||= socketFailure(err);
      });
      ws.on('message', (data: Buffer, binary: boolean) => {
        let m: Record<string, unknown>;
        try {
          m = JSON.parse(data.toString()) as Record<string, unknown>;
        } catch {
          return;
        }
        if (binary || m === null || typeof m !== 'object') return;
        if (this.on) {
          for (const user of this.users) user.message(m);
          return;
        }
        if (m.id !== ID_INFO) return;
        const name = (m.data as { name?: unknown } | null)?.name;
        const v = u.view;
        if (typeof name === 'string' && v.verified && coinOf(name) === v.identity) {
          clearTimeout(timer);
          this.on = true;
          let answered = true;
          ws.on('pong', () => (answered = true));
          // Judged after the turn's input is read (setImmediate): a pong that came while this process was busy counts.
          pings = setInterval(
            () =>
              setImmediate(() => {
                if (!answered) return ws.terminate();
                answered = false;
                ws.ping();
              }),
            pingMs,
          ).unref();
          return resolve();
        }
        reason = typeof name === 'string' ? `serves ${coinOf(name)}` : (errorOf(m.data) ?? 'getInfo names no coin');
        ws.terminate();
      });
      ws.on('close', (code: number) => {
        clearTimeout(timer);
        clearInterval(pings);
        reject(new Error(`upstream shard socket: ${reason || `closed (${code})`}`));
        const was = this.on;
        this.on = false;
        if (was) for (const user of this.users) user.down();
      });
    });
    // The hub awaits it; a rejection nobody awaits (the hub gave up first) is no fault.
    this.ready.catch(() => {});
  }

  get live(): boolean {
    return this.on;
  }

  attach(user: SocketUser): void {
    this.users.add(user);
  }

  detach(user: SocketUser): void {
    this.users.delete(user);
  }

  send(text: string): boolean {
    if (!this.on) return false;
    this.ws.send(text);
    return true;
  }

  /** Closed at once: what it carried is gone with it (Blockbook keeps a socket's subscriptions with the socket). */
  close(): void {
    this.ws.terminate();
  }
}
