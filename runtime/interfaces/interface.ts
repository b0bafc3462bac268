// What an interface is to the server: its chains' request flow, its envelope
// and its health check. The server knows interfaces only through the table in
// index.ts, which the compiler keeps complete.
import type { AdmissionStage } from '../admission.ts';
import type { Envelope } from '../envelope.ts';
import type { RouteHandler } from '../exchange.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { CacheStore } from '../cache/store.ts';
import type { SharedTier } from '../cache/shared.ts';
import type { Usage } from '../usage.ts';
import type { ValidatorTables } from '../validators.ts';
import type { CacheSpec, InterfaceKind, RouteOf } from '../types.ts';
import type { Upstream, UpstreamGroup } from '../upstream.ts';

/** What the server gives each chain's handler. */
export interface RouteServices {
  readonly admission: AdmissionStage;
  /** The chain's upstreams. */
  readonly group: UpstreamGroup;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The process's answer cache, when the manifest has a cache block. */
  readonly cache: { readonly store: CacheStore; readonly spec: CacheSpec; readonly shared: SharedTier | null } | null;
  readonly circuitOpen: (u: Upstream) => void;
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
}

/**
 * Which chain an upstream serves, checked on every health round for a chain
 * whose manifest says what it must serve.
 */
export interface IdentityCheck {
  /** A request of its own, sent alongside the head probe; absent: the head probe's answer tells. */
  readonly request?: (u: Upstream) => ProbeRequest;
  /** true: the chain's own; a string: what the upstream serves instead (for the log, never a URL); false: the answer cannot tell (the probe fails). */
  check(doc: Record<string, any>): boolean | string;
}

/** One probe of an upstream: the request, and where its answer says the head is. */
export interface HealthProbe<K extends InterfaceKind> {
  request(route: RouteOf<K>, u: Upstream): ProbeRequest;
  /**
   * The head the answer reports: a number, undefined when it reports none
   * (then the upstream is up but takes no part in lag checks), or null when
   * the answer says the upstream is not serving.
   */
  head(doc: Record<string, any>): unknown;
  /** The chain's identity check, made once per chain; null when the manifest names nothing to check. */
  identity(route: RouteOf<K>): IdentityCheck | null;
  /**
   * Where the probe asks head and identity in one request (a batch): the two
   * asked apart, for an upstream that answered that request with a single
   * object (a node that takes no batches). Absent: nothing else to try.
   */
  apart?(route: RouteOf<K>, u: Upstream): { readonly head: ProbeRequest; readonly identity: ProbeRequest } | null;
}

export interface InterfaceModule<K extends InterfaceKind> {
  readonly envelope: Envelope;
  /** The flow of one chain, made once at start. */
  handler(route: RouteOf<K>, services: RouteServices): RouteHandler;
  readonly health: HealthProbe<K>;
}
