// Issue 33's pool settings end to end, each on a chain of its own in one
// gateway: broadcast over two anvils that share no mempool, quorum against a
// node that answers a different balance, archive routing past a pruned node,
// a try again on an empty answer from a laggard (and none about a finalized
// block), hedged reads past a slow node, and eth_blockNumber from the served
// tip. The odd nodes are the stand-ins of test/support/pool-standins.ts
// (laggard, pruned, healthy) and, here, a small proxy that can delay an
// answer or put its own result in place of the node's (a slow node, a node
// that lies about a balance, one that has expired old blocks). Every stand-in
// records what reached it; the tests wait on those records, the gateway's
// metrics and its logs, never on time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { keccak256, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';
import { close, createSafeServer, isHealthCheck, listen, parseJson, readAll } from '../support/http.ts';
import { fetchSeries } from '../support/metrics-text.ts';

const KEY = newKey();
const CHAIN_ID = 31337;
/** anvil's funded dev accounts come from this public test mnemonic; each test signs with its own. */
const MNEMONIC = 'test test test test test test test test test test test junk';
const dev = (i: number) => mnemonicToAccount(MNEMONIC, { addressIndex: i });
const TO = '0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6';

// ---------------------------------------------------------------- a tweaking proxy

interface Call {
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: unknown;
}

interface Arrival {
  readonly json: Call;
  /** performance.now() when it arrived. */
  readonly at: number;
}

/** A node as a test wants it: anvil, slower, or with some answers of its own. */
interface Tweak {
  readonly url: string;
  /** Single calls from clients (not the gateway's polls), in arrival order. */
  readonly calls: Arrival[];
  /** The gateway's polls reaching it. */
  polls: number;
  /** Answers to client calls (not polls) are written this many ms after the node answered. */
  delayMs: number;
  /** A result of its own for a client call, in place of the node's (undefined: the node's answer). */
  result: (call: Call) => unknown;
  close(): Promise<void>;
}

async function startTweak(target: string): Promise<Tweak> {
  const server = createSafeServer(async (req, res) => {
    const body = await readAll(req);
    const health = isHealthCheck(req);
    const json = parseJson(body) as Call | undefined;
    const single = json !== undefined && json !== null && typeof json === 'object' && !Array.isArray(json);
    if (health) tweak.polls++;
    else if (single) tweak.calls.push({ json, at: performance.now() });
    const own = !health && single ? tweak.result(json) : undefined;
    let status = 200;
    let out: Buffer;
    if (own !== undefined) out = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: json!.id ?? null, result: own }));
    else {
      const r = await request(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      status = r.statusCode;
      out = Buffer.from(await r.body.arrayBuffer());
    }
    // The slow node: its answer, held back (what is under test is the gateway not waiting for it).
    if (!health && tweak.delayMs > 0) await new Promise((r) => setTimeout(r, tweak.delayMs));
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': out.length }).end(out);
  });
  const url = await listen(server);
  const tweak: Tweak = { url, calls: [], polls: 0, delayMs: 0, result: () => undefined, close: () => close(server) };
  return tweak;
}

// ---------------------------------------------------------------- the pool

let anvil: Anvil;
/** Two nodes of one chain that share no mempool: a transaction sent to one is not seen by the other. */
let mempoolA: Anvil;
let mempoolB: Anvil;
let honest: Tweak;
let liar: Tweak;
let pruned: PoolStandin;
let archive: PoolStandin;
let laggard: PoolStandin;
let healthy: PoolStandin;
let forgetful: Tweak;
let remembers: Tweak;
let slow: Tweak;
let fast: Tweak;
let tipLaggard: PoolStandin;
let tipHealthy: PoolStandin;
let rig: Gateway;
let gw: RunningGateway;

/** Blocks the pruned node keeps the state of. */
const KEEP = 16;
/** The archive chain's pruneDepth: state between KEEP and this deep only a try again can save. */
const PRUNE_DEPTH = 64;
const HEDGE_AFTER_MS = 50;

