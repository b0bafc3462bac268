// The subscriptions' feed (issue 38) through the built gateway in front of
// anvil: logs from a contract, with "removed": true after a reorg; 200
// subscribers and what reached the node for them (counted at a recording
// proxy: one log fetch per block, whatever the number of subscribers); and a
// pool of two upstreams losing the one in use without a block lost; and a
// call over a socket served by the cache, as over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKey, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { connect, wsUrl, type RpcSocket } from '../support/ws-client.ts';
import { deployPing, PING_TOPIC, type PingContract } from '../support/ws-contract.ts';

const KEY = newKey();
let anvil: Anvil;
let single: RecordingProxy;
let poolA: RecordingProxy;
let poolB: RecordingProxy;
let cachedProxy: RecordingProxy;
let ping: PingContract;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  ping = await deployPing(anvil);
  [single, poolA, poolB, cachedProxy] = await Promise.all([startRecordingProxy(anvil.url), startRecordingProxy(anvil.url), startRecordingProxy(anvil.url), startRecordingProxy(anvil.url)]);
  rig = await gateway({
    name: 'ws-feed',
    chains: [
      evmChain('single', ['SINGLE'], { websocket: true, cache: 'off' }),
      evmChain('cached', ['CACHED'], { websocket: true }),
      evmChain('pool', ['POOL_A', 'POOL_B'], { websocket: true, retries: 1, cache: 'off' }),
    ],
    header: { admin: null, health: { intervalMs: 100, timeoutMs: 1000 }, cache: { headPollMs: 100 } },
    keys: [{ id: 'feed', key: KEY }],
    standIns: { anvil, SINGLE: single, POOL_A: poolA, POOL_B: poolB, CACHED: cachedProxy },
  });
  gw = rig.gw;
}, 40_000);

afterAll(async () => {
  if (process.env.WS_DEBUG) console.log(gw.lines.filter((l) => !l.includes('"msg":"request"')).slice(-40).join('\n'));
  await rig?.close();
});

const open = (chain: string) => connect(wsUrl(gw.url('rpc', `/${chain}`)), { 'x-api-key': KEY });

