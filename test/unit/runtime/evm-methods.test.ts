// The method traits table (runtime/evm-methods.ts): every method the gateway
// knows has a row, a method it does not know is a write, and the rows agree
// with what the cache and the manifest checker say of the same methods.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { COUNTS, MAY_BE_EMPTY, METHOD_TRAITS, STATE_METHODS, traitsOf } from '../../../runtime/evm-methods.ts';
import { isCacheable } from '../../../runtime/cache/policy.ts';
import { WRITE_METHODS } from '../../../runtime/guards/evm-decision.ts';
import { KNOWN_METHODS, NOT_COMPARABLE } from '../../../generator/known-methods.ts';

const SPEC = JSON.parse(readFileSync(new URL('../../../schema/specs/eth-openrpc.json', import.meta.url), 'utf8')) as { methods: { name: string }[] };

describe('method traits', () => {
  it('every method the manifest checker knows, and every method of the interface spec, has a row', () => {
    const missing = [...KNOWN_METHODS, ...SPEC.methods.map((m) => m.name)].filter((m) => !METHOD_TRAITS.has(m));
    expect(missing).toEqual([]);
  });

  it('the table knows no method the manifest checker does not (no row for a misspelt name)', () => {
    expect([...METHOD_TRAITS.keys()].filter((m) => !KNOWN_METHODS.has(m))).toEqual([]);
  });

  it('a method the table does not know is a write: not a read, so never hedged nor sent again', () => {
    for (const m of ['eth_sendUserOperation', 'bor_getAuthor', 'eth_getbalance', '']) {
      expect(traitsOf(m)).toEqual({ read: false, mayBeEmpty: null, state: false, cacheable: false, filter: null });
    }
  });

  it('writes are not reads: the guard\'s, and every method quorum refuses as a write', () => {
    for (const m of WRITE_METHODS) expect(traitsOf(m).read, m).toBe(false);
    for (const [m, why] of NOT_COMPARABLE) if (why === 'write') expect(traitsOf(m).read, m).toBe(false);
    expect(traitsOf('eth_sendRawTransactionConditional').read).toBe(false);
  });

  it('filters are made on one node and used there: not reads, and marked new or use', () => {
    for (const m of ['eth_newFilter', 'eth_newBlockFilter', 'eth_newPendingTransactionFilter']) expect(traitsOf(m)).toMatchObject({ read: false, filter: 'new' });
    for (const m of ['eth_getFilterChanges', 'eth_getFilterLogs', 'eth_uninstallFilter']) expect(traitsOf(m)).toMatchObject({ read: false, filter: 'use' });
    expect([...METHOD_TRAITS].filter(([, t]) => t.filter !== null)).toHaveLength(6);
  });

  it('cacheable is what the cache\'s policy says', () => {
    for (const [m, t] of METHOD_TRAITS) expect(t.cacheable, m).toBe(isCacheable(m));
  });

  it('the pool\'s sets come from the table, and hold at least what they held before it', () => {
    for (const m of ['eth_getBalance', 'eth_getTransactionCount', 'eth_getCode', 'eth_getStorageAt', 'eth_call', 'eth_getProof', 'eth_estimateGas']) expect(STATE_METHODS.has(m), m).toBe(true);
    for (const m of [
      'eth_getBlockByNumber',
      'eth_getBlockByHash',
      'eth_getTransactionByHash',
      'eth_getTransactionReceipt',
      'eth_getTransactionByBlockHashAndIndex',
      'eth_getTransactionByBlockNumberAndIndex',
      'eth_getUncleByBlockHashAndIndex',
      'eth_getUncleByBlockNumberAndIndex',
    ])
      expect(MAY_BE_EMPTY.has(m), m).toBe(true);
    expect([...COUNTS].sort()).toEqual(['eth_getBlockTransactionCountByHash', 'eth_getBlockTransactionCountByNumber', 'eth_getUncleCountByBlockHash', 'eth_getUncleCountByBlockNumber']);
    for (const m of [...STATE_METHODS, ...MAY_BE_EMPTY, ...COUNTS]) expect(traitsOf(m).read, m).toBe(true);
  });
});
