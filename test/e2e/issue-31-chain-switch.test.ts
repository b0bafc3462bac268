// Issue 31, defect 2: an upstream that serves another chain for a few seconds
// (a DNS, load-balancer or provider change) must not poison the cache. The
// route names chainId 1; replica R1 has two upstreams: a switchable stand-in S
// (weight 10, so it would take most calls) and P1, both in front of anvil A
// (chain 1, at block 170, finalized 106). Replica R2 shares R1's Redis
// (cache.redis) and has two upstreams of its own in front of A: it never sees
// S. For a few seconds S forwards to anvil B instead: chain 5, another
// genesis (another genesis timestamp: anvil's blocks do not depend on the
// chain id), mined to 300. Meanwhile R1 is asked block 100, eth_chainId and
// eth_blockNumber. Then S goes back to A.
//
// What must hold: eth_chainId is 0x1 throughout and, like net_version, never
// reaches a node (the manifest names the chain id); after the switch back both
// replicas answer block 100 and eth_blockNumber as anvil A does (R2 could only
// have got chain 5's block from Redis); R1 logged a cache_reset with reason
// identity and counted it in gateway_cache_resets_total.
//
// Readiness comes from what the stand-ins record: a switch counts once S has
// answered three of the gateway's polls from the new node; the calls made
// during the switch are followed by three more before S goes back, so every
// answer S gave from chain 5 had an identity check after it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { startSteerableProxy, type SteerableProxy } from '../support/steerable-proxy.ts';
import { fetchSeries } from '../support/metrics-text.ts';

const KEY = newKey();
const A_HEAD = 170;
const B_HEAD = 300;

let a: Anvil;
let b: Anvil;
let redis: RedisServer;
/** The switchable upstream, R1's other one, and R2's two. */
let s: SteerableProxy;
let p1: SteerableProxy;
let p2a: SteerableProxy;
let p2b: SteerableProxy;
let rig: Gateway;
let r1: RunningGateway;
let r2: RunningGateway;

async function launch(up1: string, up2: string): Promise<RunningGateway> {
  const g = await rig.start({ env: { UP1: up1, UP2: up2, REDIS_URL: redis.url } });
  await g.waitForLog((e) => e.event === 'cache_shared_up');
  return g;
}

beforeAll(async () => {
  [a, b, redis] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 5, args: ['--timestamp', '1600000000'] }), startRedis()]);
  await Promise.all([a.mine(A_HEAD), b.mine(B_HEAD)]);
  [s, p1, p2a, p2b] = await Promise.all([startSteerableProxy(a.url), startSteerableProxy(a.url), startSteerableProxy(a.url), startSteerableProxy(a.url)]);
  rig = await gateway({
    name: 'issue-31-chain-switch',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: [{ url: '${UP1}', weight: 10 }, '${UP2}'] }],
    header: { cache: { redis: true, headPollMs: 100 }, health: { intervalMs: 60000, timeoutMs: 2000 } },
    keys: [{ id: 'switch', key: KEY }],
    standIns: { a, b, redis, proxies: [s, p1, p2a, p2b] },
    start: false,
  });
  [r1, r2] = await Promise.all([launch(s.url, p1.url), launch(p2a.url, p2b.url)]);
  for (const g of [r1, r2]) {
    await until(
      async () => (await metricValue(g, 'gateway_cache_head_block', '{chain="ethereum"}')) === A_HEAD && (await metricValue(g, 'gateway_cache_finalized_block', '{chain="ethereum"}')) === A_HEAD - 64,
      'the replica sees chain 1 at 170, finalized 106',
    );
  }
}, 90_000);

afterAll(() => rig?.close());

