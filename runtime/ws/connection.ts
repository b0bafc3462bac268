// One client socket on a chain: its messages, its subscriptions, its limits.
//
// A message is JSON-RPC as over HTTP. Calls go through the chain's own flow
// (frame.ts: the route handler with its admission, guard, cache, pool and
// forwarding), so a socket gets exactly the HTTP answers. eth_subscribe and
// eth_unsubscribe are answered here, after the same admission (key, policy,
// rate limit, quota, credits); in a batch they are answered here and the rest
// of the batch goes the HTTP way, the answers joined in one array.
//
// What one socket may hold is bounded: at most maxInflightPerConnection
// messages under way (past it the socket is not read, so the client's own
// TCP window holds the rest), and a socket that closes cancels the calls it
// still had waiting, as an HTTP client going away does.
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import { isRefused, whenIdentified, type Asking } from '../admission/admission.ts';
import { bearerVerifies } from '../keys/jwt.ts';
import type { Refused } from '../envelope.ts';
import { rpcErrorJson } from '../errors/evm-jsonrpc.ts';
import { Exchange } from '../exchange.ts';
import { X_CACHE, X_CACHE_LOG } from '../cache/index.ts';
import { invalidParamsJson } from '../guards/evm-params.ts';
import type { KeyEntry } from '../keys/keys.ts';
import type { Taken } from '../admission/ratelimit.ts';
import { add as addUsage } from '../observe/usage.ts';
import type { EvmRouteSpec } from '../types.ts';
import type { FeedSubscriber, SubscriptionType } from './feed.ts';
import { FrameRequest, FrameResponse } from './frame.ts';
import { isFilter, parseLogFilter, type LogFilter } from './logs.ts';
import type { AdmissionStage } from '../admission/admission.ts';
import type { ExchangeContext } from '../exchange.ts';
import type { Logger } from '../observe/log.ts';
import type { RouteMetrics } from '../observe/metrics.ts';
import type { Usage } from '../observe/usage.ts';
import type { Chain } from '../chains.ts';
import type { WebSocketSpec } from '../types.ts';
import type { ChainFeed } from './feed.ts';
import type { CloseReason, WsStats } from './stats.ts';

const SUBSCRIBE = 'eth_subscribe';
const UNSUBSCRIBE = 'eth_unsubscribe';
/**
 * A message that may hold a subscription call, before it is parsed: both
 * methods' names contain it, and an escaped one (`eth_\u0073ubscribe`) has a
 * `\u`. Any other message goes to the chain's flow unparsed here.
 */
const MAY_SUBSCRIBE = 'subscribe';
const ESCAPE = '\\u';
const EMPTY = Buffer.alloc(0);
/** A socket closed by the gateway whose client does not read the close: dropped this much later. */
const CLOSE_GRACE_MS = 5_000;

interface Item {
  readonly jsonrpc?: unknown;
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: unknown;
}

function isSubscriptionCall(v: unknown): v is Item {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const m = (v as Item).method;
  return m === SUBSCRIBE || m === UNSUBSCRIBE;
}

const NULL_ID = '"id":null';

/**
 * A refusal of the whole request (HTTP 4xx/5xx: the key, a limit, an
 * upstream failure) carries id null over HTTP; over a socket, where answers
 * are matched to calls by id alone, a single call's refusal carries its id,
 * and a batch's is one error per call, each with its own id (none for a
 * notification, as for any batch answer).
 */
function withCallId(answer: Buffer, request: Buffer): Buffer {
  if (answer.indexOf(NULL_ID) === -1) return answer;
  let doc: unknown;
  try {
    doc = JSON.parse(request.toString('utf8'));
  } catch {
    return answer;
  }
  // Not JSON-RPC at all, or an empty batch: the one error with id null is the answer, as over HTTP.
  if (doc === null || typeof doc !== 'object' || (Array.isArray(doc) && doc.length === 0)) return answer;
  const text = answer.toString('utf8');
  if (!Array.isArray(doc)) return (doc as Item).id === undefined ? answer : Buffer.from(text.replace(NULL_ID, `"id":${idJsonOf(doc as Item)}`));
  const each: string[] = [];
  for (const it of doc as unknown[]) if (it !== null && typeof it === 'object' && (it as Item).id !== undefined) each.push(text.replace(NULL_ID, `"id":${idJsonOf(it as Item)}`));
  // A batch of notifications only: nothing to answer, as over HTTP.
  return each.length === 0 ? EMPTY : Buffer.from(`[${each.join(',')}]`);
}

function idJsonOf(it: Item): string {
  const id = it.id;
  return id === null || typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? JSON.stringify(id) : 'null';
}

