// How every upstream request of a chain goes out: a route's forwarding and
// the cache's misses. Plain: one Forward (selection, retries, timeouts,
// breaker, streaming). A chain with a pool of upstreams uses the pool's
// dispatch in its place (chains.ts): the pool builds its own Forwards, one per
// attempt (pool/flow.ts, pool/fanout.ts, pool/doc-pool.ts).
import { Forward, type ForwardRequest, type ForwardTarget } from './proxy.ts';
import type { Upstream, UpstreamGroup } from './upstream.ts';

/** What a request under way can be told: the client went away. */
export interface Cancelable {
  cancel(): void;
}

/** Sends `request` upstream (to `group`'s upstreams, the chain's by default); `target` gets the outcome once. */
export type Dispatch = (target: ForwardTarget, request: ForwardRequest, group?: UpstreamGroup) => Cancelable;

export function plainDispatch(chain: UpstreamGroup, circuitOpen: (u: Upstream) => void): Dispatch {
  return (target, request, group = chain) => {
    const f = new Forward(group, request, target, circuitOpen);
    f.start();
    return f;
  };
}
