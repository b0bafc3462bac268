// Issue 31, defect 1: a call joined a flight that started before the head
// changed. A stand-in in front of each node holds back the answer to one
// client call (the node answered it at once, from the state it had then).
// Client A asks; the chain moves (a new balance and a block, a reorg, a new
// Blockbook or Rosetta block); the gateway's own head gauge shows it; then
// client B asks the same call. B must go upstream itself (X-Cache: MISS) and
// get the chain as it is now, never the answer of A's flight, which started
// in the epoch before (X-Cache: COALESCED, the old answer).
//
// No waiting on the clock: A's call is known to be held once the stand-in has
// it (and the node's answer to it) in hand; the gateway is known to have seen
// the change by its metrics. The stand-in lets A's answer go once B is
// answered, or after 3 s, as the slow node it plays would: that is how long a
// B that joined A's flight waits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { isCall, startSteerableProxy, type SteerableProxy } from '../support/steerable-proxy.ts';

const KEY = newKey();
/** How long the stand-ins hold an answer at most (the slow node's delay). */
const HOLD_MS = 3000;

let anvil: Anvil;
let bb: BlockbookStub;
let rosetta: RosettaStub;
let evmProxy: SteerableProxy;
let bbProxy: SteerableProxy;
let rosettaProxy: SteerableProxy;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  [anvil, bb, rosetta] = await Promise.all([startAnvil({ chainId: 1 }), startBlockbookStub({ bestHeight: 500 }), startRosettaStub({ network: 'preprod', blockIndex: 100 })]);
  await anvil.mine(3);
  [evmProxy, bbProxy, rosettaProxy] = await Promise.all([
    startSteerableProxy(anvil.url),
    // The Blockbook stand-in's URL ends in /api; the proxy forwards the path as the gateway sends it.
    startSteerableProxy(new URL(bb.url).origin),
    startSteerableProxy(rosetta.url),
  ]);
  rig = await gateway({
    name: 'issue-31-flight-epoch',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
      { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${ROSETTA_URL}'] },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', coin: 'Bitcoin', upstreams: ['${BB_URL}/api'] },
    ],
    header: { cache: { headPollMs: 100 }, health: { intervalMs: 60000, timeoutMs: 2000 } },
    keys: [{ id: 'flights', key: KEY }],
    standIns: { anvil, bb, rosetta, ETH_URL: evmProxy, ROSETTA_URL: rosettaProxy, BB_URL: bbProxy },
  });
  gw = rig.gw;
  await Promise.all([sees('ethereum', 3), sees('bitcoin', 500), sees('cardano-preprod', 100)]);
}, 60_000);

afterAll(() => rig?.close());

const metric = (name: string, chain: string): Promise<number> => metricValue(gw, name, `{chain="${chain}"}`);

/** Waits until the gateway's cache knows `chain`'s head is `n` (its own gauge). */
async function sees(chain: string, n: number): Promise<void> {
  await until(async () => (await metric('gateway_cache_head_block', chain)) === n, `the gateway sees ${chain} at ${n}`);
}

interface Answer {
  status: number;
  xCache: string;
  body: any;
}

