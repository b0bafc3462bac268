// Upstreams: one undici Pool each, what each serves in its view (kept by the
// poller and by the answers of real requests), and weighted selection per chain.
import { Pool } from 'undici';
import type { RouteSpec, UpstreamRole, UpstreamSpec } from '../types.ts';
import { resolveTemplate } from '../config/env.ts';
import { UpstreamView } from './upstream-view.ts';
import type { UpstreamState } from '../observe/series.ts';
import type { UpstreamTally } from './tally.ts';
import type { UpstreamSocket } from './upstream-socket.ts';
import { Scorer, type UpstreamScore } from './upstream-score.ts';
import { budgetOf, type Budget } from './upstream-budget.ts';

/** Health checks and head polls say who they are, so upstream logs (and tests) can tell them apart. */
export const HEALTH_AGENT = 'chain-gateway-health/1';

export { UPSTREAM_STATES, type UpstreamState } from '../observe/series.ts';

/** Failed health checks in a row before an upstream is taken out. */
export const HEALTH_FAILS_TO_DOWN = 2;
/** Failed requests in a row before an upstream is taken out at once (circuit breaker). */
export const REQUEST_FAILS_TO_DOWN = 3;

/** Why an upstream could not be reached, from the error's code alone: its message may carry the upstream's address. */
export function unreachable(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? (REASONS[code] ?? code) : 'no answer';
}

const REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found (DNS)',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  UND_ERR_SOCKET: 'connection closed',
};

export class Upstream {
  readonly name: string;
  /** The access log's `"upstream":...,"ms":` fields, made once. */
  readonly logFields: string;
  readonly chain: string;
  readonly role: UpstreamRole;
  readonly weight: number;
  /** An archive node: a pool sends calls for old state here. */
  readonly archive: boolean;
  /** How long its pool waits for an answer's head, and between its chunks: the chain's timeoutMs. */
  readonly timeoutMs: number;
  readonly pool: Pool;
  /** Path part of the configured URL without a trailing slash ('' for none). */
  readonly basePath: string;
  /** Scheme, host and port of the configured URL (a Blockbook upstream's socket is beside its base there). */
  readonly origin: string;
  /** Where JSON-RPC requests go: the URL's own path and query, exactly. */
  readonly rpcPath: string;
  /** Configured headers, already resolved; sent with every request. */
  readonly headers: Readonly<Record<string, string>>;
  /** The same as a flat [name, value, ...] list, for the request path. */
  readonly headerList: readonly string[];
  /** What it serves, its head and state: kept by the poller (poller.ts), read by everything else. */
  readonly view = new UpstreamView();
  /** Its one WebSocket (head-sockets.ts), which a kind's subscriptions share with its heads; null: it has none. */
  socket: UpstreamSocket | null = null;
  requestFails = 0;
  /** Smooth weighted round-robin state. */
  current = 0;
  /** Told when the circuit breaker takes it out (the server's metrics and log: UpstreamGroup.onCircuitOpen). */
  private circuitListener: ((u: Upstream) => void) | null = null;
  /** Its share in the round-robin: its weight, or less while its score is out of the preferred band (upstream-score.ts). */
  share: number;
  /** Its window and rank, on a chain that selects by score among more than one (upstream-score.ts); else null. */
  score: UpstreamScore | null = null;
  /** Its rateLimit's token bucket (upstream-budget.ts); null: no budget. */
  readonly budget: Budget | null;

  constructor(spec: UpstreamSpec, route: RouteSpec) {
    const where = `chain ${route.path} (${spec.name})`;
    const raw = resolveTemplate(spec.url, where);
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new Error(`${where}: upstream URL is not a valid URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`${where}: upstream URL must be http or https`);
    const headers: Record<string, string> = {};
    for (const [k, t] of Object.entries(spec.headers)) headers[k] = resolveTemplate(t, where);
    // Credentials in the URL become a header; the URL itself is never logged.
    if (url.username || url.password) {
      headers.authorization ??= `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
    }
    this.name = spec.name;
    this.logFields = `,"upstream":${JSON.stringify(spec.name)},"ms":`;
    this.chain = route.path;
    this.role = spec.role;
    this.weight = spec.weight;
    this.share = spec.weight;
    this.budget = budgetOf(spec.rateLimit);
    this.archive = spec.archive;
    this.timeoutMs = route.limits.timeoutMs;
    this.headers = headers;
    this.headerList = Object.entries(headers).flat();
    this.basePath = url.pathname === '/' ? '' : url.pathname.replace(/\/+$/, '');
    this.origin = url.origin;
    this.rpcPath = (url.pathname || '/') + url.search;
    this.pool = new Pool(url.origin, {
      connections: spec.connections,
      pipelining: 1,
      // A server's Keep-Alive: timeout=N hint overrides this (up to 10 min).
      keepAliveTimeout: spec.idleTimeoutMs,
      connectTimeout: Math.min(10_000, route.limits.timeoutMs),
      headersTimeout: route.limits.timeoutMs,
      bodyTimeout: route.limits.timeoutMs,
    });
  }

  get state(): UpstreamState {
    return this.view.state;
  }
  set state(s: UpstreamState) {
    this.view.state = s;
  }
  get head(): number | null {
    return this.view.head;
  }
  get takesBatches(): boolean {
    return this.view.takesBatches;
  }
  set takesBatches(b: boolean) {
    this.view.takesBatches = b;
  }
  get tally(): UpstreamTally {
    return this.view.tally;
  }