/** What the upgrade request said, for every message of the socket: its headers (key, origin, JWT), path and address. */
export interface Origin {
  readonly headers: IncomingHttpHeaders;
  readonly url: string;
  readonly socket: Socket;
  /** The path after the chain's segment (`/<key>` or ''), and the query, as the route handler takes them. */
  readonly rest: string;
  readonly query: string;
  readonly pathKey: string | null;
  readonly queryKeys: readonly string[];
}

/** What the sockets share with the rest of the server. */
export interface SocketHost {
  readonly admission: AdmissionStage;
  readonly context: ExchangeContext;
  readonly credits: ((name: string) => number) | null;
  readonly usage: Usage;
  /** Takes credits from a key's quota (null: the key has none). */
  readonly quota: (key: KeyEntry, credits: number) => Taken | Promise<Taken> | null;
  readonly log: Logger;
  readonly limits: WebSocketSpec;
  readonly jwtAudience: string | null;
  /** The counters of requests that match no chain. */
  readonly noRoute: RouteMetrics;
}

/** The chain a socket is on: its flow, its feed and its counters (sockets.ts). */
export interface SocketChain {
  readonly chain: Chain;
  readonly feed: ChainFeed;
  readonly stats: WsStats;
  /** The socket is closed, for `reason`. */
  closed(c: Connection, reason: CloseReason): void;
}

interface Subscription extends FeedSubscriber {
  readonly id: string;
  /**
   * Notifications held until the answer that made the subscription is sent
   * (a batch's comes after its slowest call): a client learns the id before
   * its first notification, as from geth. null once that answer went.
   */
  held: string[] | null;
}

export class Connection {
  private readonly subs = new Map<string, Subscription>();
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
  private draining = false;
  /** Bytes of the notifications held (Subscription.held), counted against maxBufferedBytes as unsent data is. */
  private heldBytes = 0;
  /** What identify reads and sets when the socket is admitted again (recheck). */
  private readonly asking: Asking;

