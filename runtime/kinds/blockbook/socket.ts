// Blockbook's WebSocket API (trezor/blockbook server/websocket.go) on a
// blockbook chain with `websocket: true`, at `/<chain>/websocket` beside the
// chain's REST (which stands for Blockbook's /api). A message is
// {"id","method","params"}, its answer {"id","data"}, an error
// {"id","data":{"error":{"message"}}}; a notification reuses its subscribe
// message's id. A request with a REST twin (socket-methods.ts) goes into the
// chain as that REST call would (the transport's `request`: the route's guard,
// the chain's admission with the message's id, its cache and pool), and the
// answer is shaped as websocket.go shapes it; what no REST call answers
// exactly is sent on an upstream's own socket (socket-relay.ts) once admitted
// at the chain's top as a call of its own name. Subscriptions and ping are
// answered here, after the same admission (the transport's `local`):
// subscribeNewBlock is fed from the chain view (socket-blocks.ts), one feed
// for all sockets; subscribeAddresses and subscribeFiatRates are multiplexed
// on one upstream for the chain (socket-hub.ts, socket-upstream.ts): its head
// socket, and one more socket for each further 1,000 addresses.
import { blockbookErrorJson, BLOCKBOOK_ERRORS } from './errors.ts';
import { errorOf, blockbookGet, blockbookRead } from './socket-fetch.ts';
import { BlockFeed, type BlockSubscriber } from './socket-blocks.ts';
import { addressKey } from './socket-address.ts';
import { SubscriptionHub } from './socket-hub.ts';
import type { AddressClient, FiatClient } from './socket-address.ts';
import { NOT_SERVED, ParamsError, TWINS, type MethodContext, type Params, type Twin } from './socket-methods.ts';
import { RelayFailure, UpstreamCalls, upstreamParams } from './socket-relay.ts';
import type { BlockbookRouteSpec } from '../../types.ts';
import type { ChainSockets, LocalAnswer, SocketChainParts, SocketCounts, SocketLink, SocketProtocol, SocketSession } from '../socket.ts';

/** The socket's subscription types, as metrics and the status page count them. */
const TYPES = ['newBlock', 'addresses', 'fiatRates'] as const;
type SubscriptionType = (typeof TYPES)[number];

/** The methods answered here, after admission as calls of their own names (credits: module.ts creditNames). */
export const LOCAL_METHODS = ['ping', 'subscribeNewBlock', 'unsubscribeNewBlock', 'subscribeAddresses', 'unsubscribeAddresses', 'subscribeFiatRates', 'unsubscribeFiatRates'] as const;
/** websocket.go's maxWebsocketSubscribeAddresses and maxWebsocketSubscribeAddressesWithNewBlockTxs: one socket's addresses. */
const MAX_ADDRESSES = 1000;
const MAX_ADDRESSES_NEW_BLOCK_TXS = 100;

/** Messages any key sends, whatever its methods list: they ask nothing of the chain. */
const UNCHECKED: ReadonlySet<string> = new Set(['ping', 'unsubscribeNewBlock', 'unsubscribeAddresses', 'unsubscribeFiatRates']);
/** A key's methods list refusing a message, as it refuses a REST call (whose refusal a twin's message reads). */
const METHOD_REFUSED: Promise<LocalAnswer> = Promise.resolve({ status: BLOCKBOOK_ERRORS.GW_KEY_POLICY.status, body: blockbookErrorJson('GW_KEY_POLICY', 'method') });
const SUBSCRIBED = '{"subscribed":true}';
const UNSUBSCRIBED = '{"subscribed":false}';

/** A message's id as its answers carry it: websocket.go's ids are strings; a number is echoed as sent; none is "". */
function idJsonOf(id: unknown): string {
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? JSON.stringify(id) : '""';
}

function answer(idJson: string, data: string): string {
  return `{"id":${idJson},"data":${data}}`;
}

function errorAnswer(idJson: string, message: string): string {
  return answer(idJson, `{"error":{"message":${JSON.stringify(message)}}}`);
}

/** A refusal or an error answer of the chain (its {"error": ...} body) as a message's error. */
function refusal(idJson: string, status: number, body: Buffer): string {
  let doc: unknown = null;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    // Not Blockbook's envelope: the status says what went wrong.
  }
  return errorAnswer(idJson, errorOf(doc) ?? `HTTP ${status}`);
}

/** The socket side of a Blockbook chain: its block feed and what its methods read beyond their own request. */
class BlockbookChainSockets implements ChainSockets, MethodContext {
  readonly blocks: BlockFeed;
  readonly hub: SubscriptionHub;
  readonly calls: UpstreamCalls;
  private coinDecimals: Promise<number> | null = null;

