// A JSON-RPC batch through a pool (issue 37, defect 1): each call of a batch
// crosses the pool as if it had come alone, a client's batch and the cache's
// batched misses alike (runtime/pool/batch.ts). One anvil holds the history;
// in front of it:
//  - `pool`: a laggard 3 blocks behind and a healthy node
//    (test/support/pool-standins.ts). The served tip is the laggard's head
//    (servedTip: all), so before the change a batch went whole to either
//    node: the healthy one answered eth_blockNumber above the tip, the laggard
//    null and `header not found` for blocks the client had been shown;
//  - `quorum` (no cache) and `quorumcache` (the cache, misses batched):
//    anvil and a node that lies about some balances
//    (test/support/lying-node.ts), with a quorum of two for eth_getBalance.
//    Before the change a batch went whole to one of them, the liar included;
//  - `short`: a quorum of three over anvil, the liar and a node that is down:
//    eth_getBalance can never have its quorum (no usable upstream, -32052),
//    the other calls are answered: what a failed call of a batch becomes.
// Real clients (viem with batch: true, ethers v6's default batching) run
// against `pool` too. Every answer is checked against anvil.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { createPublicClient, defineChain, http } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { FetchRequest, JsonRpcProvider, Network } from 'ethers';
import { metricValue, newKey, pipelinedRequests, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';
import { startLyingNode, type LyingNode } from '../support/lying-node.ts';
import { close, createSafeServer, listen } from '../support/http.ts';

const KEY = newKey();
const CHAIN_ID = 31337;
const MNEMONIC = 'test test test test test test test test test test test junk';
const dev = (i: number): string => mnemonicToAccount(MNEMONIC, { addressIndex: i }).address;
/** The liar's balances are wrong for these (dev accounts 1-3), right for 4-6. */
const LIED = [dev(1), dev(2), dev(3)];
const TOLD = [dev(4), dev(5), dev(6)];

let anvil: Anvil;
let healthy: PoolStandin;
let laggard: PoolStandin;
let liar: LyingNode;
let rig: Gateway;
let gw: RunningGateway;
/** A port nothing listens on: an upstream that is down. */
let down = '';

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  await anvil.mine(40);
  [healthy, laggard, liar] = await Promise.all([startPoolStandin(anvil.url, { role: 'healthy' }), startPoolStandin(anvil.url, { role: 'laggard', lag: 3 }), startLyingNode(anvil.url, LIED)]);
  const gone = createSafeServer((_req, res) => void res.end());
  down = await listen(gone);
  await close(gone);
  rig = await gateway({
    name: 'pool-batch',
    chains: [
      evmChain('pool', ['LAGGARD', 'HEALTHY'], { chainId: CHAIN_ID, cache: 'off' }),
      evmChain('quorum', ['ANVIL', 'LIAR'], { cache: 'off', quorum: { methods: ['eth_getBalance'], of: 2 } }),
      evmChain('quorumcache', ['ANVIL', 'LIAR'], { quorum: { methods: ['eth_getBalance'], of: 2 } }),
      evmChain('short', ['ANVIL', 'LIAR', 'DOWN'], { cache: 'off', quorum: { methods: ['eth_getBalance'], of: 3 } }),
    ],
    header: { cache: { maxBytes: 8388608, headPollMs: 200, batch: 8 }, health: { intervalMs: 200, timeoutMs: 1000 } },
    keys: [{ id: 'batch', key: KEY }],
    standIns: { ANVIL: anvil, LAGGARD: laggard, HEALTHY: healthy, LIAR: liar },
    env: { DOWN: down },
  });
  gw = rig.gw;
  // Every node polled: the served tip is the laggard's head (a tip set before the laggard's first report stays
  // until the laggard passes it: a few blocks more), and the quorum chains have both nodes at the tip.
  await anvil.mine(4);
  await until(async () => (await single('pool', 'eth_blockNumber', [])).result === hex((await anvilHead()) - 3), 'the pool serves the laggard\'s head');
  for (const chain of ['quorum', 'quorumcache']) {
    await until(async () => (await single(chain, 'eth_getBalance', [TOLD[0], 'latest'])).result !== undefined, `${chain}: a quorum at the tip`);
  }
}, 60_000);

afterAll(() => rig?.close());