beforeAll(async () => {
  [anvil, mempoolA, mempoolB] = await Promise.all([startAnvil({ args: ['--no-mining'] }), startAnvil({ args: ['--no-mining'] }), startAnvil({ args: ['--no-mining'] })]);
  // History deeper than the archive chain's pruneDepth.
  await anvil.mine(150);
  const tweak = () => startTweak(anvil.url);
  [honest, liar, forgetful, remembers, slow, fast] = await Promise.all([tweak(), tweak(), tweak(), tweak(), tweak(), tweak()]);
  [pruned, archive, laggard, healthy, tipLaggard, tipHealthy] = await Promise.all([
    startPoolStandin(anvil.url, { role: 'pruned', keep: KEEP }),
    startPoolStandin(anvil.url, { role: 'healthy' }),
    startPoolStandin(anvil.url, { role: 'laggard', lag: 3 }),
    startPoolStandin(anvil.url, { role: 'healthy' }),
    startPoolStandin(anvil.url, { role: 'laggard', lag: 3 }),
    startPoolStandin(anvil.url, { role: 'healthy' }),
  ]);
  rig = await gateway({
    name: 'issue-33-pool',
    chains: [
      evmChain('bcast', ['MEMPOOL_A', 'MEMPOOL_B'], { cache: 'off' }),
      evmChain('bcastone', ['MEMPOOL_A', 'MEMPOOL_B'], { cache: 'off', broadcast: 'one' }),
      evmChain('quorum', ['HONEST', 'LIAR'], { cache: 'off', quorum: { methods: ['eth_getBalance'], of: 2 } }),
      { path: 'archive', interface: 'evm-jsonrpc', cache: 'off', pruneDepth: PRUNE_DEPTH, upstreams: ['${PRUNED}', { url: '${ARCHIVE}', archive: true }] },
      evmChain('retry', ['LAGGARD', 'HEALTHY'], { cache: 'off' }),
      evmChain('final', ['FORGETFUL', 'REMEMBERS'], { finality: { depth: 5 } }),
      // Half the reads must go to the slow node first for hedges to show: selection by score would keep it to probes.
      evmChain('hedge', ['SLOW', 'FAST'], { cache: 'off', hedge: { afterMs: HEDGE_AFTER_MS }, broadcast: 'one', selection: 'weighted' }),
      evmChain('tip', ['TIP_LAGGARD', 'TIP_HEALTHY'], { cache: 'off', servedTip: 'all' }),
    ],
    header: { cache: { maxBytes: 8388608, headPollMs: 200 } },
    keys: [{ id: 'pool', key: KEY }],
    standIns: {
      anvil,
      MEMPOOL_A: mempoolA,
      MEMPOOL_B: mempoolB,
      HONEST: honest,
      LIAR: liar,
      PRUNED: pruned,
      ARCHIVE: archive,
      LAGGARD: laggard,
      HEALTHY: healthy,
      FORGETFUL: forgetful,
      REMEMBERS: remembers,
      SLOW: slow,
      FAST: fast,
      TIP_LAGGARD: tipLaggard,
      TIP_HEALTHY: tipHealthy,
    },
  });
  gw = rig.gw;
}, 40_000);

afterAll(() => rig?.close());

// ---------------------------------------------------------------- helpers

interface Answer {
  readonly status: number;
  readonly text: string;
  readonly json: { id?: unknown; result?: any; error?: { code: number; message: string; data?: any } };
}