async function head(): Promise<number> {
  return Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
}
async function hashOf(n: number): Promise<string> {
  return ((await anvil.rpc('eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).result as { hash: string }).hash;
}
const numberOf = (b: { number: string }) => Number.parseInt(b.number, 16);
const reached = (s: RpcSocket, sub: string, n: number) => s.of(sub).some((x) => numberOf(x.result) === n);

describe('logs', () => {
  it('sends each matching log once, then after a reorg the orphaned one with "removed": true and the new branch\'s', async () => {
    const s = await open('single');
    const byAddress = await s.subscribe('logs', { address: ping.address });
    const byTopic = await s.subscribe('logs', { address: [ping.address.toUpperCase().replace('0X', '0x')], topics: [PING_TOPIC] });
    const other = await s.subscribe('logs', { topics: [`0x${'ab'.repeat(32)}`] });
    const heads = await s.subscribe('newHeads');
    const tx = await ping.ping();
    await anvil.mine(1);
    const h = await head();
    await s.until(() => s.of(byAddress).length === 1 && s.of(byTopic).length === 1 && reached(s, heads, h), 20_000, 'the log');
    const receipt = (await anvil.rpc('eth_getTransactionReceipt', [tx])).result as { logs: any[] };
    const log = s.of(byAddress)[0]!.result;
    // The log as the node has it (eth_getLogs' shape), removed: false.
    expect(log).toEqual((await anvil.rpc('eth_getLogs', [{ blockHash: receipt.logs[0].blockHash }])).result![0 as never]);
    expect([log.address, log.topics, log.transactionHash, log.blockNumber, log.removed]).toEqual([ping.address, [PING_TOPIC], tx, `0x${h.toString(16)}`, false]);
    expect(s.of(byTopic)[0]!.result).toEqual(log);

    // The block with the log is replaced by one where the same call runs again.
    const reorg = await anvil.rpc('anvil_reorg', [1, [[{ from: ping.from, to: ping.address, gas: '0x10000' }, 0]]]);
    expect(reorg.error).toBeUndefined();
    const newHash = await hashOf(h);
    expect(newHash).not.toBe(log.blockHash);
    await s.until(() => s.of(byAddress).length === 3 && s.of(byTopic).length === 3, 20_000, 'the reorg\'s logs');
    const [, removed, again] = s.of(byAddress).map((n) => n.result);
    expect(removed).toEqual({ ...log, removed: true });
    expect([again.blockHash, again.blockNumber, again.removed, again.topics]).toEqual([newHash, log.blockNumber, false, [PING_TOPIC]]);
    expect(s.of(byTopic).map((n) => n.result)).toEqual(s.of(byAddress).map((n) => n.result));
    expect(s.of(other)).toEqual([]);
    // newHeads got the replacing block at the same height.
    await s.until(() => s.of(heads).some((n) => n.result.hash === newHash));
    await s.close();
  }, 30_000);
});

describe('fan-out', () => {
  it('serves 200 subscribers with one log fetch per block and at most two block fetches, as for one subscriber', async () => {
    /** Mines `n` blocks one at a time, each with a Ping, and waits for every socket to get each. */
    const mineAndWait = async (n: number, sockets: { s: RpcSocket; heads: string[]; logs: string[] }[]) => {
      for (let i = 0; i < n; i++) {
        await ping.ping();
        await anvil.mine(1);
        const h = await head();
        for (const { s, heads, logs } of sockets)
          await s.until(() => heads.every((id) => reached(s, id, h)) && logs.every((id) => s.of(id).some((l) => numberOf({ number: l.result.blockNumber }) === h)), 20_000, `block ${h} everywhere`);
      }
    };
    const count = () => {
      const m = single.methodsSeen();
      return { logs: m.filter((x) => x === 'eth_getLogs').length, blocks: m.filter((x) => x === 'eth_getBlockByNumber' || x === 'eth_getBlockByHash').length };
    };

    const one = await open('single');
    const alone = [{ s: one, heads: [await one.subscribe('newHeads')], logs: [await one.subscribe('logs', { address: ping.address })] }];
    await mineAndWait(1, alone);
    single.clear();
    await mineAndWait(5, alone);
    const forOne = count();
    await one.close();

    const many: { s: RpcSocket; heads: string[]; logs: string[] }[] = [];
    for (let i = 0; i < 20; i++) {
      const s = await open('single');
      const heads: string[] = [];
      const logs: string[] = [];
      for (let j = 0; j < 5; j++) heads.push(await s.subscribe('newHeads'));
      for (let j = 0; j < 5; j++) logs.push(await s.subscribe('logs', { address: ping.address, topics: [PING_TOPIC] }));
      many.push({ s, heads, logs });
    }
    await mineAndWait(1, many);
    single.clear();
    const from = await head();
    await mineAndWait(5, many);
    const forMany = count();
    expect(forOne.logs).toBe(5);
    expect(forMany.logs).toBe(5);
    expect(forOne.blocks).toBeLessThanOrEqual(10);
    expect(forMany.blocks).toBeLessThanOrEqual(10);
    // Every subscriber got every block once, in order, with anvil's hash.
    const want = await Promise.all([1, 2, 3, 4, 5].map((k) => hashOf(from + k)));
    for (const { s, heads } of many)
      for (const id of heads) {
        const got = s.of(id).map((n) => n.result).filter((b) => numberOf(b) > from);
        expect(got.map((b) => b.hash)).toEqual(want);
      }
    await Promise.all(many.map(({ s }) => s.close()));
  }, 60_000);
});

describe('the cache', () => {
  it('serves a call over a socket as it serves one over HTTP: a final block asked twice reaches the node once', async () => {
    const s = await open('cached');
    cachedProxy.clear();
    const first = await s.call('eth_getBlockByNumber', ['0x1', false]);
    const again = await s.call('eth_getBlockByNumber', ['0x1', false]);
    expect(first.result.hash).toBe(await hashOf(1));
    expect(again.result).toEqual(first.result);
    expect(cachedProxy.methodsSeen().filter((m) => m === 'eth_getBlockByNumber')).toHaveLength(1);
    await s.close();
  });
  // Issue 45: the feed fetched through the chain's front, not under it (where the cache's hits and flights are not).
  it("fetches the feed's blocks through the cache's front: the head block a subscriber got is a hit for a client, with no request to the node", async () => {
    const s = await open('cached');
    const sub = await s.subscribe('newHeads');
    await anvil.mine(1);
    const h = await head();
    await s.until(() => reached(s, sub, h), 20_000, `block ${h}`);
    cachedProxy.clear();
    const r = await fetch(gw.url('rpc', '/cached'), {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_getBlockByNumber', params: [`0x${h.toString(16)}`, false] }),
    });
    const block = ((await r.json()) as { result: { hash: string } }).result;
    expect(block.hash).toBe(s.of(sub).find((n) => numberOf(n.result) === h)!.result.hash);
    expect(r.headers.get('x-cache')).toBe('HIT');
    expect(cachedProxy.methodsSeen().filter((m) => m === 'eth_getBlockByNumber')).toEqual([]);
    await s.close();
  });
});

describe('failover', () => {
  it('loses no block when the upstream in use goes away', async () => {
    const s = await open('pool');
    const sub = await s.subscribe('newHeads');
    await anvil.mine(2);
    let h = await head();
    await s.until(() => reached(s, sub, h), 20_000, `block ${h}`);
    // The upstream that served the feed's last block goes away.
    const used = [poolA, poolB].find((p) => p.methodsSeen().includes('eth_getBlockByNumber')) ?? poolA;
    const kept = used === poolA ? poolB : poolA;
    await used.close();
    kept.clear();
    for (let i = 0; i < 5; i++) await anvil.mine(1);
    h = await head();
    await s.until(() => reached(s, sub, h), 20_000, `block ${h} after the failover`);
    const numbers = s.of(sub).map((n) => numberOf(n.result));
    for (let i = 1; i < numbers.length; i++) expect(numbers[i], `after ${numbers[i - 1]}`).toBe(numbers[i - 1]! + 1);
    for (const n of s.of(sub).slice(-5)) expect(n.result.hash).toBe(await hashOf(numberOf(n.result)));
    expect(kept.methodsSeen()).toContain('eth_getBlockByNumber');
    await s.close();
  }, 30_000);
});
