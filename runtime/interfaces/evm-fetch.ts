// One JSON-RPC call the gateway itself makes through a chain's dispatch (the
// same way a client's call goes upstream: pool, routing, retries, breaker),
// with the answer held whole (the seam's `hold`) and parsed. The subscriptions' block and log
// fetches go this way (feed.ts).
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Dispatch } from '../dispatch.ts';
import { answerThrottled } from '../upstreams/throttle.ts';
import type { ForwardResult, HeldRequest, Verdict } from '../proxy.ts';
import type { EvmRouteSpec } from '../types.ts';
import type { Upstream } from '../upstreams/upstream.ts';
import { forwardRequest, isHtml, MAX_MERGE_BYTES } from './common.ts';

const HEADERS = ['content-type', 'application/json'];

/** A failed attempt: a 5xx or an HTML error page; anything else is held for the caller. */
function classify(status: number, h: IncomingHttpHeaders): Verdict {
  return status >= 500 || isHtml(h) ? 'bad' : 'buffer';
}

function rpcPath(u: Upstream): string {
  return u.rpcPath;
}

/** Sends one call (`method`, `params` as JSON text) and resolves with its result, or rejects with why not. */
export function rpcCall(dispatch: Dispatch, route: EvmRouteSpec, method: string, params: string): Promise<unknown> {
  const body = `{"jsonrpc":"2.0","id":1,"method":"${method}","params":${params}}`;
  return new Promise((resolve, reject) => {
    const forwarded = (r: ForwardResult): void => {
      if (r.kind !== 'buffered') return reject(new Error(`${method}: upstream ${r.kind === 'failed' ? r.fail : r.kind}`));
      let v: { result?: unknown; error?: { message?: unknown } };
      try {
        v = JSON.parse(r.body.toString('utf8')) as typeof v;
      } catch {
        return reject(new Error(`${method}: the answer is not JSON`));
      }
      if (v === null || typeof v !== 'object' || 'error' in v) return reject(new Error(`${method}: ${String(v?.error?.message ?? 'no result')}`));
      resolve(v.result);
    };
    // Held whole (`hold`): whatever the layers below do with it, the answer comes back as one buffer.
    const request: HeldRequest = { ...forwardRequest(route, 'POST', rpcPath, HEADERS.slice(), body, true, classify, MAX_MERGE_BYTES, false, answerThrottled), hold: true };
    dispatch({ forwarded }, request);
  });
}
