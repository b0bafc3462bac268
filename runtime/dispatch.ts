// The seam every upstream request of a chain crosses, and its types: the
// request, its outcome, the targets that take it, and the Dispatch each layer
// is and takes (undici's interceptors are so: a layer takes the dispatch
// below it and is a dispatch itself). chains.ts composes them: admission's
// admit step and the cache's front at the top (their target is a client's
// exchange), the module's layer, the cache's layer, the pool, the forward
// batches, and the plain dispatch at the bottom, one Forward per request
// (upstreams/forward.ts).
import type { ServerResponse } from 'node:http';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Call } from './kinds/evm/call.ts';
import type { DocCall } from './kinds/doc-call.ts';
import type { EvmForward } from './kinds/evm/decision.ts';
import type { Upstream, UpstreamGroup } from './upstreams/upstream.ts';

/** throttled: every upstream the request could go to throttled it, or is in a throttle's cooldown (throttle.ts). */
export type FailKind = 'unavailable' | 'timeout' | 'no-upstream' | 'bad-response' | 'throttled';

/**
 * What to do with an answer: stream it straight to the client, buffer it (the
 * caller rewrites it), or treat it as a failed attempt ('bad': a 5xx, or
 * something that is not an answer of this interface) and try another upstream
 * where that is safe.
 */
export type Verdict = 'stream' | 'buffer' | 'bad';

export interface ForwardRequest {
  readonly method: 'GET' | 'POST';
  /** Path and query on the upstream, given the upstream. */
  readonly path: (u: Upstream) => string;
  /** Request headers as a flat [name, value, ...] list (undici takes it as is). */
  readonly headers: string[];
  readonly body: Buffer | string | null;
  /** Safe to send again after a 5xx or timeout (reads). */
  readonly idempotent: boolean;
  readonly retries: number;
  /** Largest answer the gateway will hold in memory when it must rewrite it. */
  readonly maxBuffer: number;
  /**
   * The call's one deadline, on performance.now()'s clock: the route sets it
   * (its timeoutMs from when the call was read), and every layer below keeps
   * it. Every attempt's wait for an answer's head, an answer held whole, a
   * pool's wait and hedges, a range's chunks and the retries all end by it
   * (each gets what is left, dispatch.ts timeLeft; none once it is over).
   */
  readonly deadline: number;
  /** A 2xx with no body is a good answer (JSON-RPC notifications); otherwise only a 304 may be empty. */
  readonly emptyOk: boolean;
  readonly classify: (status: number, headers: IncomingHttpHeaders) => Verdict;
  /** Only upstreams this accepts may take the request (a pool's routing: far enough ahead, an archive node); absent: any. */
  readonly accept?: (u: Upstream) => boolean;
  /** Upstreams the request must not go to (already asked, by a hedge or a retry of the pool). */
  readonly skip?: ReadonlySet<Upstream>;
  /** Whether a 2xx answer held whole is an answer of this interface (a pool's JSON-RPC check); absent: any body but an empty one. */
  readonly isAnswer?: (body: Buffer) => boolean;
  /**
   * The call went in a batch whose upstream answered it with a throttle error
   * (jsonrpc/forward-batch.ts): that answer counts with this call's others as one
   * seen in a body (Forward.throttledInBody); `skip` holds the upstream.
   */
  readonly throttledIn?: ThrottleSeen;
  /** The calls the body carries, each a token of an upstream's budget (upstream-budget.ts): a batch's count (jsonrpc/forward-batch.ts); absent: one. */
  readonly cost?: number;
  /** Whether an answer held whole (not a 5xx), or a short streamed one (Judge), says the upstream throttled the call (EVM's JSON-RPC -32005 in a 200, every EVM chain); absent: only a 429 does. */
  readonly throttled?: (body: Buffer) => boolean;
  /**
   * Hold every answer whole, also those `classify` would stream: a layer that
   * judges, keeps or merges the answer before the client sees it (the cache's
   * flights, a pool's legs). Its target is a `HeldTarget`: nothing is streamed
   * into it.
   */
  readonly hold?: boolean;
  /**
   * The EVM call the body is, as the guard decided it (kinds/evm/call.ts: its
   * method, id, params parsed once, block): the layers below read it instead
   * of the bytes. Only as long as `body` is the Call's own (kinds/evm/pool-call.ts, callOf).
   */
  readonly call?: Call;
  /**
   * A client batch's calls, in order, as the guard made them (each with its
   * own bytes of `body` and its id): admission charges and counts by their
   * methods, and the pool splits the batch with them instead of the bytes. Only as long as `body` is the batch they were
   * made of: a layer that sends other bytes sets it to what they are, or
   * leaves it out.
   */
  readonly calls?: readonly Call[];
  /**
   * The calls of one client's batch share this: the forward layer sends them
   * to a node together, with cache.batch 1 too (jsonrpc/forward-batch.ts).
   */
  readonly together?: object;
  /** The Blockbook or Rosetta call the request is, as its guard decided it (kinds/doc-call.ts: endpoint, block, read or write, Blockbook's tail). */
  readonly doc?: DocCall;
  /**
   * The EVM guard's decision the request was made of (a single call's
   * method and id span, a batch's methods and calls, the merge plan of a
   * batch with refused calls): the cache's front reads it. Only on a
   * route's own request: a layer that sends other bytes leaves it out.
   */
  readonly decision?: EvmForward;
}


/** An upstream's throttle error in a body, not yet marked: the upstream, its answer's headers and body, and when the call was sent (epoch ms). */
export interface ThrottleSeen {
  readonly u: Upstream;
  readonly headers: IncomingHttpHeaders;
  readonly sentAt: number;
  readonly body: Buffer;
}

