// Pieces the interfaces share when they hand a request to Forward.
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { EvmForward, ForwardRequest, Verdict } from '../proxy.ts';
import type { Call } from '../evm-call.ts';
import type { DocCall } from '../doc-call.ts';
import type { RouteSpec } from '../types.ts';
import type { Upstream } from '../upstreams/upstream.ts';

/**
 * Largest upstream answer the gateway holds in memory to rewrite it. A batch
 * answer to merge is split without being parsed (about twice its size in
 * memory), and may be as large as geth's default batch answer limit (25 MB)
 * and more; the other answers held (errors, Rosetta /network/options) are
 * parsed, and are small when they are real. All of them together are capped
 * by proxy.ts's MAX_HELD_BYTES.
 */
export const MAX_MERGE_BYTES = 32 * 1024 * 1024;
export const MAX_REWRITE_BYTES = 4 * 1024 * 1024;

export const NO_KEYS: readonly string[] = [];

/** A ForwardRequest: every one made here, so all share one shape. */
export function forwardRequest(
  route: RouteSpec,
  method: 'GET' | 'POST',
  path: (u: Upstream) => string,
  headers: string[],
  body: Buffer | string | null,
  idempotent: boolean,
  classify: (status: number, headers: IncomingHttpHeaders) => Verdict,
  maxBuffer = MAX_REWRITE_BYTES,
  emptyOk = false,
  throttled?: (body: Buffer) => boolean,
  call: Call | null = null,
  doc: DocCall | null = null,
  calls: readonly Call[] | null = null,
  decision: EvmForward | null = null,
  tail: string | null = null,
): ForwardRequest {
  return {
    method,
    path,
    headers,
    body,
    idempotent,
    retries: route.retries,
    maxBuffer,
    timeoutMs: route.limits.timeoutMs,
    emptyOk,
    classify,
    throttled,
    call: call ?? undefined,
    calls: calls ?? undefined,
    doc: doc ?? undefined,
    decision: decision ?? undefined,
    tail: tail ?? undefined,
  };
}

/** An HTML page is a proxy's or load balancer's error page, never a node's answer. */
export function isHtml(h: IncomingHttpHeaders): boolean {
  const ct = h['content-type'];
  return typeof ct === 'string' && ct.indexOf('html') !== -1;
}
