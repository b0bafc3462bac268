// One JSON-RPC call the gateway itself makes into a chain (a socket feed's
// block and log fetches, evm-feed.ts), through the chain's front: its layers
// under admission, as a client's checked call goes. So a block a client just
// fetched is served from memory, a fetch joins a client's call in flight and
// the other way round, and the pool routes, retries and fails over as for any
// call. The call is checked and described by the guard as a client's is (its
// Call is what the front reads); the answer is held whole (the seam's
// `hold`) and parsed. This is the one place the feed makes a request: the
// seam's request type changes here alone.
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { ClientTarget } from '../../exchange.ts';
import { callsOf } from './decision.ts';
import { checkEvmBody } from './guard.ts';
import { OwnCall } from '../own-call.ts';
import { answerThrottled } from '../../upstreams/throttle.ts';
import { held, type Dispatch, type Verdict } from '../../dispatch.ts';
import type { EvmRouteSpec } from '../../types.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import { forwardRequest, isHtml, MAX_MERGE_BYTES } from '../common.ts';

const HEADERS = ['content-type', 'application/json'];
/** What the feed asks (the guard checks the gateway's own calls against these, whatever the chain's allowlist). */
const FEED_METHODS: ReadonlySet<string> = new Set(['eth_getBlockByNumber', 'eth_getBlockByHash', 'eth_getLogs']);

/** A failed attempt: a 5xx or an HTML error page; anything else is held for the caller. */
function classify(status: number, h: IncomingHttpHeaders): Verdict {
  return status >= 500 || isHtml(h) ? 'bad' : 'buffer';
}

function rpcPath(u: Upstream): string {
  return u.rpcPath;
}

/** Sends one call (`method`, `params` as JSON text) through the chain's `front`, and resolves with its result, or rejects with why not. */
export function rpcCall(front: Dispatch<ClientTarget>, route: EvmRouteSpec, method: string, params: string): Promise<unknown> {
  const body = Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"${method}","params":${params}}`);
  return new Promise((resolve, reject) => {
    const d = checkEvmBody(body, FEED_METHODS, 1);
    if (d.kind !== 'forward') return reject(new Error(`${method}: the gateway's own call is refused: ${d.body}`));
    const answered = (status: number, b: Buffer): void => {
      let v: { result?: unknown; error?: { message?: unknown } };
      try {
        v = JSON.parse(b.toString('utf8')) as typeof v;
      } catch {
        return reject(new Error(`${method}: the answer (${status}) is not JSON`));
      }
      if (v === null || typeof v !== 'object' || 'error' in v) return reject(new Error(`${method}: ${String(v?.error?.message ?? 'no result')}`));
      resolve(v.result);
    };
    // Held whole (`hold`): whatever the layers do with it, the answer comes back as one buffer; the guard's Call goes
    // with it, as with a client's call, for the front's layers and the pool to read.
    const request = held(
      forwardRequest(route, {
        method: 'POST',
        path: rpcPath,
        headers: HEADERS.slice(),
        body: d.body,
        idempotent: d.idempotent,
        classify,
        maxBuffer: MAX_MERGE_BYTES,
        emptyOk: !d.answered,
        throttled: answerThrottled,
        calls: callsOf(d),
      }),
    );
    const x = new OwnCall(d.label, answered, (why) => reject(new Error(`${method}: ${why}`)));
    x.forward = front(x, request);
  });
}
