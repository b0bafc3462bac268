// What a WebSocket protocol is to the transport (ws/), and the transport to
// it. ws/ upgrades, admits the socket (key, origin, per-key count), reads and
// sends frames, pings, re-admits, bounds what is under way and unsent, and
// drains; it knows nothing of what a message means. A module's `socket`
// (interface.ts) says that: how a message becomes a request into the chain
// (through its route, at its top: admitted, counted and served as an HTTP
// call) or a call answered locally (a subscription: admitted and counted at
// the same top), and which feeds it offers over the chain view. EVM's is
// evm-socket.ts; a second protocol is one file beside it and its module's
// `socket` field.
import type { ClientTarget } from '../exchange.ts';
import type { Dispatch } from '../dispatch.ts';
import type { KeyEntry } from '../keys/keys.ts';
import type { Logger } from '../observe/log.ts';
import type { ChainView } from '../upstreams/chain-view.ts';
import type { Upstream } from '../upstreams/upstream.ts';
import type { WebSocketSpec } from '../types.ts';

/** Why a protocol closes a socket: its client reads too slowly (1013), or a feed left a gap it will not fill (1013). */
export type ProtocolCloseReason = 'slow' | 'gap';

/** A chain's socket counters the protocol keeps, by its own subscription types (metrics' `type` label). */
export interface SocketCounts {
  readonly subscriptions: Record<string, number>;
  readonly notifications: Record<string, number>;
}

/** What a protocol is given of a chain that takes sockets, once, for its feeds. */
export interface SocketChainParts {
  /** The chain's view: its head, served tip and epochs, the one head source of every feed. */
  readonly view: ChainView;
  /**
   * Where a feed's own fetches go (chains.ts's Chain.front): the chain's
   * layers under admission, so a feed's fetch is served as a client's call
   * is (answers from memory, joined flights, the pool's routing, retries and
   * failover).
   */
  readonly front: Dispatch<ClientTarget>;
  /** Whether the chain has several upstreams (a feed follows the served tip then). */
  readonly pooled: boolean;
  /** The chain's upstreams: where a protocol that subscribes upstream (Blockbook's addresses) holds its sockets. */
  readonly upstreams: readonly Upstream[];
  readonly log: Logger;
  readonly counts: SocketCounts;
}

/**
 * One request a message becomes, as an HTTP request to the chain: `path` is
 * what follows the chain's segment and the socket's key (EVM: '', its POST
 * to the chain itself; Blockbook: '/v2/address/...'), `query` its own query
 * ('' none). The transport puts the socket's key where the upgrade had it
 * (the path, `api_key=`) and its headers on it.
 */
export interface SocketRequest {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly query: string;
  readonly body: Buffer;
}

/** A locally answered call's later outcome: its status (as the access log and metrics count it) and body. */
export interface LocalAnswer {
  readonly status: number;
  readonly body: string;
}

/** One socket as the transport runs it, as its protocol sees it (ws/connection.ts). */
export interface SocketLink {
  /** The key the socket is admitted with now (each re-admission may bring a reloaded entry). */
  readonly key: KeyEntry;
  /** The server drains: the socket closes once nothing is under way, so no new subscription should be made. */
  readonly draining: boolean;
  readonly limits: WebSocketSpec;
  /**
   * A request into the chain, as over HTTP: its route (the key, the guard),
   * its top (rate limit, quota, credits, usage) and the layers under it.
   * `done` gets the status and body it answers; status 0: cancelled, the
   * socket closed. Where the protocol makes the message's answer of it later
   * (more reads, a reshaping that may fail), `done` gives a promise of the
   * status that answer stands for: the call's access-log line and metrics
   * wait for it, and carry it.
   */
  request(req: SocketRequest, done: (status: number, body: Buffer) => void | Promise<number>): void;
  /**
   * A call the protocol answers itself (a subscription), admitted and counted
   * at the chain's top as a call of `method`, as any call (the key, its
   * policy, JWT, rate limit, quota, credits, usage). Once admitted, `answer`
   * gives its body (null: nothing to send, a notification), or a promise of
   * its outcome where the protocol answers later (a read it sends elsewhere):
   * the call is logged and measured when that comes, with its status and
   * latency. `done` gets the body (200, or the later outcome's status), or
   * the refusal in the chain's envelope (its status), or status 0 when the
   * socket closed first.
   */
  local(method: string, answer: (key: KeyEntry) => string | null | Promise<LocalAnswer>, done: (status: number, body: Buffer) => void): void;
  /** A message to the client (a Buffer goes as a text frame). */
  send(data: string | Buffer): void;
  /**
   * A message the chain pushes unasked (a notification): counted as a call of
   * `method` in the key's usage and credits, and taken from its quota (not its
   * rate limit); a spent quota closes the socket with 1008 and sends nothing.
   * Whether it was sent.
   */
  push(method: string, data: Buffer): boolean;
  /** Bytes the protocol holds for the client before it may send them (+ when held, − when sent or dropped), counted against maxBufferedBytes as unsent data is. */
  hold(bytes: number): void;
  /** One message is answered (or needs no answer): the next may be read. Exactly once per message. */
  settled(): void;
  /** Closes the socket. */
  end(code: number, reason: ProtocolCloseReason, text?: string): void;
}

/** One socket's protocol state: its subscriptions. */
export interface SocketSession {
  /** One text message; link.settled() once it is answered. */
  message(data: Buffer): void;
  /** The socket closed (whoever closed it): its subscriptions end, nothing more is sent. */
  closed(): void;
}

/** A chain's side of a protocol: its feeds, shared by every socket on the chain. */
export interface ChainSockets {
  connect(link: SocketLink): SocketSession;
}

/** A gateway refusal before the upgrade, in the protocol's own envelope. */
export interface SocketRefusal {
  readonly status: number;
  readonly body: string;
}

/** How a kind's chains speak over a WebSocket (the module's `socket`). */
export interface SocketProtocol<R> {
  /** Its subscription types, as the metrics and the status page count them. */
  readonly types: readonly string[];
  /** A chain's side, made once at start for each chain with `websocket: true`. */
  open(route: R, parts: SocketChainParts): ChainSockets;
  /**
   * The key an upgrade's path carries after the chain's segment (EVM: `/<key>`;
   * Blockbook: `/<key>/websocket`): null for none, undefined where no socket
   * is served at that path (404).
   */
  keyOf(rest: string): string | null | undefined;
  /** The refusal of a key that already holds maxConnectionsPerKey sockets (HTTP 429). */
  tooManyConnections(max: number): SocketRefusal;
}

/** A protocol bound to one chain's route (chains.ts's Chain.socket): what ws/ holds of it. */
export interface RouteSocket {
  readonly types: readonly string[];
  open(parts: SocketChainParts): ChainSockets;
  keyOf(rest: string): string | null | undefined;
  tooManyConnections(max: number): SocketRefusal;
}
