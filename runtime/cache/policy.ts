// What the cache may keep of an EVM JSON-RPC answer, and until when, per
// method (docs/cache.md: "What is kept, and until when"). Anything not listed here is never cached
// nor coalesced: writes, answers that depend on the caller or the mempool, and
// node status.
import { blockParamAt } from '../evm-methods.ts';
import { blockOf, type BlockRef } from '../evm-call.ts';

/**
 * How long an answer may be served:
 *  - forever: it can never change (the chain id);
 *  - head: until the chain's head (number or hash) moves;
 *  - block: addressed by block number N: forever once N is final, until the head moves before that.
 */
export type Scope =
  | { readonly kind: 'forever' }
  | { readonly kind: 'head' }
  | { readonly kind: 'block'; readonly number: number }
  | { readonly kind: 'hash'; readonly located: Located };

/**
 * Where an answer addressed by hash says its block is: 'block' (a block: its
 * number and hash), 'tx' (a transaction or receipt: blockNumber and
 * blockHash). Such an answer is kept forever once that block is final and its
 * hash is the canonical one at that number; until the head moves before that.
 */
export type Located = 'block' | 'tx';

const FOREVER: Scope = { kind: 'forever' };
const HEAD: Scope = { kind: 'head' };
const BY_HASH: ReadonlyMap<string, Scope> = new Map<string, Scope>([
  ['eth_getBlockByHash', { kind: 'hash', located: 'block' }],
  ['eth_getTransactionByHash', { kind: 'hash', located: 'tx' }],
  ['eth_getTransactionReceipt', { kind: 'hash', located: 'tx' }],
  ['eth_getTransactionByBlockHashAndIndex', { kind: 'hash', located: 'tx' }],
]);

/** Methods the cache keeps by the block their parameter names (where it is: evm-methods.ts, the pool's table too). */
const AT_BLOCK = [
  // state at a block
  'eth_getBalance',
  'eth_getTransactionCount',
  'eth_getCode',
  'eth_getStorageAt',
  'eth_call',
  'eth_getProof',
  // blocks by number
  'eth_getBlockByNumber',
  'eth_getBlockTransactionCountByNumber',
  'eth_getUncleCountByBlockNumber',
  'eth_getTransactionByBlockNumberAndIndex',
  'eth_getUncleByBlockNumberAndIndex',
] as const;

/** Where a cacheable method's block parameter is (-1: none, the answer is bound to the head). */
const BLOCK_PARAM: ReadonlyMap<string, number> = new Map([
  ...AT_BLOCK.map((m) => [m, blockParamAt(m)!] as const),
  // by hash: a block can be reorged out, and some nodes keep answering for it;
  // those whose answer says where its block is may be kept forever (BY_HASH)
  ['eth_getBlockByHash', -1],
  ['eth_getBlockTransactionCountByHash', -1],
  ['eth_getUncleCountByBlockHash', -1],
  ['eth_getTransactionByBlockHashAndIndex', -1],
  ['eth_getUncleByBlockHashAndIndex', -1],
  ['eth_getTransactionByHash', -1],
  ['eth_getTransactionReceipt', -1],
  // the head itself
  ['eth_blockNumber', -1],
  ['eth_gasPrice', -1],
]);

const CONSTANT = new Set(['eth_chainId', 'net_version', 'web3_sha3']);

/**
 * How long an answer at the block a block parameter names may be kept: a
 * number, by that number; the tags bound to the head (`latest`, `safe`,
 * `finalized`) and a block hash, until the head moves; `pending`, or no block
 * the reader is sure of, never. The block is read by the one reader the pool
 * routes by (evm-call.ts `blockOf`).
 */
function scopeAt(b: BlockRef): Scope | null {
  if (typeof b === 'number') return { kind: 'block', number: b };
  return b === null || b === 'pending' ? null : HEAD;
}

/** May a call of this method ever be cached or coalesced? (Its params decide the rest: scopeOf.) */
export function isCacheable(method: string): boolean {
  return CONSTANT.has(method) || BLOCK_PARAM.has(method);
}

/** The scope of a call's answer, or null when it must not be cached or coalesced. */
export function scopeOf(method: string, params: unknown): Scope | null {
  if (CONSTANT.has(method)) return FOREVER;
  const at = BLOCK_PARAM.get(method);
  if (at === undefined) return null;
  if (at === -1) return BY_HASH.get(method) ?? HEAD;
  const list = params === undefined ? [] : params;
  if (!Array.isArray(list)) return null;
  return scopeAt(blockOf(list[at]));
}
