// Blockbook's WebSocket messages whose answer no parameter bounds
// (getMempoolFilters: every mempool entry since fromTimestamp), sent on a
// short-lived socket of their own to the upstream chosen for them: opened,
// the one message sent, its one answer read, closed. The upstream's ONE
// shared socket (upstreams/head-sockets.ts: its heads, the chain's
// subscriptions, the other relayed reads, socket-relay.ts) closes at a
// message over its bound (1009), so such an answer there would cost it, and
// a retry another upstream's. Here the bound is this socket's own: `ws`
// refuses a longer message from its frame's length, before holding it, and
// only this socket closes.
//
// The socket goes where the shared one goes (head-sockets.ts socketUrl: the
// upstream's `ws:`, else beside its base) with the same headers (the
// upstream's own, its credentials among them, and the gateway's user agent),
// never a client's; its URL is never logged. At most MAX_OWN_SOCKETS are open
// to one upstream at once, so that no client can make a storm of connections
// to a provider's Blockbook: past it a message waits, in order, within its
// time.
import WebSocket from 'ws';
import type { Upstream } from '../../upstreams/upstream.ts';
import { upstreamWebSocket } from '../../upstreams/head-sockets.ts';

/** Sockets of their own open to one upstream at once: past it, a message waits for one to close. */
export const MAX_OWN_SOCKETS = 4;
/** A socket that answered and does not finish its closing handshake in this long is dropped (its place is taken meanwhile). */
const CLOSE_GRACE_MS = 1000;
/** The one message's id: the socket carries nothing else. */
const ID = 'o';

/** An answer longer than the socket's bound: the upstream's answer, too large to pass on. */
export class OverBound extends Error {}
/** No place came free in time: the upstream's sockets of their own were all in use (no fault of the upstream's). */
export class Busy extends Error {}

/** What one upstream's sockets of their own hold: how many are open, and the messages waiting for a place. */
interface Places {
  open: number;
  readonly waiting: (() => void)[];
}

/** A chain's sockets of their own, by upstream. */
export class OwnSockets {
  private readonly places = new Map<Upstream, Places>();

  constructor(
    /** Each upstream's socket URL (that of its shared socket). */
    private readonly urls: ReadonlyMap<Upstream, string>,
    /** The longest answer taken: a longer one is OverBound. */
    private readonly maxBytes: number,
  ) {}

  /**
   * Sends `method` with `params` on a socket of its own to `u`, waiting its
   * turn, opening, sending and answering within `timeoutMs`: the answer's
   * `data`. Rejects with OverBound for an answer over the bound, Busy when
   * no place came free in time, else with an Error saying why there was
   * none (refused, lost, silent).
   */
  ask(u: Upstream, method: string, params: object, timeoutMs: number): Promise<unknown> {
    const url = this.urls.get(u);
    if (url === undefined) return Promise.reject(new Error('no socket URL'));
    let p = this.places.get(u);
    if (p === undefined) this.places.set(u, (p = { open: 0, waiting: [] }));
    const places = p;
    return new Promise((resolve, reject) => {
      let ws: WebSocket | null = null;
      let over = false;
      const done = (err: Error | null, data?: unknown): void => {
        if (over) return;
        over = true;
        clearTimeout(timer);
        if (ws === null) {
          // Never opened: it gives up its turn.
          const i = places.waiting.indexOf(start);
          if (i >= 0) places.waiting.splice(i, 1);
        } else this.close(ws);
        if (err === null) resolve(data);
        else reject(err);
      };
      const timer = setTimeout(() => done(ws === null ? new Busy() : new Error('no answer in time')), timeoutMs);
      timer.unref();
      const start = (): void => {
        places.open++;
        const s = upstreamWebSocket(u, url, timeoutMs, this.maxBytes);
        ws = s;
        s.on('open', () => s.send(JSON.stringify({ id: ID, method, params })));
        s.on('message', (data: Buffer, binary: boolean) => {
          if (binary) return;
          let m: { id?: unknown; data?: unknown } | null;
          try {
            m = JSON.parse(data.toString('utf8')) as { id?: unknown; data?: unknown } | null;
          } catch {
            return done(new Error('an answer that is not JSON'));
          }
          if (m?.id === ID) done(null, m.data);
        });
        s.on('error', (err: Error & { code?: string }) => {
          // Codes only: an error's message may carry the URL.
          done(err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? new OverBound() : new Error(err.code ?? 'socket error'));
        });
        s.on('close', () => {
          done(new Error('closed before its answer'));
          places.open--;
          places.waiting.shift()?.();
        });
      };
      if (places.open < MAX_OWN_SOCKETS) start();
      else places.waiting.push(start);
    });
  }

  /** Closes a socket that is done with (the upstream is told), dropped if it does not finish closing soon. */
  private close(ws: WebSocket): void {
    if (ws.readyState === WebSocket.CLOSED) return;
    if (ws.readyState === WebSocket.CONNECTING) return ws.terminate();
    const drop = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
    drop.unref();
    ws.once('close', () => clearTimeout(drop));
    ws.close(1000);
  }
}
