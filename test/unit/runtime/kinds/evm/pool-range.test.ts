// What a pool reads of range methods and of answers (issue 37, defects 2 and 5),
// without HTTP: the block references of eth_getLogs, eth_getBlockReceipts and
// eth_feeHistory (kinds/evm/pool-call.ts), their tags rewritten, and the block hashes
// learned from answers (kinds/evm/learn.ts).
import { describe, expect, it } from 'vitest';
import { readCall, rewriteTags } from '../../../../../runtime/kinds/evm/pool-call.ts';
import { learnHashes } from '../../../../../runtime/kinds/evm/learn.ts';

const NUMBERS = { latest: 100, safe: 90, finalized: 80 };
const H1 = `0x${'ab'.repeat(32)}`;
const H2 = `0x${'cd'.repeat(32)}`;
const body = (method: string, params: unknown[]) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
const rewritten = (method: string, params: unknown[]) => {
  const out = rewriteTags(readCall(body(method, params))!, NUMBERS);
  return out === null ? null : (JSON.parse(out) as { params: unknown[] }).params;
};

describe('range methods: where their blocks are', () => {
  it('eth_getLogs: fromBlock..toBlock (absent: latest), or a blockHash', () => {
    expect(readCall(body('eth_getLogs', [{ fromBlock: '0x10', toBlock: '0x20' }]))).toMatchObject({ at: 0, from: 16, block: 32 });
    expect(readCall(body('eth_getLogs', [{ fromBlock: '0x10' }]))).toMatchObject({ at: 0, from: 16, block: 'latest' });
    expect(readCall(body('eth_getLogs', [{ address: '0x1' }]))).toMatchObject({ at: 0, from: 'latest', block: 'latest' });
    expect(readCall(body('eth_getLogs', [{ blockHash: H1 }]))).toMatchObject({ at: 0, block: { hash: H1 } });
    expect(readCall(body('eth_getLogs', [{ blockHash: H1 }]))!.from).toBeUndefined();
  });

  it('eth_getBlockReceipts: its block, by number, tag or hash; eth_feeHistory: its newest block', () => {
    expect(readCall(body('eth_getBlockReceipts', ['0x20']))).toMatchObject({ at: 0, block: 32 });
    expect(readCall(body('eth_getBlockReceipts', [H1]))).toMatchObject({ at: 0, block: { hash: H1 } });
    expect(readCall(body('eth_feeHistory', ['0x4', 'latest', [50]]))).toMatchObject({ at: 1, block: 'latest' });
  });

  it("rewrites a range's tags, absent ends included, and leaves numbers and hashes alone", () => {
    expect(rewritten('eth_getLogs', [{ fromBlock: 'finalized', toBlock: 'latest', address: '0x1' }])).toEqual([{ fromBlock: '0x50', toBlock: '0x64', address: '0x1' }]);
    expect(rewritten('eth_getLogs', [{ fromBlock: '0x10' }])).toEqual([{ fromBlock: '0x10', toBlock: '0x64' }]);
    expect(rewritten('eth_getLogs', [{}])).toEqual([{ fromBlock: '0x64', toBlock: '0x64' }]);
    expect(rewritten('eth_getLogs', [{ fromBlock: '0x10', toBlock: '0x20' }])).toBeNull();
    expect(rewritten('eth_getLogs', [{ blockHash: H1 }])).toBeNull();
    expect(rewritten('eth_feeHistory', ['0x4', 'latest', [50]])).toEqual(['0x4', '0x64', [50]]);
    expect(rewritten('eth_getBlockReceipts', ['safe'])).toEqual(['0x5a']);
  });
});

describe('block hashes learned from answers', () => {
  const learned = (method: string, result: unknown) => {
    const out: [string, number][] = [];
    learnHashes(method, Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, result })), (h, n) => out.push([h, n]));
    return out;
  };

  it('logs and receipts: each blockHash with its blockNumber, whatever the key order', () => {
    const logs = [
      { blockNumber: '0x10', blockHash: H1, logIndex: '0x0' },
      { blockNumber: '0x11', blockHash: H2, logIndex: '0x0' },
    ];
    expect(learned('eth_getLogs', logs)).toEqual([
      [H1, 16],
      [H2, 17],
    ]);
    expect(learned('eth_getTransactionReceipt', { blockHash: H2, blockNumber: '0x11', logs: [{ blockNumber: '0x11', blockHash: H2 }] })).toEqual([[H2, 17]]);
  });

  it("a block: its own hash and number (with its transactions' hashes beside it too)", () => {
    expect(learned('eth_getBlockByNumber', { hash: H1, number: '0x10', parentHash: H2, transactions: [] })).toEqual([[H1, 16]]);
    const full = { hash: H1, number: '0x10', transactions: [{ hash: H2, blockHash: H1, blockNumber: '0x10' }] };
    expect(learned('eth_getBlockByHash', full)).toEqual([[H1, 16]]);
  });

  it('nothing from a pending transaction, from null, or from a method whose answer carries no block', () => {
    expect(learned('eth_getTransactionByHash', { hash: H2, blockHash: null, blockNumber: null })).toEqual([]);
    expect(learned('eth_getBlockByNumber', null)).toEqual([]);
    expect(learned('eth_call', { blockHash: H1, blockNumber: '0x1' })).toEqual([]);
  });
});