const hex = (n: number): string => `0x${n.toString(16)}`;
const anvilHead = async (): Promise<number> => Number((await anvil.rpc('eth_blockNumber')).result);

interface Answer {
  readonly jsonrpc?: string;
  readonly id?: unknown;
  readonly result?: any;
  readonly error?: { code: number; message: string; data?: any };
}

let nextId = 1;
async function post(chain: string, body: string): Promise<{ status: number; text: string }> {
  const r = await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body });
  return { status: r.statusCode, text: await r.body.text() };
}
async function single(chain: string, method: string, params: unknown[]): Promise<Answer> {
  return JSON.parse((await post(chain, JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }))).text) as Answer;
}
/** A batch of calls; its answer items by the client's order (checked: one per call, the ids in order). */
async function batch(chain: string, calls: readonly (readonly [string, unknown[]])[]): Promise<Answer[]> {
  const ids = calls.map(() => nextId++);
  const r = await post(chain, JSON.stringify(calls.map(([method, params], i) => ({ jsonrpc: '2.0', id: ids[i], method, params }))));
  expect(r.status, r.text).toBe(200);
  const items = JSON.parse(r.text) as Answer[];
  expect(items.map((a) => a.id), r.text).toEqual(ids);
  return items;
}

describe('a client batch through a pool with a laggard', () => {
  it('eth_blockNumber in a batch answers the served tip and never goes backwards; the block it names is never null, and state at it never `header not found`', async () => {
    let last = -1;
    for (let round = 0; round < 16; round++) {
      const [n, chainId] = await batch('pool', [
        ['eth_blockNumber', []],
        ['eth_chainId', []],
      ]);
      expect(chainId!.result).toBe(hex(CHAIN_ID));
      const tip = Number(n!.result);
      // The served tip: what a lone eth_blockNumber says right after (the pool's tip only moves up here).
      expect(tip, `round ${round}: a batch's eth_blockNumber above the served tip`).toBeLessThanOrEqual(Number((await single('pool', 'eth_blockNumber', [])).result));
      expect(tip, `round ${round}: eth_blockNumber went back`).toBeGreaterThanOrEqual(last);
      last = tip;
      const [block, balance, count] = await batch('pool', [
        ['eth_getBlockByNumber', [hex(tip), false]],
        ['eth_getBalance', [dev(0), hex(tip)]],
        ['eth_getTransactionCount', [dev(0), hex(tip)]],
      ]);
      expect(block!.result, `round ${round}: block ${tip}, which the client was told exists`).not.toBeNull();
      expect(block!.result.hash).toBe(((await anvil.rpc('eth_getBlockByNumber', [hex(tip), false])).result as { hash: string }).hash);
      expect(balance!.error, `round ${round}: state at ${tip}`).toBeUndefined();
      expect(balance!.result).toBe((await anvil.rpc('eth_getBalance', [dev(0), hex(tip)])).result);
      expect(count!.error).toBeUndefined();
      if (round % 4 === 3) await anvil.mine(1);
    }
    // Both nodes took calls of the batches: the laggard was asked, about what it has.
    expect(laggard.requests.filter((r) => !Array.isArray(r.json)).length).toBeGreaterThan(0);
  }, 30_000);

  it('keeps each item\'s id bytes (a 30-digit number, a string), answers in the client\'s order, and gives a notification no item', async () => {
    const head = Number((await single('pool', 'eth_blockNumber', [])).result);
    // anvil refuses ids past 2^64: the 30-digit one goes on eth_blockNumber, which the pool answers itself.
    const body = `[{"jsonrpc":"2.0","id":"a","method":"eth_getBlockByNumber","params":["${hex(head)}",false]},{"jsonrpc":"2.0","method":"eth_chainId","params":[]},{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"eth_blockNumber","params":[]}]`;
    const r = await post('pool', body);
    expect(r.status).toBe(200);
    // The served tip, which may have moved on since `head` was read.
    expect(r.text).toMatch(/,\{"jsonrpc":"2\.0","id":123456789012345678901234567890,"result":"0x[0-9a-f]+"\}\]$/);
    const items = JSON.parse(r.text) as Answer[];
    expect(items).toHaveLength(2);
    expect(items[0]!.id).toBe('a');
    expect(items[0]!.result.number).toBe(hex(head));
    expect(Number(items[1]!.result)).toBeGreaterThanOrEqual(head);
  });
});

