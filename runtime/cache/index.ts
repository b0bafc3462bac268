// The cache as the chains see it: one core per cached chain (core.ts), with its
// interface's rules (evm.ts, doc.ts, as the interface module picks them):
// a front around the chain's forwarding, and a layer in the chain's dispatch
// (evm-logs.ts) where the module has one.
import type { ChainView } from '../upstreams/chain-view.ts';
import type { Forwarders } from '../forwarders.ts';
import type { Logger } from '../observe/log.ts';
import type { CacheSpec, InterfaceKind, RouteOf } from '../types.ts';
import type { UpstreamGroup } from '../upstreams/upstream.ts';
import type { Dispatch } from '../dispatch.ts';
import { CacheCore } from './core.ts';
import { SharedTier } from './shared.ts';
import { CacheStore, type CacheStats } from './store.ts';

export { X_CACHE, X_CACHE_LOG } from './common.ts';
export { CacheStore, SharedTier };

/** What every cached chain shares: the memory, the Redis tier, the manifest's settings. */
export interface CacheServices {
  readonly store: CacheStore;
  readonly spec: CacheSpec;
  readonly shared: SharedTier | null;
  readonly log: Logger;
}

/** A cached chain's core (its dispatch is set once the chain's layers are composed: chains.ts). */
export function cacheCore(route: { readonly path: string }, group: UpstreamGroup, view: ChainView, below: Dispatch, s: CacheServices): CacheCore {
  return new CacheCore(route.path, group, s.store, view, s.shared, s.log, below);
}

/**
 * The cache's front around a chain's forwarding (`rules`, its interface
 * module's: hits answer the exchange before any request exists), whose misses
 * go through `top`, the chain's layers from the top; the cache's other place,
 * its layer in the chain's dispatch, is the module's `cacheLayer` over the same
 * core (chains.ts composes it).
 */
export function cachedForwarder<K extends InterfaceKind>(
  rules: (route: RouteOf<K>, core: CacheCore, spec: CacheSpec) => Forwarders[K],
  route: RouteOf<K>,
  core: CacheCore,
  top: Dispatch,
  s: CacheServices,
): { forward: Forwarders[K]; stats: CacheStats } {
  core.dispatch = top;
  return { forward: rules(route, core, s.spec), stats: core.stats };
}
