// EVM's socket protocol (socket.ts): JSON-RPC over a WebSocket, as geth
// speaks it. A message is JSON-RPC as over HTTP, and goes into the chain as
// an HTTP POST would (the transport's `request`: the route, the chain's top,
// and the layers under it), so a socket gets exactly the HTTP answers.
// eth_subscribe and eth_unsubscribe are answered here, after the same
// admission at the chain's top (the transport's `local`: key, policy, rate
// limit, quota, credits, usage); in a batch they are answered here and the
// rest of the batch goes the HTTP way, the answers joined in one array.
// Subscriptions are fed by the chain's feed (evm-feed.ts): each block and log
// serialized once, each socket's subscription id spliced in front of it.
import { randomBytes } from 'node:crypto';
import { rpcErrorJson, RPC_ERRORS } from './errors.ts';
import { invalidParamsJson } from './params.ts';
import type { KeyEntry } from '../../keys/keys.ts';
import type { EvmRouteSpec } from '../../types.ts';
import { pathKeyOf } from '../../url.ts';
import { ChainFeed, type FeedResult, type FeedSubscriber, type SubscriptionType } from './socket-feed.ts';
import { isFilter, parseLogFilter, type LogFilter } from './socket-logs.ts';
import type { ChainSockets, SocketChainParts, SocketCounts, SocketLink, SocketProtocol, SocketSession } from '../socket.ts';

const SUBSCRIBE = 'eth_subscribe';
const UNSUBSCRIBE = 'eth_unsubscribe';
/**
 * A message that may hold a subscription call, before it is parsed: both
 * methods' names contain it, and an escaped one (`eth_\u0073ubscribe`) has a
 * `\u`. Any other message goes into the chain unparsed here.
 */
const MAY_SUBSCRIBE = 'subscribe';
const ESCAPE = '\\u';
const EMPTY = Buffer.alloc(0);
const NULL_ID = '"id":null';
/** What every notification starts with, up to its subscription id; the feed's `wire` is what follows it. */
const NOTIFICATION = '{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"';

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

/** The socket side of an EVM chain: its feed, shared by every subscription of every socket. */
class EvmChainSockets implements ChainSockets {
  readonly feed: ChainFeed;

  constructor(
    readonly route: EvmRouteSpec,
    readonly counts: SocketCounts,
    parts: SocketChainParts,
  ) {
    this.feed = new ChainFeed(route, parts.view, parts.front, parts.pooled, parts.log);
  }

  connect(link: SocketLink): SocketSession {
    return new EvmSession(this, link);
  }
}

interface Subscription extends FeedSubscriber {
  readonly id: string;
  /**
   * Notifications held until the answer that made the subscription is sent
   * (a batch's comes after its slowest call): a client learns the id before
   * its first notification, as from geth. null once that answer went.
   */
  held: Buffer[] | null;
}

/** One socket's JSON-RPC: its calls and its subscriptions. */
class EvmSession implements SocketSession {
  private readonly subs = new Map<string, Subscription>();
  private over = false;

  constructor(
    private readonly at: EvmChainSockets,
    private readonly link: SocketLink,
  ) {}