describe('a quorum of two and a node that lies about balances', () => {
  /** What a lone call gets for each address at block `n`: anvil's balance, or -32603 "upstreams disagree" where the liar lies. */
  async function expectEach(items: readonly Answer[], addresses: readonly string[], n: number | 'latest'): Promise<void> {
    for (const [i, a] of addresses.entries()) {
      const item = items[i]!;
      if (LIED.includes(a)) {
        expect(item.result, `${a}: a balance served though the nodes disagree (one of them the liar's)`).toBeUndefined();
        expect(item.error).toMatchObject({ code: -32603, data: { reason: 'upstreams disagree' } });
      } else expect(item.result).toBe((await anvil.rpc('eth_getBalance', [a, n === 'latest' ? n : hex(n)])).result);
    }
  }
  const ADDRESSES = [LIED[0]!, TOLD[0]!, LIED[1]!, TOLD[1]!, LIED[2]!, TOLD[2]!];

  it('a client batch of eth_getBalance calls never gets the liar\'s answer: each call is asked of both', async () => {
    for (let round = 0; round < 4; round++) {
      const items = await batch(
        'quorum',
        ADDRESSES.map((a) => ['eth_getBalance', [a, 'latest']] as const),
      );
      await expectEach(items, ADDRESSES, 'latest');
    }
  });

  it('the cache\'s batched misses (six single calls in one turn) never get the liar\'s answer', async () => {
    const head = await anvilHead();
    const batchesBefore = await metricValue(gw, 'gateway_cache_batches_total', '{chain="quorumcache"}');
    for (let round = 0; round < 3; round++) {
      const n = head - 1 - round;
      const answers = await pipelinedRequests(
        gw.ports.rpc!,
        '/quorumcache',
        KEY,
        ADDRESSES.map((a, i) => JSON.stringify({ jsonrpc: '2.0', id: i, method: 'eth_getBalance', params: [a, hex(n)] })),
      );
      answers.forEach((a) => expect(a.status, a.text).toBe(200));
      await expectEach(
        answers.map((a) => JSON.parse(a.text) as Answer),
        ADDRESSES,
        n,
      );
    }
    // They did go upstream as batches of misses.
    expect(await metricValue(gw, 'gateway_cache_batches_total', '{chain="quorumcache"}')).toBeGreaterThan(batchesBefore);
  });

  it('a batch the gateway answers in part (a call the allowlist refuses): the refused call gets -32601 in place, each other call the quorum\'s answer', async () => {
    const r = await post(
      'quorum',
      JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [LIED[0], 'latest'] },
        { jsonrpc: '2.0', id: 2, method: 'debug_traceBlock', params: [] },
        { jsonrpc: '2.0', id: 3, method: 'eth_getBalance', params: [TOLD[0], 'latest'] },
      ]),
    );
    expect(r.status).toBe(200);
    const items = JSON.parse(r.text) as Answer[];
    expect(items.map((a) => a.id)).toEqual([1, 2, 3]);
    expect(items[1]!.error).toMatchObject({ code: -32601 });
    await expectEach([items[0]!, items[2]!], [LIED[0]!, TOLD[0]!], 'latest');
  });

  it('a client batch through the cache (its misses sent together) never gets the liar\'s answer', async () => {
    const n = (await anvilHead()) - 5;
    const batchesBefore = await metricValue(gw, 'gateway_cache_batches_total', '{chain="quorumcache"}');
    const items = await batch(
      'quorumcache',
      ADDRESSES.map((a) => ['eth_getBalance', [a, hex(n)]] as const),
    );
    await expectEach(items, ADDRESSES, n);
    // Each call asked of both nodes, and the six calls bound for each node went to it as one batch (runtime/jsonrpc/forward-batch.ts).
    expect(await metricValue(gw, 'gateway_cache_batches_total', '{chain="quorumcache"}')).toBe(batchesBefore + 2);
  });
});

