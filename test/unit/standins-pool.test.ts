// The pool stand-ins of issue 33's consistency oracle (test/support/
// pool-standins.ts), each in front of a real anvil: the laggard shows exactly
// anvil's chain 3 blocks back (to the gateway's health polls too), the pruned
// node refuses exactly the state older than 16 blocks, with geth's error, and
// the healthy one is anvil. The oracle counts what a pool gets wrong; these
// prove that the pool gets wrong what it is meant to, and nothing else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mnemonicToAccount } from 'viem/accounts';
import { startAnvil, type Anvil, type JsonRpcResponse } from '../support/anvil.ts';
import { HEADER_NOT_FOUND, startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';
import { AnvilGate } from '../support/anvil-gate.ts';

const MNEMONIC = 'test test test test test test test test test test test junk';
const hex = (n: number): string => `0x${n.toString(16)}`;

let anvil: Anvil;
let laggard: PoolStandin;
let pruned: PoolStandin;
let healthy: PoolStandin;

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  await anvil.mine(40);
  [laggard, pruned, healthy] = await Promise.all([
    startPoolStandin(anvil.url, { role: 'laggard' }),
    startPoolStandin(anvil.url, { role: 'pruned' }),
    startPoolStandin(anvil.url, { role: 'healthy' }),
  ]);
}, 30_000);

afterAll(async () => {
  await Promise.all([laggard?.close(), pruned?.close(), healthy?.close()]);
  await anvil?.stop();
});

let id = 1;
async function rpc(s: { url: string }, method: string, params: unknown[] = [], headers: Record<string, string> = {}): Promise<JsonRpcResponse> {
  const r = await fetch(s.url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ jsonrpc: '2.0', id: id++, method, params }) });
  return (await r.json()) as JsonRpcResponse;
}
const head = async (): Promise<number> => Number((await anvil.rpc('eth_blockNumber')).result);
const block = async (n: number | string): Promise<Record<string, string>> => (await anvil.rpc('eth_getBlockByNumber', [typeof n === 'number' ? hex(n) : n, false])).result as Record<string, string>;

