// One WebSocket to one Blockbook upstream, the gateway's own (issue 46), and
// the chain's set of them (UpstreamSockets: one per upstream, shared): it
// carries the union of every client's address subscriptions and one fiat
// rates subscription for all of them (socket-hub.ts), whatever the number of
// clients, and, for whoever sets `onHead`, the upstream's new blocks. Its URL
// is the upstream's base host with /websocket (beside Blockbook's /api); its
// headers are the upstream's (credentials included), never a client's.
//
// Blockbook keeps one address set and one fiat subscription per socket, each
// under the id of the message that made it: subscribing again replaces them,
// so the union is sent whole on every change (Blockbook's own limits: 1,000
// addresses a socket).
import { WebSocket } from 'ws';
import type { Upstream } from '../../upstreams/upstream.ts';

/** Blockbook's maxWebsocketSubscribeAddresses: addresses one socket may subscribe. */
export const MAX_UPSTREAM_ADDRESSES = 1000;
/** What one message from the upstream may weigh (a transaction with many inputs). */
const MAX_PAYLOAD = 16 * 1024 * 1024;
/** An answer (or the upgrade) the upstream owes: past this the socket is treated as lost. */
const ANSWER_MS = 10_000;

const ADDRESSES = 'a';
const FIAT = 'f';
const BLOCKS = 'b';

/** The socket URL of a Blockbook upstream: its base (`…/api`) host and prefix, with /websocket. */
export function blockbookSocketUrl(u: Upstream): string {
  return `${u.origin.replace(/^http/, 'ws')}${u.basePath.replace(/\/api$/, '')}/websocket`;
}

/** What the subscriptions' carrier is told (socket-hub.ts). */
export interface CarriedEvents {
  /** A mempool transaction of a subscribed address: the notification's `data` text, and its address. */
  address(address: string, data: string): void;
  /** A fiat rates notification's `data` (all currencies). */
  fiat(data: string): void;
}

/** Who holds an upstream's socket (UpstreamSockets): told once when it is lost. */
export interface SocketUser {
  lost(): void;
}

/**
 * A chain's Blockbook upstream sockets: ONE per upstream, shared by whoever
 * needs one (the carrier of the chain's subscriptions, socket-hub.ts; the
 * upstream's heads, through onHead): opened by the first acquire, closed by
 * the last release. A socket lost is forgotten and every holder told: the
 * next acquire opens a new one.
 */
export class UpstreamSockets {
  private readonly held = new Map<Upstream, { readonly socket: UpstreamSocket; readonly users: Set<SocketUser> }>();

  acquire(u: Upstream, user: SocketUser): UpstreamSocket {
    let e = this.held.get(u);
    if (e === undefined) {
      const socket: UpstreamSocket = new UpstreamSocket(u, () => {
        const now = this.held.get(u);
        if (now?.socket !== socket) return;
        this.held.delete(u);
        for (const x of now.users) x.lost();
      });
      this.held.set(u, (e = { socket, users: new Set() }));
    }
    e.users.add(user);
    return e.socket;
  }

  release(u: Upstream, user: SocketUser): void {
    const e = this.held.get(u);
    if (e === undefined || !e.users.delete(user) || e.users.size > 0) return;
    this.held.delete(u);
    e.socket.close();
  }

  /** Sockets open now. */
  get size(): number {
    return this.held.size;
  }
}

export class UpstreamSocket {
  private readonly ws: WebSocket;
  private readonly waiting = new Map<string, { done: (data: unknown) => void; fail: (err: Error) => void; timer: NodeJS.Timeout }>();
  private seq = 0;
  /** Lost or closed: nothing more is sent or told. */
  private gone = false;
  /** The hook for the upstream's new blocks ({height, hash}); set, the socket subscribes to them. */
  private head: ((height: number, hash: string) => void) | null = null;
  /** Where its address and fiat notifications go, while it carries the chain's subscriptions. */
  private carried: CarriedEvents | null = null;
  readonly ready: Promise<void>;

