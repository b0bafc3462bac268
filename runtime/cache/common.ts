// What the EVM cache and the Rosetta/Blockbook cache share: the X-Cache
// header and log field, and how a flight's clients are told its outcome.
import type { Failure } from '../envelope.ts';
import type { Logger } from '../observe/log.ts';
import type { ForwardResult } from '../dispatch.ts';
import type { Upstream } from '../upstreams/upstream.ts';

/**
 * Who waits for a flight's answer: a client's exchange (a single call), or one
 * call of a client's batch (evm-batch.ts, BatchCall). An Exchange is one as it is.
 */
export interface FlightMember {
  /** The request id, for the log and the upstream's X-Request-Id. */
  readonly id: string;
  upstream: Upstream | null;
  cacheTag: readonly string[] | null;
  cacheLog: string;
  send(status: number, body: string | Buffer): void;
  fail(f: Failure, extra?: readonly string[]): void;
  internal(err: unknown): void;
  later(step: () => void): void;
}

export const X_CACHE = {
  hit: ['x-cache', 'HIT'],
  miss: ['x-cache', 'MISS'],
  coalesced: ['x-cache', 'COALESCED'],
  bypass: ['x-cache', 'BYPASS'],
} as const;

/** The access log's field, per X-Cache value. */
export const X_CACHE_LOG = { hit: ',"cache":"HIT"', miss: ',"cache":"MISS"', coalesced: ',"cache":"COALESCED"', bypass: ',"cache":"BYPASS"' } as const;

/** The clients of one flight, as X-Cache and the log say: the first went upstream (MISS), the rest joined it. */
export function tagFlight(members: readonly FlightMember[]): void {
  members.forEach((x, i) => {
    x.cacheTag = i === 0 ? X_CACHE.miss : X_CACHE.coalesced;
    x.cacheLog = i === 0 ? X_CACHE_LOG.miss : X_CACHE_LOG.coalesced;
  });
}

/** A flight that got no answer: logged once, and every client waiting on it gets the failure in its envelope. */
export function failFlight(log: Logger, r: Exclude<ForwardResult, { kind: 'buffered' }>, waiting: readonly FlightMember[]): void {
  const fail = r.kind === 'failed' ? r.fail : 'unavailable';
  // Logged once where a batch of calls failed (jsonrpc/forward-batch.ts).
  if (r.upstream && !(r.kind === 'failed' && r.logged === true)) log.warn({ event: 'upstream_failed', chain: r.upstream.chain, upstream: r.upstream.name, fail, reqId: waiting[0]!.id }, 'upstream failed');
  for (const x of waiting) {
    if (r.upstream) x.upstream = r.upstream;
    x.fail(fail, r.kind === 'failed' && r.retryAfter !== undefined ? ['retry-after', String(r.retryAfter)] : undefined);
  }
}