let nextId = 1;
async function rpc(method: string, params: unknown[]): Promise<Answer> {
  const res = await fetch(gw.url('rpc', '/ethereum'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  return { status: res.status, xCache: res.headers.get('x-cache') ?? '', body: await res.json() };
}

async function blockbook(path: string): Promise<Answer> {
  const res = await fetch(gw.url('explorer', `/bitcoin/v2/${path}`), { headers: { 'x-api-key': KEY } });
  return { status: res.status, xCache: res.headers.get('x-cache') ?? '', body: await res.json() };
}

async function rosettaCall(endpoint: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(gw.url('rpc', `/cardano-preprod/${endpoint}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' }, ...body }),
  });
  return { status: res.status, xCache: res.headers.get('x-cache') ?? '', body: await res.json() };
}

describe('issue 31: a call never joins a flight that started before the head changed', () => {
  it('EVM: after the balance changed and a block was mined, B gets the new balance from upstream (MISS), not A\'s flight', { timeout: 20_000 }, async () => {
    const who = '0x' + '42'.repeat(20);
    const head = Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
    const hold = evmProxy.holdNext((j) => isCall(j, 'eth_getBalance', (p) => p[0] === who), HOLD_MS);
    const a = rpc('eth_getBalance', [who, 'latest']);
    await hold.arrived; // anvil has answered A: the old balance, held at the stand-in
    expect((await anvil.rpc('anvil_setBalance', [who, '0x2a'])).error).toBeUndefined();
    await anvil.mine(1);
    await sees('ethereum', head + 1);

    const b = await rpc('eth_getBalance', [who, 'latest']);
    hold.release();
    const ans = await a;
    expect(ans.body.result).toBe('0x0'); // A asked before the change: the old balance is its right answer
    expect((await anvil.rpc('eth_getBalance', [who, 'latest'])).result).toBe('0x2a');
    expect({ result: b.body.result, xCache: b.xCache }, 'B asked after the gateway saw the new block').toEqual({ result: '0x2a', xCache: 'MISS' });
    // B's own call reached the node.
    expect(evmProxy.requests.filter((r) => isCall(r.json, 'eth_getBalance', (p) => p[0] === who))).toHaveLength(2);
  });

  it('EVM: across anvil_reorg, B gets the new block at the head (MISS), never the orphaned one A\'s flight carries', { timeout: 20_000 }, async () => {
    const accounts = (await anvil.rpc('eth_accounts')).result as string[];
    const orphan = (await anvil.rpc('eth_getBlockByNumber', ['latest', false])).result as { number: string; hash: string };
    await sees('ethereum', Number.parseInt(orphan.number, 16));
    const changes = await metric('gateway_cache_head_changes_total', 'ethereum');
    const hold = evmProxy.holdNext((j) => isCall(j, 'eth_getBlockByNumber', (p) => p[0] === 'latest'), HOLD_MS);
    const a = rpc('eth_getBlockByNumber', ['latest', false]);
    await hold.arrived;
    // The last block again, now with a transaction in it: same number, another hash.
    const reorg = await anvil.rpc('anvil_reorg', [1, [[{ from: accounts[0], to: accounts[1], value: '0x1' }, 0]]]);
    expect(reorg.error).toBeUndefined();
    const fresh = (await anvil.rpc('eth_getBlockByNumber', ['latest', false])).result as { number: string; hash: string };
    expect(fresh.number).toBe(orphan.number);
    expect(fresh.hash).not.toBe(orphan.hash);
    // The gateway saw the head's hash change (its number stayed).
    await until(async () => (await metric('gateway_cache_head_changes_total', 'ethereum')) > changes, 'the gateway sees the reorg');

    const b = await rpc('eth_getBlockByNumber', ['latest', false]);
    hold.release();
    expect((await a).body.result.hash).toBe(orphan.hash);
    const which = (h: unknown): unknown => (h === fresh.hash ? 'the new block' : h === orphan.hash ? 'the orphaned block' : h);
    expect({ block: which(b.body.result?.hash), xCache: b.xCache }, 'B asked after the gateway saw the reorg').toEqual({ block: 'the new block', xCache: 'MISS' });
  });

  it('Blockbook: after a new block, B gets the block with its new confirmation count (MISS), not A\'s flight', { timeout: 20_000 }, async () => {
    const hold = bbProxy.holdNext(() => true, HOLD_MS); // the stand-in's next client request: A's
    const a = blockbook('block/500');
    await hold.arrived;
    bb.setBestHeight(501);
    await sees('bitcoin', 501);

    const b = await blockbook('block/500');
    hold.release();
    expect((await a).body.confirmations).toBe(1);
    expect({ status: b.status, confirmations: b.body.confirmations, xCache: b.xCache }, 'B asked after the gateway saw block 501').toEqual({ status: 200, confirmations: 2, xCache: 'MISS' });
  });

  it('Rosetta: after a new block, B gets the balance at the new tip (MISS), not A\'s flight', { timeout: 20_000 }, async () => {
    const account = { account_identifier: { address: 'addr_test1vpfwv0ezc5g8a4mkku8hhy3y3vp92t7s3ul8g778g5yegsgalc6gc' } };
    const hold = rosettaProxy.holdNext(() => true, HOLD_MS);
    const a = rosettaCall('account/balance', account);
    await hold.arrived;
    rosetta.setBlockIndex(101);
    await sees('cardano-preprod', 101);

    const b = await rosettaCall('account/balance', account);
    hold.release();
    const old = await a;
    expect(old.status, JSON.stringify(old.body)).toBe(200);
    expect(old.body.block_identifier.index).toBe(100);
    expect({ status: b.status, tip: b.body.block_identifier?.index, xCache: b.xCache }, 'B asked after the gateway saw block 101').toEqual({ status: 200, tip: 101, xCache: 'MISS' });
  });
});
