// What the cache may keep of an EVM JSON-RPC answer, and until when, per
// method (docs/cache.md: "What is kept, and until when"), as the method
// table's rows say (kinds/evm/methods.ts: the cache scope, where the block parameter
// is, where the answer names its block) read with a call's params. A method
// whose row has no cache scope is never cached nor coalesced: writes, answers
// that depend on the caller or the mempool, and node status.
import { METHOD_TRAITS, type Located } from './methods.ts';
import { blockOf, type BlockRef } from './call.ts';

/**
 * How long an answer may be served:
 *  - forever: it can never change (the chain id);
 *  - head: until the chain's head (number or hash) moves;
 *  - block: addressed by block number N: forever once N is final, until the head moves before that;
 *  - hash: addressed by hash, with its answer saying where its block is (`located`): forever once that block is
 *    final and its hash is the canonical one at that number, until the head moves before that.
 */
export type Scope =
  | { readonly kind: 'forever' }
  | { readonly kind: 'head' }
  | { readonly kind: 'block'; readonly number: number }
  | { readonly kind: 'hash'; readonly located: Located };

const FOREVER: Scope = { kind: 'forever' };
const HEAD: Scope = { kind: 'head' };
/** An answer addressed by hash whose answer says where its block is. */
const LOCATED: Readonly<Record<Located, Scope>> = {
  block: { kind: 'hash', located: 'block' },
  tx: { kind: 'hash', located: 'tx' },
};

/**
 * How long an answer at the block a block parameter names may be kept: a
 * number, by that number; the tags bound to the head (`latest`, `safe`,
 * `finalized`) and a block hash, until the head moves; `pending`, or no block
 * the reader is sure of, never. The block is read by the one reader the pool
 * routes by (kinds/evm/call.ts `blockOf`).
 */
function scopeAt(b: BlockRef): Scope | null {
  if (typeof b === 'number') return { kind: 'block', number: b };
  return b === null || b === 'pending' ? null : HEAD;
}

/** May a call of this method ever be cached or coalesced? (Its params decide the rest: scopeOf.) */
export function isCacheable(method: string): boolean {
  return (METHOD_TRAITS.get(method)?.cache ?? null) !== null;
}

/**
 * The scope of a call's answer, or null when it must not be cached or
 * coalesced: as the method table's row says (its cache scope, and where its
 * block parameter is or its answer names its block).
 */
export function scopeOf(method: string, params: unknown): Scope | null {
  const t = METHOD_TRAITS.get(method);
  if (t === undefined || t.cache === null) return null;
  if (t.cache === 'constant') return FOREVER;
  if (t.cache === 'head') return HEAD;
  if (t.block < 0) return t.located === null ? HEAD : LOCATED[t.located];
  const list = params === undefined ? [] : params;
  if (!Array.isArray(list)) return null;
  return scopeAt(blockOf(list[t.block]));
}
