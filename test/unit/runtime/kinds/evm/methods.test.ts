// The method table (runtime/kinds/evm/methods.ts), the one place that says what
// each EVM method is: every method the gateway knows has a row, a method it
// does not know is a write, the rows say of the 30 methods of the interface
// spec what its OpenRPC document says (where each names its block, where an
// answer names its block), and every reader (the guards, the Call, the
// cache's policy, the pool's learning) takes its facts from it.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { COUNTS, MAY_BE_EMPTY, METHOD_TRAITS, STATE_METHODS, traitsOf, WRITES } from '../../../../../runtime/kinds/evm/methods.ts';
import { isCacheable, scopeOf } from '../../../../../runtime/kinds/evm/cache-policy.ts';
import { checkEvmBody, checkEvmBodyGeneral } from '../../../../../runtime/kinds/evm/guard.ts';
import { Call } from '../../../../../runtime/kinds/evm/call.ts';
import { learnHashes } from '../../../../../runtime/kinds/evm/learn.ts';
import { KNOWN_METHODS, NOT_COMPARABLE } from '../../../../../generator/known-methods.ts';

interface Schema {
  readonly $ref?: string;
  readonly properties?: Record<string, unknown>;
  readonly oneOf?: readonly Schema[];
  readonly anyOf?: readonly Schema[];
  readonly allOf?: readonly Schema[];
}
interface Spec {
  readonly methods: readonly { name: string; params: readonly { name: string; schema: Schema }[]; result: { schema: Schema } }[];
  readonly components: { schemas: Record<string, Schema> };
}
const SPEC = JSON.parse(readFileSync(new URL('../../../../../schema/specs/eth-openrpc.json', import.meta.url), 'utf8')) as Spec;

const refName = (s: Schema): string | undefined => s.$ref?.slice('#/components/schemas/'.length);

/** The property names of every object a schema may be (its refs, oneOf, anyOf, allOf followed). */
function propsOf(s: Schema, seen: ReadonlySet<string> = new Set()): Set<string> {
  const ref = refName(s);
  if (ref !== undefined) return seen.has(ref) ? new Set() : propsOf(SPEC.components.schemas[ref]!, new Set([...seen, ref]));
  const out = new Set(Object.keys(s.properties ?? {}));
  for (const x of [...(s.oneOf ?? []), ...(s.anyOf ?? []), ...(s.allOf ?? [])]) for (const p of propsOf(x, seen)) out.add(p);
  return out;
}

const HASH = `0x${'ab'.repeat(32)}`;

