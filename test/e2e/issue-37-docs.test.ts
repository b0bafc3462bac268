// Issue 37, defect 6, through the built gateway: Rosetta and Blockbook pools of
// a stand-in behind (997) and one ahead (1000) (test/support/rosetta-stub.ts,
// blockbook-stub.ts, which answer as the specs in ../shared/specs say).
//  - Rosetta's /network/status names the served tip (the block both have),
//    never going back, whichever node is asked; one upstream whose polls see
//    997 while its calls reach the node at 1000 (test/support/split-node.ts)
//    is still served as 997;
//  - a block asked by hash that the node behind does not have ("Block not
//    found": Rosetta 4001, Blockbook's {"error":"Block not found"}) is asked
//    again of the node ahead, on both interfaces.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { rosettaBlockHash, startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { blockbookBlockHash, startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startSplitNode, type SplitNode } from '../support/split-node.ts';
import { fetchSeries } from '../support/metrics-text.ts';

const KEY = newKey();
const BEHIND = 997;
const AHEAD = 1000;
let behind: RosettaStub;
let ahead: RosettaStub;
let bbBehind: BlockbookStub;
let bbAhead: BlockbookStub;
let split: SplitNode;
/** What the split node's polls see (its calls reach `ahead`). */
let polled: RosettaStub;
let up: Gateway;
let gw: RunningGateway;

const servedTip = (chain: string) => fetchSeries(gw.url('admin', '/metrics'), 'gateway_pool_served_tip', { chain });
const upstreamHead = (chain: string, n: number) => fetchSeries(gw.url('admin', '/metrics'), 'gateway_upstream_head', { chain, upstream: `${chain}#${n}` });

beforeAll(async () => {
  // All start at BEHIND, so that the served tip is the block both have however the first polls arrive; then the node ahead moves on.
  const stub = () => startRosettaStub({ network: 'preprod', blockIndex: BEHIND });
  [behind, ahead, polled] = await Promise.all([stub(), stub(), stub()]);
  [bbBehind, bbAhead] = await Promise.all([startBlockbookStub({ bestHeight: BEHIND }), startBlockbookStub({ bestHeight: BEHIND })]);
  split = await startSplitNode({ polls: polled.url, calls: ahead.url });
  up = await gateway({
    name: 'issue-37-docs',
    chains: [
      { path: 'cardano', interface: 'rosetta', network: 'preprod', upstreams: ['${BEHIND}', '${AHEAD}'] },
      { path: 'csplit', interface: 'rosetta', network: 'preprod', upstreams: ['${SPLIT}', '${AHEAD}'] },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB_BEHIND}', '${BB_AHEAD}'] },
    ],
    keys: [{ id: 'docs', key: KEY }],
    standIns: { behind, ahead, polled, bbBehind, bbAhead, split },
    env: { BEHIND: behind.url, AHEAD: ahead.url, SPLIT: split.url, BB_BEHIND: bbBehind.url, BB_AHEAD: bbAhead.url },
  });
  gw = up.gw;
  const both = async (heads: readonly [number, number]) => {
    for (const chain of ['cardano', 'csplit', 'bitcoin']) {
      await until(async () => (await upstreamHead(chain, 0)) === heads[0] && (await upstreamHead(chain, 1)) === heads[1], `${chain}: the polls seeing both nodes at ${heads.join(' and ')}`);
    }
  };
  await both([BEHIND, BEHIND]);
  ahead.setBlockIndex(AHEAD);
  bbAhead.setBestHeight(AHEAD);
  await both([BEHIND, AHEAD]);
}, 60_000);

afterAll(() => up?.close());

