// Issue 37, defects 7 to 12: what a pool sends where, and when it stops.
// Each chain of one gateway is a pool in front of anvil (or the Blockbook
// stand-in) through proxies that answer late or in their own way
// (test/support/tweak-proxy.ts), the laggard and pruned nodes of
// test/support/pool-standins.ts, or two anvils that share nothing (a filter
// made on one is unknown to the other, as between two real nodes). Every
// proxy and stand-in records what reached its node; the tests count those
// records ("never sent twice") and read the gateway's metrics and log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { newKey, until, EVM_METHODS, type RunningGateway } from './harness.ts';
import { gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startPoolStandin, missingTrieNode, type PoolStandin } from '../support/pool-standins.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startTweakProxy, type TweakProxy } from '../support/tweak-proxy.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { fetchSeries } from '../support/metrics-text.ts';

const KEY = newKey();
const MNEMONIC = 'test test test test test test test test test test test junk';
const dev = (i: number) => mnemonicToAccount(MNEMONIC, { addressIndex: i });
const TO = '0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6';
const hex = (n: number) => `0x${n.toString(16)}`;

const FILTERS = ['eth_newFilter', 'eth_newBlockFilter', 'eth_newPendingTransactionFilter', 'eth_getFilterChanges', 'eth_getFilterLogs', 'eth_uninstallFilter'];
/** A hedge after this long: far less than any answer held back here. */
const HEDGE_AFTER_MS = 50;
/** How long the write nodes hold a write's answer: a hedge, if one were sent, would be out long before. */
const HOLD_MS = 800;
/** The deadline chain's timeoutMs, and how long its slow nodes take to answer null. */
const TIMEOUT_MS = 3000;
const SLOW_NULL_MS = 2600;
/** What a loaded machine may add to the gateway's own deadline. */
const MARGIN_MS = 1500;
/** The quorum chain: the pruned nodes keep state this many blocks deep; older state goes to archive nodes. */
const KEEP = 16;
const PRUNE_DEPTH = 32;

let anvil: Anvil;
/** Two nodes of one chain that share nothing: a filter made on one is unknown to the other. */
let anvilA: Anvil;
let anvilB: Anvil;
let filterA: RecordingProxy;
let filterB: RecordingProxy;
let write1: TweakProxy;
let write2: TweakProxy;
let ahead: TweakProxy;
let behind: PoolStandin;
let pruned1: PoolStandin;
let pruned2: PoolStandin;
let archive1: PoolStandin;
let archive2: PoolStandin;
let broken: TweakProxy;
let sound: TweakProxy;
let late1: TweakProxy;
let late2: TweakProxy;
let bb1: BlockbookStub;
let bb2: BlockbookStub;
let bbFront1: TweakProxy;
let bbFront2: TweakProxy;
let ro1: RosettaStub;
let ro2: RosettaStub;
let roFront1: TweakProxy;
let roFront2: TweakProxy;
let up: Gateway;
let gw: RunningGateway;

