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
}