  message(data: Buffer): void {
    if (data.indexOf(MAY_SUBSCRIBE) === -1 && data.indexOf(ESCAPE) === -1) return this.forward(data);
    let doc: unknown;
    try {
      doc = JSON.parse(data.toString('utf8'));
    } catch {
      return this.forward(data);
    }
    if (isSubscriptionCall(doc)) {
      const made: Subscription[] = [];
      void this.local(doc, made).then((a) => this.reply(a, made));
      return;
    }
    if (!Array.isArray(doc) || doc.length === 0 || doc.length > this.at.route.limits.maxBatchSize || !doc.some(isSubscriptionCall)) return this.forward(data);
    // A batch with subscription calls: those here, the rest as the HTTP batch it would be.
    const rest = doc.filter((i) => !isSubscriptionCall(i));
    const forwarded = rest.length === 0 ? Promise.resolve('') : new Promise<string>((resolve) => this.request(Buffer.from(JSON.stringify(rest)), (b) => resolve(b.toString('utf8'))));
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

  closed(): void {
    this.over = true;
    for (const s of [...this.subs.values()]) this.drop(s);
  }

  /** A message that holds no subscription call: into the chain, its answer sent as it comes. */
  private forward(data: Buffer): void {
    this.request(data, (body) => {
      if (body.length > 0) this.link.send(body);
      this.link.settled();
    });
  }

  /** The chain's answer to `body` (empty: nothing to send), its refusals carrying the calls' ids. */
  private request(body: Buffer, done: (answer: Buffer) => void): void {
    this.link.request({ method: 'POST', path: '', query: '', body }, (status, b) => done(status === 0 || status === 204 ? EMPTY : status >= 300 ? withCallId(b, body) : b));
  }

  /** Sends the answer that made `made` (if any), then what they were sent meanwhile. */
  private reply(answer: string | null, made: readonly Subscription[]): void {
    if (answer !== null) this.link.send(answer);
    for (const sub of made) {
      const held = sub.held;
      // Dropped meanwhile (the socket closed): its notifications went with it.
      if (held === null) continue;
      sub.held = null;
      for (const b of held) {
        this.link.hold(-b.length);
        this.push(sub, b);
      }
    }
    this.link.settled();
  }

  /** eth_subscribe or eth_unsubscribe, admitted at the chain's top as any call: its answer (null for a notification); a subscription it makes goes in `made`. */
  private local(it: Item, made: Subscription[]): Promise<string | null> {
    const method = it.method as string;
    return new Promise((resolve) =>
      this.link.local(
        method,
        (key) => this.answer(it, method, key, made),
        (status, b) => resolve(status === 0 || status === 204 || b.length === 0 ? null : status >= 300 ? b.toString('utf8').replace(NULL_ID, `"id":${idJsonOf(it)}`) : b.toString('utf8')),
      ),
    );
  }

  /** The answer to an admitted subscription call (null: it was a notification). */
  private answer(it: Item, method: string, key: KeyEntry, made: Subscription[]): string | null {
    // The socket closed while the call was admitted (a JWT verified, a key store or Redis asked): a subscription made
    // now would stay in the feed with no socket.
    if (this.over) return null;
    const idJson = idJsonOf(it);
    // A key with its own methods list subscribes only if the list names eth_subscribe.
    const p = key.policy;
    let a: string;
    if (it.jsonrpc !== '2.0') a = rpcErrorJson('GW_RPC_INVALID_REQUEST', idJson);
    else if (p !== null && p.methods !== null && !p.methods.has(SUBSCRIBE)) a = rpcErrorJson('GW_KEY_CALL_POLICY', idJson, '{"reason":"method"}');
    // The server drains: a subscription would be cut at once; the client makes it on another connection.
    else if (method === SUBSCRIBE && this.link.draining) a = rpcErrorJson('GW_WS_DRAINING', idJson);
    else a = method === SUBSCRIBE ? this.subscribe(it, idJson, made) : this.unsubscribe(it, idJson);
    return it.id === undefined ? null : a;
  }

  private subscribe(it: Item, idJson: string, made: Subscription[]): string {
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
    const max = this.link.limits.maxSubscriptionsPerConnection;
    if (this.subs.size >= max) return rpcErrorJson('GW_WS_TOO_MANY_SUBSCRIPTIONS', idJson, `{"maxSubscriptionsPerConnection":${max}}`);
    const id = `0x${randomBytes(16).toString('hex')}`;
    // The notification's bytes up to the end of the id, made once; each block's or log's rest is made once for all.
    const head = Buffer.from(`${NOTIFICATION}${id}`);
    const t = type as SubscriptionType;
    const feed = this.at.feed;
    const sub: Subscription = {
      id,
      type: t,
      filter,
      since: feed.now,
      after: feed.head,
      held: [],
      notify: (r: FeedResult) => {
        const b = Buffer.concat([head, (r.wire ??= Buffer.from(`","result":${r.json}}}`))]);
        if (sub.held === null) return this.push(sub, b);
        if (!this.subs.has(id)) return;
        sub.held.push(b);
        this.link.hold(b.length);
      },
      missed: (first) => this.link.end(1013, 'gap', `missed blocks from ${first}: subscribe again`),
    };
    made.push(sub);
    this.subs.set(id, sub);
    this.at.counts.subscriptions[t]!++;
    feed.add(sub);
    return `{"jsonrpc":"2.0","id":${idJson},"result":"${id}"}`;
  }

  private unsubscribe(it: Item, idJson: string): string {
    const p = it.params;
    if (!Array.isArray(p) || p.length !== 1 || typeof p[0] !== 'string') return invalidParamsJson(idJson, { path: '/0', message: 'must be a subscription id' });
    const sub = this.subs.get(p[0]);
    if (sub === undefined) return rpcErrorJson('GW_WS_SUBSCRIPTION_NOT_FOUND', idJson);
    this.drop(sub);
    return `{"jsonrpc":"2.0","id":${idJson},"result":true}`;
  }

  private drop(sub: Subscription): void {
    if (!this.subs.delete(sub.id)) return;
    if (sub.held !== null) for (const b of sub.held) this.link.hold(-b.length);
    sub.held = null;
    this.at.feed.remove(sub);
    this.at.counts.subscriptions[sub.type]!--;
  }

  /** One notification: counted as a call of eth_subscribe, and taken from the key's quota (transport's push). */
  private push(sub: Subscription, b: Buffer): void {
    if (!this.over && this.link.push(SUBSCRIBE, b)) this.at.counts.notifications[sub.type]!++;
  }
}

const TYPES: readonly SubscriptionType[] = ['newHeads', 'logs'];

export const evmSocket: SocketProtocol<EvmRouteSpec> = {
  types: TYPES,
  open: (route, parts) => new EvmChainSockets(route, parts.counts, parts),
  // `/<chain>`, `/<chain>/` or `/<chain>/<key>[/]`, as for HTTP.
  keyOf: pathKeyOf,
  tooManyConnections: (max) => ({ status: RPC_ERRORS.GW_WS_TOO_MANY_CONNECTIONS.status, body: rpcErrorJson('GW_WS_TOO_MANY_CONNECTIONS', 'null', `{"maxConnectionsPerKey":${max}}`) }),
};