describe('the method table', () => {
  it('every method the manifest checker knows, and every method of the interface spec, has a row', () => {
    const missing = [...KNOWN_METHODS, ...SPEC.methods.map((m) => m.name)].filter((m) => !METHOD_TRAITS.has(m));
    expect(missing).toEqual([]);
  });

  it('the table knows no method the manifest checker does not (no row for a misspelt name)', () => {
    expect([...METHOD_TRAITS.keys()].filter((m) => !KNOWN_METHODS.has(m))).toEqual([]);
  });

  it('a method the table does not know is a write: not a read, so never hedged nor sent again, never cached, naming no block', () => {
    for (const m of ['eth_sendUserOperation', 'bor_getAuthor', 'eth_getbalance', '']) {
      expect(traitsOf(m)).toEqual({ read: false, write: true, mayBeEmpty: null, state: false, block: -1, range: false, byHash: false, located: null, cache: null, filter: null, broadcast: false, contract: null });
      expect(isCacheable(m), m).toBe(false);
    }
  });

  describe('says of the 30 methods what their OpenRPC document says', () => {
    it('where the block parameter is: the param whose schema is a block number or tag (or hash)', () => {
      for (const m of SPEC.methods) {
        const at = m.params.findIndex((p) => ['BlockNumberOrTag', 'BlockNumberOrTagOrHash'].includes(refName(p.schema) ?? ''));
        expect(traitsOf(m.name).block, m.name).toBe(at);
      }
    });

    it('by hash: the first param is a block hash', () => {
      for (const m of SPEC.methods) {
        const first = m.params[0];
        expect(traitsOf(m.name).byHash, m.name).toBe(first !== undefined && first.name === 'Block hash' && refName(first.schema) === 'hash32');
      }
    });

    it('no range (a filter object) among them', () => {
      for (const m of SPEC.methods) expect(traitsOf(m.name).range, m.name).toBe(false);
    });

    it("where an answer names its block: a block's hash and number, or a transaction's or receipt's blockHash and blockNumber (an uncle is no block of the chain)", () => {
      for (const m of SPEC.methods) {
        const p = propsOf(m.result.schema);
        const spec = p.has('hash') && p.has('number') ? 'block' : p.has('blockHash') && p.has('blockNumber') ? 'tx' : null;
        // An uncle has a block's fields, but its hash is not the canonical one at its number: nothing is learned or
        // kept by it (the cache keeps an uncle until the head moves).
        const uncle = m.name.startsWith('eth_getUncleBy');
        expect(traitsOf(m.name).located, m.name).toBe(uncle ? null : spec);
      }
    });
  });

  it('writes are not reads, and are what quorum refuses as a write; eth_sendRawTransactionConditional is one', () => {
    for (const m of WRITES) expect(traitsOf(m).read, m).toBe(false);
    expect([...NOT_COMPARABLE].filter(([, why]) => why === 'write').map(([m]) => m).sort()).toEqual([...WRITES].sort());
    expect(WRITES.has('eth_sendRawTransactionConditional')).toBe(true);
    // Only a transaction is broadcast; the conditional one goes as any write (one upstream).
    expect([...METHOD_TRAITS].filter(([, t]) => t.broadcast).map(([m]) => m)).toEqual(['eth_sendRawTransaction']);
  });

  it('filters are made on one node and used there: not reads, not writes, and marked new or use', () => {
    for (const m of ['eth_newFilter', 'eth_newBlockFilter', 'eth_newPendingTransactionFilter']) expect(traitsOf(m)).toMatchObject({ read: false, write: false, filter: 'new' });
    for (const m of ['eth_getFilterChanges', 'eth_getFilterLogs', 'eth_uninstallFilter']) expect(traitsOf(m)).toMatchObject({ read: false, write: false, filter: 'use' });
    expect([...METHOD_TRAITS].filter(([, t]) => t.filter !== null)).toHaveLength(6);
  });

  it("the guard's request may be sent twice exactly when no call in it is a write, on its fast path and its general one", () => {
    const allowed = new Set(METHOD_TRAITS.keys());
    for (const [m, t] of METHOD_TRAITS) {
      const one = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: m, params: [] }));
      const batch = Buffer.from(JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, { jsonrpc: '2.0', id: 2, method: m, params: [] }]));
      for (const d of [checkEvmBody(one, allowed, 10), checkEvmBodyGeneral(one, allowed, 10), checkEvmBody(batch, allowed, 10), checkEvmBodyGeneral(batch, allowed, 10)]) {
        expect(d.kind === 'forward' && d.idempotent, m).toBe(!t.write);
      }
    }
  });

  it("a row's cache scope can be read: one kept by block names its block in a param or in its answer", () => {
    for (const [m, t] of METHOD_TRAITS) {
      if (t.cache === 'block') expect(t.block >= 0 || t.located !== null, m).toBe(true);
      if (t.cache !== null) expect(t.read && !t.write && t.filter === null, m).toBe(true);
      expect(isCacheable(m), m).toBe(t.cache !== null);
    }
    expect([...METHOD_TRAITS].filter(([, t]) => t.cache === 'constant').map(([m]) => m).sort()).toEqual(['eth_chainId', 'net_version', 'web3_sha3']);
    // By hash, scoped by what the answer names, else by the head; by number, by that block.
    expect(scopeOf('eth_getBlockByHash', [HASH, false])).toEqual({ kind: 'hash', located: 'block' });
    expect(scopeOf('eth_getTransactionReceipt', [HASH])).toEqual({ kind: 'hash', located: 'tx' });
    expect(scopeOf('eth_getUncleByBlockHashAndIndex', [HASH, '0x0'])).toEqual({ kind: 'head' });
    expect(scopeOf('eth_getBlockByNumber', ['0x10', false])).toEqual({ kind: 'block', number: 16 });
    expect(scopeOf('eth_getBlockReceipts', ['0x10'])).toBeNull();
  });

  it("the Call names its block where the row says: a block parameter, a block hash first, or a range's filter", () => {
    const call = (method: string, params: unknown[]) => Call.read(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }))!;
    expect(call('eth_getStorageAt', ['0x00', '0x0', '0x5']).block).toBe(5);
    expect(call('eth_feeHistory', ['0x4', '0x5', []]).block).toBe(5);
    expect(call('eth_getUncleCountByBlockHash', [HASH]).block).toEqual({ hash: HASH });
    expect(call('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2' }])).toMatchObject({ from: 1, block: 2 });
    expect(call('eth_getTransactionByHash', [HASH]).block).toBeNull();
  });

  it('the pool learns block hashes from the answers the row says name them', () => {
    const tx = Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"blockHash":"${HASH}","blockNumber":"0x7"}}`);
    for (const [m, t] of METHOD_TRAITS) {
      const learned: [string, number][] = [];
      learnHashes(m, tx, (h, n) => learned.push([h, n]));
      expect(learned, m).toEqual(t.located === null ? [] : [[HASH, 7]]);
    }
  });

  it("the pool's sets come from the table, and hold at least what they held before it", () => {
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
