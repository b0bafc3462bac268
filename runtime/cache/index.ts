// The cache as the chains see it: one core per cached chain (core.ts), with its
// interface's rules (evm.ts, doc.ts, as the interface module picks them): a
// front, the top layer of the chain's dispatch, and a layer lower in it
// (evm-logs.ts) where the module has one.
import type { ChainView } from '../upstreams/chain-view.ts';
import type { Logger } from '../observe/log.ts';
import type { CacheSpec } from '../types.ts';
import type { UpstreamGroup } from '../upstreams/upstream.ts';
import type { Dispatch } from '../dispatch.ts';
import { CacheCore } from './core.ts';
import { SharedTier } from './shared.ts';
import { CacheStore } from './store.ts';

export { X_CACHE, X_CACHE_LOG } from './common.ts';
export { CacheStore, SharedTier };

/** What every cached chain shares: the memory, the Redis tier, the manifest's settings. */
export interface CacheServices {
  readonly store: CacheStore;
  readonly spec: CacheSpec;
  readonly shared: SharedTier | null;
  readonly log: Logger;
}

/** A cached chain's core (its dispatch, where the front's flights go, is set once the layers below the front are composed: chains.ts). */
export function cacheCore(route: { readonly path: string }, group: UpstreamGroup, view: ChainView, below: Dispatch, s: CacheServices): CacheCore {
  return new CacheCore(route.path, group, s.store, view, s.shared, s.log, below);
}
