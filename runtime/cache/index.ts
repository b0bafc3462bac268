// The cache as the chains see it: one core per cached chain (core.ts), with its
// interface's rules (evm.ts, doc.ts, as the interface module picks them),
// wrapped around the chain's forwarding.
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

/** A chain's forwarding with its cache around it (its interface module's rules, `rules`, over the chain's core), and the cache's counters. */
export function cachedForwarder<K extends InterfaceKind>(
  rules: (route: RouteOf<K>, core: CacheCore, spec: CacheSpec) => Forwarders[K],
  route: RouteOf<K>,
  group: UpstreamGroup,
  view: ChainView,
  dispatch: Dispatch,
  s: CacheServices,
): { forward: Forwarders[K]; stats: CacheStats } {
  const core = new CacheCore(route.path, group, s.store, view, s.shared, s.log, dispatch);
  return { forward: rules(route, core, s.spec), stats: core.stats };
}