let nextId = 1;
async function rpc(g: RunningGateway, method: string, params: unknown[]): Promise<{ xCache: string; result?: unknown; error?: unknown }> {
  const res = await fetch(g.url('rpc', '/ethereum'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const body = (await res.json()) as { result?: unknown; error?: unknown };
  return { xCache: res.headers.get('x-cache') ?? '', ...body };
}

/** Waits until S has answered `n` more of the gateway's polls (from whichever node it now forwards to). */
async function polledAgain(n: number): Promise<void> {
  const from = s.polls.length;
  await until(async () => s.polls.length >= from + n, `${n} more polls answered by the switchable upstream`);
}

const upstreamState = async (g: RunningGateway, name: string): Promise<string | undefined> => {
  const r = (await (await fetch(g.url('admin', '/readyz'))).json()) as { chains: Record<string, { upstreams: { name: string; state: string }[] }> };
  return r.chains.ethereum!.upstreams.find((u) => u.name === name)?.state;
};

describe('issue 31: an upstream that serves another chain for a few seconds', () => {
  it('poisons nothing: eth_chainId stays 0x1 and reaches no node, and after the switch back both replicas answer block 100 and eth_blockNumber as chain 1 does', { timeout: 50_000 }, async () => {
    const chainIds: unknown[] = [];
    const block100 = ['0x64', false];
    const aBlock100 = (await a.rpc('eth_getBlockByNumber', block100)).result as { hash: string };
    const bBlock100 = (await b.rpc('eth_getBlockByNumber', block100)).result as { hash: string };
    expect(aBlock100.hash).not.toBe(bBlock100.hash); // another chain: another block 100
    /** Which chain's block 100 an answer is. */
    const whose = (r: unknown): unknown => {
      const h = (r as { hash?: unknown } | null)?.hash;
      return h === aBlock100.hash ? "chain 1's" : h === bBlock100.hash ? "chain 5's" : JSON.stringify(r);
    };

    // S serves chain 5.
    s.steer(b.url);
    await polledAgain(3);
    const during: Record<string, unknown[]> = { chainId: [], blockNumber: [], block100: [] };
    for (let i = 0; i < 3; i++) {
      const id = await rpc(r1, 'eth_chainId', []);
      chainIds.push(id.result);
      during.chainId!.push(`${String(id.result)} ${id.xCache}`);
      const n = await rpc(r1, 'eth_blockNumber', []);
      during.blockNumber!.push(`${String(n.result)} ${n.xCache}`);
      const blk = await rpc(r1, 'eth_getBlockByNumber', block100);
      during.block100!.push(`${String(whose(blk.result))} ${blk.xCache}`);
    }
    await polledAgain(3);

    // S serves chain 1 again, and R1 takes it back.
    s.steer(a.url);
    await polledAgain(3);
    await until(async () => (await metricValue(r1, 'gateway_cache_head_block', '{chain="ethereum"}')) === A_HEAD, 'R1 sees chain 1 at 170 again');
    await until(async () => (await upstreamState(r1, 'ethereum#0')) === 'up', 'R1 has S up again');
    console.log(`issue-31 chain switch, R1 during the switch: ${JSON.stringify(during)}`);

    const aNumber = (await a.rpc('eth_blockNumber')).result;
    expect(aNumber).toBe(`0x${A_HEAD.toString(16)}`);
    for (const [name, g] of [
      ['R1', r1],
      ['R2', r2],
    ] as const) {
      const blk = await rpc(g, 'eth_getBlockByNumber', block100);
      expect.soft(whose(blk.result), `${name}: block 100 after the switch back (X-Cache ${blk.xCache})`).toBe("chain 1's");
      expect.soft(blk.result, `${name}: block 100 after the switch back, as anvil A answers it`).toEqual(aBlock100);
      const n = await rpc(g, 'eth_blockNumber', []);
      expect.soft(n.result, `${name}: eth_blockNumber after the switch back, anvil A's height (chain 5 is at 0x${B_HEAD.toString(16)})`).toBe(aNumber);
      const id = await rpc(g, 'eth_chainId', []);
      chainIds.push(id.result);
      expect.soft(id.xCache, `${name}: eth_chainId answered by the gateway`).toBe('HIT');
      const version = await rpc(g, 'net_version', []);
      expect.soft({ result: version.result, xCache: version.xCache }, `${name}: net_version answered by the gateway`).toEqual({ result: '1', xCache: 'HIT' });
    }
    expect.soft(chainIds, 'every eth_chainId answer').toEqual(chainIds.map(() => '0x1'));
    // Neither ever reached a node (the gateway's own polls apart).
    for (const [name, p] of [
      ['S', s],
      ['P1', p1],
      ['P2a', p2a],
      ['P2b', p2b],
    ] as const) {
      expect.soft(p.methodsSeen().filter((m) => m === 'eth_chainId' || m === 'net_version'), `eth_chainId and net_version reaching ${name}`).toEqual([]);
    }
    const resets = r1.lines.filter((l) => l.includes('"cache_reset"')).map((l) => JSON.parse(l) as Record<string, unknown>);
    const identity = resets.filter((e) => e.chain === 'ethereum' && e.reason === 'identity');
    expect.soft(identity.length, 'R1 logged a cache_reset with reason identity').toBeGreaterThan(0);
    expect
      .soft(await fetchSeries(r1.url('admin', '/metrics'), 'gateway_cache_resets_total', { chain: 'ethereum', reason: 'identity' }), 'R1 gateway_cache_resets_total{reason="identity"}, one per line logged')
      .toBe(identity.length);
  });
});
