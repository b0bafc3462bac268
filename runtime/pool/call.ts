// What a pool needs to know of one EVM call to route it: its method, the block
// it names (a number, a tag, or a block hash), whether it reads state or asks
// for something that may not be there yet, and its id as the client wrote it.
import { blockParamAt } from '../cache/policy.ts';
import { answerSpans, MAX_ANSWER_DEPTH } from '../json-scan.ts';

export type BlockRef = number | 'latest' | 'safe' | 'finalized' | 'pending' | { readonly hash: string } | null;

export interface PoolCall {
  readonly method: string;
  readonly params: unknown[];
  /** The id's JSON text as the client wrote it (a long number keeps its digits). */
  readonly idJson: string;
  /** Where the block parameter is (-1: none). */
  readonly at: number;
  readonly block: BlockRef;
}

// Which methods read state, or may be empty: the method traits table's (evm-methods.ts).
export { COUNTS, MAY_BE_EMPTY, STATE_METHODS } from '../evm-methods.ts';

/** Methods whose first parameter is a block hash. */
const BY_BLOCK_HASH: ReadonlySet<string> = new Set(['eth_getBlockByHash', 'eth_getBlockTransactionCountByHash', 'eth_getUncleCountByBlockHash', 'eth_getTransactionByBlockHashAndIndex', 'eth_getUncleByBlockHashAndIndex']);

const QUANTITY = /^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,12})$/;

/** A single call's routing facts; null for a batch, or a body that is not one call. */
export function readCall(body: Buffer | string | null): PoolCall | null {
  if (body === null) return null;
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  let first = 0;
  while (first < b.length && (b[first] === 0x20 || b[first] === 0x0a || b[first] === 0x0d || b[first] === 0x09)) first++;
  if (b[first] !== 0x7b) return null; // '{': a batch or nothing
  let doc: { method?: unknown; params?: unknown };
  try {
    doc = JSON.parse(b.toString('utf8')) as typeof doc;
  } catch {
    return null;
  }
  if (doc === null || typeof doc !== 'object' || typeof doc.method !== 'string') return null;
  const spans = answerSpans(b, MAX_ANSWER_DEPTH);
  const idJson = spans === null || spans.idStart === -1 ? 'null' : b.toString('utf8', spans.idStart, spans.idEnd);
  const params = Array.isArray(doc.params) ? doc.params : [];
  const method = doc.method;
  let at = blockParamAt(method) ?? -1;
  if (method === 'eth_estimateGas') at = 1;
  let block: BlockRef = null;
  if (BY_BLOCK_HASH.has(method)) block = typeof params[0] === 'string' ? { hash: params[0] } : null;
  else if (at >= 0) block = blockOf(params[at]);
  return { method, params, idJson, at: BY_BLOCK_HASH.has(method) ? -1 : at, block };
}

function blockOf(v: unknown): BlockRef {
  if (v === undefined || v === 'latest') return 'latest';
  if (v === 'safe' || v === 'finalized' || v === 'pending') return v;
  if (v === 'earliest') return 0;
  if (typeof v === 'string') return QUANTITY.test(v) ? Number.parseInt(v, 16) : null;
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as { blockNumber?: unknown; blockHash?: unknown };
    if (typeof o.blockHash === 'string') return { hash: o.blockHash };
    if (o.blockNumber !== undefined) return blockOf(o.blockNumber);
  }
  return null;
}

/**
 * The call with `latest`, `safe` and `finalized` at its block parameter
 * replaced by the block numbers given (proxyd's tag rewriting); null when
 * there is nothing to rewrite.
 */
export function rewriteTags(call: PoolCall, numbers: { readonly latest: number; readonly safe: number; readonly finalized: number }): string | null {
  const b = call.block;
  if (call.at < 0 || (b !== 'latest' && b !== 'safe' && b !== 'finalized')) return null;
  const n = numbers[b];
  if (n < 0) return null;
  const params = call.params.slice();
  while (params.length < call.at) params.push(null);
  const hex = `0x${n.toString(16)}`;
  const old = params[call.at];
  params[call.at] = old !== null && typeof old === 'object' && !Array.isArray(old) ? { ...(old as object), blockNumber: hex } : hex;
  return `{"jsonrpc":"2.0","id":${call.idJson},"method":${JSON.stringify(call.method)},"params":${JSON.stringify(params)}}`;
}
