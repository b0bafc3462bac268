// The seam every upstream request of a chain crosses: a route's requests and
// the cache front's misses (the front itself, the top layer, is a dispatch
// whose target is a client: exchange.ts `Front`). Plain: one Forward (selection, retries, timeouts,
// breaker, streaming). A layer takes the dispatch below it and is a dispatch
// itself, as undici's interceptors are: a chain with a pool of upstreams
// sends through the pool, and the pool sends each of its attempts through the
// plain dispatch below it (chains.ts composes them).
import { Forward, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget } from './proxy.ts';
import type { Upstream, UpstreamGroup } from './upstreams/upstream.ts';

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

/** The plain dispatch: one Forward per request, started (the only place one is made). Hot path. */
export function plainDispatch(chain: UpstreamGroup): Next {
  return (target: HeldTarget, request: ForwardRequest, group = chain) => {
    // The overloads pair a target that cannot be streamed to with a held request: passed on as given.
    const f = new Forward(group, request as HeldRequest, target);
    f.start();
    return f;
  };
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
