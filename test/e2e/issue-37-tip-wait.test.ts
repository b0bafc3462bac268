// Issue 37, defect 3's other side: the served tip never goes back, so when the
// upstream that set it goes down and the one left is behind, a call at
// `latest` (rewritten to the tip: pools rewrite tags by default) names a block
// no usable upstream has yet. It must not get the behind node's null (or its
// geth `header not found`): the gateway waits, within the call's timeoutMs,
// for an upstream to reach the block, and answers it then; if none does in
// time, the call fails with the gateway's error. A slow answer, not a wrong one.
//
// Stand-ins in front of one anvil (pool-standins.ts): a healthy node, which
// sets the tip, and a laggard 3 blocks behind, which answers null for the
// blocks above its head as a node that does not have them yet does. The
// healthy one is closed (its polls fail: it goes down); anvil then mines, so
// that the laggard reaches the tip. Each step waits for what the gateway saw
// (/readyz) with until(), never for a time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';

const KEY = newKey();
const LAG = 3;
/** The chain whose calls may wait long enough for the laggard to catch up. */
const WAIT_MS = 20_000;
/** The chain whose calls end before anything catches up. */
const SHORT_MS = 1500;
const ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

let anvil: Anvil;
let healthy: PoolStandin;
/** Closed by the test itself (the node that set the tip going away). */
let healthyClosed = false;
let laggard: PoolStandin;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1, args: ['--no-mining'] });
  await anvil.mine(20);
  [healthy, laggard] = await Promise.all([startPoolStandin(anvil.url, { role: 'healthy' }), startPoolStandin(anvil.url, { role: 'laggard', lag: LAG })]);
  rig = await gateway({
    name: 'issue-37-tip-wait',
    chains: [
      evmChain('wait', ['HEALTHY', 'LAGGARD'], { cache: 'off', limits: { timeoutMs: WAIT_MS } }),
      evmChain('short', ['HEALTHY', 'LAGGARD'], { cache: 'off', limits: { timeoutMs: SHORT_MS } }),
    ],
    header: { health: { intervalMs: 300, timeoutMs: 2000 } },
    keys: [{ id: 'wait', key: KEY }],
    standIns: { anvil, LAGGARD: laggard, HEALTHY: { url: healthy.url, close: () => healthyClosed || healthy.close() } },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

let nextId = 1;
async function post(chain: string, method: string, params: unknown[] = []): Promise<{ status: number; doc: { result?: unknown; error?: { message?: string } } }> {
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  return { status: r.statusCode, doc: JSON.parse(await r.body.text()) };
}

/** A client batch (as ethers v6 sends by default): the answer items by id. */
async function postBatch(chain: string, calls: [string, unknown[]][]): Promise<{ status: number; items: { id: number; result?: unknown; error?: { code?: number; message?: string } }[] }> {
  const first = nextId;
  nextId += calls.length;
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify(calls.map(([method, params], i) => ({ jsonrpc: '2.0', id: first + i, method, params }))),
  });
  const items = JSON.parse(await r.body.text()) as { id: number }[];
  return { status: r.statusCode, items: [...items].sort((a, b) => a.id - b.id) };
}

const num = (hex: unknown): number => Number.parseInt(String(hex), 16);
async function blockNumber(chain: string): Promise<number> {
  const { status, doc } = await post(chain, 'eth_blockNumber');
  expect(status).toBe(200);
  return num(doc.result);
}

/** Each upstream's head and state as the gateway's view has them (/readyz), in manifest order. */
async function upstreams(chain: string): Promise<{ head: number | null; state: string }[]> {
  const ready = (await (await request(gw.url('admin', '/readyz'))).body.json()) as { chains: Record<string, { upstreams: { head: number | null; state: string }[] }> };
  return ready.chains[chain]!.upstreams;
}

/** Calls of a chain that waited for an upstream to reach their block. */
const waits = (chain: string): Promise<number> => metricValue(gw, 'gateway_pool_tip_waits_total', `{chain="${chain}"}`);

