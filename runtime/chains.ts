// Each chain of the manifest as the server runs it: its upstreams and their
// view, its forwarding (with the cache around it where the manifest has
// one), its flow, envelope and counters; and each listener's dispatch table.
import type { Envelope } from './envelope.ts';
import type { Exchange, RouteHandler } from './exchange.ts';
import type { ForwardRequest } from './proxy.ts';
import type { EvmRouteSpec, GatewaySpec, ListenerSpec, RouteSpec } from './types.ts';
import { Pool, type PoolSettings } from './pool/pool.ts';
import { docPool } from './pool/doc-pool.ts';
import { ChainView } from './chain-view.ts';
import { cachedForwarder, type CacheServices } from './cache/index.ts';
import { listenerEnvelope, moduleOf, routeHandler } from './interfaces/index.ts';
import type { EvmForward, Forwarders, RouteServices } from './interfaces/interface.ts';
import type { Metrics, RouteMetrics } from './metrics.ts';
import type { PolledChain } from './poller.ts';
import { Upstream, UpstreamGroup } from './upstream.ts';
import { plainDispatch, type Dispatch } from './dispatch.ts';
import { LogRanges, wantsLogRanges } from './log-ranges.ts';

/** A chain as one listener serves it: its flow, its envelope and its counters. */
export interface Chain {
  readonly route: RouteSpec;
  readonly group: UpstreamGroup;
  readonly view: ChainView;
  /** How its upstream requests go out (the pool's, or plain Forward): the WebSocket feed fetches blocks and logs through it. */
  readonly dispatch: Dispatch;
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

/** What every chain's flow is given, but its own upstreams and forwarding. */
export type SharedServices = Omit<RouteServices, 'group' | 'forward'>;

export interface Chains {
  readonly all: readonly Chain[];
  readonly dispatch: readonly DispatchTable[];
  /** What the poller polls, and how often. */
  readonly polled: readonly PolledChain[];
}

export function buildChains(spec: GatewaySpec, services: SharedServices, metrics: Metrics, cache: CacheServices | null, circuitOpen: (u: Upstream) => void): Chains {
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
      let dispatch = plainDispatch(group, circuitOpen);
      if (pooled) {
        const pool = route.interface === 'evm-jsonrpc' ? new Pool(route, group, view, poolSettings(route), circuitOpen, services.log) : docPool(route, group, view, circuitOpen);
        dispatch = pool.dispatch;
        metrics.pool(pool.stats);
      }
      // eth_getLogs ranges split above the pool (or the one upstream), below the cache (log-ranges.ts).
      if (route.interface === 'evm-jsonrpc' && wantsLogRanges(route)) dispatch = new LogRanges(route, group, view, dispatch, services.log).dispatch;
      const cached = cache !== null && route.cache === true;
      let forward = plainForwarder(route, dispatch);
      if (cached) {
        const c = cachedForwarder(route, group, view, dispatch, cache);
        forward = c.forward;
        metrics.cache(c.stats, view);
      }
      const handler = routeHandler(route, { ...services, group, forward } as RouteServices);
      const chain: Chain = { route, group, view, dispatch, handler, envelope: moduleOf(route).envelope, metrics: metrics.route(route.path, route.interface), cached };
      all.push(chain);
      chains.set(segment, chain);
      // A cached chain needs its head's hash and finality, polled every headPollMs; a pool's served tip needs heads
      // often, and an EVM pool that rewrites tags needs the safe and finalized blocks its upstreams report.
      // A chain with WebSocket subscribers follows its head (and its hash: a reorg at the same height) as a pool does.
      const ws = route.interface === 'evm-jsonrpc' && route.websocket === true;
      const heads = cached || ws || (pooled && route.interface === 'evm-jsonrpc' && route.rewriteTags);
      polled.push({ route, group, view, everyMs: cached ? cache.spec.headPollMs : pooled || ws ? Math.min(spec.health.intervalMs, POOL_POLL_MS) : null, heads });
    }
    dispatch.push({ spec: l, chains, envelope: listenerEnvelope(l) });
  }
  return { all, dispatch, polled };
}

/** How often at least a pool without a cache polls its upstreams (the served tip is at most this old). */
const POOL_POLL_MS = 1000;

function poolSettings(route: EvmRouteSpec): PoolSettings {
  return { rewriteTags: route.rewriteTags, pruneDepth: route.pruneDepth, hedge: route.hedge, broadcast: route.broadcast, quorum: route.quorum };
}

/** Forwarding with nothing around it: upstream through the chain's dispatch. */
function plainForwarder(route: RouteSpec, dispatch: Dispatch): Forwarders[RouteSpec['interface']] {
  if (route.interface === 'evm-jsonrpc') return (x: Exchange, d: EvmForward, build: (x: Exchange, d: EvmForward) => ForwardRequest) => x.forwardWith(dispatch, build(x, d));
  return (x: Exchange, request: ForwardRequest) => x.forwardWith(dispatch, request);
}
