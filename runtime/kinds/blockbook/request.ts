// What goes upstream for one Blockbook call the guard checked: a client's
// (module.ts) or the gateway's own (socket-fetch.ts), one request shape.
import type { ForwardRequest, Verdict } from '../../dispatch.ts';
import { blockbookThrottled } from '../../upstreams/throttle.ts';
import type { BlockbookRouteSpec } from '../../types.ts';
import { forwardRequest } from '../common.ts';
import type { DocCall } from '../doc-call.ts';

/**
 * The request of one call the guard checked, `tail` its path and query below
 * the upstream's base: a client's (its headers passed on), or the gateway's
 * own (the socket's fetches, socket-fetch.ts).
 */
export function blockbookRequest(route: BlockbookRouteSpec, tail: string, doc: DocCall, body: Buffer | null, headers: string[]): ForwardRequest {
  // sendtx, GET or POST, is a write (the guard's call says): sent once, never hedged, never again after an answer or a 502.
  return forwardRequest(route, {
    method: body === null ? 'GET' : 'POST',
    path: (u) => u.basePath + tail,
    headers,
    body,
    idempotent: doc.read,
    classify,
    throttled: blockbookThrottled,
    // With what names the read below the upstream's base (its path and query: kinds/doc-call.ts tail).
    calls: { one: doc.withTail(tail) },
  });
}

/**
 * A 502 or more is a failed attempt; Blockbook's own error answers (4xx, 500,
 * 501: {"error": ...}, short and rare) are held whole, to be judged for a
 * provider's throttle text (throttle.ts blockbookThrottled), also on a chain
 * of one upstream, and passed on unchanged when they are no throttle.
 */
function classify(status: number): Verdict {
  return status >= 502 ? 'bad' : status >= 400 ? 'buffer' : 'stream';
}
