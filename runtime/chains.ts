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
import type { EvmForward, Forwarders } from './forwarders.ts';
import type { RouteServices } from './interfaces/interface.ts';
import type { Metrics, RouteMetrics } from './metrics.ts';
import type { PolledChain } from './poller.ts';
import { Upstream, UpstreamGroup } from './upstream.ts';
import { plainDispatch, type Dispatch } from './dispatch.ts';
import { Call } from './evm-call.ts';

/** A chain as one listener serves it: its flow, its envelope and its counters. */
export interface Chain {
  readonly route: RouteSpec;
  readonly group: UpstreamGroup;
  readonly view: ChainView;
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

export function buildChains(spec: GatewaySpec, services: SharedServices, metrics: Metrics, cache: CacheServices | null): Chains {
  const all: Chain[] = [];
  const dispatch: DispatchTable[] = [];
  const polled: PolledChain[] = [];
  for (const l of spec.listeners) {
    const chains = new Map<string, Chain>();
    for (const [segment, route] of l.routes) {
      const group = new UpstreamGroup(route.upstreams.map((u) => new Upstream(u, route)));
      metrics.upstreams(group.all);
      const pooled = group.all.length > 1;
      const view = new ChainView(group.all, route.servedTip);
      // The layers, composed: a pool over the plain dispatch (Forward), where the chain has several upstreams.
      const forwards = plainDispatch(group);
      let dispatch: Dispatch = forwards;
      if (pooled) {
        const pool = route.interface === 'evm-jsonrpc' ? new Pool(route, group, view, poolSettings(route), services.log, forwards) : docPool(route, group, view, forwards);
        dispatch = pool.dispatch;
        metrics.pool(pool.stats);
      }
      const cached = cache !== null && route.cache === true;
      let forward = pooled && route.interface === 'evm-jsonrpc' ? pooledEvmForwarder(dispatch) : plainForwarder(route, dispatch);
      if (cached) {
        const c = cachedForwarder(route, group, view, dispatch, cache);
        forward = c.forward;
        metrics.cache(c.stats, view);
      }
      const handler = routeHandler(route, { ...services, group, forward } as RouteServices);
      const chain: Chain = { route, group, view, handler, envelope: moduleOf(route).envelope, metrics: metrics.route(route.path, route.interface), cached };
      all.push(chain);
      chains.set(segment, chain);
      // A cached chain needs its head's hash and finality, polled every headPollMs; a pool's served tip needs heads
      // often, and an EVM pool that rewrites tags needs the safe and finalized blocks its upstreams report.
      const heads = cached || (pooled && route.interface === 'evm-jsonrpc' && route.rewriteTags);
      polled.push({ route, group, view, everyMs: cached ? cache.spec.headPollMs : pooled ? Math.min(spec.health.intervalMs, POOL_POLL_MS) : null, heads });
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

/**
 * An EVM pool's forwarding with nothing around it: a single call's request
 * carries its Call, made of what the guard found (the method, the id's place),
 * so the pool reads the body at most once (its params, when it needs them).
 */
function pooledEvmForwarder(dispatch: Dispatch): Forwarders['evm-jsonrpc'] {
  return (x, d, build) => {
    const r = build(x, d);
    x.forwardWith(dispatch, d.methods === null && r.body !== null ? { ...r, call: new Call(r.body, d.label, d.idStart, d.idEnd) } : r);
  };
}

/** Forwarding with nothing around it: upstream through the chain's dispatch. */
function plainForwarder(route: RouteSpec, dispatch: Dispatch): Forwarders[RouteSpec['interface']] {
  if (route.interface === 'evm-jsonrpc') return (x: Exchange, d: EvmForward, build: (x: Exchange, d: EvmForward) => ForwardRequest) => x.forwardWith(dispatch, build(x, d));
  return (x: Exchange, request: ForwardRequest) => x.forwardWith(dispatch, request);
}