describe('a call of a batch that fails', () => {
  it('gets the error a lone call gets (-32052, no healthy upstream) in its slot; the other calls are answered', async () => {
    const lone = await post('short', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [TOLD[0], 'latest'] }));
    expect(lone.status).toBe(503);
    expect((JSON.parse(lone.text) as Answer).error).toMatchObject({ code: -32052 });
    const [balance, chainId, tip] = await batch('short', [
      ['eth_getBalance', [TOLD[0], 'latest']],
      ['eth_chainId', []],
      ['eth_blockNumber', []],
    ]);
    expect(balance!.result).toBeUndefined();
    expect(balance!.error).toEqual({ code: -32052, message: 'No healthy upstream' });
    expect(chainId!.result).toBe(hex(CHAIN_ID));
    expect(Number(tip!.result)).toBeGreaterThan(0);
  });

  it('when every call of the batch fails, the batch fails as one call does (503, -32052)', async () => {
    const r = await post('short', JSON.stringify(TOLD.map((a, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_getBalance', params: [a, 'latest'] }))));
    expect(r.status).toBe(503);
    // One error per call, each with its id (issue 43, rule 11).
    expect((JSON.parse(r.text) as Answer[]).map((a) => [a.id, a.error?.code])).toEqual(TOLD.map((_, i) => [i, -32052]));
  });
});

describe('real clients, unmodified, batching through the pool', () => {
  const chain = defineChain({ id: CHAIN_ID, name: 'anvil', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } });

  it('viem with http(url, { batch: true }): the block number, that block and a balance at it, consistent with anvil', async () => {
    const client = createPublicClient({ chain, transport: http(gw.url('rpc', `/pool/${KEY}`), { batch: true }), cacheTime: 0 });
    let last = -1n;
    for (let round = 0; round < 8; round++) {
      // Made in one tick: viem sends them as one batch.
      const [n, id, latest] = await Promise.all([client.getBlockNumber(), client.getChainId(), client.getBalance({ address: dev(0) as `0x${string}` })]);
      expect(id).toBe(CHAIN_ID);
      expect(n).toBeGreaterThanOrEqual(last);
      last = n;
      expect(latest).toBe(BigInt((await anvil.rpc('eth_getBalance', [dev(0), 'latest'])).result as string));
      const [block, balance] = await Promise.all([client.getBlock({ blockNumber: n }), client.getBalance({ address: dev(0) as `0x${string}`, blockNumber: n })]);
      expect(block.hash).toBe(((await anvil.rpc('eth_getBlockByNumber', [hex(Number(n)), false])).result as { hash: string }).hash);
      expect(balance).toBe(BigInt((await anvil.rpc('eth_getBalance', [dev(0), hex(Number(n))])).result as string));
      // A lone call too: the rounds' batches do not always meet the nodes in the same order.
      expect(await client.getTransactionCount({ address: dev(0) as `0x${string}`, blockNumber: n })).toBe(Number((await anvil.rpc('eth_getTransactionCount', [dev(0), hex(Number(n))])).result));
      if (round % 3 === 2) await anvil.mine(1);
    }
  }, 30_000);

  it('ethers v6 JsonRpcProvider (batches by default): the block number, that block and a balance, consistent with anvil', async () => {
    const req = new FetchRequest(gw.url('rpc', '/pool'));
    req.setHeader('X-API-Key', KEY);
    const provider = new JsonRpcProvider(req, Network.from(CHAIN_ID), { staticNetwork: true });
    try {
      let last = -1;
      for (let round = 0; round < 8; round++) {
        const [n, latest] = await Promise.all([provider.getBlockNumber(), provider.getBalance(dev(0))]);
        expect(n).toBeGreaterThanOrEqual(last);
        last = n;
        expect(latest).toBe(BigInt((await anvil.rpc('eth_getBalance', [dev(0), 'latest'])).result as string));
        const [block, balance] = await Promise.all([provider.getBlock(n), provider.getBalance(dev(0), n)]);
        expect(block, `block ${n}, which the provider was told exists`).not.toBeNull();
        expect(block!.hash).toBe(((await anvil.rpc('eth_getBlockByNumber', [hex(n), false])).result as { hash: string }).hash);
        expect(balance).toBe(BigInt((await anvil.rpc('eth_getBalance', [dev(0), hex(n)])).result as string));
        // A lone call too: the rounds' batches do not always meet the nodes in the same order.
        expect(await provider.getTransactionCount(dev(0), n)).toBe(Number((await anvil.rpc('eth_getTransactionCount', [dev(0), hex(n)])).result));
        if (round % 3 === 2) await anvil.mine(1);
      }
    } finally {
      provider.destroy();
    }
  }, 30_000);
});