describe('issue 37: a call at or below the served tip that no usable upstream has yet waits for one', () => {
  it('the node that set the tip goes down, the other is behind: latest is never null, alone or in a batch; it waits for the block, or fails with the gateway error', { timeout: 90_000 }, async () => {
    const n = num((await anvil.rpc('eth_blockNumber')).result);
    for (const chain of ['wait', 'short']) {
      await until(async () => {
        const [h, l] = await upstreams(chain);
        return h!.head === n && l!.head === n - LAG;
      }, `${chain}: the healthy node at ${n}, the laggard at ${n - LAG}`);
      expect(await blockNumber(chain)).toBe(n);
    }

    // The node that set the tip goes away: its polls fail and it is taken out.
    await healthy.close();
    healthyClosed = true;
    for (const chain of ['wait', 'short']) await until(async () => (await upstreams(chain))[0]!.state !== 'up', `${chain}: the healthy node down`);
    for (const chain of ['wait', 'short']) expect(await blockNumber(chain), `${chain}: eth_blockNumber never goes back`).toBe(n);

    // None reaches the tip within the call's timeoutMs: the gateway's error, never the laggard's null or its header not found.
    const nullsBefore = laggard.altered.nulls;
    const short = await Promise.all([
      post('short', 'eth_getBlockByNumber', ['latest', false]),
      post('short', 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false]),
      post('short', 'eth_getBalance', [ADDRESS, 'latest']),
    ]);
    for (const { status, doc } of short) {
      expect(doc.result, JSON.stringify(doc)).toBeUndefined();
      expect(status, JSON.stringify(doc)).toBeGreaterThanOrEqual(500);
      expect(doc.error?.message).toBeTypeOf('string');
      expect(doc.error?.message).not.toMatch(/header not found/);
    }
    // In a client batch, the call at latest gets the gateway's error in its slot; the other call is answered.
    const batch = await postBatch('short', [
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_chainId', []],
    ]);
    expect(batch.items, JSON.stringify(batch.items)).toHaveLength(2);
    expect(batch.items[0]!.result, JSON.stringify(batch.items)).toBeUndefined();
    expect(batch.items[0]!.error?.message).toBeTypeOf('string');
    expect(batch.items[1]!.result).toBe((await anvil.rpc('eth_chainId')).result);
    expect(laggard.altered.nulls, 'no call was sent to the node behind the block').toBe(nullsBefore);
    expect(await blockNumber('short')).toBe(n);

    expect(await waits('short')).toBe(4);

    // The laggard reaches the tip while the calls wait (the gateway counts them waiting first): they get the block
    // eth_blockNumber named, and the state at it.
    const latest = post('wait', 'eth_getBlockByNumber', ['latest', false]);
    const balance = post('wait', 'eth_getBalance', [ADDRESS, 'latest']);
    const batched = postBatch('wait', [
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_blockNumber', []],
    ]);
    await until(async () => (await waits('wait')) === 3, 'the three calls at latest waiting');
    await anvil.mine(LAG);
    const [block, state, inBatch] = await Promise.all([latest, balance, batched]);
    expect(inBatch.status).toBe(200);
    expect(num((inBatch.items[0]!.result as { number: string } | null)?.number), JSON.stringify(inBatch.items)).toBe(n);
    expect(num(inBatch.items[1]!.result)).toBe(n);
    expect(block.status).toBe(200);
    expect(block.doc.result, JSON.stringify(block.doc)).not.toBeNull();
    expect(num((block.doc.result as { number: string }).number)).toBe(n);
    expect(state.status).toBe(200);
    expect(state.doc.error, JSON.stringify(state.doc)).toBeUndefined();
    expect(state.doc.result).toBe((await anvil.rpc('eth_getBalance', [ADDRESS, `0x${n.toString(16)}`])).result);
    expect(await blockNumber('wait')).toBe(n);
    expect((await upstreams('wait'))[1]!.head).toBe(n);
  });
});