/**
 * What is left of a request's `deadline` at `now`, in whole ms for a timer
 * or a wait: at least 1 while any is left, 0 once it is over. The one place
 * the time left of a call is worked out.
 */
export function timeLeft(deadline: number, now = performance.now()): number {
  const left = deadline - now;
  return left < 1 ? 0 : Math.round(left);
}

/** A request whose answers are held whole (`hold`), for a target nothing streams into. */
export type HeldRequest = ForwardRequest & { readonly hold: true };

/** What Forward writes a streamed answer into: a client's response. */
export type Sink = Pick<ServerResponse, 'destroyed' | 'headersSent' | 'write' | 'end' | 'once' | 'destroy'>;

/** Where the outcome of a held request goes (`hold`): only the outcome, never a streamed byte. */
export interface HeldTarget {
  /** Called once, with the outcome. */
  forwarded(r: ForwardResult): void;
  /**
   * Told, before the outcome comes (before a streamed answer's head), how
   * the cache's layer took part in it (kinds/evm/cache-logs.ts): the answer came
   * from memory, joined a call in flight, or was sent for it; for an answer
   * the ranges layer made of chunks, what its chunks say together. A target
   * that reports it (X-Cache) or counts it listens.
   */
  cacheSaid?(c: CacheSays): void;
}

/** How the cache's layer took part in an answer. */
export type CacheSays = 'hit' | 'coalesced' | 'miss';

/** The request's side of forwarding that can be streamed to: a client's exchange. */
export interface ForwardTarget extends HeldTarget {
  readonly res: Sink;
  /** Writes status and headers on the client response; the body follows. */
  streamHead(status: number, headers: IncomingHttpHeaders, u: Upstream): void;
}

export type ForwardResult =
  | { readonly kind: 'streamed'; readonly upstream: Upstream; readonly status: number }
  | {
      readonly kind: 'buffered';
      readonly upstream: Upstream;
      readonly status: number;
      readonly headers: IncomingHttpHeaders;
      readonly body: Buffer;
    }
  /** retryAfter: seconds until the soonest throttled upstream is free again (fail 'throttled'). */
  /** logged: the layer that failed it logged it (once for a batch of calls): its receivers do not. */
  | { readonly kind: 'failed'; readonly fail: FailKind; readonly upstream: Upstream | null; readonly retryAfter?: number; readonly logged?: boolean }
  /** The client went away, or the answer broke after it had started. */
  | { readonly kind: 'aborted'; readonly upstream: Upstream | null };

/** The headers of a JSON answer a layer made itself (a merged batch or range, an answer from memory, the served tip). */
export const JSON_HEADERS = { 'content-type': 'application/json' } as const;

/** What a request under way can be told: the client went away. */
export interface Cancelable {
  cancel(): void;
}

/** Nothing to cancel: an answer already made, or a request nobody calls back. */
export const NOTHING: Cancelable = { cancel: () => undefined };

/**
 * Sends `request` upstream (to `group`'s upstreams, the chain's by default);
 * `target` gets the outcome once. A held request (`hold`) needs only a
 * `HeldTarget`; any other may be streamed into its target.
 */
export interface Dispatch {
  (target: ForwardTarget, request: ForwardRequest, group?: UpstreamGroup): Cancelable;
  (target: HeldTarget, request: HeldRequest, group?: UpstreamGroup): Cancelable;
}

/** One attempt under way: what it can be told, and the upstream it went to (null: none could take it). */
export interface Attempt extends Cancelable {
  readonly upstream: Upstream | null;
}

/** The plain dispatch, as the layer above it sees it: each request one attempt (with Forward's own retries). */
export interface Next {
  (target: ForwardTarget, request: ForwardRequest, group?: UpstreamGroup): Attempt;
  (target: HeldTarget, request: HeldRequest, group?: UpstreamGroup): Attempt;
}

/** Whether `request`'s sender would have the answer `r` streamed to it (it did not ask for it held, and its classify streams `r`). */
export function streams(request: ForwardRequest, r: Extract<ForwardResult, { kind: 'buffered' }>): boolean {
  return request.hold !== true && request.classify(r.status, r.headers) === 'stream';
}

/**
 * An answer a layer held to judge it (a pool's legs, a batch's calls), handed
 * to the sender of `request` as it asked: one it would have had streamed is
 * written to its client as it came; the rest goes to it whole (to its rewrite,
 * the cache, a batch).
 */
export function deliver(target: HeldTarget, request: ForwardRequest, r: ForwardResult): void {
  if (r.kind === 'buffered' && streams(request, r)) {
    const t = target as ForwardTarget;
    t.streamHead(r.status, { ...r.headers, 'content-length': String(r.body.length) }, r.upstream);
    t.res.end(r.body);
    return t.forwarded({ kind: 'streamed', upstream: r.upstream, status: r.status });
  }
  target.forwarded(r);
}

/**
 * A JSON answer a layer made of parts it holds (a merged range's chunks, a
 * split batch's answers), written to a client that takes a stream as they
 * are, not copied into one; `done` runs once the response is over (the parts
 * may be let go), also when the client is gone already.
 */
export function streamParts(t: ForwardTarget, u: Upstream, parts: readonly Buffer[], done: () => void): void {
  const res = t.res;
  if (res.destroyed) {
    done();
    return t.forwarded({ kind: 'aborted', upstream: u });
  }
  let length = 0;
  for (const p of parts) length += p.length;
  t.streamHead(200, { ...JSON_HEADERS, 'content-length': String(length) }, u);
  res.once('close', done);
  for (const p of parts) res.write(p);
  res.end();
  t.forwarded({ kind: 'streamed', upstream: u, status: 200 });
}
