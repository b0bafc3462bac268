// The cache's shared tier (issue 20, `cache: { redis: true }`): two gateway
// processes on one real Redis. What one of them fetched and may keep forever
// (a constant, a final block, an answer by hash in a final canonical block, a
// final Rosetta block) the other serves without asking its upstream; answers
// bound to the head never go to Redis; a Redis outage only turns the tier off.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const KEY = newKey();

let anvil: Anvil;
let proxy: RecordingProxy;
let rosetta: RosettaStub;
let redis: RedisServer;
let peek: Redis;
let rig: Gateway;
let a: RunningGateway;
let b: RunningGateway;

async function launch(redisUrl: string): Promise<RunningGateway> {
  const g = await rig.start({ env: { REDIS_URL: redisUrl } });
  await g.waitForLog((e) => e.event === 'cache_shared_up');
  return g;
}

beforeAll(async () => {
  [anvil, rosetta, redis] = await Promise.all([startAnvil({ chainId: 1 }), startRosettaStub({ network: 'preprod', blockIndex: 100 }), startRedis(undefined, ['--enable-debug-command', 'local'])]);
  await anvil.mine(80); // blocks 0..16 final (anvil: latest - 64)
  proxy = await startRecordingProxy(anvil.url);
  peek = new Redis(redis.url, { lazyConnect: true });
  await peek.connect();
  rig = await gateway({
    name: 'cache-shared',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
      { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', finality: { depth: 10 }, upstreams: ['${ROSETTA_URL}'] },
    ],
    header: { cache: { redis: true, headPollMs: 100 }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'shared', key: KEY }],
    standIns: { anvil, redis, ETH_URL: proxy, ROSETTA_URL: rosetta },
    start: false,
  });
  [a, b] = await Promise.all([launch(redis.url), launch(redis.url)]);
  await Promise.all([a, b].map((g) => finalKnown(g)));
}, 90_000);

afterAll(async () => {
  peek?.disconnect();
  await rig?.close();
});

const metric = metricValue;

/** Waits until a gateway knows anvil's finalized block and the Rosetta tip. */
async function finalKnown(g: RunningGateway): Promise<void> {
  await until(async () => (await metric(g, 'gateway_cache_finalized_block', '{chain="ethereum"}')) >= 16, 'the finalized block known');
  await until(async () => (await metric(g, 'gateway_cache_head_block', '{chain="cardano-preprod"}')) === 100, 'the Rosetta tip known');
}

const sharedKeys = async (): Promise<number> => (await peek.keys('gw:cache:*')).length;

let nextId = 1;
async function rpc(g: RunningGateway, method: string, params: unknown[]): Promise<{ xCache: string; body: { id: unknown; result?: unknown; error?: unknown } }> {
  const id = nextId++;
  const res = await fetch(g.url('rpc', '/ethereum'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  });
  const body = (await res.json()) as { id: unknown; result?: unknown };
  expect(body.id).toBe(id);
  return { xCache: res.headers.get('x-cache') ?? '', body };
}

