// One client socket on a chain: the transport under its protocol (the
// chain's module's `socket`, kinds/socket.ts), which reads its messages
// and keeps its subscriptions. Here: what goes into the chain for it, and
// what is bounded.
//
// A message the protocol sends into the chain crosses the chain's own flow
// (frame.ts: the route handler, then the chain's top with its admission, the
// guard, cache, pool and forwarding), so a socket gets exactly the HTTP
// answers; a call it answers itself is admitted and counted at the same top
// (Chain.top), as is each notification it pushes.
//
// What one socket may hold is bounded: at most maxInflightPerConnection
// messages under way (past it the socket is not read, so the client's own
// TCP window holds the rest), its unsent and held bytes by maxBufferedBytes,
// and a socket that closes cancels the calls it still had waiting, as an HTTP
// client going away does.
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import { isRefused, whenIdentified, type Asking } from '../admission/admission.ts';
import { stillVerified, verifyBearer, type Verified } from '../keys/jwt.ts';
import type { Refused } from '../envelope.ts';
import { Exchange } from '../exchange.ts';
import { X_CACHE, X_CACHE_LOG } from '../cache/index.ts';
import type { KeyEntry } from '../keys/keys.ts';
import type { Taken } from '../admission/ratelimit.ts';
import { FrameRequest, FrameResponse } from './frame.ts';
import type { AdmissionStage } from '../admission/admission.ts';
import type { ExchangeContext } from '../exchange.ts';
import type { Logger } from '../observe/log.ts';
import type { RouteMetrics } from '../observe/metrics.ts';
import type { Chain } from '../chains.ts';
import type { WebSocketSpec } from '../types.ts';
import type { ChainSockets, LocalAnswer, SocketLink, SocketRequest, SocketSession } from '../kinds/socket.ts';
import type { CloseReason, WsStats } from './stats.ts';

const EMPTY = Buffer.alloc(0);
/** A socket closed by the gateway whose client does not read the close: dropped this much later. */
const CLOSE_GRACE_MS = 5_000;
/** A Buffer sent to the client goes as a text frame, as a string would (every protocol here speaks JSON). */
const TEXT = { binary: false } as const;

/** What the upgrade request said, for every message of the socket: its headers (key, origin, JWT), path and address. */
export interface Origin {
  readonly headers: IncomingHttpHeaders;
  readonly url: string;
  readonly socket: Socket;
  /** The upgrade's query (its api_key=, if the key came there). */
  readonly query: string;
  readonly pathKey: string | null;
  readonly queryKeys: readonly string[];
}

/** What the sockets share with the rest of the server. */
export interface SocketHost {
  /** Who is asking (the upgrade, each re-admission, each locally answered call): the key and its policy. */
  readonly admission: AdmissionStage;
  readonly context: ExchangeContext;
  readonly log: Logger;
  readonly limits: WebSocketSpec;
  readonly jwtAudience: string | null;
  /** The counters of requests that match no chain. */
  readonly noRoute: RouteMetrics;
}

/** The chain a socket is on: its flow, its protocol's side and its counters (sockets.ts). */
export interface SocketChain {
  readonly chain: Chain;
  readonly protocol: ChainSockets;
  readonly stats: WsStats;
  /** The socket is closed, for `reason`. */
  closed(c: Connection, reason: CloseReason): void;
}

