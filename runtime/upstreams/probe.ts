// How a chain's upstreams are asked about themselves: the shape of an
// interface's probe (what one poll sends, and how its answers are read). Each
// interface module gives one (interfaces/); chains.ts hands each chain's to the
// poller with the chain (poller.ts PolledChain), so the poller knows no
// interface.
import type { InterfaceKind, RouteOf } from '../types.ts';
import type { PollReport } from './upstream-view.ts';
import type { Upstream } from './upstream.ts';

export interface ProbeRequest {
  readonly path: string;
  readonly method: 'GET' | 'POST';
  readonly body?: string;
  /** A JSON-RPC batch: a node that answers it with one object takes no batches (then `requests` is asked again). */
  readonly batch?: boolean;
  /** The calls a batch holds: each takes one from the upstream's budget (upstream-budget.ts); absent: one. */
  readonly calls?: number;
}

/**
 * How a chain's upstreams are polled (poller.ts): one poll tells what an
 * upstream serves, its head and, where the chain needs heads, the head's
 * hash, the finalized and safe blocks and the genesis hash.
 */
export interface ChainProbe<K extends InterfaceKind = InterfaceKind> {
  /** Whether the manifest names what the chain's upstreams must serve (then none takes traffic before a poll says it does). */
  names(route: RouteOf<K>): boolean;
  /**
   * The requests of one poll of `u`, sent together. `heads`: the chain needs
   * hashes and finality; `lookups`: final blocks whose canonical
   * hash to ask for (EVM).
   */
  requests(route: RouteOf<K>, u: Upstream, heads: boolean, lookups: readonly number[]): readonly ProbeRequest[];
  /**
   * The report in the answers (in the order of the requests; null for one
   * that brought no proper answer), or why they are not one. Identity first:
   * a node of another network may fail the head request (Rosetta's 4002).
   */
  read(route: RouteOf<K>, answers: readonly (Record<string, any> | null)[], heads: boolean): PollReport | string;
  /** How an upstream's socket pushes its heads (head-sockets.ts), where the kind has one; absent: its heads come from polls alone. */
  readonly socket?: HeadSocketProbe<K>;
}

/**
 * A kind's side of an upstream head socket: its URL, what it sends and how
 * its messages read. The socket itself (one per upstream, reconnects,
 * backoff, the quiet check, the identity check) is head-sockets.ts's, the
 * same for every kind.
 */
export interface HeadSocketProbe<K extends InterfaceKind = InterfaceKind> {
  /** The socket of an upstream whose manifest entry names no `ws`, from its http URL; null: none (EVM: providers' socket URLs differ). */
  readonly defaultUrl: ((base: URL) => string) | null;
  /** The messages sent once the socket is open: what it serves (its identity, its genesis block) and the head subscription. */
  hello(route: RouteOf<K>): readonly string[];
  /** What one message (parsed JSON) tells (null: nothing heads care about; the socket's other users get it). */
  read(route: RouteOf<K>, message: Record<string, any>): SocketNews | null;
  /** Largest message it takes, where other traffic than heads answers on it (Blockbook's relayed reads); absent: a head's 1 MiB. */
  readonly maxMessageBytes?: number;
}

/**
 * One message of an upstream head socket, read: what the node says it serves
 * (as its PollReport's `identity` and `genesis` name it), the subscription
 * taken or refused, or a head it announced.
 */
export type SocketNews =
  | { readonly identity: string }
  | { readonly genesis: string }
  | { readonly subscribed: true }
  | { readonly refused: string }
  | { readonly head: number; readonly hash: string };
