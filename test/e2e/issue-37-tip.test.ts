// Issue 37, defects 3, 13, 14, 15 and 16: the served tip and the chain's
// identity as a pool keeps them, through the built gateway, in front of
// stand-ins that do what real nodes and proxies do:
//  - 3: one upstream's head dips, then every upstream comes back behind
//    (pool-standins' laggard, its lag steered): eth_blockNumber never goes
//    below what it said, with the cache on or off, and a call at `latest`
//    still gets an answer from the nodes furthest ahead. A Rosetta pool,
//    whose finality is a depth below the head, does not reset or move its
//    tip back when one node dips either;
//  - 13: with `finality: {depth}`, `finalized` is the node's own finalized
//    block where it is lower than head − depth (anvil's: 64 below its head,
//    its safe block 32 below), never above `safe`;
//  - 14: a broken proxy answers the polls' head with null: the upstream is
//    left out of the tip and of calls at `latest`, and the tip follows the
//    other node;
//  - 15: one upstream answers polls 6 s late: the tip shows a new block
//    before that upstream has reported it;
//  - 16: no chainId, and one upstream of another chain (anvil --chain-id 137)
//    far ahead: it is wrong_chain, every call is answered by chain 1.
// Each test waits for what the gateway saw (/readyz's heads, the stand-ins'
// poll records) with until(), never for a time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, vars, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';
import { polledHead, startSteerableProxy, withoutHeight, type SteerableProxy } from '../support/steerable-proxy.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';

const KEY = newKey();
/** The pools' poll interval (health.intervalMs; a pool polls at least every second). */
const POLL_MS = 1000;
/** How late the slow upstream answers polls (defect 15): far more than a poll interval. */
const SLOW_POLL_MS = 6000;
const DEPTH = 5;

