// The cache's pieces on their own: what each method may keep (policy.ts) and
// the byte-bounded LRU (store.ts). The end-to-end proof against anvil is in
// test/e2e/cache.test.ts.
import { describe, expect, it } from 'vitest';
import { scopeOf } from '../../../../../runtime/kinds/evm/cache-policy.ts';
import { CacheStats, CacheStore } from '../../../../../runtime/cache/store.ts';
import { answerSpans } from '../../../../../runtime/jsonrpc/answer.ts';

const ADDR = '0x00000000000000000000000000000000000000aa';
const HASH = `0x${'ab'.repeat(32)}`;

describe('cache policy', () => {
  it('keeps constants forever, head-bound reads until the head moves, and reads by number by that number', () => {
    expect(scopeOf('eth_chainId', [])).toEqual({ kind: 'forever' });
    expect(scopeOf('net_version', undefined)).toEqual({ kind: 'forever' });
    expect(scopeOf('web3_sha3', ['0x68656c6c6f'])).toEqual({ kind: 'forever' });
    for (const m of ['eth_blockNumber', 'eth_gasPrice', 'eth_getBlockTransactionCountByHash', 'eth_getUncleCountByBlockHash', 'eth_getUncleByBlockHashAndIndex']) {
      expect(scopeOf(m, [HASH]), m).toEqual({ kind: 'head' });
    }
    // By hash, where the answer says its block: forever once that block is final and canonical.
    expect(scopeOf('eth_getBlockByHash', [HASH, false])).toEqual({ kind: 'hash', located: 'block' });
    for (const m of ['eth_getTransactionReceipt', 'eth_getTransactionByHash', 'eth_getTransactionByBlockHashAndIndex']) {
      expect(scopeOf(m, [HASH]), m).toEqual({ kind: 'hash', located: 'tx' });
    }
    expect(scopeOf('eth_getBalance', [ADDR, 'latest'])).toEqual({ kind: 'head' });
    expect(scopeOf('eth_getBalance', [ADDR])).toEqual({ kind: 'head' });
    expect(scopeOf('eth_getBalance', [ADDR, 'finalized'])).toEqual({ kind: 'head' });
    expect(scopeOf('eth_getBalance', [ADDR, 'safe'])).toEqual({ kind: 'head' });
    expect(scopeOf('eth_getBalance', [ADDR, '0x10'])).toEqual({ kind: 'block', number: 16 });
    expect(scopeOf('eth_getBalance', [ADDR, 'earliest'])).toEqual({ kind: 'block', number: 0 });
    expect(scopeOf('eth_getStorageAt', [ADDR, '0x0', '0x1'])).toEqual({ kind: 'block', number: 1 });
    expect(scopeOf('eth_call', [{ to: ADDR }, { blockNumber: '0x2' }])).toEqual({ kind: 'block', number: 2 });
    expect(scopeOf('eth_call', [{ to: ADDR }, { blockHash: HASH }])).toEqual({ kind: 'head' });
    expect(scopeOf('eth_getBlockByNumber', ['0x5', false])).toEqual({ kind: 'block', number: 5 });
    expect(scopeOf('eth_getBlockByNumber', ['latest', true])).toEqual({ kind: 'head' });
  });

  it('keeps nothing at pending, nothing with a block parameter it cannot read, and never writes or caller-bound calls', () => {
    expect(scopeOf('eth_getBalance', [ADDR, 'pending'])).toBeNull();
    expect(scopeOf('eth_getTransactionCount', [ADDR, 'pending'])).toBeNull();
    expect(scopeOf('eth_getBlockByNumber', ['pending', false])).toBeNull();
    expect(scopeOf('eth_getBalance', [ADDR, '0x010'])).toBeNull(); // leading zero: not a quantity
    expect(scopeOf('eth_getBalance', [ADDR, 16])).toBeNull();
    expect(scopeOf('eth_call', [{ to: ADDR }, { blockHash: HASH, blockNumber: '0x1' }])).toBeNull();
    expect(scopeOf('eth_getBalance', { address: ADDR })).toBeNull();
    for (const m of ['eth_sendRawTransaction', 'eth_getWork', 'eth_estimateGas', 'eth_syncing', 'eth_mining', 'net_listening', 'web3_clientVersion', 'eth_newFilter']) {
      expect(scopeOf(m, []), m).toBeNull();
    }
  });
});

