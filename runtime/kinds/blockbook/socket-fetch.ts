// One read the gateway itself makes into a Blockbook chain for its socket
// (a new block's hash, the heights a feed fills, what a message's answer
// needs beyond its own request: getInfo's hashes, estimateFee's further block
// counts, the coin's decimals), through the chain's front: its layers under
// admission, as the EVM feed's fetches go (kinds/evm/socket-fetch.ts). The
// path is checked by the guard as a client's is; the answer is held whole and
// parsed. Blockbook's own error ({"error": ...}) rejects with its message.
import type { ClientTarget } from '../../exchange.ts';
import { held, type Dispatch } from '../../dispatch.ts';
import type { BlockbookRouteSpec } from '../../types.ts';
import { OwnCall } from '../own-call.ts';
import { MAX_MERGE_BYTES } from '../common.ts';
import { checkBlockbook } from './guard.ts';
import { blockbookRequest } from './request.ts';

/** A read of `rest` (what follows `/v2/`, e.g. `block-index/5`), resolved with its parsed answer, or rejected with why not. */
export function blockbookGet(front: Dispatch<ClientTarget>, route: BlockbookRouteSpec, rest: string, query = ''): Promise<unknown> {
  return blockbookRead(front, route, rest, query, MAX_MERGE_BYTES).then((r) => r.doc);
}

/** As blockbookGet, its answer held to at most `maxBytes`: the parsed answer and its length. */
export function blockbookRead(front: Dispatch<ClientTarget>, route: BlockbookRouteSpec, rest: string, query: string, maxBytes: number): Promise<{ doc: unknown; bytes: number }> {
  return new Promise((resolve, reject) => {
    const d = checkBlockbook('GET', rest, query, false, route.limits.maxPageSize);
    if (d.kind !== 'forward') return reject(new Error(`${rest}: refused by the guard`));
    const answered = (status: number, b: Buffer): void => {
      let v: unknown;
      try {
        v = JSON.parse(b.toString('utf8'));
      } catch {
        return reject(new Error(`${rest}: the answer (${status}) is not JSON`));
      }
      if (status >= 300) return reject(new Error(errorOf(v) ?? `${rest}: HTTP ${status}`));
      resolve({ doc: v, bytes: b.length });
    };
    // A block's page of a thousand transactions can pass the few MiB a client's answer is held to: read one at a time
    // (the feed's and the hub's reads are sequential, a block page's pages too), it is held up to the merge bound.
    const request = held(blockbookRequest(route, query === '' ? d.path : `${d.path}?${query}`, d.call, null, []), { maxBuffer: maxBytes });
    const x = new OwnCall(d.endpoint, answered, (why) => reject(new Error(`${rest}: ${why}`)));
    x.forward = front(x, request);
  });
}

/** Blockbook's error text in an answer ({"error": "..."} or {"error": {"message": "..."}}), or null. */
export function errorOf(v: unknown): string | null {
  if (v === null || typeof v !== 'object' || !('error' in v)) return null;
  const e = (v as { error: unknown }).error;
  if (typeof e === 'string') return e;
  if (e !== null && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string') return (e as { message: string }).message;
  return null;
}