let anvil: Anvil;
let polygon: Anvil;
let dipA: PoolStandin;
let dipB: PoolStandin;
let heightA: SteerableProxy;
let heightB: SteerableProxy;
let slowA: SteerableProxy;
let slowB: SteerableProxy;
let depthA: RecordingProxy;
let depthB: RecordingProxy;
let electA: RecordingProxy;
let electB: RecordingProxy;
let electWrong: RecordingProxy;
let rosettaA: RosettaStub;
let rosettaB: RosettaStub;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  [anvil, polygon] = await Promise.all([startAnvil({ chainId: 1, args: ['--no-mining'] }), startAnvil({ chainId: 137, args: ['--no-mining'] })]);
  // Past 64 blocks anvil reports a finalized block (64 below its head) and a safe one (32 below).
  await Promise.all([anvil.mine(200), polygon.mine(1000)]);
  [rosettaA, rosettaB] = await Promise.all([startRosettaStub({ network: 'preprod' }), startRosettaStub({ network: 'preprod' })]);
  [dipA, dipB, heightA, heightB, slowA, slowB, depthA, depthB, electA, electB, electWrong] = await Promise.all([
    startPoolStandin(anvil.url, { role: 'laggard', lag: 0 }),
    startPoolStandin(anvil.url, { role: 'laggard', lag: 0 }),
    startSteerableProxy(anvil.url),
    startSteerableProxy(anvil.url),
    startSteerableProxy(anvil.url),
    startSteerableProxy(anvil.url),
    startRecordingProxy(anvil.url),
    startRecordingProxy(anvil.url),
    startRecordingProxy(anvil.url),
    startRecordingProxy(anvil.url),
    startRecordingProxy(polygon.url),
  ]);
  rig = await gateway({
    name: 'issue-37-tip',
    chains: [
      evmChain('dip', ['DIP_A', 'DIP_B'], { cache: 'off', rewriteTags: false }),
      evmChain('dip-cached', ['DIP_A', 'DIP_B'], { rewriteTags: false }),
      evmChain('height', ['HEIGHT_A', 'HEIGHT_B'], { cache: 'off', rewriteTags: false }),
      evmChain('slow', ['SLOW_A', 'SLOW_B'], { cache: 'off', rewriteTags: false }),
      evmChain('depth', ['DEPTH_A', 'DEPTH_B'], { cache: 'off', rewriteTags: true, finality: { depth: DEPTH } }),
      evmChain('depth-cached', ['DEPTH_A', 'DEPTH_B'], { rewriteTags: true, finality: { depth: DEPTH } }),
      { path: 'rosetta-dip', interface: 'rosetta', network: 'preprod', cache: 'off', finality: { depth: 10 }, upstreams: vars('ROSETTA_A', 'ROSETTA_B') },
      { path: 'rosetta-dip-cached', interface: 'rosetta', network: 'preprod', finality: { depth: 10 }, upstreams: vars('ROSETTA_A', 'ROSETTA_B') },
      { path: 'elect', interface: 'evm-jsonrpc', cache: 'off', upstreams: [...vars('ELECT_A', 'ELECT_B'), { url: '${ELECT_WRONG}', weight: 10 }] },
    ],
    header: { cache: { headPollMs: POLL_MS }, health: { intervalMs: POLL_MS, timeoutMs: 10000 } },
    keys: [{ id: 'tip', key: KEY }],
    standIns: {
      anvil,
      polygon,
      DIP_A: dipA,
      DIP_B: dipB,
      HEIGHT_A: heightA,
      HEIGHT_B: heightB,
      SLOW_A: slowA,
      SLOW_B: slowB,
      DEPTH_A: depthA,
      DEPTH_B: depthB,
      ELECT_A: electA,
      ELECT_B: electB,
      ELECT_WRONG: electWrong,
      ROSETTA_A: rosettaA,
      ROSETTA_B: rosettaB,
    },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

let nextId = 1;
async function call(chain: string, method: string, params: unknown[] = []): Promise<any> {
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const doc = JSON.parse(await r.body.text()) as { result?: unknown; error?: unknown };
  expect(doc.error, `${chain} ${method} ${JSON.stringify(params)}`).toBeUndefined();
  return doc.result;
}

const num = (hex: unknown): number => Number.parseInt(String(hex), 16);
const blockNumber = async (chain: string): Promise<number> => num(await call(chain, 'eth_blockNumber'));
const anvilHead = async (): Promise<number> => num((await anvil.rpc('eth_blockNumber')).result);
async function anvilBlock(tag: string): Promise<number> {
  return num(((await anvil.rpc('eth_getBlockByNumber', [tag, false])).result as { number: string }).number);
}

/** Each upstream's head as the gateway's view has it (/readyz), in manifest order. */
async function heads(chain: string): Promise<(number | null)[]> {
  const ready = (await (await request(gw.url('admin', '/readyz'))).body.json()) as { chains: Record<string, { upstreams: { head: number | null }[] }> };
  return ready.chains[chain]!.upstreams.map((u) => u.head);
}

async function states(chain: string): Promise<string[]> {
  const ready = (await (await request(gw.url('admin', '/readyz'))).body.json()) as { chains: Record<string, { upstreams: { state: string }[] }> };
  return ready.chains[chain]!.upstreams.map((u) => u.state);
}

describe('issue 37: the served tip goes back only when the chain does', () => {
  const chains = ['dip', 'dip-cached'];

  it('one upstream dipping, or every upstream coming back behind, does not move eth_blockNumber back (cache off and on); calls at latest still get answers', { timeout: 60_000 }, async () => {
    let head = await anvilHead();
    for (const c of chains) await until(async () => (await blockNumber(c)) === head, `${c} serves ${head}`);

    // One node's head dips by one; the other stays at the head.
    dipB.lag = 1;
    for (const c of chains) await until(async () => (await heads(c)).join() === `${head},${head - 1}`, `${c} sees the dip`);
    for (const c of chains) expect(await blockNumber(c), `${c}: one node dipped`).toBe(head);

    dipB.lag = 0;
    await anvil.mine(10);
    head += 10;
    for (const c of chains) await until(async () => (await blockNumber(c)) === head, `${c} serves ${head}`);

    // Every node comes back three blocks behind what the clients were given.
    dipA.lag = 3;
    dipB.lag = 3;
    for (const c of chains) await until(async () => (await heads(c)).join() === `${head - 3},${head - 3}`, `${c} sees both nodes behind`);
    for (const c of chains) expect(await blockNumber(c), `${c}: every node came back behind`).toBe(head);
    // No node is at the tip: a call at latest goes to the ones furthest ahead, and is answered.
    const latest = (await call('dip', 'eth_getBlockByNumber', ['latest', false])) as { number: string };
    expect(num(latest.number)).toBe(head - 3);
    expect(await call('dip', 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest'])).toMatch(/^0x/);

    // They catch up: the tip moves on from where it was.
    dipA.lag = 0;
    dipB.lag = 0;
    await anvil.mine(1);
    for (const c of chains) await until(async () => (await blockNumber(c)) === head + 1, `${c} serves ${head + 1}`);
  });
});

describe('issue 37: a Rosetta pool, whose finality is a depth below the head', () => {
  it('one node dipping resets nothing and does not move the served tip back (cache off and on)', { timeout: 30_000 }, async () => {
    const chains = ['rosetta-dip', 'rosetta-dip-cached'];
    const tip = (c: string): Promise<number> => metricValue(gw, 'gateway_pool_served_tip', `{chain="${c}"}`);
    for (const c of chains) await until(async () => (await tip(c)) === 1000, `${c}: served tip 1000`);
    rosettaB.setBlockIndex(999);
    for (const c of chains) await until(async () => (await heads(c)).join() === '1000,999', `${c} sees the dip`);
    for (const c of chains) expect(await tip(c), `${c}: one node dipped`).toBe(1000);
    expect(await metricValue(gw, 'gateway_cache_resets_total', '{chain="rosetta-dip-cached",reason="finalized_backwards"}')).toBe(0);
    expect(gw.lines.filter((l) => l.includes('"cache_reset"') && l.includes('rosetta-dip'))).toEqual([]);
    rosettaB.setBlockIndex(1000);
  });
});

describe('issue 37: an upstream whose poll has no usable height', () => {
  it('is left out of the tip and of calls at latest; the tip follows the other node', { timeout: 60_000 }, async () => {
    const head = await anvilHead();
    await until(async () => (await blockNumber('height')) === head, `height serves ${head}`);
    const from = heightB.polls.length;
    heightB.pollAnswer = withoutHeight;
    // Two polls answered with no height: the gateway took the first in before it sent the second.
    await until(async () => heightB.polls.slice(from).filter((p) => polledHead(p) === -1).length >= 2, 'the gateway saw a poll with no height');

    const asked = heightB.requests.length;
    for (let i = 0; i < 10; i++) expect(num(((await call('height', 'eth_getBlockByNumber', ['latest', false])) as { number: string }).number)).toBe(head);
    expect(heightB.requests.length - asked, 'calls at latest that reached the upstream with no height').toBe(0);

    await anvil.mine(20);
    await until(async () => (await blockNumber('height')) === head + 20, `height serves ${head + 20} while one node's polls have no height`);

    heightB.pollAnswer = null;
    await until(async () => (await heads('height'))[1] === head + 20, 'the node answers with a height again');
  });
});

describe('issue 37: an upstream that answers polls late', () => {
  it(`holds no one: a new block is served before the upstream whose polls come ${SLOW_POLL_MS} ms late reports it`, { timeout: 60_000 }, async () => {
    const head = await anvilHead();
    await until(async () => (await blockNumber('slow')) === head, `slow serves ${head}`);
    slowB.pollDelayMs = SLOW_POLL_MS;
    await anvil.mine(1);
    await until(async () => (await blockNumber('slow')) === head + 1, `slow serves ${head + 1}`, 30_000);
    // The tip moved on the fast node's report: the slow one has not answered a poll that names the block yet.
    expect(slowB.polls.filter((p) => polledHead(p) > head), "the slow node's poll answers naming the new block when the tip showed it").toEqual([]);
    // And calls at latest go to the node that has the tip.
    const asked = slowB.requests.length;
    for (let i = 0; i < 10; i++) await call('slow', 'eth_getBlockByNumber', ['latest', false]);
    expect(slowB.requests.length - asked, 'calls at latest that reached the slow node').toBe(0);
    slowB.pollDelayMs = 0;
  });
});

describe('issue 37: finality by depth', () => {
  for (const chain of ['depth', 'depth-cached']) {
    it(`${chain}: finalized is the node's own where it is lower than head - ${DEPTH}, never above safe`, { timeout: 30_000 }, async () => {
      const [own, safe, head] = [await anvilBlock('finalized'), await anvilBlock('safe'), await anvilHead()];
      expect(own, "anvil's finalized block is below head - depth").toBeLessThan(head - DEPTH);
      const served = async (tag: string): Promise<number> => num(((await call(chain, 'eth_getBlockByNumber', [tag, false])) as { number: string }).number);
      await until(async () => (await served('safe')) === safe, `${chain} serves safe ${safe}`);
      await until(async () => (await served('finalized')) === own, `${chain} serves finalized ${own}, the node's own (head ${head}, depth ${DEPTH})`);
      expect(await served('finalized')).toBeLessThanOrEqual(await served('safe'));
    });
  }
});

describe('issue 37: a pool without chainId takes the identity most of its upstreams have', () => {
  it('one upstream of another chain, far ahead, is wrong_chain and answers nothing; every call is chain 1', { timeout: 30_000 }, async () => {
    await until(async () => (await states('elect')).join() === 'up,up,wrong_chain', 'the upstream of chain 137 is wrong_chain');
    const line = await gw.waitForLog((e) => e.event === 'upstream_wrong_chain' && e.chain === 'elect');
    expect(line.serves).toBe('chainId 137');
    electWrong.clear();
    for (let i = 0; i < 20; i++) expect(await call('elect', 'eth_chainId')).toBe('0x1');
    const head = await anvilHead();
    expect(await blockNumber('elect')).toBeLessThanOrEqual(head);
    expect(electWrong.requests, 'client calls that reached the upstream of chain 137').toEqual([]);
  });
});
