// Issue 43, eth_getLogs ranges (rules 2, 3, 5, 9 and 10), through the built
// gateway, against anvil with real logs (a contract whose code is LOG0, called
// in most of 300 blocks). Each chain's upstreams are stand-ins in front of
// that anvil that cap eth_getLogs as providers do and refuse wider ranges with
// their own texts (test/support/range-capped-node.ts); every range that
// reached them is recorded. The oracle is anvil itself, asked for the range.
// Rule 6 (the held-bytes bound) is issue-43-logs-memory.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { metricValue, newKey, until, EVM_METHODS, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRangeCappedNode, type LogsSeen, type RangeCappedNode } from '../support/range-capped-node.ts';
import { startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';
import { startSplitNode, type SplitNode } from '../support/split-node.ts';

const KEY = newKey();
/** anvil's first dev account (unlocked). */
const FROM = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
/** Init code that deploys the runtime code 0x60006000a0: PUSH1 0 PUSH1 0 LOG0 (a log with no topics and no data). */
const DEPLOY_LOG0 = '0x6460006000a06000526005601bf3';
/** Blocks with logs. */
const BLOCKS = 300;
/** Blocks mined after them: the head is past block 1000, so a range of 1050 blocks lies below it. */
const AFTER = 800;

let anvil: Anvil;
let rig: Gateway;
let gw: RunningGateway;
let contract = '';
let first = 0;
let last = 0;
const nodes: Record<string, RangeCappedNode> = {};
/** The polls of the `behind` chain reach a laggard 3 blocks behind; its calls reach a capped node at anvil's head. */
let laggard: PoolStandin;
let behind: SplitNode;

const ENV: Record<string, string> = { SOLO: 'solo', ALCHEMY: 'alchemy', PACED: 'paced', CLAMP: 'clamp', CALLS: 'calls', TINY: 'tiny', OWN: 'own' };

async function send(method: string, params: unknown[]): Promise<any> {
  const r = await anvil.rpc(method, params);
  if (r.error) throw new Error(`${method}: ${r.error.message}`);
  return r.result;
}

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  const deploy = await send('eth_sendTransaction', [{ from: FROM, data: DEPLOY_LOG0, gas: '0x30000' }]);
  await anvil.mine(1);
  contract = ((await send('eth_getTransactionReceipt', [deploy])) as { contractAddress: string }).contractAddress;
  first = Number.parseInt(await send('eth_blockNumber', []), 16) + 1;
  // Logs in most blocks: none in every seventh, two in every third.
  for (let i = 0; i < BLOCKS; i++) {
    const calls = i % 7 === 6 ? 0 : i % 3 === 0 ? 2 : 1;
    for (let k = 0; k < calls; k++) await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
    await anvil.mine(1);
  }
  last = first + BLOCKS - 1;
  await anvil.mine(AFTER);
  const caps: Record<string, { cap: number | null; text?: 'publicnode' | 'alchemy-size' }> = {
    solo: { cap: 100, text: 'publicnode' },
    alchemy: { cap: 100, text: 'alchemy-size' },
    paced: { cap: 50 },
    clamp: { cap: 50 },
    calls: { cap: 50 },
    tiny: { cap: 1 },
    own: { cap: null },
  };
  for (const id of Object.values(ENV)) nodes[id] = await startRangeCappedNode(anvil.url, caps[id]);
  laggard = await startPoolStandin(anvil.url, { role: 'laggard', lag: 3 });
  behind = await startSplitNode({ polls: laggard.url, calls: nodes.calls!.url });
  rig = await gateway({
    name: 'issue-43-ranges',
    chains: [
      // Rule 10: one node, no word of its cap in the manifest; it refuses more than 100 blocks.
      evmChain('solo', ['SOLO']),
      // Rule 2: one node that answers Alchemy's "Log response size exceeded" past 100 blocks (a cap in the manifest that
      // splits nothing here: the ranges layer was there before rule 10 too).
      { path: 'alchemy', interface: 'evm-jsonrpc', upstreams: [{ url: '${ALCHEMY}', maxLogRange: 5000 }] },
      // Rule 3: one node that takes 50 blocks, at 10 requests a second; a call has 2 s.
      { path: 'paced', interface: 'evm-jsonrpc', limits: { timeoutMs: 2000 }, upstreams: [{ url: '${PACED}', maxLogRange: 50, rateLimit: '10/s' }] },
      // Rule 5: one node that takes 50 blocks.
      { path: 'clamp', interface: 'evm-jsonrpc', upstreams: [{ url: '${CLAMP}', maxLogRange: 50 }] },
      // Rule 5: one node that takes 50 blocks, whose polls report a head 3 blocks behind the one its calls see.
      { path: 'behind', interface: 'evm-jsonrpc', upstreams: [{ url: '${BEHIND}', maxLogRange: 50 }] },
      // Rule 9: a provider that takes one block, and the own node that takes any range.
      { path: 'sized', interface: 'evm-jsonrpc', upstreams: [{ url: '${TINY}', maxLogRange: 1 }, '${OWN}'] },
    ],
    header: { methodSets: { evm: [...EVM_METHODS, 'eth_getLogs'] }, },
    keys: [{ id: 'ranges', key: KEY }],
    standIns: { anvil, BEHIND: behind, laggard, nodes: Object.values(nodes) },
    env: Object.fromEntries(Object.entries(ENV).map(([k, id]) => [k, nodes[id]!.url])),
  });
  gw = rig.gw;
}, 180_000);