describe('pool stand-ins (issue 33)', () => {
  it('healthy: answers exactly what anvil answers, batches included', async () => {
    const n = await head();
    expect((await rpc(healthy, 'eth_blockNumber')).result).toBe(hex(n));
    expect((await rpc(healthy, 'eth_getBlockByNumber', ['latest', false])).result).toEqual(await block(n));
    const batch = await fetch(healthy.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] },
        { jsonrpc: '2.0', id: 8, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', '0x1'] },
      ]),
    });
    expect(await batch.json()).toEqual([
      { jsonrpc: '2.0', id: 7, result: '0x7a69' },
      { jsonrpc: '2.0', id: 8, result: '0x0' },
    ]);
  });

  it('laggard: its chain is anvil 3 blocks back, for blocks, transactions, receipts and state, and then catches up', async () => {
    const account = mnemonicToAccount(MNEMONIC, { addressIndex: 7 });
    const raw = await account.signTransaction({ chainId: 31337, nonce: 0, to: account.address, value: 0n, gas: 21_000n, maxFeePerGas: 10n ** 11n, maxPriorityFeePerGas: 10n ** 9n });
    // The send goes through the laggard (a lagging node still relays transactions).
    const hash = (await rpc(laggard, 'eth_sendRawTransaction', [raw])).result as string;
    await anvil.mine(1);
    const n = await head();
    const mined = (await anvil.rpc('eth_getTransactionReceipt', [hash])).result as { blockNumber: string; blockHash: string };
    expect(Number(mined.blockNumber)).toBe(n);
    const before = n - 3;

    expect((await rpc(laggard, 'eth_blockNumber')).result).toBe(hex(before));
    expect((await rpc(laggard, 'eth_getBlockByNumber', ['latest', false])).result).toEqual(await block(before));
    expect((await rpc(laggard, 'eth_getBlockByNumber', ['pending', false])).result).toEqual(await block(before));
    expect((await rpc(laggard, 'eth_getBlockByNumber', [hex(before), false])).result).toEqual(await block(before));
    for (const k of [before + 1, n]) expect((await rpc(laggard, 'eth_getBlockByNumber', [hex(k), false])).result, `block ${k}`).toBeNull();
    expect((await rpc(laggard, 'eth_getBlockByHash', [mined.blockHash, false])).result).toBeNull();
    expect((await rpc(laggard, 'eth_getTransactionByHash', [hash])).result).toBeNull();
    expect((await rpc(laggard, 'eth_getTransactionReceipt', [hash])).result).toBeNull();
    expect((await rpc(laggard, 'eth_getTransactionByBlockNumberAndIndex', [hex(n), '0x0'])).result).toBeNull();
    expect((await rpc(laggard, 'eth_getBlockTransactionCountByHash', [mined.blockHash])).result).toBeNull();

    // State: at a number above its head, geth's error; at latest, the state of its own head.
    const bal = await rpc(laggard, 'eth_getBalance', [account.address, hex(n)]);
    expect(bal.error).toEqual({ code: -32000, message: HEADER_NOT_FOUND });
    expect((await rpc(laggard, 'eth_getBalance', [account.address, { blockHash: mined.blockHash }])).error?.message).toBe(HEADER_NOT_FOUND);
    const atHead = (await anvil.rpc('eth_getTransactionCount', [account.address, hex(before)])).result;
    expect(atHead).toBe('0x0');
    expect((await anvil.rpc('eth_getTransactionCount', [account.address, 'latest'])).result).toBe('0x1');
    expect((await rpc(laggard, 'eth_getTransactionCount', [account.address, 'latest'])).result).toBe(atHead);
    expect((await rpc(laggard, 'eth_getTransactionCount', [account.address])).result).toBe(atHead);

    // Three blocks later its head has reached the transaction's block.
    await anvil.mine(3);
    expect((await rpc(laggard, 'eth_blockNumber')).result).toBe(hex(n));
    expect((await rpc(laggard, 'eth_getTransactionReceipt', [hash])).result).toEqual(mined);
    expect((await rpc(laggard, 'eth_getBlockByHash', [mined.blockHash, false])).result).toEqual(await block(n));
    expect((await rpc(laggard, 'eth_getTransactionCount', [account.address, 'latest'])).result).toBe('0x1');
    expect(laggard.altered.nulls).toBeGreaterThanOrEqual(7);
    expect(laggard.altered.headerNotFound).toBe(2);
  });

  it("laggard: the gateway's health polls (batches) see the lag too, and are recorded apart", async () => {
    const n = await head();
    const polls = laggard.healthChecks.length;
    const r = await fetch(laggard.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'chain-gateway-health/1' },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
        { jsonrpc: '2.0', id: 2, method: 'eth_getBlockByNumber', params: ['latest', false] },
        { jsonrpc: '2.0', id: 3, method: 'eth_getBlockByNumber', params: ['finalized', false] },
        { jsonrpc: '2.0', id: 4, method: 'eth_blockNumber', params: [] },
      ]),
    });
    const answers = (await r.json()) as { id: number; result: any }[];
    expect(answers.map((a) => a.id)).toEqual([1, 2, 3, 4]);
    expect(answers[1]!.result.number).toBe(hex(n - 3));
    expect(answers[2]!.result.number).toBe((await block('finalized')).number);
    expect(answers[3]!.result).toBe(hex(n - 3));
    expect(laggard.healthChecks.length).toBe(polls + 1);
  });

  it('pruned: state more than 16 blocks below the head fails with geth\'s missing trie node; newer state, blocks and receipts do not', async () => {
    const n = await head();
    const addr = mnemonicToAccount(MNEMONIC, { addressIndex: 7 }).address;
    const kept = n - 16;
    const gone = n - 17;
    expect((await rpc(pruned, 'eth_getBalance', [addr, hex(kept)])).result).toBe((await anvil.rpc('eth_getBalance', [addr, hex(kept)])).result);
    expect((await rpc(pruned, 'eth_getBalance', [addr, { blockNumber: hex(kept) }])).result).toBe((await anvil.rpc('eth_getBalance', [addr, hex(kept)])).result);
    const root = (await block(gone)).stateRoot!.slice(2);
    const refused = { code: -32000, message: `missing trie node ${root} (path )` };
    expect((await rpc(pruned, 'eth_getBalance', [addr, hex(gone)])).error).toEqual(refused);
    expect((await rpc(pruned, 'eth_getBalance', [addr, { blockHash: (await block(gone)).hash }])).error).toEqual(refused);
    expect((await rpc(pruned, 'eth_getTransactionCount', [addr, hex(gone)])).error).toEqual(refused);
    expect((await rpc(pruned, 'eth_getCode', [addr, hex(gone)])).error).toEqual(refused);
    expect((await rpc(pruned, 'eth_getStorageAt', [addr, '0x0', hex(gone)])).error).toEqual(refused);
    expect((await rpc(pruned, 'eth_call', [{ to: addr, data: '0x' }, hex(gone)])).error).toEqual(refused);
    expect((await rpc(pruned, 'eth_getProof', [addr, [], hex(gone)])).error).toEqual(refused);
    expect((await rpc(pruned, 'eth_getBalance', [addr, 'earliest'])).error?.message).toMatch(/^missing trie node [0-9a-f]{64} \(path \)$/);
    // latest and the head itself are kept; so are old blocks (only state is pruned)
    expect((await rpc(pruned, 'eth_getBalance', [addr, 'latest'])).result).toBe((await anvil.rpc('eth_getBalance', [addr, 'latest'])).result);
    expect((await rpc(pruned, 'eth_blockNumber')).result).toBe(hex(n));
    expect((await rpc(pruned, 'eth_getBlockByNumber', [hex(gone), false])).result).toEqual(await block(gone));
    expect(pruned.altered.missingTrieNode).toBe(8);
  });

  it('is steerable: a role or depth changed while it runs holds from the next request', async () => {
    const n = await head();
    laggard.lag = 5;
    expect((await rpc(laggard, 'eth_blockNumber')).result).toBe(hex(n - 5));
    laggard.role = 'healthy';
    expect((await rpc(laggard, 'eth_blockNumber')).result).toBe(hex(n));
    laggard.role = 'laggard';
    laggard.lag = 3;
    expect((await rpc(laggard, 'eth_blockNumber')).result).toBe(hex(n - 3));
    pruned.keep = 40;
    expect((await rpc(pruned, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', hex(n - 30)])).result).toBe('0x0');
    pruned.keep = 16;
  });
});

describe('AnvilGate: a change of the chain is atomic for every reader', () => {
  it('a change waits for the reads in flight, and reads that come during it wait for it', async () => {
    const gate = new AnvilGate();
    const log: string[] = [];
    let endA!: () => void;
    const a = gate.read(async () => {
      log.push('A start');
      await new Promise<void>((r) => (endA = r));
      log.push('A end');
    });
    await Promise.resolve();
    const w = gate.exclusive(async () => {
      log.push('W start');
      await new Promise((r) => setTimeout(r, 20));
      log.push('W end');
    });
    const b = gate.read(async () => void log.push('B'));
    await new Promise((r) => setTimeout(r, 20));
    expect(log).toEqual(['A start']);
    endA();
    await Promise.all([a, w, b]);
    expect(log).toEqual(['A start', 'A end', 'W start', 'W end', 'B']);
  });

  it("with it, no read through a stand-in sees an anvil_reorg half done (anvil's own reorg unwinds, then mines)", async () => {
    const gate = new AnvilGate();
    const gated = await startPoolStandin(anvil.url, { role: 'healthy', gate });
    try {
      const top = await head();
      const seen: string[] = [];
      let reading = true;
      const reader = async (): Promise<void> => {
        while (reading) {
          const [n, b] = await Promise.all([rpc(gated, 'eth_blockNumber'), rpc(gated, 'eth_getBlockByNumber', [hex(top), false])]);
          if (n.result !== hex(top)) seen.push(`eth_blockNumber ${String(n.result)}`);
          if (b.result === null) seen.push(`block ${top} null`);
        }
      };
      const readers = [reader(), reader(), reader(), reader()];
      for (let i = 0; i < 30; i++) {
        const r = await gate.exclusive(() => anvil.rpc('anvil_reorg', [3, []]));
        expect(r.error).toBeUndefined();
      }
      reading = false;
      await Promise.all(readers);
      expect(seen).toEqual([]);
    } finally {
      await gated.close();
    }
  });
});