  /** May take traffic but for a throttle: up, or not yet checked on a chain that names nothing to check, and not behind the finality it reported (chain-view.ts). */
  get serving(): boolean {
    const v = this.view;
    const s = v.state;
    return (s === 'up' || (s === 'unknown' && !v.verify)) && v.finalBehind < 0;
  }

  /** May take traffic: serving, not in a throttle's cooldown (throttle.ts), and with room in its budget (upstream-budget.ts). */
  get usable(): boolean {
    const v = this.view;
    const s = v.state;
    return (s === 'up' || (s === 'unknown' && !v.verify)) && v.finalBehind < 0 && (v.throttledUntil === 0 || !v.throttled) && (this.budget === null || this.budget.ready());
  }

  /** An answer: the run of failed requests is over, and the run of throttles (throttle.ts). */
  markSuccess(): void {
    this.requestFails = 0;
    if (this.view.throttleRun !== 0) this.view.throttleRun = 0;
  }

  /** A failed request; returns true if this took the upstream out. */
  markFailure(): boolean {
    this.requestFails++;
    // Only a serving upstream is taken out: one the health check found on another chain stays wrong_chain.
    if (this.serving && this.requestFails >= REQUEST_FAILS_TO_DOWN) {
      this.state = 'down';
      this.circuitListener?.(this);
      return true;
    }
    return false;
  }

  onCircuitOpen(listener: (u: Upstream) => void): void {
    this.circuitListener = listener;
  }
}

/** The upstreams of one chain and the choice among them. */
export class UpstreamGroup {
  readonly primaries: readonly Upstream[];
  readonly fallbacks: readonly Upstream[];
  readonly all: readonly Upstream[];
  /** Ranks the primaries (and the fallbacks) by score; null with `selection: weighted`, or with no list of two. */
  readonly scorer: Scorer | null = null;

  /** `scored`: the chain selects by score (the manifest's selection: score, its default). */
  constructor(all: readonly Upstream[], scored = false) {
    this.all = all;
    this.primaries = all.filter((u) => u.role === 'primary');
    this.fallbacks = all.filter((u) => u.role === 'fallback');
    if (scored && (this.primaries.length > 1 || this.fallbacks.length > 1)) this.scorer = new Scorer(all, [this.primaries, this.fallbacks]);
  }

  /**
   * Picks an upstream: by weight among usable primaries, else among usable
   * fallbacks. `tried` holds upstreams this request already used: a request is
   * never sent twice to the same node. `accept`, where given, narrows the
   * choice (an upstream far enough ahead, an archive node).
   */
  pick(tried: ReadonlySet<Upstream> | null, accept?: (u: Upstream) => boolean, cost = 1): Upstream | null {
    const p = this.primaries;
    if (p.length === 1 && this.fallbacks.length === 0 && accept === undefined && cost === 1) {
      const only = p[0]!;
      if (!only.usable || tried?.has(only)) return null;
      only.budget?.spend();
      return only;
    }
    return choose(p, tried, accept, cost) ?? choose(this.fallbacks, tried, accept, cost);
  }

  /** For retries: any usable upstream not yet tried, fallbacks included. */
  pickRetry(tried: ReadonlySet<Upstream>, accept?: (u: Upstream) => boolean, cost = 1): Upstream | null {
    return choose(this.primaries, tried, accept, cost) ?? choose(this.fallbacks, tried, accept, cost);
  }

  /** Is there a usable upstream, other than `u`, that this request has not tried? */
  hasOther(u: Upstream, tried: ReadonlySet<Upstream> | null, accept?: (u: Upstream) => boolean): boolean {
    for (const o of this.all) if (o !== u && o.usable && !tried?.has(o) && (accept === undefined || accept(o))) return true;
    return false;
  }

  get healthy(): boolean {
    return this.all.some((u) => u.state === 'up');
  }

  /** `listener` is told each time the circuit breaker takes one of these upstreams out (subscribed once, at start). */
  onCircuitOpen(listener: (u: Upstream) => void): void {
    for (const u of this.all) u.onCircuitOpen(listener);
  }

  async close(): Promise<void> {
    this.scorer?.stop();
    await Promise.all(this.all.map((u) => u.pool.close().catch(() => undefined)));
  }
}

/**
 * Smooth weighted round-robin (as nginx does) over the usable members, by
 * their shares (their weights, or as their scores set them). `cost`: the
 * calls the request carries, each a token of a budget (upstream-budget.ts):
 * a budgeted upstream without room for them all is passed over.
 */
function choose(list: readonly Upstream[], tried: ReadonlySet<Upstream> | null, accept?: (u: Upstream) => boolean, cost = 1): Upstream | null {
  let best: Upstream | null = null;
  let total = 0;
  for (const u of list) {
    if (!u.usable || tried?.has(u) || (accept !== undefined && !accept(u)) || (cost > 1 && u.budget !== null && u.budget.room() < cost)) continue;
    u.current += u.share;
    total += u.share;
    if (best === null || u.current > best.current) best = u;
  }
  if (best !== null) {
    best.current -= total;
    // Picked is sent (forward.ts Forward): the request's calls are taken from its budget.
    best.budget?.take(cost);
  }
  return best;
}
