// The one reader of block parameters (kinds/evm/call.ts `blockOf`): the block the
// pool routes a call by (the Call's `block`) and the scope the cache keeps its
// answer for (kinds/evm/cache-policy.ts `scopeOf`) come from the same reading, as geth
// reads the parameter (rpc.BlockNumberOrHash). Before, each had its own reader
// and they disagreed on hex case, tags in EIP-1898 objects, hashes given as a
// string, and objects geth refuses or reads otherwise.
import { describe, expect, it } from 'vitest';
import { blockOf, Call, type BlockRef } from '../../../../../runtime/kinds/evm/call.ts';
import { scopeOf, type Scope } from '../../../../../runtime/kinds/evm/cache-policy.ts';
import { traitsOf } from '../../../../../runtime/kinds/evm/methods.ts';

const HASH = `0x${'ab'.repeat(32)}`;
const ADDR = '0x742d35cc6634c0532925a3b844bc454e4438f44e';

/** [the block parameter, the block it names, the cache's scope for an answer at it]. */
const CASES: readonly [unknown, BlockRef, Scope | null][] = [
  [undefined, 'latest', { kind: 'head' }],
  ['latest', 'latest', { kind: 'head' }],
  ['safe', 'safe', { kind: 'head' }],
  ['finalized', 'finalized', { kind: 'head' }],
  ['pending', 'pending', null],
  ['earliest', 0, { kind: 'block', number: 0 }],
  ['0x0', 0, { kind: 'block', number: 0 }],
  ['0x10', 16, { kind: 'block', number: 16 }],
  // geth's hexutil takes either case: the same block
  ['0xA', 10, { kind: 'block', number: 10 }],
  ['0xaBc', 0xabc, { kind: 'block', number: 0xabc }],
  // leading zeros, no digits, too long, not a quantity: geth refuses them
  ['0x010', null, null],
  ['0x00', null, null],
  ['0x', null, null],
  ['0X10', null, null],
  ['0x12345678901234', null, null],
  ['10', null, null],
  ['Latest', null, null],
  [16, null, null],
  [null, null, null],
  [['0x1'], null, null],
  // a hash: as a string or EIP-1898, until the head moves
  [HASH, { hash: HASH }, { kind: 'head' }],
  [{ blockHash: HASH }, { hash: HASH }, { kind: 'head' }],
  [{ blockHash: HASH, requireCanonical: true }, { hash: HASH }, { kind: 'head' }],
  [{ blockHash: '0x12' }, null, null],
  [{ blockHash: 7 }, null, null],
  // EIP-1898 by number: a tag or a quantity
  [{ blockNumber: '0x2' }, 2, { kind: 'block', number: 2 }],
  [{ blockNumber: '0xB' }, 11, { kind: 'block', number: 11 }],
  [{ blockNumber: 'latest' }, 'latest', { kind: 'head' }],
  [{ blockNumber: 'pending' }, 'pending', null],
  [{ blockNumber: 'earliest' }, 0, { kind: 'block', number: 0 }],
  [{ blockNumber: '0x2', requireCanonical: false }, 2, { kind: 'block', number: 2 }],
  [{ blockNumber: HASH }, null, null],
  [{ blockNumber: { blockHash: HASH } }, null, null],
  [{ blockNumber: null }, null, null],
  [{}, null, null],
  // both: geth refuses it ("cannot specify both BlockHash and BlockNumber, choose one or the other")
  [{ blockHash: HASH, blockNumber: '0x1' }, null, null],
  // any other key: Go matches keys case-insensitively, so it may be the block to the node
  [{ blockNumber: '0x1', BlockNumber: '0x2' }, null, null],
  [{ blockNumber: '0x1', BLOCKHASH: HASH }, null, null],
  [{ blockNumber: '0x1', note: 'x' }, null, null],
  [{ BlockNumber: '0x2' }, null, null],
];

/** The Call of a call with `param` at its block parameter (absent when undefined). */
function callWith(method: string, param: unknown): Call {
  // What comes before the block parameter does not matter to where it is.
  const params: unknown[] = Array.from({ length: traitsOf(method).block }, () => ADDR);
  if (param !== undefined) params.push(param);
  return Call.read(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }))!;
}

describe('the block-parameter reader', () => {
  it('reads each form as geth does, or says it cannot be sure (null)', () => {
    for (const [param, block] of CASES) expect(blockOf(param), JSON.stringify(param)).toEqual(block);
  });

  it("the pool's block (the Call's) and the cache's scope come from the same reading, for every method kept by block", () => {
    for (const method of ['eth_getBalance', 'eth_getTransactionCount', 'eth_getCode', 'eth_getStorageAt', 'eth_call', 'eth_getProof', 'eth_getBlockByNumber']) {
      for (const [param, block, scope] of CASES) {
        const call = callWith(method, param);
        const what = `${method} ${JSON.stringify(param)}`;
        expect(call.block, what).toEqual(block);
        expect(scopeOf(method, call.params), what).toEqual(scope);
      }
    }
  });

  it("a range's ends are block numbers or tags (rpc.BlockNumber), never a hash nor an object", () => {
    const range = (filter: object) => Call.read(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params: [filter] }))!;
    expect([range({}).from, range({}).block]).toEqual(['latest', 'latest']);
    expect([range({ fromBlock: '0xA', toBlock: 'safe' }).from, range({ fromBlock: '0xA', toBlock: 'safe' }).block]).toEqual([10, 'safe']);
    expect(range({ toBlock: HASH }).block).toBeNull();
    expect(range({ fromBlock: { blockNumber: '0x1' } }).from).toBeNull();
    expect(range({ blockHash: HASH }).block).toEqual({ hash: HASH });
  });
});