  constructor(
    readonly upstream: Upstream,
    /** The socket is gone (closed, failed, or an answer that never came): nothing more comes from it. */
    private readonly lost: () => void,
  ) {
    this.ws = new WebSocket(blockbookSocketUrl(upstream), { headers: { ...upstream.headers }, maxPayload: MAX_PAYLOAD, perMessageDeflate: false, handshakeTimeout: ANSWER_MS });
    this.ready = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('close', () => reject(new Error('the upstream socket closed before it opened')));
    });
    this.ready.catch(() => {});
    this.ws.on('message', (data: Buffer) => this.message(data));
    this.ws.on('error', () => {
      // 'close' follows.
    });
    this.ws.once('close', () => this.end(true));
  }

  /** Where its address and fiat notifications go (null: nowhere, it carries nothing). */
  carry(events: CarriedEvents | null): void {
    this.carried = events;
  }

  /** Subscribes the upstream's new blocks: each one goes to `hook` (the chain view's report, where the lead wires it). */
  onHead(hook: (height: number, hash: string) => void): Promise<void> {
    this.head = hook;
    return this.ask(BLOCKS, 'subscribeNewBlock', {}).then(() => undefined);
  }

  /** The socket's address set, replaced whole (empty: unsubscribed). */
  addresses(list: readonly string[]): Promise<void> {
    return (list.length === 0 ? this.ask(ADDRESSES, 'unsubscribeAddresses', {}) : this.ask(ADDRESSES, 'subscribeAddresses', { addresses: list })).then(checked);
  }

  /** Every fiat rate (one subscription for all clients), or none. */
  fiatRates(on: boolean): Promise<void> {
    return this.ask(FIAT, on ? 'subscribeFiatRates' : 'unsubscribeFiatRates', {}).then(checked);
  }

  /** Closed by the gateway (no one holds it): `lost` is not told. */
  close(): void {
    this.end(false);
  }

  /** One request under `id` (a subscription's: its notifications carry it); resolves with the answer's data. */
  private ask(id: string, method: string, params: object): Promise<unknown> {
    return this.ready.then(
      () =>
        new Promise((resolve, reject) => {
          if (this.gone) return reject(new Error('the upstream socket is gone'));
          // A subscription's notifications come under its id; its answer is told apart by a sequence number it carries.
          const key = `${id}${++this.seq}`;
          const timer = setTimeout(() => {
            this.waiting.delete(key);
            reject(new Error(`${method}: no answer`));
            this.end(true);
          }, ANSWER_MS).unref();
          this.waiting.set(key, { done: resolve, fail: reject, timer });
          this.ws.send(JSON.stringify({ id: key, method, params }));
        }),
    );
  }

  private message(raw: Buffer): void {
    let m: { id?: unknown; data?: unknown };
    try {
      m = JSON.parse(raw.toString('utf8')) as typeof m;
    } catch {
      return;
    }
    if (typeof m?.id !== 'string') return;
    const w = this.waiting.get(m.id);
    if (w !== undefined) {
      this.waiting.delete(m.id);
      clearTimeout(w.timer);
      return w.done(m.data);
    }
    const d = m.data as { address?: unknown; tx?: { confirmations?: unknown }; height?: unknown; hash?: unknown; rates?: unknown } | null;
    if (d === null || typeof d !== 'object') return;
    switch (m.id[0]) {
      case ADDRESSES:
        // A mined transaction is found from its block (socket-hub.ts), under the chain's served tip; a Blockbook that
        // also notifies it here is not followed, so no client gets it twice.
        if (this.carried !== null && typeof d.address === 'string' && !(typeof d.tx?.confirmations === 'number' && d.tx.confirmations > 0)) this.carried.address(d.address, JSON.stringify(d));
        return;
      case FIAT:
        if (this.carried !== null && d.rates !== undefined) this.carried.fiat(JSON.stringify(d));
        return;
      case BLOCKS:
        if (this.head !== null && typeof d.height === 'number' && typeof d.hash === 'string') this.head(d.height, d.hash);
        return;
    }
  }

  private end(tell: boolean): void {
    if (this.gone) return;
    this.gone = true;
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.fail(new Error('the upstream socket is gone'));
    }
    this.waiting.clear();
    this.ws.terminate();
    if (tell) this.lost();
  }
}

/** A subscription's answer: {"subscribed": true|false}, or Blockbook's error. */
function checked(data: unknown): void {
  const e = (data as { error?: { message?: unknown } } | null)?.error;
  if (e !== undefined) throw new Error(typeof e?.message === 'string' ? e.message : 'refused');
}
