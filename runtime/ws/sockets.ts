// WebSocket upgrades on the chains with `websocket: true` (issue 38,
// docs/websocket.md). The server's 'upgrade' event comes here only on a
// listener that has such a chain, so no HTTP request and no other chain pays
// anything for it.
//
// An upgrade is admitted as an HTTP call is: the key in X-API-Key, the path
// (/<chain>/<key>) or ?api_key=, the chain's scope, the key's policy (origin,
// IP, user agent, expiry, JWT), and the key's socket count. A refusal is a
// plain HTTP answer in the chain's envelope, before the upgrade; an accepted
// one is handed to `ws` (noServer mode: the framing is ws's).
import { STATUS_CODES, ServerResponse, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { whenIdentified } from '../admission/admission.ts';
import { Exchange } from '../exchange.ts';
import { verifyBearer, type Verified } from '../keys/jwt.ts';
import type { KeyEntry } from '../keys/keys.ts';
import type { Metrics } from '../observe/metrics.ts';
import type { Chain, DispatchTable } from '../chains.ts';
import { RequestTarget, splitQuery } from '../url.ts';
import { NO_KEYS } from '../kinds/common.ts';
import { lingerAfterAnswer } from '../process/linger.ts';
import { Connection, type Origin, type SocketChain, type SocketHost } from './connection.ts';
import { FrameResponse } from './frame.ts';
import type { ChainSockets as ProtocolSide, RouteSocket } from '../kinds/socket.ts';
import { SLICES, Slices } from './slices.ts';
import { WsStats, type CloseReason } from './stats.ts';

/** The sockets of one chain: its protocol's side (the feeds), its counters, and its `ws` server (the chain's body limit is the message limit). */
export class ChainSockets implements SocketChain {
  readonly stats: WsStats;
  readonly protocol: ProtocolSide;
  readonly wss: WebSocketServer;
  readonly open = new Set<Connection>();

  constructor(
    readonly chain: Chain,
    /** The chain's module's protocol, bound to its route. */
    readonly socket: RouteSocket,
    private readonly owner: Sockets,
    host: SocketHost,
  ) {
    this.stats = new WsStats(chain.route.path, socket.types);
    this.protocol = socket.open({ view: chain.view, front: chain.front, pooled: chain.group.all.length > 1, upstreams: chain.group.all, log: host.log, counts: this.stats });
    // A message over the chain's maxBodyBytes closes the socket (1009), as a body over it gets a 413.
    this.wss = new WebSocketServer({ noServer: true, clientTracking: false, perMessageDeflate: false, maxPayload: chain.route.limits.maxBodyBytes });
  }

  closed(c: Connection, reason: CloseReason): void {
    if (!this.open.delete(c)) return;
    this.stats.connections--;
    this.stats.closed[reason]++;
    this.owner.release(c);
  }
}

interface Pending {
  readonly at: ChainSockets;
  readonly req: IncomingMessage;
  readonly socket: Duplex;
  readonly head: Buffer;
  readonly origin: Origin;
}

export class Sockets {
  private readonly byChain = new Map<Chain, ChainSockets>();
  /** Sockets open (or being opened) per key id, in this process. */
  private readonly perKey = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  /** The open sockets of every chain, in the slices the ping round takes one tick at a time. */
  private readonly round = new Slices<Connection>();
  /** The server drains: a socket opened now (an upgrade on a connection open before) drains from the start. */
  private draining = false;

  constructor(
    private readonly host: SocketHost,
    chains: readonly Chain[],
    metrics: Metrics,
  ) {
    for (const c of chains) {
      if (c.socket === null) continue;
      const at = new ChainSockets(c, c.socket, this, host);
      this.byChain.set(c, at);
      metrics.websocket(at.stats);
    }
  }

  /** Whether a listener has a chain that takes WebSockets (then, and only then, it listens for upgrades). */
  serves(d: DispatchTable): boolean {
    for (const c of d.chains.values()) if (this.byChain.has(c)) return true;
    return false;
  }

  /** Sockets open on a chain (the status page). */
  openOn(c: Chain): number | null {
    return this.byChain.get(c)?.stats.connections ?? null;
  }

  /**
   * Pings every socket each pingIntervalMs; one that answered none of the last
   * interval is dropped, but for one the gateway itself stopped reading (at
   * maxInflightPerConnection: its pong waits behind its calls). Each socket is
   * admitted again at the same time. A tick takes one slice of the sockets
   * (slices.ts), SLICES ticks an interval.
   */
  start(): void {
    this.timer = setInterval(() => {
      for (const c of this.round.turn()) {
        if (!c.alive && !c.ws.isPaused) {
          c.terminate('ping');
          continue;
        }
        c.alive = false;
        c.ws.ping();
        c.recheck();
      }
    }, this.host.limits.pingIntervalMs / SLICES);
    this.timer.unref();
  }

  /**
   * The drain starts: a socket with nothing under way (one that carries only
   * subscriptions) is closed with 1001 now, so its client resubscribes
   * elsewhere at once; the others once their last answer is sent.
   */
  drain(): void {
    this.draining = true;
    for (const at of this.byChain.values()) for (const c of [...at.open]) c.drain();
  }

  /** The drain is over: every socket is closed with 1001 (going away); resolves once all are closed, or after a second. */
  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    const all: Promise<void>[] = [];
    for (const at of this.byChain.values())
      for (const c of at.open) {
        all.push(new Promise((done) => c.ws.once('close', () => done())));
        c.end(1001, 'drain');
      }
    await Promise.race([Promise.all(all), new Promise((r) => setTimeout(r, 1000).unref())]);
  }

  /** A socket closed: out of the ping round, its key's count released. */
  release(c: Connection): void {
    this.round.delete(c);
    this.releaseKey(c.key);
  }

  private releaseKey(key: KeyEntry): void {
    const n = (this.perKey.get(key.id) ?? 1) - 1;
    if (n <= 0) this.perKey.delete(key.id);
    else this.perKey.set(key.id, n);
  }

  // -------------------------------------------------------------- upgrade

  /**
   * An upgrade request on a listener with a websocket chain. One that asks
   * for another protocol (curl's h2c) is served as the HTTP/1.1 request it
   * also is, by `http` (the server's own handling), as on any listener.
   */
  upgrade(d: DispatchTable, req: IncomingMessage, socket: Duplex, head: Buffer, http: (req: IncomingMessage, res: ServerResponse) => void): void {
    socket.on('error', () => socket.destroy());
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return serveAsHttp(req, socket as Socket, head, http);
    const target = new RequestTarget(req.url ?? '/');
    const chain = target.first === null ? undefined : d.chains.get(target.first);
    const at = chain === undefined ? undefined : this.byChain.get(chain);
    const res = new FrameResponse((status, body, headers) => {
      if (status !== 101 && status !== 0) refuseUpgrade(socket, status, body, headers);
    });
    const x = new Exchange(this.host.context, req, res.asServerResponse(), chain?.metrics ?? this.host.noRoute, chain?.envelope ?? d.envelope);
    x.label = 'websocket';
    const tracker = this.host.context.tracker;
    tracker.begin();
    res.on('close', x.closed);
    try {
      if (at === undefined) return x.fail('not-found');
      // Where the protocol serves its socket on the chain's path, and the key it may carry.
      const pathKey = at.socket.keyOf(target.rest);
      if (pathKey === undefined) return x.fail('not-found');
      const query = target.query;
      const queryKeys = query === '' ? NO_KEYS : splitQuery(query).keys;
      const headers = { ...req.headers };
      delete headers['x-request-id'];
      delete headers['content-length'];
      // A socket's answers go in frames, never HTTP-encoded: a browser's Accept-Encoding on the upgrade asks nothing of them.
      delete headers['accept-encoding'];
      const origin: Origin = { headers, url: target.url, socket: req.socket as Socket, query, pathKey, queryKeys };
      whenIdentified(x, this.host.admission.identify(x, at.chain.route, pathKey, queryKeys, null), this.identified, { at, req, socket, head, origin });
    } catch (err) {
      x.internal(err);
    }
  }

  private readonly identified = (x: Exchange, key: KeyEntry, p: Pending): void => {
    const jwt = key.policy?.jwt;
    if (!jwt) return this.counted(x, key, p, null);
    // A key with a JWT: the upgrade carries it (Authorization), as an HTTP call does; the socket keeps what verified.
    verifyBearer(p.req.headers.authorization, jwt, this.host.jwtAudience).then(
      (v) => x.later(() => (v !== null ? this.counted(x, key, p, v) : x.refuse({ ok: false, reason: 'policy-jwt', retryAfter: 0 }))),
      (err: unknown) => x.internal(err),
    );
  };

  private counted(x: Exchange, key: KeyEntry, p: Pending, verified: Verified | null): void {
    // The client left while the key store or the JWT check was asked: the attempt is over.
    if (p.socket.destroyed) return void (x.res as unknown as FrameResponse).destroy();
    const n = this.perKey.get(key.id) ?? 0;
    if (n >= this.host.limits.maxConnectionsPerKey) {
      const r = p.at.socket.tooManyConnections(this.host.limits.maxConnectionsPerKey);
      return x.send(r.status, r.body);
    }
    this.perKey.set(key.id, n + 1);
    let opened = false;
    // ws refused the handshake itself (no Sec-WebSocket-Key, not a GET: its own 400), or the client left first.
    const gone = (): void => {
      if (opened) return;
      this.releaseKey(key);
      (x.res as unknown as FrameResponse).destroy();
    };
    p.socket.once('close', gone);
    p.at.wss.handleUpgrade(p.req, p.socket, p.head, (ws: WebSocket) => {
      opened = true;
      p.socket.off('close', gone);
      const c = new Connection(ws, p.at, this.host, key, p.origin, verified);
      p.at.open.add(c);
      this.round.add(c);
      p.at.stats.connections++;
      this.host.log.info({ event: 'ws_open', chain: p.at.chain.route.path, keyId: key.id, reqId: x.id }, 'websocket open');
      const res = x.res as unknown as FrameResponse;
      res.statusCode = 101;
      res.end();
      if (this.draining) c.drain();
    });
  }
}