describe('cache store', () => {
  const b = (n: number) => Buffer.alloc(n, 0x61);

  it('evicts the oldest unread entries first to stay within its bytes, and counts them per chain', () => {
    const store = new CacheStore(4096);
    const a = new CacheStats('a');
    const c = new CacheStats('c');
    for (let i = 0; i < 10; i++) store.set(`k${i}`, b(300), b(100), -1, '', -1, i % 2 === 0 ? a : c);
    expect(store.size).toBeLessThanOrEqual(4096);
    expect(a.bytes + c.bytes).toBe(store.size);
    expect(a.evictions + c.evictions).toBeGreaterThan(0);
    expect(store.get('k0')).toBeUndefined();
    expect(store.get('k9')).toBeDefined();
  });

  it('keeps an entry that was read over an older unread one when it must evict', () => {
    const store = new CacheStore(4000);
    const s = new CacheStats('x');
    store.set('old', b(800), b(0), -1, '', -1, s);
    store.set('mid', b(800), b(0), -1, '', -1, s);
    store.get('old');
    for (const k of ['new', 'newer', 'newest']) store.set(k, b(800), b(0), -1, '', -1, s);
    expect(s.evictions).toBe(1);
    expect(store.get('mid')).toBeUndefined();
    expect(store.get('old')).toBeDefined();
  });

  it('passes over an entry read since the hand last passed it, and evicts the next one in the order they came', () => {
    const store = new CacheStore(5 * 1000);
    const s = new CacheStats('x');
    const size = (key: string) => 1000 - key.length * 2 - 160; // each entry costs 1,000 bytes with the key and overhead
    const put = (key: string) => store.set(key, b(size(key)), b(0), -1, '', -1, s);
    for (const k of ['k1', 'k2', 'k3', 'k4', 'k5']) put(k); // full
    store.get('k1');
    store.get('k3');
    put('k6'); // k1 is passed over (and unmarked), k2 goes
    expect(store.peek('k2')).toBeUndefined();
    put('k7'); // the hand goes on from k3: passed over, k4 goes
    expect(store.peek('k4')).toBeUndefined();
    put('k8'); // k5 goes
    expect(store.peek('k5')).toBeUndefined();
    put('k9'); // k6 (new, never read) goes before k1 and k3, unmarked on the hand's first pass, come round again
    expect(store.peek('k6')).toBeUndefined();
    expect(['k1', 'k3', 'k7', 'k8', 'k9'].every((k) => store.peek(k) !== undefined)).toBe(true);
    expect(s.evictions).toBe(4);
    expect(store.size).toBe(5000);
  });

  it('never evicts the entry it makes room for, even when every other entry was read', () => {
    const store = new CacheStore(4 * 1000);
    const s = new CacheStats('x');
    for (const k of ['a1', 'a2', 'a3', 'a4']) store.set(k, b(1000 - 4 - 160), b(0), -1, '', -1, s);
    for (const k of ['a1', 'a2', 'a3', 'a4']) store.get(k);
    const e = store.set('a5', b(1000 - 4 - 160), b(0), -1, '', -1, s);
    expect(e).not.toBeNull();
    expect(store.peek('a5')).toBe(e);
    expect(store.peek('a1')).toBeUndefined(); // all were read: a full round unmarks them, then the first goes
    expect(s.evictions).toBe(1);
  });

  it('reads without moving entries: a hit leaves the Map as it was', () => {
    const store = new CacheStore(1 << 20);
    const s = new CacheStats('x');
    for (let i = 0; i < 100; i++) store.set(`k${i}`, b(10), b(0), -1, '', -1, s);
    const order = () => [...(store as unknown as { entries: Map<string, unknown> }).entries.keys()];
    const before = order();
    for (let i = 0; i < 1000; i++) store.get(`k${i % 7}`);
    expect(order()).toEqual(before);
  });

  it('refuses an entry larger than a quarter of the budget', () => {
    const store = new CacheStore(4000);
    const s = new CacheStats('x');
    expect(store.set('big', b(1000), b(0), -1, '', -1, s)).toBeNull();
    expect(store.size).toBe(0);
    expect(store.set('small', b(500), b(0), -1, '', -1, s)).not.toBeNull();
  });
});

describe('answerSpans', () => {
  it('finds the id and the result of an answer, wherever they are, and says when it is an error', () => {
    const t = Buffer.from('{"result":{"a":[1,{"id":5}]},"jsonrpc":"2.0","id":"x"}');
    const s = answerSpans(t, 64)!;
    expect(t.toString('utf8', s.idStart, s.idEnd)).toBe('"x"');
    expect(t.toString('utf8', s.resultStart, s.resultEnd)).toBe('{"a":[1,{"id":5}]}');
    expect(s.hasError).toBe(false);
    expect(answerSpans(Buffer.from('{"jsonrpc":"2.0","id":1,"error":{"code":1}}'), 64)).toMatchObject({ hasError: true, resultStart: -1 });
    expect(answerSpans(Buffer.from('{"id":1,"id":2,"result":1}'), 64)).toBeNull();
    expect(answerSpans(Buffer.from('[{"id":1,"result":1}]'), 64)).toBeNull();
    expect(answerSpans(Buffer.from('{"id":1,"result":1} {}'), 64)).toBeNull();
  });
});
