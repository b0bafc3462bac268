// What an interface is to the server: its chains' request flow, its envelope
// and its health check. The server knows interfaces only through the table in
// index.ts, which the compiler keeps complete.
import type { AdmissionStage } from '../admission.ts';
import type { Envelope } from '../envelope.ts';
import type { RouteHandler } from '../exchange.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { Usage } from '../usage.ts';
import type { ValidatorTables } from '../validators.ts';
import type { InterfaceKind, RouteOf } from '../types.ts';
import type { Upstream, UpstreamGroup } from '../upstream.ts';
import type { PollReport } from '../chain-view.ts';

// Where a chain's handler sends what it has checked: the seam's types, in a file below every layer that implements them.
import type { Forwarders } from '../forwarders.ts';
export type { EvmForward, Forwarders } from '../forwarders.ts';

/** What the server gives each chain's handler. */
export interface RouteServices<K extends InterfaceKind = InterfaceKind> {
  readonly admission: AdmissionStage;
  /** The chain's upstreams. */
  readonly group: UpstreamGroup;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly forward: Forwarders[K];
  /** What a method or endpoint costs, when the manifest has `credits`; null: every call costs 1. */
  readonly credits: ((name: string) => number) | null;
  /** Calls and credits per key, day, chain and method. */
  readonly usage: Usage;
  /** The request validators the build emitted (used by chains with validate: params). */
  readonly validators: ValidatorTables;
}

export interface ProbeRequest {
  readonly path: string;
  readonly method: 'GET' | 'POST';
  readonly body?: string;
  /** A JSON-RPC batch: a node that answers it with one object takes no batches (then `requests` is asked again). */
  readonly batch?: boolean;
}

/**
 * How a chain's upstreams are polled (poller.ts): one poll tells what an
 * upstream serves, its head and, where the chain needs heads, the head's
 * hash, the finalized and safe blocks and the genesis hash.
 */
export interface ChainProbe<K extends InterfaceKind> {
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

export interface InterfaceModule<K extends InterfaceKind> {
  readonly envelope: Envelope;
  /** The flow of one chain, made once at start. */
  handler(route: RouteOf<K>, services: RouteServices<K>): RouteHandler;
  readonly probe: ChainProbe<K>;
}