/** A non-WebSocket upgrade request's body must keep coming: this long without a byte, and the connection is dropped. */
const BODY_IDLE_MS = 10_000;

/**
 * Node hands every request with an Upgrade header to the 'upgrade' listener,
 * its body unread. One that asks for something else than WebSocket is served
 * here as the plain HTTP request it also is, on its socket, which closes
 * after the answer: the server's own handling (route, key, `maxBodyBytes`
 * from Content-Length) runs before a byte of the body is read, and the body
 * is read only as the chain reads it (SocketBody). An answer that comes
 * before the whole body (a refusal, a 413) leaves the rest unread, dropped
 * within the lingering close's bounds (process/linger.ts). A chunked one is refused
 * with 411, since nothing here could bound it ahead.
 */
function serveAsHttp(req: IncomingMessage, socket: Socket, head: Buffer, http: (req: IncomingMessage, res: ServerResponse) => void): void {
  const declared = req.headers['content-length'];
  const n = declared === undefined ? 0 : Number(declared);
  if (req.headers['transfer-encoding'] !== undefined || !Number.isSafeInteger(n) || n < 0) {
    socket.end('HTTP/1.1 411 Length Required\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    return;
  }
  const r = new SocketBody(req, socket, head, n);
  const res = new ServerResponse(r.asIncoming());
  res.shouldKeepAlive = false;
  // The response emits 'close' when its socket closes (assignSocket), as the server's own do.
  res.assignSocket(socket);
  res.once('finish', () => {
    // Node's server ends a Connection: close answer so (destroySoon); a body still coming lingers first.
    lingerAfterAnswer(r.asIncoming(), res);
    (socket as Socket & { destroySoon(): void }).destroySoon();
  });
  http(r.asIncoming(), res);
}

/**
 * The body of a non-WebSocket upgrade request, read from its socket only as
 * its reader asks (a Readable's pull), up to Content-Length: nothing is
 * taken from the socket before the route reads the body. A body that stops
 * for BODY_IDLE_MS drops the connection.
 */
class SocketBody extends Readable {
  readonly httpVersionMajor: number;
  readonly httpVersionMinor: number;
  readonly httpVersion: string;
  readonly headers: IncomingHttpHeaders;
  readonly url: string;
  readonly method: string | undefined;
  /** The whole body is in (a lingering close has nothing more to wait for). */
  complete = false;
  private left: number;
  private reading = false;

  constructor(
    req: IncomingMessage,
    readonly socket: Socket,
    head: Buffer,
    length: number,
  ) {
    super();
    this.httpVersionMajor = req.httpVersionMajor;
    this.httpVersionMinor = req.httpVersionMinor;
    this.httpVersion = req.httpVersion;
    this.headers = req.headers;
    this.url = req.url ?? '/';
    this.method = req.method;
    this.left = length;
    if (length === 0) this.finish();
    else if (head.length > 0) this.accept(head);
  }

  private readonly onData = (c: Buffer): void => {
    if (!this.accept(c)) this.socket.pause();
  };

  private readonly idle = (): void => {
    this.socket.destroy();
  };

  /** Passes on what is still body; false when the reader wants no more for now. */
  private accept(c: Buffer): boolean {
    if (this.left === 0) return false;
    const part = c.length > this.left ? c.subarray(0, this.left) : c;
    this.left -= part.length;
    const more = this.push(part);
    if (this.left === 0) this.finish();
    return more;
  }

  private finish(): void {
    this.complete = true;
    if (this.reading) {
      this.socket.off('data', this.onData);
      this.socket.setTimeout(0);
      this.socket.off('timeout', this.idle);
    }
    this.push(null);
  }

  override _read(): void {
    if (this.complete) return;
    if (!this.reading) {
      this.reading = true;
      this.socket.setTimeout(BODY_IDLE_MS);
      this.socket.on('timeout', this.idle);
      this.socket.on('data', this.onData);
    }
    this.socket.resume();
  }

  asIncoming(): IncomingMessage {
    return this as unknown as IncomingMessage;
  }
}

/** A refused upgrade: the answer as plain HTTP on the socket, then the socket closes. */
function refuseUpgrade(socket: Duplex, status: number, body: Buffer, headers: readonly string[]): void {
  if (socket.destroyed) return;
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nconnection: close\r\n`;
  for (let i = 0; i + 1 < headers.length; i += 2) if (headers[i] !== 'connection') head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  socket.end(Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), body]));
}