describe('cache: the shared tier (Redis)', () => {
  it('what one replica may keep forever, the other serves without asking its upstream', { timeout: 30_000 }, async () => {
    const block5 = (await anvil.rpc('eth_getBlockByNumber', ['0x5', false])).result as { hash: string };
    // (eth_chainId is the manifest's own answer on every replica: never asked, never shared.)
    const calls: Array<[string, unknown[]]> = [
      ['web3_sha3', ['0x68656c6c6f']],
      ['eth_getBlockByNumber', ['0x5', false]],
      ['eth_getBalance', ['0x' + '11'.repeat(20), '0x3']],
      // By hash, in a final block whose canonical hash replica a learned just above.
      ['eth_getBlockByHash', [block5.hash, false]],
    ];
    for (const [m, p] of calls) {
      const before = await sharedKeys();
      const first = await rpc(a, m, p);
      expect(first.xCache, m).toBe('MISS');
      await until(async () => (await sharedKeys()) === before + 1, `${m} kept in Redis`);
      const upstream = proxy.requests.length;
      const other = await rpc(b, m, p);
      expect(other.xCache, `${m} on the other replica`).toBe('HIT');
      expect(other.body.result, m).toEqual((await anvil.rpc(m, p)).result);
      expect(proxy.requests.length - upstream, `${m}: nothing reached the node`).toBe(0);
    }
    expect(await metric(b, 'gateway_cache_shared_hits_total', '{chain="ethereum"}')).toBe(calls.length);
  });

  it('answers bound to the head never go to Redis', async () => {
    const before = await sharedKeys();
    for (const [m, p] of [
      ['eth_blockNumber', []],
      ['eth_getBalance', ['0x' + '22'.repeat(20), 'latest']],
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_getBlockByNumber', ['finalized', false]],
    ] as Array<[string, unknown[]]>) {
      await rpc(a, m, p);
      expect((await rpc(a, m, p)).xCache, `${m} is kept in a's memory`).toBe('HIT');
      expect((await rpc(b, m, p)).xCache, `${m} is not shared`).toBe('MISS');
    }
    expect(await sharedKeys()).toBe(before);
  });

  it('a final Rosetta block is shared too', async () => {
    const call = (g: RunningGateway) =>
      fetch(g.url('rpc', '/cardano-preprod/block'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' }, block_identifier: { index: 42 } }),
      }).then(async (r) => ({ xCache: r.headers.get('x-cache'), type: r.headers.get('content-type'), body: (await r.json()) as { block: { block_identifier: { index: number } } } }));
    const before = await sharedKeys();
    const first = await call(a);
    expect(first.xCache).toBe('MISS');
    await until(async () => (await sharedKeys()) === before + 1, 'the block kept in Redis');
    const upstream = rosetta.requests.length;
    const other = await call(b);
    expect(other).toEqual({ ...first, xCache: 'HIT' });
    expect(other.body.block.block_identifier.index).toBe(42);
    expect(rosetta.requests.length - upstream).toBe(0);
  });

  it('a stall longer than its timeout turns the tier off, and it comes back on its own once Redis answers (a stall brings no reconnect)', { timeout: 30_000 }, async () => {
    const sleeper = new Redis(redis.url);
    const pinger = new Redis(redis.url, { commandTimeout: 50, maxRetriesPerRequest: 0 });
    try {
      const down = b.nextLog((e) => e.event === 'cache_shared_down', 10_000);
      const up = b.nextLog((e) => e.event === 'cache_shared_up', 15_000);
      const stall = sleeper.call('DEBUG', 'SLEEP', '2');
      await until(async () => pinger.ping().then(() => false, () => true), 'Redis asleep');
      // b misses on a final block while Redis sleeps: its lookup times out (100 ms), the tier goes off, the node answers.
      const during = await rpc(b, 'eth_getBlockByNumber', ['0x9', false]);
      expect(during.xCache).toBe('MISS');
      expect(during.body.result).toEqual((await anvil.rpc('eth_getBlockByNumber', ['0x9', false])).result);
      await down;
      await stall;
      await up;
      expect(await metric(b, 'gateway_redis_state', '{part="cache",state="up"}')).toBe(1);
      // Shared again: what a keeps, b serves from Redis.
      const before = await sharedKeys();
      expect((await rpc(a, 'eth_getBlockByNumber', ['0xa', false])).xCache).toBe('MISS');
      await until(async () => (await sharedKeys()) === before + 1, 'kept in Redis');
      const upstream = proxy.requests.length;
      expect((await rpc(b, 'eth_getBlockByNumber', ['0xa', false])).xCache).toBe('HIT');
      expect(proxy.requests.length - upstream).toBe(0);
    } finally {
      sleeper.disconnect();
      pinger.disconnect();
    }
  });

  it('a Redis outage only turns the tier off: every call is still answered, from the node', { timeout: 30_000 }, async () => {
    const down = b.nextLog((e) => e.event === 'cache_shared_down');
    await redis.stop();
    await down;
    const upstream = proxy.requests.length;
    const g = await rpc(b, 'eth_getBlockByNumber', ['0x7', false]);
    expect(g.xCache).toBe('MISS');
    expect(g.body.result).toEqual((await anvil.rpc('eth_getBlockByNumber', ['0x7', false])).result);
    expect(proxy.requests.length - upstream).toBe(1);
    // Kept in b's own memory all the same.
    expect((await rpc(b, 'eth_getBlockByNumber', ['0x7', false])).xCache).toBe('HIT');
  });
});
