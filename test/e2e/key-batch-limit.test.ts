// maxBatchSize per key (issue 32): a JSON-RPC batch with more calls than the
// key's maxBatchSize is refused whole, as the chain's limit refuses one (HTTP
// 413, -32005 "Limit exceeded: batch too large"), with the key's limit in
// `data`, and never reaches the node; a batch at the limit does. Keys from a
// file and from Redis, set with `gateway keys add|set`, against real anvil.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http } from 'viem';
import { mainnet } from 'viem/chains';
import { newKey, rawRequest, sha256, until, type Built, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { runCli } from '../support/cli.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const K = { small: newKey(), roomy: newKey(), open: newKey(), methods: newKey() };
const CHAIN_MAX = 20;

let anvil: Anvil;
let proxy: RecordingProxy;
let redis: RedisServer;
let built: Built;
let rig: Gateway;
let fileGw: RunningGateway;
let redisGw: RunningGateway;

beforeAll(async () => {
  [anvil, redis] = await Promise.all([startAnvil({ chainId: 1 }), startRedis()]);
  proxy = await startRecordingProxy(anvil.url);
  rig = await gateway({
    name: 'key-batch-limit',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, limits: { maxBatchSize: CHAIN_MAX }, upstreams: ['${ETH_URL}'] }],
    header: { admin: null, keys: '${KEYS}', keyCache: { size: 100, ttlMs: 30000 }, health: { intervalMs: 60000, timeoutMs: 1000 }, methodSets: { evm: ['eth_blockNumber', 'eth_chainId', 'eth_getBalance'] } },
    keys: `keys:
  - id: small
    sha256: "${sha256(K.small)}"
    maxBatchSize: 3
  - { id: roomy, sha256: "${sha256(K.roomy)}", maxBatchSize: 50 }
  - { id: open, sha256: "${sha256(K.open)}" }
  - id: methods
    sha256: "${sha256(K.methods)}"
    maxBatchSize: 2
    allow: { methods: [eth_blockNumber, eth_chainId] }
`,
    standIns: { anvil, redis, ETH_URL: proxy },
    start: false,
  });
  built = rig.built;
  [fileGw, redisGw] = await Promise.all([rig.start({ env: { KEYS: './keys.yaml' } }), rig.start({ env: { KEYS: redis.url } })]);

}, 60_000);

afterAll(() => rig?.close());

const batchOf = (n: number): string => JSON.stringify(Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method: i % 2 ? 'eth_chainId' : 'eth_blockNumber', params: [] })));
const send = (gw: RunningGateway, key: string, n: number) => rawRequest(gw.url('rpc', '/ethereum'), { body: batchOf(n), headers: { 'x-api-key': key } });
const keyLimit = (max: number) => ({ jsonrpc: '2.0', id: null, error: { code: -32005, message: 'Limit exceeded: batch too large', data: { reason: 'key', maxBatchSize: max } } });
const CHAIN_LIMIT = { jsonrpc: '2.0', id: null, error: { code: -32005, message: 'Limit exceeded: batch too large' } };

/** Refused with the key's limit, and nothing reached the node. */
async function refusedByKey(gw: RunningGateway, key: string, n: number, max: number): Promise<void> {
  const before = proxy.requests.length;
  const r = await send(gw, key, n);
  expect(r.status, `a batch of ${n}`).toBe(413);
  expect(r.json()).toEqual(keyLimit(max));
  expect(proxy.requests.length, 'nothing reached the node').toBe(before);
}

