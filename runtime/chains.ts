// Each chain of the manifest as the server runs it: its upstreams and their
// view, its layers (admission's admit step -> the cache's front -> module's
// own -> cache's layer -> pool -> forward batches -> plain) composed, its
// flow, envelope and counters; and each listener's dispatch table.
import type { Envelope } from './envelope.ts';
import type { ClientTarget, RouteHandler } from './exchange.ts';
import type { GatewaySpec, InterfaceKind, ListenerSpec, RouteOf, RouteSpec } from './types.ts';
import { ChainView } from './upstreams/chain-view.ts';
import { cacheCore, type CacheServices } from './cache/index.ts';
import { listenerEnvelope, moduleOf } from './kinds/index.ts';
import type { InterfaceModule, RouteServices } from './kinds/interface.ts';
import type { RouteSocket, SocketChainParts } from './kinds/socket.ts';
import type { Metrics, RouteMetrics } from './observe/metrics.ts';
import type { PolledChain } from './upstreams/poller.ts';
import { Upstream, UpstreamGroup } from './upstreams/upstream.ts';
import type { Dispatch } from './dispatch.ts';
import { plainDispatch } from './upstreams/forward.ts';
import { ForwardBatches } from './jsonrpc/forward-batch.ts';
import { splitBatches } from './pool/batch.ts';
import { AdmitLayer } from './admission/admission.ts';

/** A chain as one listener serves it: its flow, its envelope and its counters. */
export interface Chain {
  readonly route: RouteSpec;
  readonly group: UpstreamGroup;
  readonly view: ChainView;
  /**
   * Its layers under admission (the cache's front, then the module's own,
   * the cache's layer, the pool's, or plain Forward): the gateway's own calls
   * go in here (a socket feed's blocks and logs, held, with no key to admit),
   * so they are served as clients' calls are, hits and joined flights included.
   */
  readonly front: Dispatch<ClientTarget>;
  /** Its top layer, admission's admit step: what a socket's locally answered calls and its notifications are admitted and counted by. */
  readonly top: AdmitLayer;
  /**
   * Its module's socket protocol, bound to its route (ws/); null where the
   * chain takes no WebSocket: no `websocket: true`, or a kind without one.
   */
  readonly socket: RouteSocket | null;
  readonly handler: RouteHandler;
  readonly envelope: Envelope;
  readonly metrics: RouteMetrics;
  /** Whether it has a cache: then every answer, a preflight's too, carries X-Cache. */
  readonly cached: boolean;
}

/** A listener's dispatch table: first path segment to chain, and the envelope for everything else. */
export interface DispatchTable {
  readonly spec: ListenerSpec;
  readonly chains: ReadonlyMap<string, Chain>;
  readonly envelope: Envelope;
}

/** What every chain's flow is given, but where its handler sends (the top of its layers). */
export type SharedServices = Omit<RouteServices, 'dispatch'>;

export interface Chains {
  readonly all: readonly Chain[];
  readonly dispatch: readonly DispatchTable[];
  /** What the poller polls, and how often. */
  readonly polled: readonly PolledChain[];
}

export function buildChains(spec: GatewaySpec, services: SharedServices, metrics: Metrics, cache: CacheServices | null): Chains {
  const all: Chain[] = [];
  const dispatch: DispatchTable[] = [];
  const polled: PolledChain[] = [];
  for (const l of spec.listeners) {
    const chains = new Map<string, Chain>();
    for (const [segment, route] of l.routes) {
      const group = new UpstreamGroup(route.upstreams.map((u) => new Upstream(u, route)), route.selection !== 'weighted');
      metrics.upstreams(group.all);
      const pooled = group.all.length > 1;
      const view = new ChainView(group.all, route.servedTip);
      const cached = cache !== null && route.cache === true;
      const { handler, envelope, poolHeads, followsHeads, front, top, socket } = chainFlow(moduleOf(route.interface), route, group, view, services, metrics, cached ? cache : null);
      const chain: Chain = { route, group, view, front, top, socket, handler, envelope, metrics: metrics.route(route.path, route.interface), cached };
      all.push(chain);
      chains.set(segment, chain);
      // A cached chain needs its head's hash and finality, polled every headPollMs; a pool's served tip needs heads
      // often, and a pool may need the hashes and finalized blocks its upstreams report (its module says). A chain
      // with WebSocket subscribers follows its head (and its hash: a reorg at the same height) as a pool does.
      const heads = cached || followsHeads || (pooled && poolHeads);
      polled.push({ route, group, view, everyMs: cached ? cache.spec.headPollMs : pooled || followsHeads ? Math.min(spec.health.intervalMs, POOL_POLL_MS) : null, heads, probe: moduleOf(route.interface).probe });
    }
    dispatch.push({ spec: l, chains, envelope: listenerEnvelope(l) });
  }
  return { all, dispatch, polled };
}