const hedge = { afterMs: HEDGE_AFTER_MS };
const deadline = { timeoutMs: TIMEOUT_MS };
const CHAINS: readonly Chain[] = [
  { path: 'writes', interface: 'evm-jsonrpc', hedge, broadcast: 'one', upstreams: ['${WRITE1}', '${WRITE2}'] },
  { path: 'filters', interface: 'evm-jsonrpc', upstreams: ['${FILTER_A}', '${FILTER_B}'] },
  { path: 'hedgenull', interface: 'evm-jsonrpc', hedge, upstreams: ['${AHEAD}', '${BEHIND}'] },
  {
    path: 'quorum',
    interface: 'evm-jsonrpc',
    pruneDepth: PRUNE_DEPTH,
    quorum: { methods: ['eth_getBalance'], of: 2 },
    upstreams: ['${PRUNED1}', '${PRUNED2}', { url: '${ARCHIVE1}', archive: true }, { url: '${ARCHIVE2}', archive: true }],
  },
  { path: 'empty', interface: 'evm-jsonrpc', upstreams: ['${BROKEN}', '${SOUND}'] },
  { path: 'deadline', interface: 'evm-jsonrpc', limits: deadline, upstreams: ['${LATE1}', '${LATE2}'] },
  { path: 'deadlinehedge', interface: 'evm-jsonrpc', limits: deadline, hedge, upstreams: ['${LATE1}', '${LATE2}'] },
  { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', sendtx: true, hedge, upstreams: ['${BB1}', '${BB2}'] },
  { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', hedge, upstreams: ['${RO1}', '${RO2}'] },
];

beforeAll(async () => {
  [anvil, anvilA, anvilB] = await Promise.all([startAnvil({ args: ['--no-mining'] }), startAnvil(), startAnvil()]);
  // History deeper than the quorum chain's pruneDepth.
  await anvil.mine(150);
  [filterA, filterB] = await Promise.all([startRecordingProxy(anvilA.url), startRecordingProxy(anvilB.url)]);
  const tweak = () => startTweakProxy(anvil.url);
  [write1, write2, ahead, broken, sound, late1, late2] = await Promise.all([tweak(), tweak(), tweak(), tweak(), tweak(), tweak(), tweak()]);
  [behind, pruned1, pruned2, archive1, archive2] = await Promise.all([
    startPoolStandin(anvil.url, { role: 'laggard', lag: 3 }),
    startPoolStandin(anvil.url, { role: 'pruned', keep: KEEP }),
    startPoolStandin(anvil.url, { role: 'pruned', keep: KEEP }),
    startPoolStandin(anvil.url, { role: 'healthy' }),
    startPoolStandin(anvil.url, { role: 'healthy' }),
  ]);
  [bb1, bb2] = await Promise.all([startBlockbookStub(), startBlockbookStub()]);
  [bbFront1, bbFront2] = await Promise.all([startTweakProxy(bb1.url), startTweakProxy(bb2.url)]);
  [ro1, ro2] = await Promise.all([startRosettaStub({ network: 'preprod' }), startRosettaStub({ network: 'preprod' })]);
  [roFront1, roFront2] = await Promise.all([startTweakProxy(ro1.url), startTweakProxy(ro2.url)]);
  up = await gateway({
    name: 'issue-37-flow',
    chains: CHAINS,
    header: { methodSets: { evm: [...EVM_METHODS, ...FILTERS, 'eth_sendRawTransactionConditional'] } },
    keys: [{ id: 'flow', key: KEY }],
    standIns: { anvil, anvilA, anvilB, all: [filterA, filterB, write1, write2, ahead, behind, pruned1, pruned2, archive1, archive2, broken, sound, late1, late2, bbFront1, bbFront2, bb1, bb2, roFront1, roFront2, ro1, ro2] },
    env: {
      WRITE1: write1.url,
      WRITE2: write2.url,
      FILTER_A: filterA.url,
      FILTER_B: filterB.url,
      AHEAD: ahead.url,
      BEHIND: behind.url,
      PRUNED1: pruned1.url,
      PRUNED2: pruned2.url,
      ARCHIVE1: archive1.url,
      ARCHIVE2: archive2.url,
      BROKEN: broken.url,
      SOUND: sound.url,
      LATE1: late1.url,
      LATE2: late2.url,
      BB1: `${bbFront1.url}/api`,
      BB2: `${bbFront2.url}/api`,
      RO1: roFront1.url,
      RO2: roFront2.url,
    },
  });
  gw = up.gw;
}, 60_000);

afterAll(() => up?.close());

// ---------------------------------------------------------------- helpers

interface Answer {
  readonly status: number;
  readonly text: string;
  readonly json: { id?: unknown; result?: any; error?: { code: number; message: string; data?: any } };
  /** ms from the request to the whole answer. */
  readonly ms: number;
}

let nextId = 1;
async function rpc(chain: string, method: string, params: unknown[] = []): Promise<Answer> {
  const t0 = performance.now();
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const text = await r.body.text();
  const ms = performance.now() - t0;
  let json: Answer['json'];
  try {
    json = JSON.parse(text) as Answer['json'];
  } catch {
    json = {};
  }
  return { status: r.statusCode, text, json, ms };
}

async function result(chain: string, method: string, params: unknown[] = []): Promise<any> {
  const a = await rpc(chain, method, params);
  expect(a.json.error, `${chain} ${method} ${JSON.stringify(params)}: ${a.status} ${a.text}`).toBeUndefined();
  expect(a.status, a.text).toBe(200);
  return a.json.result;
}

const metric = (name: string, labels: Record<string, string>): Promise<number> => fetchSeries(gw.url('admin', '/metrics'), name, labels);

/** The hedge budget is 10% of a chain's calls over a minute: calls that wait for nobody make room for the hedges under test. */
async function roomForHedges(chain: string): Promise<void> {
  await until(async () => (await rpc(chain, 'eth_blockNumber')).status === 200, `${chain} serving`);
  for (let i = 0; i < 60; i++) await rpc(chain, 'eth_blockNumber');
}

async function signed(account: number, nonce: number): Promise<Hex> {
  return dev(account).signTransaction({ chainId: 31337, type: 'eip1559', nonce, to: TO, value: 1n, gas: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
}

// ---------------------------------------------------------------- 7 and 8: writes

describe('writes are sent once (defects 7 and 8)', () => {
  it('eth_sendRawTransactionConditional and eth_newFilter are not hedged: each reaches one node, however long it holds the answer', async () => {
    await roomForHedges('writes');
    // Both nodes hold these answers long past afterMs: a hedge, if one went, would reach the other node.
    const held = new Set(['eth_sendRawTransactionConditional', 'eth_newFilter', 'eth_getBalance']);
    for (const p of [write1, write2]) p.tweak = (a) => (a.rpcMethod !== undefined && held.has(a.rpcMethod) ? { delayMs: HOLD_MS } : undefined);
    const reached = (m: string) => write1.count(m) + write2.count(m);
    const raw = await signed(6, 0);
    await rpc('writes', 'eth_sendRawTransactionConditional', [raw, {}]);
    await rpc('writes', 'eth_newFilter', [{ fromBlock: 'latest' }]);
    expect(reached('eth_sendRawTransactionConditional'), 'nodes that got the conditional transaction').toBe(1);
    expect(reached('eth_newFilter'), 'nodes asked to make the filter').toBe(1);
    // A read held as long is hedged: the setup would show a hedge. It names a block both nodes have by number, so
    // either may take it whether or not its last poll was on time (a call at latest goes only to current heads).
    const sent = await metric('gateway_pool_hedges_total', { chain: 'writes', outcome: 'sent' });
    const at = await result('writes', 'eth_blockNumber');
    await rpc('writes', 'eth_getBalance', [dev(0).address, at]);
    expect(reached('eth_getBalance')).toBe(2);
    expect(await metric('gateway_pool_hedges_total', { chain: 'writes', outcome: 'sent' })).toBe(sent + 1);
  });

  it("a write answered with a state error (geth's 'missing trie node') is not sent to a second node: 4 writes, 4 arrivals", async () => {
    const root = (await anvil.rpc('eth_getBlockByNumber', ['latest', false])).result as { stateRoot: string };
    for (const p of [write1, write2]) p.tweak = (a) => (a.rpcMethod === 'eth_sendRawTransaction' ? { error: { code: -32000, message: missingTrieNode(root.stateRoot) } } : undefined);
    const before = write1.count('eth_sendRawTransaction') + write2.count('eth_sendRawTransaction');
    const retried = await metric('gateway_pool_retries_total', { chain: 'writes', reason: 'state' });
    for (let nonce = 0; nonce < 4; nonce++) {
      const a = await rpc('writes', 'eth_sendRawTransaction', [await signed(7, nonce)]);
      expect(a.json.error?.message).toMatch(/missing trie node/);
    }
    expect(write1.count('eth_sendRawTransaction') + write2.count('eth_sendRawTransaction') - before).toBe(4);
    expect(await metric('gateway_pool_retries_total', { chain: 'writes', reason: 'state' })).toBe(retried);
  });
});

// ---------------------------------------------------------------- 7: filters

describe('filters stay on the node that made them (defect 7)', () => {
  it('a filter made through the pool is polled, read and uninstalled on that node only: never "filter not found"', async () => {
    await until(async () => (await rpc('filters', 'eth_chainId')).status === 200, 'filters serving');
    const made = new Map<string, RecordingProxy>();
    const making = (p: RecordingProxy) => p.methodsSeen().filter((m) => m.startsWith('eth_new')).length;
    for (const [method, params] of [
      ['eth_newBlockFilter', []],
      ['eth_newFilter', [{ fromBlock: 'latest' }]],
      ['eth_newPendingTransactionFilter', []],
      ['eth_newBlockFilter', []],
    ] as const) {
      const [a, b] = [making(filterA), making(filterB)];
      const id = (await result('filters', method, [...params])) as string;
      expect(id).toMatch(/^0x[0-9a-f]+$/);
      expect(making(filterA) - a + making(filterB) - b, `nodes that made the ${method}`).toBe(1);
      made.set(id, making(filterA) > a ? filterA : filterB);
    }
    // Round robin would take every other call to the other node.
    await Promise.all([anvilA.mine(1), anvilB.mine(1)]);
    for (const [id, p] of made) {
      const other = p === filterA ? filterB : filterA;
      const elsewhere = other.methodsSeen().filter((m) => m.startsWith('eth_getFilter') || m === 'eth_uninstallFilter').length;
      for (let i = 0; i < 4; i++) expect(Array.isArray(await result('filters', 'eth_getFilterChanges', [id]))).toBe(true);
      expect(await result('filters', 'eth_uninstallFilter', [id])).toBe(true);
      expect(other.methodsSeen().filter((m) => m.startsWith('eth_getFilter') || m === 'eth_uninstallFilter').length, 'calls about the filter on the other node').toBe(elsewhere);
    }
    // Both nodes made some of them: the pool does pick either.
    expect(new Set(made.values()).size).toBe(2);
  });

  it('eth_getFilterLogs goes to the node that made the log filter', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push((await result('filters', 'eth_newFilter', [{ fromBlock: '0x0' }])) as string);
    for (const id of ids) for (let i = 0; i < 3; i++) expect(Array.isArray(await result('filters', 'eth_getFilterLogs', [id]))).toBe(true);
  });
});

// ---------------------------------------------------------------- 9: a hedge leg's null

describe('a hedge leg that answers null (defect 9)', () => {
  it("the node behind answers a fresh receipt with a quick null; it does not win while the node ahead can still answer", async () => {
    await roomForHedges('hedgenull');
    const sent = (await anvil.rpc('eth_sendTransaction', [{ from: dev(4).address, to: TO, value: '0x1' }])).result as Hex;
    await anvil.mine(1);
    // The node ahead has the receipt but takes its time: each call is hedged to the node behind, which answers null at once.
    ahead.tweak = (a) => (a.rpcMethod === 'eth_getTransactionReceipt' ? { delayMs: 400 } : undefined);
    const nulls = behind.altered.nulls;
    const hedged = await metric('gateway_pool_hedges_total', { chain: 'hedgenull', outcome: 'sent' });
    for (let i = 0; i < 4; i++) expect((await result('hedgenull', 'eth_getTransactionReceipt', [sent]))?.transactionHash, `call ${i}`).toBe(sent);
    expect(behind.altered.nulls - nulls, 'the node behind answered null').toBeGreaterThan(0);
    expect(await metric('gateway_pool_hedges_total', { chain: 'hedgenull', outcome: 'sent' }), 'hedges sent').toBeGreaterThan(hedged);
  });
});

// ---------------------------------------------------------------- 10: quorum

describe('a quorum (defect 10)', () => {
  const ADDRESS = dev(0).address;
  const balanceAt = async (n: number): Promise<string> => (await anvil.rpc('eth_getBalance', [ADDRESS, hex(n)])).result as string;
  const asked = (p: PoolStandin) => p.requests.filter((r) => (r.json as { method?: string }).method === 'eth_getBalance').length;

  it('state older than pruneDepth is asked of the archive nodes only, and their agreed answer is served', async () => {
    await until(async () => (await rpc('quorum', 'eth_chainId')).status === 200, 'quorum serving');
    const head = Number((await anvil.rpc('eth_blockNumber')).result);
    const pruned = asked(pruned1) + asked(pruned2);
    for (const depth of [PRUNE_DEPTH + 10, 100]) expect(await result('quorum', 'eth_getBalance', [ADDRESS, hex(head - depth)])).toBe(await balanceAt(head - depth));
    expect(asked(pruned1) + asked(pruned2), 'the pruned nodes were asked').toBe(pruned);
  });

  it("two pruned nodes' 'missing trie node' is no vote: the archive nodes are asked in their place, and their agreed answer is served", async () => {
    const head = Number((await anvil.rpc('eth_blockNumber')).result);
    // Deeper than the pruned nodes keep, not as deep as pruneDepth: routing cannot know, and the pruned nodes are asked first.
    const gone = pruned1.altered.missingTrieNode + pruned2.altered.missingTrieNode;
    const archived = asked(archive1) + asked(archive2);
    const agreed = await metric('gateway_pool_quorum_total', { chain: 'quorum', outcome: 'agree' });
    const n = head - KEEP - 8;
    const a = await rpc('quorum', 'eth_getBalance', [ADDRESS, hex(n)]);
    expect(pruned1.altered.missingTrieNode + pruned2.altered.missingTrieNode - gone, 'the pruned nodes said their state is gone').toBe(2);
    expect(a.text).not.toMatch(/trie node/);
    expect(a.json.result, a.text).toBe(await balanceAt(n));
    expect(asked(archive1) + asked(archive2) - archived, 'archive nodes asked in their place').toBe(2);
    expect(await metric('gateway_pool_quorum_total', { chain: 'quorum', outcome: 'agree' })).toBe(agreed + 1);
  });
});

// ---------------------------------------------------------------- 11: an empty 200

describe('an empty or cut-off 200 (defect 11)', () => {
  it('is a failed attempt: the call is answered by the other node, and the breaker takes the broken node out', async () => {
    await until(async () => (await rpc('empty', 'eth_chainId')).status === 200, 'empty serving');
    const opened = gw.nextLog((e) => e.event === 'upstream_circuit_open' && e.upstream === 'empty#0');
    let odd = 0;
    // As a broken proxy in front of the node answers: an empty 200, then a 200 cut off mid-answer.
    broken.tweak = (a) => (a.rpcMethod === 'eth_getBalance' ? { status: 200, body: odd++ % 2 === 0 ? '' : '{"jsonrpc":"2.0","id":1,"resu' } : undefined);
    const head = Number((await anvil.rpc('eth_blockNumber')).result);
    const balance = (await anvil.rpc('eth_getBalance', [dev(1).address, hex(head)])).result;
    for (let i = 0; i < 8 && broken.count('eth_getBalance') < 3; i++) expect(await result('empty', 'eth_getBalance', [dev(1).address, hex(head)])).toBe(balance);
    expect(broken.count('eth_getBalance'), 'calls that reached the broken node').toBe(3);
    expect(await opened).toMatchObject({ chain: 'empty' });
  });
});

// ---------------------------------------------------------------- 12: one deadline

describe('one deadline per call (defect 12)', () => {
  it(`a null asked again of a node that is slow too: the answer comes within timeoutMs (${TIMEOUT_MS} ms), and it is the first null, not a late answer`, async () => {
    await until(async () => (await rpc('deadline', 'eth_chainId')).status === 200, 'deadline serving');
    // Both nodes answer a receipt null, slowly (as a node behind that is also loaded does).
    for (const p of [late1, late2]) p.tweak = (a) => (a.rpcMethod === 'eth_getTransactionReceipt' ? { delayMs: SLOW_NULL_MS, body: `{"jsonrpc":"2.0","id":${JSON.stringify((a.json as { id: unknown }).id)},"result":null}` } : undefined);
    const a = await rpc('deadline', 'eth_getTransactionReceipt', [`0x${'ab'.repeat(32)}`]);
    expect(a.json).toMatchObject({ result: null });
    expect(late1.count('eth_getTransactionReceipt') + late2.count('eth_getTransactionReceipt'), 'asked again of the other node').toBe(2);
    expect(a.ms, 'ms until the answer').toBeLessThan(TIMEOUT_MS + MARGIN_MS);
  }, 20_000);

  it('a hedged read of two nodes that never answer: the hedge and the retries end at timeoutMs, and the client gets the gateway timeout', async () => {
    await roomForHedges('deadlinehedge');
    for (const p of [late1, late2]) p.tweak = (a) => (a.rpcMethod === 'eth_getCode' ? { delayMs: 60_000, body: '{}' } : undefined);
    const hedged = await metric('gateway_pool_hedges_total', { chain: 'deadlinehedge', outcome: 'sent' });
    const a = await rpc('deadlinehedge', 'eth_getCode', [TO, 'latest']);
    expect(await metric('gateway_pool_hedges_total', { chain: 'deadlinehedge', outcome: 'sent' }), 'hedges sent').toBe(hedged + 1);
    expect(a.status).toBe(504);
    expect(a.json.result).toBeUndefined();
    expect(a.json.error?.code, a.text).toBeTypeOf('number');
    expect(a.ms, 'ms until the answer').toBeLessThan(TIMEOUT_MS + MARGIN_MS);
  }, 20_000);
});

// ---------------------------------------------------------------- 7: Blockbook sendtx

describe('Blockbook sendtx is a write (defect 7)', () => {
  const TX = '0200000001' + 'ab'.repeat(60);
  const get = (path: string) => request(gw.url('explorer', `/bitcoin/v2/${path}`), { headers: { 'x-api-key': KEY } }).then(async (r) => ({ status: r.statusCode, text: await r.body.text() }));
  const sendtx = () => bbFront1.count('/sendtx') + bbFront2.count('/sendtx');

  it('GET /v2/sendtx/<hex> is not hedged, however long the node takes', async () => {
    await until(async () => (await get('block/1')).status === 200, 'bitcoin serving');
    for (let i = 0; i < 60; i++) await get('block/1');
    for (const p of [bbFront1, bbFront2]) p.tweak = (a) => (a.path.includes('/sendtx') || a.path.includes('/block/2') ? { delayMs: HOLD_MS } : undefined);
    const before = sendtx();
    const r = await get(`sendtx/${TX}`);
    expect(r.status, r.text).toBe(200);
    expect(sendtx() - before, 'nodes that got the transaction').toBe(1);
    // A read held as long is hedged: the setup would show a hedge.
    const blocks = bbFront1.count('/block/2') + bbFront2.count('/block/2');
    expect((await get('block/2')).status).toBe(200);
    expect(bbFront1.count('/block/2') + bbFront2.count('/block/2') - blocks).toBe(2);
  });

  it('GET and POST sendtx answered 502 by the node\'s load balancer are not sent to the other node', async () => {
    for (const p of [bbFront1, bbFront2]) p.tweak = (a) => (a.path.includes('/sendtx') ? { status: 502, body: '<html><body><h1>502 Bad Gateway</h1></body></html>' } : undefined);
    const before = sendtx();
    expect((await get(`sendtx/${TX}`)).status).toBeGreaterThanOrEqual(502);
    expect(sendtx() - before, 'nodes that got the GET').toBe(1);
    const r = await request(gw.url('explorer', '/bitcoin/v2/sendtx/'), { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'text/plain' }, body: TX });
    await r.body.text();
    expect(r.statusCode).toBeGreaterThanOrEqual(502);
    expect(sendtx() - before, 'nodes that got the GET and the POST').toBe(2);
  });
});

// ---------------------------------------------------------------- Rosetta construction/submit

describe('Rosetta construction/submit is a write', () => {
  const NETWORK = { blockchain: 'cardano', network: 'preprod' };
  const post = (endpoint: string, body: Record<string, unknown>) =>
    request(gw.url('rpc', `/cardano-preprod/${endpoint}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: JSON.stringify({ network_identifier: NETWORK, ...body }) }).then(async (r) => ({ status: r.statusCode, text: await r.body.text() }));
  const submitted = () => roFront1.count('/construction/submit') + roFront2.count('/construction/submit');
  const SIGNED = '84a4' + 'cd'.repeat(60);

  it('is not hedged however long the node takes, nor sent to the other node after a 502', async () => {
    await until(async () => (await post('network/status', {})).status === 200, 'cardano-preprod serving');
    for (let i = 0; i < 60; i++) await post('network/status', {});
    for (const p of [roFront1, roFront2]) p.tweak = (a) => (a.path === '/construction/submit' || a.path === '/block' ? { delayMs: HOLD_MS } : undefined);
    let before = submitted();
    expect((await post('construction/submit', { signed_transaction: SIGNED })).status).toBe(200);
    expect(submitted() - before, 'nodes that got the transaction').toBe(1);
    // A read held as long is hedged: the setup would show a hedge.
    const blocks = roFront1.count('/block') + roFront2.count('/block');
    expect((await post('block', { block_identifier: { index: 10 } })).status).toBe(200);
    expect(roFront1.count('/block') + roFront2.count('/block') - blocks).toBe(2);

    for (const p of [roFront1, roFront2]) p.tweak = (a) => (a.path === '/construction/submit' ? { status: 502, body: '<html><body><h1>502 Bad Gateway</h1></body></html>' } : undefined);
    before = submitted();
    expect((await post('construction/submit', { signed_transaction: SIGNED })).status).toBeGreaterThanOrEqual(500);
    expect(submitted() - before, 'nodes that got the transaction after a 502').toBe(1);
  });
});