  constructor(
    readonly ws: WebSocket,
    private readonly at: SocketChain,
    private readonly host: SocketHost,
    /** The key's entry: the one the socket was opened with, then the one each recheck found (a reloaded keys file's). */
    public key: KeyEntry,
    private readonly origin: Origin,
  ) {
    this.asking = { req: new FrameRequest(origin.headers, origin.url, origin.socket, EMPTY).asIncoming(), key: null };
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

  private get route(): EvmRouteSpec {
    return this.at.chain.route as EvmRouteSpec;
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
    this.handle(data);
  }

  /** A message's answer is sent (or there was none): the waiting ones go, and the socket is read again below the cap. */
  private readonly settled = (): void => {
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
    if (this.draining && this.inflight === 0) return this.end(1001, 'drain');
    if (this.waiting.length === 0 && this.inflight < cap && this.ws.isPaused) this.ws.resume();
  }

  private handle(data: Buffer): void {
    if (data.indexOf(MAY_SUBSCRIBE) === -1 && data.indexOf(ESCAPE) === -1) return this.forward(data, this.answer);
    let doc: unknown;
    try {
      doc = JSON.parse(data.toString('utf8'));
    } catch {
      return this.forward(data, this.answer);
    }
    if (isSubscriptionCall(doc)) {
      const made: Subscription[] = [];
      void this.local(doc, made).then((a) => this.reply(a, made));
      return;
    }
    if (!Array.isArray(doc) || doc.length === 0 || doc.length > this.route.limits.maxBatchSize || !doc.some(isSubscriptionCall)) return this.forward(data, this.answer);
    // A batch with subscription calls: those here, the rest as the HTTP batch it would be.
    const rest = doc.filter((i) => !isSubscriptionCall(i));
    const forwarded = rest.length === 0 ? Promise.resolve('') : new Promise<string>((resolve) => this.forward(Buffer.from(JSON.stringify(rest)), (b) => resolve(b.toString('utf8'))));
    const made: Subscription[] = [];
    const local = doc.filter(isSubscriptionCall).map((i) => this.local(i, made));
    void Promise.all([forwarded, ...local]).then(([f, ...mine]) => {
      const parts: string[] = [];
      const body = (f as string).trim();
      if (body.startsWith('[')) {
        const inner = body.slice(1, -1).trim();
        if (inner !== '') parts.push(inner);
      } else if (body !== '') parts.push(body);
      for (const a of mine) if (a !== null) parts.push(a);
      this.reply(parts.length > 0 ? `[${parts.join(',')}]` : null, made);
    });
  }

  /** Sends the answer that made `made` (if any), then what they were sent meanwhile. */
  private reply(answer: string | null, made: readonly Subscription[]): void {
    if (answer !== null) this.send(answer);
    for (const sub of made) {
      const held = sub.held!;
      sub.held = null;
      for (const text of held) {
        this.heldBytes -= text.length;
        sub.notify(text);
      }
    }
    this.settled();
  }

  private readonly answer = (body: Buffer): void => {
    if (body.length > 0) this.send(body);
    this.settled();
  };

  /** The chain's own flow for one message, as a POST; `done` gets the body it answers (empty: nothing to send). */
  private forward(body: Buffer, done: (body: Buffer) => void): void {
    const x = this.exchange(body, (status, b) => done(status === 0 || status === 204 ? EMPTY : status >= 300 ? withCallId(b, body) : b));
    try {
      this.at.chain.handler.handle(x, this.origin.rest, this.origin.query);
    } catch (err) {
      x.internal(err);
    }
  }

  /** An Exchange for one message, counted and logged as a request of the chain. */
  private exchange(body: Buffer, done: (status: number, body: Buffer) => void): Exchange {
    const o = this.origin;
    const res: FrameResponse = new FrameResponse((status, b) => {
      this.pending.delete(res);
      done(status, b);
    });
    this.pending.add(res);
    const chain = this.at.chain;
    const x = new Exchange(this.host.context, new FrameRequest(o.headers, o.url, o.socket, body).asIncoming(), res.asServerResponse(), chain.metrics, chain.envelope);
    if (chain.cached) {
      x.cacheTag = X_CACHE.bypass;
      x.cacheLog = X_CACHE_LOG.bypass;
    }
    x.handler = chain.handler;
    this.host.context.tracker.begin();
    res.on('close', x.closed);
    return x;
  }

  /** eth_subscribe or eth_unsubscribe, admitted as any call: its answer (null for a notification); a subscription it makes goes in `made`. */
  private local(it: Item, made: Subscription[]): Promise<string | null> {
    return new Promise((resolve) => {
      const x = this.exchange(EMPTY, (status, b) => resolve(status === 0 || status === 204 || b.length === 0 ? null : (status >= 300 ? b.toString('utf8').replace(NULL_ID, `"id":${idJsonOf(it)}`) : b.toString('utf8'))));
      const method = it.method as string;
      x.label = method;
      try {
        const s = this.host.admission;
        whenIdentified(
          x,
          s.identify(x, this.route, this.origin.pathKey, this.origin.queryKeys, null),
          (x, key) => {
            const cost = this.host.credits;
            s.admit(x, key, cost === null ? 1 : cost(method), () => {
              // The socket closed while the call was admitted (a JWT verified, a key store or Redis asked): its call
              // was cancelled (cancelAll), and a subscription made now would stay in the feed with no socket.
              if (this.ending !== null) return;
              // A key with its own methods list subscribes only if the list names eth_subscribe.
              const p = key.policy;
              let a: string;
              if (it.jsonrpc !== '2.0') a = rpcErrorJson('GW_RPC_INVALID_REQUEST', idJsonOf(it));
              else if (p !== null && p.methods !== null && !p.methods.has(SUBSCRIBE)) a = rpcErrorJson('GW_KEY_CALL_POLICY', idJsonOf(it), '{"reason":"method"}');
              // The server drains: a subscription would be cut at once; the client makes it on another connection.
              else if (method === SUBSCRIBE && this.draining) a = rpcErrorJson('GW_WS_DRAINING', idJsonOf(it));
              else {
                addUsage(this.host.usage.bucket(key.id, this.route.path), method, 1, cost === null ? 1 : cost(method));
                a = method === SUBSCRIBE ? this.subscribe(it, made) : this.unsubscribe(it);
              }
              if (it.id === undefined) x.send(204, '');
              else x.send(200, a);
            }, null);
          },
          null,
        );
      } catch (err) {
        x.internal(err);
      }
    });
  }

  private subscribe(it: Item, made: Subscription[]): string {
    const idJson = idJsonOf(it);
    const p = it.params;
    if (!Array.isArray(p) || typeof p[0] !== 'string') return invalidParamsJson(idJson, { path: '/0', message: 'must be the subscription type: newHeads or logs' });
    const type = p[0];
    let filter: LogFilter | null = null;
    if (type === 'newHeads') {
      if (p.length > 1) return invalidParamsJson(idJson, { path: '/1', message: 'newHeads takes no options' });
    } else if (type === 'logs') {
      if (p.length > 2) return invalidParamsJson(idJson, { path: '/2', message: 'logs takes one filter object' });
      const f = parseLogFilter(p[1]);
      if (!isFilter(f)) return invalidParamsJson(idJson, f as { path: string; message: string });
      filter = f;
    } else return invalidParamsJson(idJson, { path: '/0', message: 'unsupported subscription type: newHeads or logs' });
    const max = this.host.limits.maxSubscriptionsPerConnection;
    if (this.subs.size >= max) return rpcErrorJson('GW_WS_TOO_MANY_SUBSCRIPTIONS', idJson, `{"maxSubscriptionsPerConnection":${max}}`);
    const id = `0x${randomBytes(16).toString('hex')}`;
    const prefix = `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":`;
    const t = type as SubscriptionType;
    const feed = this.at.feed;
    const sub: Subscription = {
      id,
      type: t,
      filter,
      since: feed.now,
      after: feed.head,
      held: [],
      notify: (json) => {
        if (sub.held === null) return this.notify(t, `${prefix}${json}}}`);
        if (!this.subs.has(id)) return;
        sub.held.push(json);
        this.heldBytes += json.length;
        if (this.heldBytes > this.host.limits.maxBufferedBytes) this.end(1013, 'slow');
      },
      missed: (first) => this.end(1013, 'gap', `missed blocks from ${first}: subscribe again`),
    };
    made.push(sub);
    this.subs.set(id, sub);
    this.at.stats.subscriptions[t]++;
    this.at.feed.add(sub);
    return `{"jsonrpc":"2.0","id":${idJson},"result":"${id}"}`;
  }

  private unsubscribe(it: Item): string {
    const idJson = idJsonOf(it);
    const p = it.params;
    if (!Array.isArray(p) || p.length !== 1 || typeof p[0] !== 'string') return invalidParamsJson(idJson, { path: '/0', message: 'must be a subscription id' });
    const sub = this.subs.get(p[0]);
    if (sub === undefined) return rpcErrorJson('GW_WS_SUBSCRIPTION_NOT_FOUND', idJson);
    this.drop(sub);
    return `{"jsonrpc":"2.0","id":${idJson},"result":true}`;
  }

  private drop(sub: Subscription): void {
    this.subs.delete(sub.id);
    this.at.feed.remove(sub);
    this.at.stats.subscriptions[sub.type]--;
  }

  // -------------------------------------------------------------- sending

  /**
   * One notification: counted as a call of eth_subscribe in the key's usage
   * and credits, and taken from its quota (not its rate limit). A key whose
   * quota is spent gets no more: its socket is closed with 1008.
   */
  private notify(type: SubscriptionType, text: string): void {
    if (this.ending !== null) return;
    const cost = this.host.credits;
    const credits = cost === null ? 1 : cost(SUBSCRIBE);
    if (this.key.quota !== null) {
      const q = this.host.quota(this.key, credits);
      if (q instanceof Promise) q.then(this.spent, () => {});
      else if (q !== null && !q.ok) return this.end(1008, 'quota');
    }
    this.at.stats.notifications[type]++;
    addUsage(this.host.usage.bucket(this.key.id, this.route.path), SUBSCRIBE, 1, credits);
    this.send(text);
  }

  /** A quota the key store had to be asked about (Redis): spent, the socket closes (what was sent meanwhile went). */
  private readonly spent = (q: Taken | null): void => {
    if (q !== null && !q.ok) this.end(1008, 'quota');
  };

  private send(data: string | Buffer): void {
    if (this.ending !== null) return;
    this.ws.send(data);
    // A client that reads slower than its data comes: closed, its unsent data bounded by the limit and this message.
    if (this.ws.bufferedAmount > this.host.limits.maxBufferedBytes) this.end(1013, 'slow');
  }

  // ------------------------------------------------------------ lifecycle

  /** Closes the socket with `code`, and drops it if the client does not answer the close in time. */
  end(code: number, reason: CloseReason, text?: string): void {
    if (this.ending !== null) return;
    this.ending = reason;
    this.dropAll();
    this.cancelAll();
    this.host.log.info({ event: 'ws_closing', chain: this.route.path, keyId: this.key.id, reason, code, bufferedBytes: this.ws.bufferedAmount }, 'websocket closing');
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
    const who = this.host.admission.identify(this.asking, this.route, this.origin.pathKey, this.origin.queryKeys, null);
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
    bearerVerifies(this.origin.headers.authorization, jwt, this.host.jwtAudience).then((ok) => {
      if (!ok) return this.refused('policy-jwt');
      if (this.ending === null) this.key = who;
    }, () => {});
  };

  private refused(why: string): void {
    this.end(1008, 'revoked', why.startsWith('policy-') ? `refused by the key's policy: ${why.slice(7)}` : undefined);
  }

  /** The server drains: closed (1001) at once if nothing is under way, else once its last answer is sent; no new subscription. */
  drain(): void {
    this.draining = true;
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

  private dropAll(): void {
    for (const s of [...this.subs.values()]) this.drop(s);
  }

  private closed(code: number): void {
    const reason = this.ending ?? 'client';
    this.ending = reason;
    this.dropAll();
    this.cancelAll();
    this.at.closed(this, reason);
    this.host.log.info(
      { event: 'ws_close', chain: this.route.path, keyId: this.key.id, reason, code, ms: Date.now() - this.opened, messages: this.messages },
      'websocket closed',
    );
  }
}
