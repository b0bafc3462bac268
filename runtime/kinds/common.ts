// Pieces the interfaces share when they hand a request to Forward.
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Calls, ForwardRequest, Transport } from '../dispatch.ts';
import type { RouteSpec } from '../types.ts';

/**
 * Largest upstream answer the gateway holds in memory to rewrite it. A batch
 * answer to merge is split without being parsed (about twice its size in
 * memory), and may be as large as geth's default batch answer limit (25 MB)
 * and more; the other answers held (errors, Rosetta /network/options) are
 * parsed, and are small when they are real. All of them together are capped
 * by forward.ts's MAX_HELD_BYTES.
 */
export const MAX_MERGE_BYTES = 32 * 1024 * 1024;
export const MAX_REWRITE_BYTES = 4 * 1024 * 1024;

export const NO_KEYS: readonly string[] = [];

/**
 * What a route says of the request it makes: its calls, and of its
 * transport what is not the route's (its retries, and the deadline: its
 * timeoutMs from now) nor has a default (maxBuffer: MAX_REWRITE_BYTES;
 * emptyOk: false).
 */
export type RequestParts = Pick<Transport, 'method' | 'path' | 'headers' | 'body' | 'idempotent' | 'classify'> &
  Partial<Pick<Transport, 'maxBuffer' | 'emptyOk' | 'throttled'>> & { readonly calls: Calls };

/** A route's ForwardRequest: every one made here, so all share one shape (every field written, in one order: one hidden class on the hot path). */
export function forwardRequest(route: RouteSpec, p: RequestParts): ForwardRequest {
  return {
    calls: p.calls,
    transport: {
      method: p.method,
      path: p.path,
      headers: p.headers,
      body: p.body,
      idempotent: p.idempotent,
      retries: route.retries,
      maxBuffer: p.maxBuffer ?? MAX_REWRITE_BYTES,
      deadline: performance.now() + route.limits.timeoutMs,
      emptyOk: p.emptyOk ?? false,
      classify: p.classify,
      throttled: p.throttled,
    },
  };
}

/** An HTML page is a proxy's or load balancer's error page, never a node's answer. */
export function isHtml(h: IncomingHttpHeaders): boolean {
  const ct = h['content-type'];
  return typeof ct === 'string' && ct.indexOf('html') !== -1;
}