  constructor(
    readonly route: BlockbookRouteSpec,
    readonly counts: SocketCounts,
    private readonly parts: SocketChainParts,
  ) {
    this.blocks = new BlockFeed(parts.view, parts.pooled, (h) => this.get(`block-index/${h}`).then(hashOf), parts.log);
    // Made only for a chain with websocket on (chains.ts socketOf): its address bounds are set.
    if (route.websocket === false) throw new Error(`chain ${route.path}: websocket is off`);
    this.hub = new SubscriptionHub(route, route.websocket, parts.upstreams, this.blocks, parts.view, (rest, query) => this.get(rest, query), parts.log);
    this.calls = new UpstreamCalls(route, parts.upstreams, parts.view, route.limits.timeoutMs);
  }

  connect(link: SocketLink): SocketSession {
    return new BlockbookSession(this, link);
  }

  get(rest: string, query = ''): Promise<unknown> {
    return blockbookGet(this.parts.front, this.route, rest, query);
  }

  read(rest: string, query: string, maxBytes: number): Promise<{ doc: unknown; bytes: number }> {
    return blockbookRead(this.parts.front, this.route, rest, query, maxBytes);
  }

  servedTip(): number {
    return this.parts.pooled ? this.parts.view.tip : -1;
  }

  decimals(): Promise<number> {
    // Read once; a failed read is asked again by the next message that needs it.
    this.coinDecimals ??= this.get('status').then((s) => {
      const d = (s as { blockbook?: { decimals?: unknown } }).blockbook?.decimals;
      if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) throw new Error('the status names no decimals');
      return d;
    });
    this.coinDecimals.catch(() => {
      this.coinDecimals = null;
    });
    return this.coinDecimals;
  }
}

function hashOf(doc: unknown): string {
  const h = (doc as { blockHash?: unknown } | null)?.blockHash;
  if (typeof h !== 'string' || h === '') throw new Error('block-index answered no hash');
  return h;
}

/** One socket's messages and subscriptions. */
class BlockbookSession implements SocketSession {
  /** subscribeNewBlock's: its notifications carry `idJson`. null: not subscribed. */
  private newBlock: (BlockSubscriber & { idJson: string }) | null = null;
  private addresses: AddressClient | null = null;
  private fiat: FiatClient | null = null;
  private over = false;

  constructor(
    private readonly at: BlockbookChainSockets,
    private readonly link: SocketLink,
  ) {}

  message(data: Buffer): void {
    let req: unknown;
    try {
      req = JSON.parse(data.toString('utf8'));
    } catch {
      // Blockbook closes the socket; the gateway answers and keeps it open.
      return this.reply(errorAnswer('""', 'Invalid message: not JSON'));
    }
    if (req === null || typeof req !== 'object' || Array.isArray(req)) return this.reply(errorAnswer('""', 'Invalid message: not a {"id","method","params"} object'));
    const { id, method, params } = req as { id?: unknown; method?: unknown; params?: unknown };
    const idJson = idJsonOf(id);
    if (typeof method !== 'string') return this.reply(errorAnswer(idJson, 'Invalid message: no method'));
    if (params !== undefined && params !== null && (typeof params !== 'object' || Array.isArray(params))) return this.reply(errorAnswer(idJson, 'Invalid params: must be an object'));
    const p = (params ?? {}) as Params;
    switch (method) {
      case 'ping':
        return this.local(method, idJson, () => '{}');
      case 'subscribeNewBlock':
        return this.local(method, idJson, () => this.subscribeNewBlock(idJson));
      case 'unsubscribeNewBlock':
        return this.local(method, idJson, () => this.unsubscribeNewBlock());
      case 'subscribeAddresses':
        return this.local(method, idJson, () => this.subscribeAddresses(idJson, p));
      case 'unsubscribeAddresses':
        return this.local(method, idJson, () => this.unsubscribeAddresses());
      case 'subscribeFiatRates':
        return this.local(method, idJson, () => this.subscribeFiatRates(idJson, p));
      case 'unsubscribeFiatRates':
        return this.local(method, idJson, () => this.unsubscribeFiatRates());
    }
    if (method === 'sendTransaction' && !this.at.route.sendtx) return this.reply(errorAnswer(idJson, 'sendTransaction is not enabled on this chain'));
    let sent: Record<string, unknown> | null;
    let t: Twin | undefined;
    try {
      sent = upstreamParams(method, p);
      t = sent === null ? TWINS.get(method)?.(p, this.at.route) : undefined;
    } catch (err) {
      // A fault of the gateway's own is the message's error, as websocket.go's recover makes it; the socket goes on.
      return this.reply(errorAnswer(idJson, err instanceof ParamsError ? err.message : 'Internal error'));
    }
    if (sent !== null) return this.upstream(method, idJson, sent);
    // Blockbook answers a method it does not know with nothing; the gateway says so.
    if (t === undefined) return this.reply(errorAnswer(idJson, NOT_SERVED.has(method) ? `${method} is not served by this gateway` : `Unknown method '${method}'`));
    this.request(idJson, t);
  }