let nextId = 1;
async function rpc(chain: string, method: string, params: unknown[] = []): Promise<Answer> {
  const r = await request(gw.url('rpc', `/${chain}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const text = await r.body.text();
  return { status: r.statusCode, text, json: JSON.parse(text) as Answer['json'] };
}

/** A result, or the test fails naming the error. */
async function result(chain: string, method: string, params: unknown[] = []): Promise<any> {
  const a = await rpc(chain, method, params);
  expect(a.json.error, `${chain} ${method} ${JSON.stringify(params)}: ${a.text}`).toBeUndefined();
  return a.json.result;
}

const metric = (name: string, labels: Record<string, string>): Promise<number> => fetchSeries(gw.url('admin', '/metrics'), name, labels);

async function signed(account: number, nonce: number): Promise<{ raw: Hex; hash: Hex }> {
  const raw = await dev(account).signTransaction({
    chainId: CHAIN_ID,
    type: 'eip1559',
    nonce,
    to: TO,
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: 10_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
  });
  return { raw, hash: keccak256(raw) };
}

const hasTx = async (node: Anvil, hash: Hex): Promise<boolean> => (await node.rpc('eth_getTransactionByHash', [hash])).result != null;

// ---------------------------------------------------------------- broadcast

describe('broadcast', () => {
  it('broadcast (default all): a signed transaction reaches both nodes, the client gets its hash, the metric counts it', async () => {
    const { raw, hash } = await signed(1, 0);
    const before = await metric('gateway_pool_broadcasts_total', { chain: 'bcast' });
    expect(await result('bcast', 'eth_sendRawTransaction', [raw])).toBe(hash);
    // The client has its answer with the first success; the other node's may still be on its way.
    await until(async () => (await hasTx(mempoolA, hash)) && (await hasTx(mempoolB, hash)), 'the transaction in both mempools', 3000);
    expect(await metric('gateway_pool_broadcasts_total', { chain: 'bcast' })).toBe(before + 1);
  });

  it('broadcast: one sends the transaction to one node only', async () => {
    const { raw, hash } = await signed(2, 0);
    expect(await result('bcastone', 'eth_sendRawTransaction', [raw])).toBe(hash);
    const where = [await hasTx(mempoolA, hash), await hasTx(mempoolB, hash)];
    expect(where.filter(Boolean)).toHaveLength(1);
    expect(await metric('gateway_pool_broadcasts_total', { chain: 'bcastone' })).toBe(0);
  });
});

// ---------------------------------------------------------------- quorum

const hex = (n: number) => `0x${n.toString(16)}`;
const anvilHead = async (): Promise<number> => Number((await anvil.rpc('eth_blockNumber')).result);
const balanceAt = async (address: string, n: number): Promise<string> => (await anvil.rpc('eth_getBalance', [address, hex(n)])).result as string;

describe('quorum', () => {
  const ADDRESS = dev(3).address;

  it('different balances from the two upstreams: -32603 "upstreams disagree", both named in the log, neither in the body', async () => {
    liar.result = (call) => (call.method === 'eth_getBalance' ? '0xdead' : undefined);
    const before = await metric('gateway_pool_quorum_total', { chain: 'quorum', outcome: 'disagree' });
    const logged = gw.nextLog((e) => e.event === 'upstreams_disagree');
    const a = await rpc('quorum', 'eth_getBalance', [ADDRESS, 'latest']);
    expect(a.status).toBe(200);
    expect(a.json.error).toMatchObject({ code: -32603, data: { reason: 'upstreams disagree' } });
    expect(a.json.result).toBeUndefined();
    const line = await logged;
    expect(line).toMatchObject({ chain: 'quorum' });
    expect([...(line.upstreams as string[])].sort()).toEqual(['quorum#0', 'quorum#1']);
    for (const secret of ['quorum#', honest.url, liar.url, new URL(honest.url).port, new URL(liar.url).port]) expect(a.text).not.toContain(secret);
    // Both were asked.
    expect(honest.calls.filter((c) => c.json.method === 'eth_getBalance')).toHaveLength(1);
    expect(liar.calls.filter((c) => c.json.method === 'eth_getBalance')).toHaveLength(1);
    expect(await metric('gateway_pool_quorum_total', { chain: 'quorum', outcome: 'disagree' })).toBe(before + 1);
  });

  it('equal balances are served', async () => {
    liar.result = () => undefined;
    const before = await metric('gateway_pool_quorum_total', { chain: 'quorum', outcome: 'agree' });
    const head = await anvilHead();
    expect(await result('quorum', 'eth_getBalance', [ADDRESS, hex(head)])).toBe(await balanceAt(ADDRESS, head));
    expect(await metric('gateway_pool_quorum_total', { chain: 'quorum', outcome: 'agree' })).toBe(before + 1);
  });
});

// ---------------------------------------------------------------- archive

const retries = (chain: string, reason: 'empty' | 'state') => metric('gateway_pool_retries_total', { chain, reason });

describe('archive routing', () => {
  const ADDRESS = dev(0).address;

  it('state older than pruneDepth goes to the archive node: the pruned node is never asked', async () => {
    const head = await anvilHead();
    const asked = pruned.requests.length;
    const retried = await retries('archive', 'state');
    for (const depth of [PRUNE_DEPTH + 2, 80, 100, 120, 140]) {
      expect(await result('archive', 'eth_getBalance', [ADDRESS, hex(head - depth)])).toBe(await balanceAt(ADDRESS, head - depth));
    }
    expect(pruned.requests.length).toBe(asked);
    expect(await retries('archive', 'state')).toBe(retried);
  });

  it("state the pruned node no longer has, but routing cannot know it (newer than pruneDepth): its 'missing trie node' is asked again of the archive node", async () => {
    const head = await anvilHead();
    const gone = pruned.altered.missingTrieNode;
    const retried = await retries('archive', 'state');
    // Round-robin over two: among these the pruned node is asked first at least once.
    for (let depth = KEEP + 5; depth < KEEP + 15; depth++) {
      const a = await rpc('archive', 'eth_getBalance', [ADDRESS, hex(head - depth)]);
      expect(a.text).not.toMatch(/trie node/);
      expect(a.json.result).toBe(await balanceAt(ADDRESS, head - depth));
    }
    const refused = pruned.altered.missingTrieNode - gone;
    expect(refused).toBeGreaterThan(0);
    expect(await retries('archive', 'state')).toBe(retried + refused);
  });
});

// ---------------------------------------------------------------- retry on empty

/** The forgetful node has expired the bodies of blocks below this one. */
const EXPIRED_BELOW = 20;

describe('retry on empty', () => {
  it('a receipt, transaction and block the laggard has not seen yet are answered with data, asked again of the healthy node', async () => {
    const sent = (await anvil.rpc('eth_sendTransaction', [{ from: dev(4).address, to: TO, value: '0x1' }])).result as Hex;
    await anvil.mine(1);
    const receipt = (await anvil.rpc('eth_getTransactionReceipt', [sent])).result as { blockHash: string; blockNumber: string };
    const nulls = laggard.altered.nulls;
    const retried = await retries('retry', 'empty');
    for (let i = 0; i < 4; i++) {
      expect((await result('retry', 'eth_getTransactionReceipt', [sent]))?.transactionHash).toBe(sent);
      expect((await result('retry', 'eth_getTransactionByHash', [sent]))?.hash).toBe(sent);
      expect((await result('retry', 'eth_getBlockByHash', [receipt.blockHash, false]))?.hash).toBe(receipt.blockHash);
    }
    const nulled = laggard.altered.nulls - nulls;
    expect(nulled, 'the laggard answered null (and the client never saw it)').toBeGreaterThan(0);
    expect(await retries('retry', 'empty')).toBe(retried + nulled);
  });

  it('a null about a finalized block is final: passed on, not asked again', async () => {
    // The forgetful node has expired old block bodies (EIP-4444 style): null for blocks below EXPIRED_BELOW.
    forgetful.result = (call) => {
      if (call.method !== 'eth_getBlockByNumber' || !Array.isArray(call.params)) return undefined;
      const n = Number.parseInt(String(call.params[0]), 16);
      return n < EXPIRED_BELOW ? null : undefined;
    };
    const retried = await retries('final', 'empty');
    const asked = forgetful.calls.length;
    let nulls = 0;
    // Each block once: an answer that is not null is cached, and would keep the next call from any node.
    for (let n = 1; n < 11; n++) {
      const r = await result('final', 'eth_getBlockByNumber', [hex(n), false]);
      if (r === null) nulls++;
      else expect(r.number).toBe(hex(n));
    }
    const forgot = forgetful.calls.slice(asked).filter((c) => c.json.method === 'eth_getBlockByNumber').length;
    expect(forgot, 'the forgetful node was asked').toBeGreaterThan(0);
    expect(nulls, 'its nulls reached the client').toBe(forgot);
    expect(await retries('final', 'empty')).toBe(retried);
  });
});

// ---------------------------------------------------------------- hedged reads

/** How long the slow node holds each answer back. */
const SLOW_MS = 500;
const hedges = (outcome: 'sent' | 'won' | 'capped') => metric('gateway_pool_hedges_total', { chain: 'hedge', outcome });

describe('hedged reads', () => {
  const ADDRESS = dev(0).address;
  let calls = 0;
  const counted = async (method: string, params: unknown[]) => {
    calls++;
    return rpc('hedge', method, params);
  };

  it('reads come back without waiting for the slow node; hedges are sent and won; writes are never hedged; at most 10% of calls are hedged', async () => {
    slow.delayMs = SLOW_MS;
    // The budget is 10% of the chain's calls over a minute: eth_blockNumber (answered from the tip) makes calls that wait for nobody.
    for (let i = 0; i < 100; i++) expect((await counted('eth_blockNumber', [])).json.result).toMatch(/^0x/);
    expect(await hedges('sent')).toBe(0);

    // Writes: one node each (broadcast: one), never a second one, however long the first takes.
    const slowBefore = slow.calls.length;
    const fastBefore = fast.calls.length;
    const txs = await Promise.all([0, 1, 2, 3].map((nonce) => signed(5, nonce)));
    for (const { raw, hash } of txs) expect((await counted('eth_sendRawTransaction', [raw])).json.result).toBe(hash);
    const writes = [...slow.calls.slice(slowBefore), ...fast.calls.slice(fastBefore)].filter((c) => c.json.method === 'eth_sendRawTransaction');
    expect(writes).toHaveLength(txs.length);
    expect(slow.calls.slice(slowBefore).length, 'a write waited on the slow node').toBeGreaterThan(0);
    expect(await hedges('sent')).toBe(0);

    // Reads: half of them are asked of the slow node first; a hedge answers them.
    const head = await anvilHead();
    const balance = await balanceAt(ADDRESS, head);
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      const a = await counted('eth_getBalance', [ADDRESS, 'latest']);
      const ms = performance.now() - t0;
      expect(a.json.result).toBe(balance);
      expect(ms, 'a read did not wait for the slow node').toBeLessThan(SLOW_MS - 100);
    }
    const sent = await hedges('sent');
    expect(sent).toBeGreaterThan(0);
    expect(await hedges('won')).toBeGreaterThan(0);

    // A burst: most of its hedges are over the budget and counted as capped.
    const cappedBefore = await hedges('capped');
    const burstIds = new Set<unknown>();
    const slowMark = slow.calls.length;
    const fastMark = fast.calls.length;
    const burst = await Promise.all(
      Array.from({ length: 60 }, async () => {
        const a = await counted('eth_getBalance', [ADDRESS, 'latest']);
        burstIds.add(a.json.id);
        return a.json.result;
      }),
    );
    expect(burst.every((b) => b === balance)).toBe(true);
    const sentNow = await hedges('sent');
    const capped = (await hedges('capped')) - cappedBefore;
    expect(sentNow, `hedges sent ${sentNow} of ${calls} calls`).toBeLessThanOrEqual(Math.floor(calls * 0.1) + 1);
    expect(capped).toBeGreaterThan(0);
    // Which node each burst call reached first: every one that reached the slow node first wanted a hedge (sent or capped).
    const first = new Map<unknown, 'slow' | 'fast'>();
    const arrivals = [...slow.calls.slice(slowMark).map((c) => ({ ...c, node: 'slow' as const })), ...fast.calls.slice(fastMark).map((c) => ({ ...c, node: 'fast' as const }))]
      .filter((c) => burstIds.has(c.json.id))
      .sort((a, b) => a.at - b.at);
    let twice = 0;
    for (const c of arrivals) {
      if (first.has(c.json.id)) twice++;
      else first.set(c.json.id, c.node);
    }
    const slowFirst = [...first.values()].filter((n) => n === 'slow').length;
    expect(slowFirst).toBeGreaterThan(0);
    // A hedge cancelled before it left (the first node answered just after afterMs) reaches no node: at most the hedges sent.
    expect(twice, 'calls asked of both nodes').toBeGreaterThan(0);
    expect(twice).toBeLessThanOrEqual(sentNow - sent);
    expect(sentNow - sent + capped).toBeGreaterThanOrEqual(slowFirst);
  }, 30_000);
});

// ---------------------------------------------------------------- served tip

describe('eth_blockNumber on a pool', () => {
  it('answers the served tip: the laggard\'s head (servedTip: all), never less than before, and counts it', async () => {
    let asked = 0;
    const blockNumber = async (): Promise<number> => {
      asked++;
      return Number(await result('tip', 'eth_blockNumber'));
    };
    const before = await metric('gateway_pool_tip_answers_total', { chain: 'tip' });
    // Past the first round of polls (whichever node answered first, its head was the tip until the laggard passed it).
    await anvil.mine(4);
    const head = await anvilHead();
    const upstreamHead = (u: string) => metric('gateway_upstream_head', { chain: 'tip', upstream: u });
    await until(async () => (await upstreamHead('tip#0')) === head - 3 && (await upstreamHead('tip#1')) === head, 'the polls seeing both nodes at their new heads');
    expect(await blockNumber()).toBe(head - 3);
    expect(tipHealthy.requests.filter((r) => (r.json as Call)?.method === 'eth_blockNumber')).toHaveLength(0);
    // Blocks come while clients ask: never backwards, never past what the laggard has.
    let last = 0;
    for (let i = 0; i < 10; i++) {
      if (i % 2 === 0) await anvil.mine(1);
      for (let j = 0; j < 3; j++) {
        const n = await blockNumber();
        expect(n).toBeGreaterThanOrEqual(last);
        expect(n).toBeLessThanOrEqual((await anvilHead()) - 3);
        last = n;
      }
    }
    expect(await metric('gateway_pool_tip_answers_total', { chain: 'tip' })).toBe(before + asked);
  });
});

describe('a pool with every upstream down', () => {
  it('eth_blockNumber is not answered from a tip nobody serves: 503 and -32052 at once, as any other call', async () => {
    const up = (u: string) => metric('gateway_upstream_up', { chain: 'bcast', upstream: u });
    await Promise.all([mempoolA.stop(), mempoolB.stop()]);
    await until(async () => (await up('bcast#0')) === 0 && (await up('bcast#1')) === 0, 'both nodes of bcast taken out');
    const before = await metric('gateway_pool_tip_answers_total', { chain: 'bcast' });
    for (const method of ['eth_blockNumber', 'eth_chainId']) {
      const a = await rpc('bcast', method);
      expect(a.status, `${method}: ${a.text}`).toBe(503);
      expect(a.json.error?.code).toBe(-32052);
    }
    expect(await metric('gateway_pool_tip_answers_total', { chain: 'bcast' })).toBe(before);
  });
});