afterAll(() => rig?.close());

/** A raw call through the gateway: its status and its text. */
async function raw(chain: string, body: string): Promise<{ status: number; text: string }> {
  const r = await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body });
  return { status: r.statusCode, text: await r.body.text() };
}

const hex = (n: number): string => `0x${n.toString(16)}`;
const logsCall = (id: number, filter: Record<string, unknown>): string => `{"jsonrpc":"2.0","id":${id},"method":"eth_getLogs","params":[${JSON.stringify(filter)}]}`;

/** anvil's own answer to the range. */
async function oracle(filter: Record<string, unknown>): Promise<unknown[]> {
  const r = await anvil.rpc('eth_getLogs', [filter]);
  expect(r.error).toBeUndefined();
  return r.result as unknown[];
}

function widths(seen: readonly LogsSeen[]): number[] {
  return seen.map((s) => (typeof s.from === 'number' && typeof s.to === 'number' ? s.to - s.from + 1 : Number.NaN));
}

describe('eth_getLogs ranges keep their promises (issue 43)', () => {
  it('rule 10: a chain of one upstream splits a range its node refuses ("exceed maximum block range: 100"), and answers it complete', async () => {
    const node = nodes.solo!;
    const filter = { fromBlock: hex(first), toBlock: hex(last) };
    const at = node.logs.length;
    const r = await raw('solo', logsCall(1, filter));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ jsonrpc: '2.0', id: 1, result: await oracle(filter) });
    const seen = node.logs.slice(at);
    expect(seen[0], 'the whole range went first, and was refused').toEqual({ from: first, to: last, refused: true });
    expect(seen.slice(1).every((s) => !s.refused)).toBe(true);
    expect(Math.max(...widths(seen.slice(1)))).toBeLessThanOrEqual(100);
    // The cap is kept: the next range is split from the start.
    const again = node.logs.length;
    expect(JSON.parse((await raw('solo', logsCall(2, filter))).text).result).toEqual(await oracle(filter));
    expect(node.logs.slice(again).filter((s) => s.refused)).toEqual([]);
    // A range within the cap goes as the client's call, streamed as before.
    const narrow = { fromBlock: hex(first), toBlock: hex(first + 9) };
    const one = node.logs.length;
    expect(JSON.parse((await raw('solo', logsCall(3, narrow))).text)).toEqual({ jsonrpc: '2.0', id: 3, result: await oracle(narrow) });
    expect(node.logs.slice(one)).toEqual([{ from: first, to: first + 9, refused: false }]);
    // A short error that refuses no range is the node's answer, byte for byte (anvil: blocks past its head).
    const head = Number.parseInt(await send('eth_blockNumber', []), 16);
    const past = logsCall(13, { fromBlock: hex(head + 5), toBlock: hex(head + 6) });
    const direct = await request(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: past });
    const own = await direct.body.text();
    expect(own).toContain('"error"');
    expect(await raw('solo', past)).toEqual({ status: 200, text: own });
  }, 30_000);

  it('rule 2: Alchemy\'s "Log response size exceeded ... up to a 2K block range" splits by the range it suggests, and keeps no cap', async () => {
    const node = nodes.alchemy!;
    const filter = { fromBlock: hex(first), toBlock: hex(last) };
    const at = node.logs.length;
    const r = JSON.parse((await raw('alchemy', logsCall(4, filter))).text) as { result?: unknown[]; error?: unknown };
    expect(r.error).toBeUndefined();
    expect(r.result).toEqual(await oracle(filter));
    const seen = node.logs.slice(at);
    expect(seen.filter((s) => s.refused).length).toBeGreaterThan(0);
    expect(Math.max(...widths(seen.filter((s) => !s.refused)))).toBeLessThanOrEqual(100);
    // A too-many-logs answer is not a cap of the upstream: no 2,000-block cap (nor any other) is learned.
    expect(gw.lines.filter((l) => l.includes('"upstream_log_range"') && l.includes('"chain":"alchemy"'))).toEqual([]);
  }, 30_000);

  it('rule 3: a split range on an upstream with rateLimit 10/s is paced within timeoutMs, not refused with 429', async () => {
    const node = nodes.paced!;
    // Six chunks of 50: three times what the bucket holds at once.
    const filter = { fromBlock: hex(first), toBlock: hex(last) };
    const at = node.logs.length;
    const r = await raw('paced', logsCall(5, filter));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ jsonrpc: '2.0', id: 5, result: await oracle(filter) });
    expect(node.logs.slice(at).length).toBe(BLOCKS / 50);
  }, 30_000);

  it('rule 3: a range that cannot fit at the budget within timeoutMs is refused up front with -32602, naming the widest range that fits', async () => {
    const node = nodes.paced!;
    const at = node.logs.length;
    // 1050 blocks: 21 chunks; at 10/s (less the polls' tenth) within 2 s, at most 2 + 18.
    const wide = JSON.parse((await raw('paced', logsCall(6, { fromBlock: hex(first), toBlock: hex(first + 1049) }))).text) as { id: number; error: { code: number; data: { maxLogRange: number } } };
    expect(wide.id).toBe(6);
    expect(wide.error.code).toBe(-32602);
    expect(node.logs.slice(at), 'no node saw it').toEqual([]);
    const widest = wide.error.data.maxLogRange;
    expect(widest % 50).toBe(0);
    expect(widest).toBeGreaterThanOrEqual(50 * 18);
    expect(widest).toBeLessThan(1050);
    // Half of it is answered, paced.
    const half = { fromBlock: hex(first), toBlock: hex(first + widest / 2 - 1) };
    const ok = await raw('paced', logsCall(7, half));
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text).result).toEqual(await oracle(half));
  }, 30_000);

  it('rule 5: a range past the head is answered as one node at the head answers it, whole (no chunk above the head gets the node\'s out-of-range error)', async () => {
    const head = Number.parseInt(await send('eth_blockNumber', []), 16);
    await until(async () => (await metricValue(gw, 'gateway_upstream_head', '{chain="clamp",upstream="clamp#0"}')) === head, 'the gateway knows anvil\'s head');
    const node = nodes.clamp!;
    const at = node.logs.length;
    const r = await raw('clamp', logsCall(8, { fromBlock: hex(last - 120), toBlock: hex(head + 50) }));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ jsonrpc: '2.0', id: 8, result: await oracle({ fromBlock: hex(last - 120), toBlock: hex(head) }) });
    expect(node.logs.slice(at).every((s) => typeof s.to === 'number' && s.to <= head), 'no chunk asked past the head').toBe(true);
    // Clamped to one chunk: it goes by number, to the head, not as the client wrote it.
    const one = node.logs.length;
    expect(JSON.parse((await raw('clamp', logsCall(12, { fromBlock: hex(head - 10), toBlock: hex(head + 100) }))).text).result).toEqual(await oracle({ fromBlock: hex(head - 10), toBlock: hex(head) }));
    expect(node.logs.slice(one)).toEqual([{ from: head - 10, to: head, refused: false }]);
    // Wholly above the head: no block of it exists at that head, so no log.
    const above = node.logs.length;
    expect(JSON.parse((await raw('clamp', logsCall(9, { fromBlock: hex(head + 1), toBlock: hex(head + 200) }))).text)).toEqual({ jsonrpc: '2.0', id: 9, result: [] });
    expect(node.logs.slice(above)).toEqual([]);
  }, 30_000);

  it('rule 5: one snapshot per range: blocks mined while its chunks are out are not in the answer, none half in', async () => {
    // Logs at the top of the chain, in the range's last chunk.
    for (let i = 0; i < 5; i++) {
      await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
      await anvil.mine(1);
    }
    const head = Number.parseInt(await send('eth_blockNumber', []), 16);
    await until(async () => (await metricValue(gw, 'gateway_upstream_head', '{chain="clamp",upstream="clamp#0"}')) === head, 'the gateway knows anvil\'s head');
    const node = nodes.clamp!;
    const want = await oracle({ fromBlock: hex(head - 120), toBlock: hex(head) });
    expect(want.length).toBe(5);
    // Each chunk that reaches the node first mines a block with a log: the chain grows while the range is split.
    // One at a time: two chunks' transactions sent at once from one account may take one nonce, and the one anvil
    // refuses would make the stand-in answer 500 (seen in CI as the gateway's 502).
    let turn: Promise<void> = Promise.resolve();
    node.before = () => {
      turn = turn.then(async () => {
        await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
        await anvil.mine(1);
      });
      return turn;
    };
    try {
      const r = await raw('clamp', logsCall(10, { fromBlock: hex(head - 120), toBlock: hex(head + 20) }));
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text).result).toEqual(want);
    } finally {
      node.before = null;
    }
    expect(Number.parseInt(await send('eth_blockNumber', []), 16), 'blocks were mined meanwhile').toBeGreaterThan(head);
  }, 30_000);

  it("rule 5: on a chain of one upstream the head is the node's own: blocks its clients know of (past the last poll's head) are not answered absent", async () => {
    // Logs in the top blocks: the ones the polls do not report yet.
    for (let i = 0; i < 3; i++) {
      await send('eth_sendTransaction', [{ from: FROM, to: contract, gas: '0x10000' }]);
      await anvil.mine(1);
    }
    const head = Number.parseInt(await send('eth_blockNumber', []), 16);
    await until(async () => (await metricValue(gw, 'gateway_upstream_head', '{chain="behind",upstream="behind#0"}')) === head - 3, 'the polls report the laggard\'s head');
    // The client asks the node its head, as any client of a chain of one upstream does, and the logs up to it.
    expect(JSON.parse((await raw('behind', '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}')).text).result).toBe(hex(head));
    const filter = { fromBlock: hex(head - 120), toBlock: hex(head) };
    const want = await oracle(filter);
    expect((want as { blockNumber: string }[]).slice(-3).map((l) => Number.parseInt(l.blockNumber, 16))).toEqual([head - 2, head - 1, head]);
    const r = await raw('behind', logsCall(14, filter));
    expect(JSON.parse(r.text)).toEqual({ jsonrpc: '2.0', id: 14, result: want });
  }, 30_000);

  it('rule 9: chunks are sized per upstream: a range of 1050 blocks goes whole to the own node, though the provider takes one block', async () => {
    const [tiny, own] = [nodes.tiny!, nodes.own!];
    const filter = { fromBlock: hex(first), toBlock: hex(first + 1049) };
    const [ft, fo] = [tiny.logs.length, own.logs.length];
    const r = JSON.parse((await raw('sized', logsCall(11, filter))).text) as { result?: unknown[]; error?: unknown };
    expect(r.error).toBeUndefined();
    expect(r.result).toEqual(await oracle(filter));
    expect(own.logs.slice(fo)).toEqual([{ from: first, to: first + 1049, refused: false }]);
    expect(tiny.logs.slice(ft)).toEqual([]);
  }, 30_000);
});