/**
 * How a chain takes WebSockets: its module's socket protocol, bound to the
 * route, where the module has one and the route says `websocket: true`; null
 * otherwise (ws/ then serves no upgrade on it).
 */
export function socketOf<K extends InterfaceKind>(m: InterfaceModule<K>, route: RouteOf<K>): RouteSocket | null {
  const protocol = m.socket;
  if (protocol === null || !('websocket' in route) || route.websocket === false) return null;
  return { types: protocol.types, open: (parts: SocketChainParts) => protocol.open(route, parts), keyOf: protocol.keyOf, tooManyConnections: protocol.tooManyConnections };
}

/** How often at least a pool without a cache polls its upstreams (the served tip is at most this old). */
const POOL_POLL_MS = 1000;

/**
 * A chain's flow as its interface module makes it: its layers (the pool's
 * dispatch where there is more than one upstream, the cache's layer and its
 * front where the chain is cached, the module's own layer) and the handler.
 * Generic in the kind, so that the compiler ties every piece to the route's
 * kind.
 */
function chainFlow<K extends InterfaceKind>(
  m: InterfaceModule<K>,
  route: RouteOf<K>,
  group: UpstreamGroup,
  view: ChainView,
  services: SharedServices,
  metrics: Metrics,
  cache: CacheServices | null,
): { handler: RouteHandler; envelope: Envelope; poolHeads: boolean; followsHeads: boolean; front: Dispatch<ClientTarget>; top: AdmitLayer; socket: RouteSocket | null } {
  // The layers, composed from the bottom, as undici's compose() stacks interceptors: a pool over the plain dispatch
  // (Forward) where the chain has several upstreams, the cache's layer over that where the chain is cached, the
  // module's own layer over that (EVM: eth_getLogs ranges, each chunk through the cache's layer), and the cache's
  // front on top, whose flights and other calls go through them all. A cached EVM chain's (or an EVM pool's) calls
  // bound for the same upstreams go as one batch (cache.batch, and a client batch's calls): a layer right over the
  // plain dispatch.
  const plain = plainDispatch(group);
  const pooled = group.all.length > 1;
  // A chain of one upstream with a rateLimit splits a client batch into its calls as a pool does: a batch costs its
  // calls, and goes together only as far as the budget has room (jsonrpc/forward-batch.ts).
  const budgeted = m.batchesCalls && !pooled && group.all[0]!.budget !== null;
  // An EVM pool without the cache still sends each client batch's calls together where the pool sends them to the
  // same upstreams (batch 1: only the calls of one client batch); a chain of one upstream without it (and without a
  // budget) pays nothing.
  const batches = m.batchesCalls && (cache !== null || pooled || budgeted) ? new ForwardBatches(plain, group, cache?.spec.batch ?? 1, services.log, route.path) : null;
  const forwards = batches === null ? plain : batches.dispatch;
  let dispatch: Dispatch = forwards;
  if (pooled) {
    const pool = m.pool(route, group, view, services.log, forwards);
    dispatch = pool.dispatch;
    metrics.pool(pool.stats);
  } else if (budgeted) dispatch = splitBatches(forwards, m.envelope, services.log, route.path);
  const core = cache === null ? null : cacheCore(route, group, view, dispatch, cache);
  if (core !== null) dispatch = m.cacheLayer(route, core, dispatch);
  dispatch = m.own(route, group, view, dispatch, services.log, core !== null);
  // The cache's front over them, whose hits answer the client with no upstream request and whose flights go through
  // the layers below (the core's dispatch); a chain without a cache has none.
  let front: Dispatch<ClientTarget> = dispatch;
  if (core !== null) {
    core.dispatch = dispatch;
    front = m.cacheFront(route, core);
    metrics.cache(core.stats, view);
    if (batches !== null) batches.counts = core.stats;
  }
  // The top, where the route sends, on every chain: admission's admit step (JWT, rate limit, quota, usage), so a cache
  // hit is limited and counted as any call.
  const top = new AdmitLayer(services.admission, route.path, services.usage, services.credits, front);
  return { handler: m.handler(route, { ...services, dispatch: top.front }), envelope: m.envelope, poolHeads: m.poolHeads(route), followsHeads: m.followsHeads(route), front, top, socket: socketOf(m, route) };
}
