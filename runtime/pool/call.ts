// What a pool needs to know of one EVM call to route it: its method, the block
// it names (a number, a tag, or a block hash; for a range, its two ends),
// whether it reads state or asks for something that may not be there yet, and
// its id as the client wrote it. The pool's own table of where each method's
// block parameter is: the cache's policy table (cache/policy.ts) is about what
// may be kept, this one about where a call may go.
import { answerSpans, MAX_ANSWER_DEPTH } from '../json-scan.ts';

export type BlockRef = number | 'latest' | 'safe' | 'finalized' | 'pending' | { readonly hash: string } | null;

export interface PoolCall {
  readonly method: string;
  readonly params: unknown[];
  /** The id's JSON text as the client wrote it (a long number keeps its digits). */
  readonly idJson: string;
  /** Where the block parameter is (-1: none); for a range, where its filter object is. */
  readonly at: number;
  /** The block the call is about; for a range, its upper end (toBlock) or its blockHash. */
  readonly block: BlockRef;
  /** A range's lower end (eth_getLogs' fromBlock); undefined for a call about one block. */
  readonly from?: BlockRef;
}

// Which methods read state, or may be empty: the method traits table's (evm-methods.ts).
export { COUNTS, MAY_BE_EMPTY, STATE_METHODS } from '../evm-methods.ts';

/** Where a method's block parameter is: a number, a tag, an EIP-1898 object or (eth_getBlockReceipts) a block hash. */
const BLOCK_PARAM: ReadonlyMap<string, number> = new Map([
  // state at a block
  ['eth_getBalance', 1],
  ['eth_getTransactionCount', 1],
  ['eth_getCode', 1],
  ['eth_getStorageAt', 2],
  ['eth_call', 1],
  ['eth_getProof', 2],
  ['eth_estimateGas', 1],
  // blocks by number
  ['eth_getBlockByNumber', 0],
  ['eth_getBlockTransactionCountByNumber', 0],
  ['eth_getUncleCountByBlockNumber', 0],
  ['eth_getTransactionByBlockNumberAndIndex', 0],
  ['eth_getUncleByBlockNumberAndIndex', 0],
  // a block's receipts; fee history up to its newest block
  ['eth_getBlockReceipts', 0],
  ['eth_feeHistory', 1],
]);

/** Methods whose first parameter is a filter object: fromBlock..toBlock (each `latest` when absent), or blockHash. */
const RANGES: ReadonlySet<string> = new Set(['eth_getLogs']);

/** Methods whose first parameter is a block hash. */
const BY_BLOCK_HASH: ReadonlySet<string> = new Set(['eth_getBlockByHash', 'eth_getBlockTransactionCountByHash', 'eth_getUncleCountByBlockHash', 'eth_getTransactionByBlockHashAndIndex', 'eth_getUncleByBlockHashAndIndex']);

const QUANTITY = /^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,12})$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;

/** A single call's routing facts; null for a batch, or a body that is not one call. */
export function readCall(body: Buffer | string | null): PoolCall | null {
  if (body === null) return null;
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  let first = 0;
  while (first < b.length && (b[first] === 0x20 || b[first] === 0x0a || b[first] === 0x0d || b[first] === 0x09)) first++;
  if (b[first] !== 0x7b) return null; // '{': a batch or nothing
  let doc: unknown;
  try {
    doc = JSON.parse(b.toString('utf8'));
  } catch {
    return null;
  }
  const spans = answerSpans(b, MAX_ANSWER_DEPTH);
  return callOf(doc, spans === null || spans.idStart === -1 ? 'null' : b.toString('utf8', spans.idStart, spans.idEnd));
}

/** The routing facts of one parsed call (a batch's item too), given its id's JSON text; null when it is not a call. */
export function callOf(doc: unknown, idJson: string): PoolCall | null {
  if (doc === null || typeof doc !== 'object') return null;
  const { method, params: p } = doc as { method?: unknown; params?: unknown };
  if (typeof method !== 'string') return null;
  const params = Array.isArray(p) ? p : [];
  if (BY_BLOCK_HASH.has(method)) return { method, params, idJson, at: -1, block: typeof params[0] === 'string' ? { hash: params[0] } : null };
  if (RANGES.has(method)) {
    const f = params[0];
    if (f === null || typeof f !== 'object' || Array.isArray(f)) return { method, params, idJson, at: -1, block: null };
    const o = f as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
    if (o.blockHash !== undefined) return { method, params, idJson, at: 0, block: typeof o.blockHash === 'string' ? { hash: o.blockHash } : null };
    return { method, params, idJson, at: 0, block: blockOf(o.toBlock), from: blockOf(o.fromBlock) };
  }
  const at = BLOCK_PARAM.get(method) ?? -1;
  return { method, params, idJson, at, block: at >= 0 ? blockOf(params[at]) : null };
}

function blockOf(v: unknown): BlockRef {
  if (v === undefined || v === 'latest') return 'latest';
  if (v === 'safe' || v === 'finalized' || v === 'pending') return v;
  if (v === 'earliest') return 0;
  if (typeof v === 'string') return QUANTITY.test(v) ? Number.parseInt(v, 16) : HASH.test(v) ? { hash: v } : null;
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as { blockNumber?: unknown; blockHash?: unknown };
    if (typeof o.blockHash === 'string') return { hash: o.blockHash };
    if (o.blockNumber !== undefined) return blockOf(o.blockNumber);
  }
  return null;
}

type Numbers = { readonly latest: number; readonly safe: number; readonly finalized: number };

/**
 * The call with `latest`, `safe` and `finalized` at its block parameter (a
 * range's fromBlock and toBlock, absent ones included: they mean `latest`)
 * replaced by the block numbers given (proxyd's tag rewriting); null when
 * there is nothing to rewrite.
 */
export function rewriteTags(call: PoolCall, numbers: Numbers): string | null {
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