  closed(): void {
    this.over = true;
    this.unsubscribeNewBlock();
    this.unsubscribeAddresses();
    this.unsubscribeFiatRates();
  }

  /** Sends one answer; the message is settled. */
  private reply(text: string): void {
    this.link.send(text);
    this.link.settled();
  }

  /** A twin's request into the chain, as its REST call; the answer shaped as websocket.go's. */
  private request(idJson: string, t: Twin): void {
    if (t.local !== undefined) {
      const data = t.local;
      return this.local(t.rest, idJson, () => data);
    }
    this.link.request({ method: t.method, path: `/v2/${t.rest}`, query: t.query, body: t.body }, (status, body) => {
      // Cancelled: the socket closed.
      if (status === 0) return this.link.settled();
      if (status >= 300) return this.reply(refusal(idJson, status, body));
      if (t.shape === null) return this.reply(answer(idJson, body.toString('utf8')));
      const shape = t.shape;
      // The call's line and metrics wait for the shaped answer: a shape that fails (a page over the merge bound, a
      // further read that failed) is logged with the status it stands for (RelayFailure's, else 502: what the chain
      // answered could not be made into the message's answer).
      return (async () => {
        let text: string;
        let outcome = 200;
        try {
          text = answer(idJson, JSON.stringify(await shape(JSON.parse(body.toString('utf8')), this.at, body.length)));
        } catch (err) {
          text = errorAnswer(idJson, (err as Error).message);
          outcome = err instanceof RelayFailure ? err.status : 502;
        }
        this.reply(text);
        return outcome;
      })();
    });
  }

  /**
   * A message no REST call answers exactly, sent on an upstream's socket
   * (socket-relay.ts) once admitted at the chain's top as a call of its own
   * name: answered later, so that its access-log line and metrics carry its
   * outcome (200 and its latency, or the failure's status), and settled when
   * its answer is sent, so that maxInflightPerConnection bounds these as it
   * bounds the rest.
   */
  private upstream(method: string, idJson: string, params: object): void {
    this.local(method, idJson, () =>
      (method === 'getBlockFiltersBatch' ? this.at.calls.filtersBatch(params as Record<string, unknown>) : this.at.calls.call(method, params)).then(
        // An answer without data (none of Blockbook's) is null, so that the client's answer is JSON.
        (data) => ({ status: 200, body: answer(idJson, JSON.stringify(data ?? null)) }),
        // In Blockbook's REST envelope, which the refusal reads the message of.
        (err: Error) => ({ status: err instanceof RelayFailure ? err.status : 500, body: JSON.stringify({ error: err.message }) }),
      ),
    );
  }

  /** A method answered here (or by a read sent upstream, later), admitted and counted at the chain's top as a call of `method`. */
  private local(method: string, idJson: string, data: () => string | Promise<LocalAnswer>): void {
    this.link.local(
      method,
      // The socket closed while the call was admitted: nothing is made, nothing sent.
      (key) => {
        if (this.over) return null;
        // A key with its own methods list sends a message no REST call answers only if the list names it (a twin's
        // is checked as its REST call, by its endpoint): nothing is subscribed or sent upstream otherwise.
        const allowed = key.policy?.methods;
        if (allowed != null && !allowed.has(method) && !UNCHECKED.has(method)) return METHOD_REFUSED;
        const d = data();
        return typeof d === 'string' ? answer(idJson, d) : d;
      },
      (status, body) => {
        if (status === 0 || status === 204) return this.link.settled();
        this.reply(status >= 300 ? refusal(idJson, status, body) : body.toString('utf8'));
      },
    );
  }

  /** Why a new subscription cannot be made now (null: it can): a drain, or maxSubscriptionsPerConnection. */
  private refusedSubscription(): string | null {
    // The server drains: the subscription would be cut at once; the client makes it on another connection.
    if (this.link.draining) return `{"error":{"message":"server going away: subscribe on another connection"}}`;
    const max = this.link.limits.maxSubscriptionsPerConnection;
    const held = (this.newBlock === null ? 0 : 1) + (this.addresses === null ? 0 : 1) + (this.fiat === null ? 0 : 1);
    return held >= max ? `{"error":{"message":"Limit exceeded: subscriptions per connection (maxSubscriptionsPerConnection ${max})"}}` : null;
  }

