// What an interface is to the server: its chains' request flow, its envelope,
// its health check, and every other decision that depends on the kind (the
// cache's rules, the pool and its block reader, whether a pool polls heads,
// the listener's envelope, what credits name, whether `archive` applies). The
// server, the layers and the build know interfaces only through the table in
// index.ts, which the compiler keeps complete.
import type { AdmissionStage } from '../admission/admission.ts';
import type { Envelope } from '../envelope.ts';
import type { ClientTarget, RouteHandler } from '../exchange.ts';
import type { Logger } from '../observe/log.ts';
import type { Usage } from '../observe/usage.ts';
import type { ValidatorTables } from '../config/validators.ts';
import type { InterfaceKind, RouteOf } from '../types.ts';
import type { UpstreamGroup } from '../upstreams/upstream.ts';
import type { ChainView } from '../upstreams/chain-view.ts';
// How its chains' upstreams are polled: the probe's shape, beside the poller that uses it.
import type { ChainProbe } from '../upstreams/probe.ts';
import type { Attempt, Dispatch, ForwardTarget } from '../dispatch.ts';
import type { CacheCore } from '../cache/core.ts';
import type { PoolStats } from '../pool/stats.ts';
import type { SocketProtocol } from './socket.ts';

/** What the server gives each chain's handler (and chains.ts its admit layer: admission, credits, usage). */
export interface RouteServices {
  /** The handler identifies the key (before it reads a body); the admit step is the chain's top layer. */
  readonly admission: AdmissionStage;
  readonly log: Logger;
  /** The top of the chain's layers (admission's admit step), where the handler sends each request it has checked (`x.forwardWith`). */
  readonly dispatch: Dispatch<ClientTarget>;
  /** What a method or endpoint costs, when the manifest has `credits`; null: every call costs 1. */
  readonly credits: ((name: string) => number) | null;
  /** Calls and credits per key, day, chain and method. */
  readonly usage: Usage;
  /** The request validators the build emitted (used by chains with validate: params). */
  readonly validators: ValidatorTables;
}

/** A chain's pool: its dispatch in place of the plain one, and its counters. */
export interface ChainPool {
  readonly dispatch: Dispatch;
  readonly stats: PoolStats;
}

export interface InterfaceModule<K extends InterfaceKind> {
  readonly envelope: Envelope;
  /**
   * Whether a listener that serves one of its chains answers what belongs to
   * no chain (an unknown path, a request the parser refused) in this
   * envelope, because its clients read no other. Where no chain's module
   * says so, the listener answers in the plain {"error": ...} (index.ts).
   */
  readonly answersStrays: boolean;
  /**
   * Whether calls of its kind may go upstream several in one request (a
   * JSON-RPC batch): then a cached chain's, or a pool's, held calls bound for
   * the same upstreams go together (jsonrpc/forward-batch.ts).
   */
  readonly batchesCalls: boolean;
  /** The flow of one chain, made once at start. */
  handler(route: RouteOf<K>, services: RouteServices): RouteHandler;
  readonly probe: ChainProbe<K>;
  /**
   * Its cache rules, as the cache's front: the top layer of a cached chain,
   * over the core's dispatch (the chain's layers below it). It reads the
   * Calls the route's request carries (EVM's, with a batch's merge plan;
   * Rosetta's and Blockbook's DocCall, with Blockbook's tail) and answers
   * hits and joined flights itself; the rest goes on through the core's
   * dispatch.
   */
  cacheFront(route: RouteOf<K>, core: CacheCore): Dispatch<ClientTarget>;
  /** Its cache's layer over the dispatch below the cache (the pool, or Forward), for the held calls of the layers above (EVM: eth_getLogs in final blocks); `next` itself where it has none. */
  cacheLayer(route: RouteOf<K>, core: CacheCore, next: Dispatch): Dispatch;
  /** The pool of a chain with more than one upstream, with its way of reading the block a request names. */
  pool(route: RouteOf<K>, group: UpstreamGroup, view: ChainView, log: Logger, next: Dispatch<ForwardTarget, Attempt>): ChainPool;
  /** Whether a pool without a cache needs its upstreams' head hashes and finalized blocks polled. */
  poolHeads(route: RouteOf<K>): boolean;
  /** Whether the chain follows its head (and its hash) even with one upstream (EVM: WebSocket subscribers, websocket: true). */
  followsHeads(route: RouteOf<K>): boolean;
  /**
   * The module's own layer: under the cache's front, over the cache's layer
   * (or the pool, or the one upstream), which is `next`; `next` itself where
   * it has none (EVM: eth_getLogs ranges). `cached`: the chain has a cache,
   * whose layer is `next`.
   */
  own(route: RouteOf<K>, group: UpstreamGroup, view: ChainView, next: Dispatch, log: Logger, cached: boolean): Dispatch;
  /** What the manifest's `credits` may name for it: its methods or endpoints (the build refuses any other name). */
  readonly creditNames: readonly string[];
  /** Whether its upstreams' `archive` applies (state older than pruneDepth goes to them); else the build refuses it. */
  readonly archive: boolean;
  /**
   * How its chains with `websocket: true` speak over a WebSocket (socket.ts):
   * how a message becomes a request into the chain or a local subscription,
   * and the feeds it offers over the chain view; ws/ is the transport. null:
   * its chains take no WebSocket.
   */
  readonly socket: SocketProtocol<RouteOf<K>> | null;
}

/**
 * The module members of a kind whose calls are documents (Blockbook,
 * Rosetta): it answers no strays, sends no batches, has no layer of its own
 * nor a cache layer under the pool, polls no head hashes, and has no archive
 * nodes.
 */
export const DOC_KIND = {
  answersStrays: false,
  batchesCalls: false,
  poolHeads: () => false,
  followsHeads: () => false,
  cacheLayer: (_route: unknown, _core: unknown, next: Dispatch): Dispatch => next,
  own: (_route: unknown, _group: unknown, _view: unknown, next: Dispatch): Dispatch => next,
  archive: false,
  socket: null,
} as const;