export class Connection implements SocketLink {
  /** A pong (or the socket's opening) since the last ping. */
  alive = true;
  private ending: CloseReason | null = null;
  private readonly opened = Date.now();
  private messages = 0;
  /** Messages under way (read, not yet answered). */
  private inflight = 0;
  /** Messages read past maxInflightPerConnection while the socket was being paused (ws hands over what it had parsed). */
  private readonly waiting: Buffer[] = [];
  /** The answers still to come: a socket that closes cancels their calls. */
  private readonly pending = new Set<FrameResponse>();
  /** The server drains: the socket closes (1001) as soon as nothing is under way. */
  private drained = false;
  /** Bytes the protocol holds for the client (SocketLink.hold), counted against maxBufferedBytes as unsent data is. */
  private heldBytes = 0;
  /** Set while unsent data is over maxBufferedBytes after a message: the check that it was taken in time. */
  private overdue: NodeJS.Timeout | null = null;
  /** What identify reads and sets when the socket is admitted again (recheck). */
  private readonly asking: Asking;
  /** What its messages mean: the chain's protocol, for this socket. */
  private readonly session: SocketSession;

  constructor(
    readonly ws: WebSocket,
    private readonly at: SocketChain,
    private readonly host: SocketHost,
    /** The key's entry: the one the socket was opened with, then the one each recheck found (a reloaded keys file's). */
    public key: KeyEntry,
    private readonly origin: Origin,
    /** The upgrade's JWT, as it verified (null: the key has no JWT check); a recheck checks it again (admitted). */
    private verified: Verified | null,
  ) {
    this.asking = { req: new FrameRequest(origin.headers, origin.url, origin.socket, EMPTY).asIncoming(), key: null };
    this.session = at.protocol.connect(this);
    ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => this.message(Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)));
    ws.on('pong', () => {
      this.alive = true;
    });
    ws.on('error', () => {
      // A protocol error or a broken connection: 'close' follows.
      this.ending ??= 'error';
    });
    ws.once('close', (code: number) => this.closed(code));
  }

  get draining(): boolean {
    return this.drained;
  }

  get limits(): WebSocketSpec {
    return this.host.limits;
  }

  private get path(): string {
    return this.at.chain.route.path;
  }

  // ------------------------------------------------------------- messages

  private message(data: Buffer): void {
    if (this.ending !== null) return;
    // At the cap the socket is paused, but ws still hands over what it had read: that waits here, in order
    // (bounded by one read of the socket and one message).
    if (this.inflight >= this.host.limits.maxInflightPerConnection || this.waiting.length > 0) {
      this.waiting.push(data);
      return;
    }
    this.take(data);
  }

  private take(data: Buffer): void {
    this.inflight++;
    if (this.inflight >= this.host.limits.maxInflightPerConnection) this.ws.pause();
    this.messages++;
    this.session.message(data);
  }

  /** A message's answer is sent (or there was none): the waiting ones go, and the socket is read again below the cap. */
  readonly settled = (): void => {
    this.inflight--;
    if (this.ending === null && !this.pumping) this.pump();
  };

  /** Set while pump() runs: an answer given at once (a refusal, a cache hit) does not recurse into it. */
  private pumping = false;

  private pump(): void {
    const cap = this.host.limits.maxInflightPerConnection;
    this.pumping = true;
    while (this.waiting.length > 0 && this.inflight < cap && this.ending === null) this.take(this.waiting.shift()!);
    this.pumping = false;
    if (this.ending !== null) return;
    if (this.drained && this.inflight === 0) return this.end(1001, 'drain');
    if (this.waiting.length === 0 && this.inflight < cap && this.ws.isPaused) this.ws.resume();
  }

  /**
   * The chain's own flow for one request, as over HTTP: its route handler,
   * then its top. The key goes where the upgrade had it: in the path, the
   * query, or the headers (which every request of the socket carries).
   */
  request(r: SocketRequest, done: (status: number, body: Buffer) => void | Promise<number>): void {
    const o = this.origin;
    const x = this.exchange(r.body, done, r.method);
    const rest = o.pathKey === null ? r.path : `/${o.pathKey}${r.path}`;
    const query = o.query === '' ? r.query : r.query === '' ? o.query : `${o.query}&${r.query}`;
    try {
      this.at.chain.handler.handle(x, rest, query);
    } catch (err) {
      x.internal(err);
    }
  }

  /** A call the protocol answers: the key asked as for any message, then the chain's top admits and counts it. */
  local(method: string, answer: (key: KeyEntry) => string | null | Promise<LocalAnswer>, done: (status: number, body: Buffer) => void): void {
    const x = this.exchange(EMPTY, done);
    x.label = method;
    try {
      const o = this.origin;
      whenIdentified(x, this.host.admission.identify(x, this.at.chain.route, o.pathKey, o.queryKeys, null), this.admitLocal, answer);
    } catch (err) {
      x.internal(err);
    }
  }

  private readonly admitLocal = (x: Exchange, key: KeyEntry, answer: (key: KeyEntry) => string | null | Promise<LocalAnswer>): void => {
    this.at.chain.top.local(x, () => {
      const a = answer(key);
      if (a === null) x.send(204, '');
      else if (typeof a === 'string') x.send(200, a);
      // Answered later: the exchange (its log line, its metrics) ends with the outcome. A socket closed meanwhile cancelled it: the send is a no-op.
      else a.then((r) => x.send(r.status, r.body), (err: unknown) => x.internal(err));
    });
  };

  /** An Exchange for one message, counted and logged as a request of the chain. */
  private exchange(body: Buffer, done: (status: number, body: Buffer) => void | Promise<number>, method: 'GET' | 'POST' = 'POST'): Exchange {
    const o = this.origin;
    const res: FrameResponse = new FrameResponse((status, b) => {
      this.pending.delete(res);
      return done(status, b);
    });
    this.pending.add(res);
    const chain = this.at.chain;
    const x = new Exchange(this.host.context, new FrameRequest(o.headers, o.url, o.socket, body, method).asIncoming(), res.asServerResponse(), chain.metrics, chain.envelope);
    if (chain.cached) {
      x.cacheTag = X_CACHE.bypass;
      x.cacheLog = X_CACHE_LOG.bypass;
    }
    x.handler = chain.handler;
    this.host.context.tracker.begin();
    res.on('close', x.closed);
    return x;
  }

  // -------------------------------------------------------------- sending

  /** A notification, counted and taken from the key's quota at the chain's top; a key whose quota is spent gets no more: closed with 1008. */
  push(method: string, data: Buffer): boolean {
    if (this.ending !== null) return false;
    const q = this.at.chain.top.pushed(this.key, method);
    if (q instanceof Promise) q.then(this.spent, () => {});
    else if (q !== null && !q.ok) {
      this.end(1008, 'quota');
      return false;
    }
    this.send(data);
    return true;
  }

  /** A quota the key store had to be asked about (Redis): spent, the socket closes (what was sent meanwhile went). */
  private readonly spent = (q: Taken | null): void => {
    if (q !== null && !q.ok) this.end(1008, 'quota');
  };

  send(data: string | Buffer): void {
    if (this.ending !== null) return;
    // A client that reads slower than its data comes: what it has not taken of the messages before this one is over
    // the limit. Judged before this message, so that one answer longer than the limit (a mempool, a block page, a
    // range of logs) goes whole to a client that reads it; unsent data stays within the limit and one message.
    const limit = this.host.limits.maxBufferedBytes;
    if (this.ws.bufferedAmount > limit) return this.end(1013, 'slow');
    this.ws.send(data, TEXT);
    // One message past the limit goes whole, but must be taken within CLOSE_GRACE_MS, as a closing socket's data must:
    // a client that leaves it unread is slow, and what it holds is let go.
    if (this.overdue === null && this.ws.bufferedAmount > limit) this.overdue = setTimeout(this.takenInTime, CLOSE_GRACE_MS).unref();
  }

  private readonly takenInTime = (): void => {
    this.overdue = null;
    if (this.ws.bufferedAmount > this.host.limits.maxBufferedBytes) this.end(1013, 'slow');
  };

  hold(bytes: number): void {
    this.heldBytes += bytes;
    if (this.heldBytes > this.host.limits.maxBufferedBytes) this.end(1013, 'slow');
  }

  // ------------------------------------------------------------ lifecycle

  /** Closes the socket with `code`, and drops it if the client does not answer the close in time. */
  end(code: number, reason: CloseReason, text?: string): void {
    if (this.ending !== null) return;
    this.ending = reason;
    this.dropAll();
    this.cancelAll();
    this.host.log.info({ event: 'ws_closing', chain: this.path, keyId: this.key.id, reason, code, bufferedBytes: this.ws.bufferedAmount }, 'websocket closing');
    this.ws.close(code, text ?? (reason === 'slow' ? 'too slow: unsent data over maxBufferedBytes' : reason === 'drain' ? 'server going away' : reason === 'revoked' ? 'API key no longer valid for this chain' : reason === 'quota' ? 'quota exceeded' : reason));
    setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS).unref();
  }

  /**
   * The socket admitted again, as its upgrade was (every ping interval): the
   * key, its chains and its whole policy (expiry, origins, IPs, user agents,
   * the JWT's exp). It goes on with the entry found, so a reloaded keys file's
   * limits (a quota) apply to its notifications too; a refusal closes it with
   * 1008, the reason in the close.
   */
  recheck(): void {
    if (this.ending !== null) return;
    this.asking.key = null;
    const who = this.host.admission.identify(this.asking, this.at.chain.route, this.origin.pathKey, this.origin.queryKeys, null);
    if (who instanceof Promise) who.then(this.admitted, () => {});
    else this.admitted(who);
  }

  private readonly admitted = (who: KeyEntry | Refused): void => {
    if (this.ending !== null) return;
    // A key store that cannot be asked keeps the socket as it keeps recently used keys.
    if (isRefused(who)) return who.reason === 'key-store-unavailable' ? undefined : this.refused(who.reason);
    const jwt = who.policy?.jwt;
    if (!jwt) {
      this.key = who;
      return;
    }
    // The token cannot change on a socket: its signature is verified again only if the key it verified against
    // changed, else just its exp (a signature check at every interval for every socket would stall the server).
    const still = this.verified === null ? null : stillVerified(this.verified, jwt, Date.now());
    if (still === true) this.key = who;
    else if (still === false) this.refused('policy-jwt');
    else
      void verifyBearer(this.origin.headers.authorization, jwt, this.host.jwtAudience).then((v) => {
        if (v === null) return this.refused('policy-jwt');
        if (this.ending !== null) return;
        this.verified = v;
        this.key = who;
      });
  };

  private refused(why: string): void {
    this.end(1008, 'revoked', why.startsWith('policy-') ? `refused by the key's policy: ${why.slice(7)}` : undefined);
  }

  /** The server drains: closed (1001) at once if nothing is under way, else once its last answer is sent; no new subscription. */
  drain(): void {
    this.drained = true;
    if (this.inflight === 0) this.end(1001, 'drain');
  }

  /** The calls still waiting for an answer are cancelled (their upstream requests too), and what waited to be read is dropped. */
  private cancelAll(): void {
    this.waiting.length = 0;
    for (const res of [...this.pending]) res.destroy();
  }

  /** No pong within an interval: dropped at once (a client that answers no ping reads no close either). */
  terminate(reason: CloseReason): void {
    if (this.ending !== null) return;
    this.ending = reason;
    this.dropAll();
    this.cancelAll();
    this.ws.terminate();
  }

  /** Its subscriptions end: nothing more is sent. */
  private dropAll(): void {
    this.session.closed();
  }

  private closed(code: number): void {
    const reason = this.ending ?? 'client';
    this.ending = reason;
    this.dropAll();
    this.cancelAll();
    this.at.closed(this, reason);
    this.host.log.info(
      { event: 'ws_close', chain: this.path, keyId: this.key.id, reason, code, ms: Date.now() - this.opened, messages: this.messages },
      'websocket closed',
    );
  }
}