  private subscribeNewBlock(idJson: string): string {
    if (this.newBlock !== null) {
      // Again: websocket.go keeps one subscription per socket, under the newest id.
      this.newBlock.idJson = idJson;
      return SUBSCRIBED;
    }
    const refused = this.refusedSubscription();
    if (refused !== null) return refused;
    const sub = {
      idJson,
      block: (data: string) => this.push('newBlock', 'subscribeNewBlock', `{"id":${sub.idJson},"data":${data}}`),
      missed: (first: number) => this.link.end(1013, 'gap', `missed blocks from ${first}: subscribe again`),
    };
    this.newBlock = sub;
    this.at.counts.subscriptions.newBlock!++;
    this.at.blocks.add(sub);
    return SUBSCRIBED;
  }

  private unsubscribeNewBlock(): string {
    const sub = this.newBlock;
    if (sub !== null) {
      this.newBlock = null;
      this.at.blocks.remove(sub);
      this.at.counts.subscriptions.newBlock!--;
    }
    return UNSUBSCRIBED;
  }

  /** The socket's address set, replaced whole as websocket.go replaces it, under this message's id. */
  private subscribeAddresses(idJson: string, p: Params): string {
    const list = p.addresses;
    if (!Array.isArray(list) || !list.every((a) => typeof a === 'string' && a !== '')) return `{"error":{"message":"Invalid subscribeAddresses params"}}`;
    const newBlockTxs = p.newBlockTxs === true;
    const max = newBlockTxs ? MAX_ADDRESSES_NEW_BLOCK_TXS : MAX_ADDRESSES;
    const addresses = new Set((list as string[]).map(addressKey));
    if (addresses.size > max) return `{"error":{"message":"addresses max ${max}"}}`;
    const previous = this.addresses;
    if (previous === null) {
      const refused = this.refusedSubscription();
      if (refused !== null) return refused;
    }
    const client: AddressClient = { key: this.link.key.id, idJson, addresses, newBlockTxs, notify: (text) => this.push('addresses', 'subscribeAddresses', text) };
    const over = this.at.hub.setAddresses(client, previous);
    if (over !== null) return `{"error":{"message":${JSON.stringify(over)}}}`;
    if (previous === null) this.at.counts.subscriptions.addresses!++;
    this.addresses = client;
    return SUBSCRIBED;
  }

  private unsubscribeAddresses(): string {
    const c = this.addresses;
    if (c !== null) {
      this.addresses = null;
      this.at.hub.removeAddresses(c);
      this.at.counts.subscriptions.addresses!--;
    }
    return UNSUBSCRIBED;
  }

  /** One currency's rates, or all of them (no currency), under this message's id. */
  private subscribeFiatRates(idJson: string, p: Params): string {
    const currency = p.currency;
    if (currency !== undefined && currency !== null && typeof currency !== 'string') return `{"error":{"message":"Invalid params: 'currency' must be a string"}}`;
    // Token rates come with a ticker the one upstream subscription for all clients does not carry.
    if (Array.isArray(p.tokens) && p.tokens.length > 0) return `{"error":{"message":"subscribeFiatRates with tokens is not served by this gateway"}}`;
    const previous = this.fiat;
    if (previous === null) {
      const refused = this.refusedSubscription();
      if (refused !== null) return refused;
    } else this.at.hub.removeFiat(previous);
    const client: FiatClient = { idJson, currency: typeof currency === 'string' && currency !== '' ? currency.toLowerCase() : null, notify: (text) => this.push('fiatRates', 'subscribeFiatRates', text) };
    this.at.hub.addFiat(client);
    if (previous === null) this.at.counts.subscriptions.fiatRates!++;
    this.fiat = client;
    return SUBSCRIBED;
  }

  private unsubscribeFiatRates(): string {
    const c = this.fiat;
    if (c !== null) {
      this.fiat = null;
      this.at.hub.removeFiat(c);
      this.at.counts.subscriptions.fiatRates!--;
    }
    return UNSUBSCRIBED;
  }

  /** One notification: counted as a call of `method` and taken from the key's quota (the transport's push). */
  private push(type: SubscriptionType, method: string, text: string): void {
    if (!this.over && this.link.push(method, Buffer.from(text))) this.at.counts.notifications[type]!++;
  }
}

export const blockbookSocket: SocketProtocol<BlockbookRouteSpec> = {
  types: TYPES,
  open: (route, parts) => new BlockbookChainSockets(route, parts.counts, parts),
  // `/<chain>/websocket` or `/<chain>/<key>/websocket`: Blockbook's socket beside its /api.
  keyOf(rest) {
    if (rest === '/websocket') return null;
    const end = rest.indexOf('/', 1);
    return end > 1 && rest.slice(end) === '/websocket' ? rest.slice(1, end) : undefined;
  },
  tooManyConnections: (max) => ({ status: BLOCKBOOK_ERRORS.GW_WS_TOO_MANY_CONNECTIONS.status, body: blockbookErrorJson('GW_WS_TOO_MANY_CONNECTIONS', undefined, undefined).replace(/}$/, `,"maxConnectionsPerKey":${max}}`) }),
};
