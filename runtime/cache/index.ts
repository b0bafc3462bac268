// The cache as the chains see it: one core per cached chain (core.ts), with its
// interface's rules (evm.ts, doc.ts), wrapped around the chain's forwarding.
import type { ChainView } from '../chain-view.ts';
import type { Forwarders } from '../forwarders.ts';
import type { Logger } from '../log.ts';
import type { CacheSpec, RouteSpec } from '../types.ts';
import type { UpstreamGroup } from '../upstream.ts';
import type { Dispatch } from '../dispatch.ts';
import { CacheCore } from './core.ts';
import { DocLayer } from './doc.ts';
import { BLOCKBOOK_RULES, ROSETTA_RULES } from './doc-rules.ts';
import { EvmLayer } from './evm.ts';
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

/** A chain's forwarding with its cache around it, and the cache's counters. */
export function cachedForwarder<R extends RouteSpec>(route: R, group: UpstreamGroup, view: ChainView, dispatch: Dispatch, s: CacheServices): { forward: Forwarders[R['interface']]; stats: CacheStats } {
  const core = new CacheCore(route.path, group, s.store, view, s.shared, s.log, dispatch);
  const forward =
    route.interface === 'evm-jsonrpc'
      ? new EvmLayer(route, core, s.spec.batch).forward
      : new DocLayer(core, route.interface === 'rosetta' ? ROSETTA_RULES : BLOCKBOOK_RULES).forward;
  return { forward: forward as Forwarders[R['interface']], stats: core.stats };
}