async function rosetta(chain: string, endpoint: string, body: Record<string, unknown> = {}): Promise<{ status: number; json: any }> {
  const r = await request(gw.url('rpc', `/${chain}/${endpoint}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' }, ...body }),
  });
  return { status: r.statusCode, json: await r.body.json() };
}

async function statusIndex(chain: string): Promise<{ index: number; hash: string }> {
  const a = await rosetta(chain, 'network/status', { metadata: {} });
  expect(a.status, JSON.stringify(a.json)).toBe(200);
  return a.json.current_block_identifier;
}

describe('Rosetta /network/status on a pool', () => {
  // The served tip is the block both nodes have while both poll on time; a poll of the node behind that is overdue
  // (a loaded machine) leaves it out, and the tip moves up to the node ahead for good. Either way every answer must
  // name the served tip of its moment, with that block's hash, and never go back: the tip is read around each call.
  it('names the served tip (its block and hash) whichever node is asked, and never goes back, not even when a node dips', async () => {
    let last = BEHIND;
    const check = async (chain: string, i: number): Promise<number> => {
      const before = await servedTip(chain);
      const s = await statusIndex(chain);
      const after = await servedTip(chain);
      expect(s.index, `call ${i}: the served tip was ${before}..${after}`).toBeGreaterThanOrEqual(Math.max(before, last));
      expect(s.index, `call ${i}`).toBeLessThanOrEqual(after);
      expect(s.hash, `call ${i}`).toBe(rosettaBlockHash(s.index));
      last = s.index;
      return s.index;
    };
    for (let i = 0; i < 8; i++) await check('cardano', i);
    // The node behind catches up two blocks: the answer follows, and never goes below what was given.
    behind.setBlockIndex(BEHIND + 2);
    await until(async () => (await upstreamHead('cardano', 0)) === BEHIND + 2, 'the polls seeing the node behind at its new head');
    for (let i = 0; i < 8; i++) await check('cardano', i);
    expect(last).toBeGreaterThanOrEqual(BEHIND + 2);
    // The node behind dips one block (a node resyncing): the answer does not go back with it.
    const high = last;
    behind.setBlockIndex(BEHIND + 1);
    await until(async () => (await upstreamHead('cardano', 0)) === BEHIND + 1, 'the polls seeing the node behind one block lower');
    for (let i = 0; i < 6; i++) expect(await check('cardano', i)).toBeGreaterThanOrEqual(high);
  });

  it('an upstream that has moved past what its polls said is served as the served tip (its block, its hash)', async () => {
    // csplit#0: the polls see 997, the calls reach the node at 1000; the answer is rewritten to the served tip.
    for (let i = 0; i < 6; i++) {
      const before = await servedTip('csplit');
      const a = await rosetta('csplit', 'network/status', { metadata: {} });
      const after = await servedTip('csplit');
      const id = a.json.current_block_identifier as { index: number; hash: string };
      expect(id.index, `call ${i}: the served tip was ${before}..${after}`).toBeGreaterThanOrEqual(before);
      expect(id.index, `call ${i}`).toBeLessThanOrEqual(after);
      expect(id.hash).toBe(rosettaBlockHash(id.index));
      expect(a.json.sync_status.current_index).toBe(id.index);
    }
  });
});

describe('a block asked by hash on a pool', () => {
  it('Rosetta: /block by the hash of a block only the node ahead has is answered every time', async () => {
    for (let i = 0; i < 6; i++) {
      const a = await rosetta('cardano', 'block', { block_identifier: { hash: rosettaBlockHash(AHEAD) } });
      expect(a.status, `call ${i}: ${JSON.stringify(a.json)}`).toBe(200);
      expect(a.json.block.block_identifier).toEqual({ index: AHEAD, hash: rosettaBlockHash(AHEAD) });
    }
    // The node behind was asked, and said it has no such block.
    expect(behind.requests.filter((r) => r.path === '/block').length).toBeGreaterThan(0);
  });

  it('Blockbook: /v2/block/<hash> of a block only the node ahead has is answered every time', async () => {
    const before = bbBehind.requests.length;
    for (let i = 0; i < 6; i++) {
      const r = await request(gw.url('explorer', `/bitcoin/v2/block/${blockbookBlockHash(AHEAD)}`), { headers: { 'x-api-key': KEY } });
      const json = (await r.body.json()) as { height?: number; error?: string };
      expect(r.statusCode, `call ${i}: ${JSON.stringify(json)}`).toBe(200);
      expect(json.height).toBe(AHEAD);
    }
    expect(bbBehind.requests.slice(before).filter((r) => r.path.startsWith('/api/v2/block/')).length).toBeGreaterThan(0);
  });
});
