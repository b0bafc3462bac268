// What a pool does with one EVM call: finds the Call a request carries
// (kinds/evm/call.ts: every request says what it carries), and rewrites
// its tags to the block numbers the gateway serves. Where the call's block
// is, and its method's traits, are kinds/evm/call.ts's and kinds/evm/methods.ts's: the
// cache's policy table (kinds/evm/cache-policy.ts) is about what may be kept.
import { Call, type BlockRef } from './call.ts';
import type { ForwardRequest } from '../../dispatch.ts';

export type { BlockRef };

// Which methods read state, or may be empty: the method traits table's (kinds/evm/methods.ts).
export { COUNTS, MAY_BE_EMPTY, STATE_METHODS } from './methods.ts';

/** A single call's routing facts; null for a batch, or a body that is not one call. For bodies that come without a Call (tests). */
export function readCall(body: Buffer | string | null): Call | null {
  return Call.read(body);
}

/** The EVM call `request` carries alone; null for a batch (its calls are `request.calls.batch`). */
export function callOf(request: ForwardRequest): Call | null {
  const c = request.calls.one;
  return c instanceof Call ? c : null;
}

/** Whether `request` is, or carries in a batch, a call of `method`, as the guard read it: a layer knows its own calls without searching the bytes. */
export function carries(request: ForwardRequest, method: string): boolean {
  const { one, batch } = request.calls;
  return one !== undefined ? one.method === method : batch.some((c) => c.method === method);
}

type Numbers = { readonly latest: number; readonly safe: number; readonly finalized: number };

/**
 * The call with `latest`, `safe` and `finalized` at its block parameter (a
 * range's fromBlock and toBlock, absent ones included: they mean `latest`)
 * replaced by the block numbers given (proxyd's tag rewriting); null when
 * there is nothing to rewrite.
 */
export function rewriteTags(call: Call, numbers: Numbers): string | null {
  if (call.at < 0) return null;
  const params = call.params.slice();
  if (call.from !== undefined) {
    const f = params[0] as { fromBlock?: unknown; toBlock?: unknown };
    const from = tagNumber(call.from, numbers);
    const to = tagNumber(call.block, numbers);
    if (from < 0 && to < 0) return null;
    params[0] = { ...f, ...(from < 0 ? {} : { fromBlock: hex(from) }), ...(to < 0 ? {} : { toBlock: hex(to) }) };
  } else {
    const n = tagNumber(call.block, numbers);
    if (n < 0) return null;
    while (params.length < call.at) params.push(null);
    const old = params[call.at];
    params[call.at] = old !== null && typeof old === 'object' && !Array.isArray(old) ? { ...(old as object), blockNumber: hex(n) } : hex(n);
  }
  return `{"jsonrpc":"2.0","id":${call.idJson},"method":${JSON.stringify(call.method)},"params":${JSON.stringify(params)}}`;
}

/** The number a tag is rewritten to (-1: not a tag rewritten, or its number is not known). */
function tagNumber(b: BlockRef, numbers: Numbers): number {
  return b === 'latest' || b === 'safe' || b === 'finalized' ? numbers[b] : -1;
}

const hex = (n: number): string => `0x${n.toString(16)}`;