/** Answered by the node: the batch reached it whole. */
async function served(gw: RunningGateway, key: string, n: number): Promise<void> {
  proxy.clear();
  const r = await send(gw, key, n);
  expect(r.status, `a batch of ${n}`).toBe(200);
  const answers = r.json() as { id: number; result: string }[];
  expect(answers.map((a) => a.id).sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  for (const a of answers) expect(a.result).toMatch(/^0x[0-9a-f]+$/);
  expect(proxy.requests.filter((q) => Array.isArray(q.json) && q.json.length === n)).toHaveLength(1);
}

describe('maxBatchSize per key, keys file', () => {
  it("a batch over the key's limit is refused with the limit named; one at the limit reaches the node", { timeout: 30_000 }, async () => {
    await refusedByKey(fileGw, K.small, 4, 3);
    await served(fileGw, K.small, 3);
    // A key's own calls list goes the path that checks each call: the same limit.
    await refusedByKey(fileGw, K.methods, 3, 2);
    await served(fileGw, K.methods, 2);
    // A key without one, or with a looser one, has the chain's limit.
    await served(fileGw, K.open, 4);
    await served(fileGw, K.roomy, CHAIN_MAX);
    const over = await send(fileGw, K.roomy, CHAIN_MAX + 1);
    expect(over.status).toBe(413);
    expect(over.json()).toEqual(CHAIN_LIMIT);
  });

  it('viem batching at the key\'s limit works', { timeout: 30_000 }, async () => {
    proxy.clear();
    const client = createPublicClient({ chain: mainnet, transport: http(fileGw.url('rpc', `/ethereum/${K.small}`), { batch: { batchSize: 3, wait: 20 } }) });
    const [block, chainId, balance] = await Promise.all([client.getBlockNumber(), client.getChainId(), client.getBalance({ address: '0x00000000000000000000000000000000000000aa' })]);
    expect(block >= 0n).toBe(true);
    expect(chainId).toBe(1);
    expect(balance).toBe(0n);
    expect(proxy.requests.some((q) => Array.isArray(q.json) && q.json.length === 3)).toBe(true);
  });

  it('`gateway keys set --max-batch-size` changes it on the running server; none gives the chain\'s back', { timeout: 60_000 }, async () => {
    const reloaded = fileGw.nextLog((e) => e.event === 'keys_reloaded');
    expect((await runCli(['keys', 'set', '--id', 'small', '--max-batch-size', '5', '--file', 'keys.yaml'], { cwd: built.dir })).code).toBe(0);
    await reloaded;
    await served(fileGw, K.small, 5);
    await refusedByKey(fileGw, K.small, 6, 5);
    const again = fileGw.nextLog((e) => e.event === 'keys_reloaded');
    expect((await runCli(['keys', 'set', '--id', 'small', '--max-batch-size', 'none', '--file', 'keys.yaml'], { cwd: built.dir })).code).toBe(0);
    await again;
    await served(fileGw, K.small, CHAIN_MAX);
  });
});

describe('maxBatchSize per key, keys in Redis', () => {
  it('`gateway keys add|set --store` with --max-batch-size: refused over it, served at it, changed at once', { timeout: 60_000 }, async () => {
    const added = await runCli(['keys', 'add', '--id', 'redis-small', '--max-batch-size', '2', '--store', redis.url]);
    expect(added.code).toBe(0);
    const key = added.stdout.trim();
    await refusedByKey(redisGw, key, 3, 2);
    await served(redisGw, key, 2);
    expect((await runCli(['keys', 'list', '--store', redis.url])).stdout).toMatch(/^redis-small\tactive\t.*\tpolicy=maxBatchSize=2$/m);
    // A change is published: the cached entry is dropped on the replica at once.
    expect((await runCli(['keys', 'set', '--id', 'redis-small', '--max-batch-size', '4', '--store', redis.url])).code).toBe(0);
    await until(async () => (await send(redisGw, key, 4)).status === 200, 'the raised limit in force', 5000);
    await refusedByKey(redisGw, key, 5, 4);
    expect((await runCli(['keys', 'set', '--id', 'redis-small', '--max-batch-size', 'none', '--store', redis.url])).code).toBe(0);
    await until(async () => (await send(redisGw, key, CHAIN_MAX)).status === 200, 'the chain limit in force', 5000);
  });
});
