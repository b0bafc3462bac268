// The cache against its oracle (issue 20): a real anvil. Random sequences of
// reads of every cacheable method (at `latest`, tags, numbers, hashes, EIP-1898
// objects), interleaved with transactions, anvil_mine and anvil_reorg (depth 1
// to 10), go through the gateway with the cache on; each answer is compared
// with anvil's own answer to the same call at that moment (the test is the only
// thing that changes anvil's state, and it waits for each answer).
//
// The one allowance docs/cache.md documents: an entry bound to the head may be
// served until the gateway has seen the head move (at most headPollMs plus one
// poll's round trip). The test does not guess that window from the clock: it
// reads the gateway's own gateway_cache_head_changes_total before each read
// made after a change, and accepts a differing answer only when the gateway
// had not yet seen the change, the answer came from memory (X-Cache: HIT), it
// is exactly what the gateway answered, and anvil confirmed, for that call
// before the change, and the call is not final (constant, or at a block at or
// below anvil's finalized block). Every other difference fails the test: a
// block or receipt of a reorged-out chain, a balance of an old head.
//
// Every read also checks X-Cache against what reached the node (HIT: nothing;
// MISS and BYPASS: one request), and the end compares the counts with
// /metrics.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { metricValue, newKey, rawRequest, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { listen } from '../support/http.ts';
import { createServer, type Server } from 'node:http';

const KEY = newKey();
const HEAD_POLL_MS = 200;
/** Sequences, and operations in each (all against one anvil, whose state carries over). */
const SEQUENCES = 4;
const OPS = 120;

let anvil: Anvil;
let proxy: RecordingProxy;
let rig: Gateway;
let gw: RunningGateway;
let cdn: Server;
/** Answers the CDN node holds back, and how many eth_getBalance calls reached it. */
const cdnHeld: Array<() => void> = [];
let cdnBalanceCalls = 0;
/** anvil's unlocked dev accounts. */
let accounts: string[] = [];
/** A contract whose code answers any call with the block number it runs at. */
let clock = '';
/** The transaction that deployed it, in block 1: final once anvil is 64 blocks past it. */
let deployTx = '';

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1 });
  proxy = await startRecordingProxy(anvil.url);
  accounts = (await anvil.rpc('eth_accounts')).result as string[];
  // NUMBER PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN, behind an init code that returns it.
  const deploy = await anvil.rpc('eth_sendTransaction', [{ from: accounts[0], data: '0x684360005260206000f360005260096017f3' }]);
  deployTx = deploy.result as string;
  clock = ((await mined(deployTx)) as { contractAddress: string }).contractAddress;
  expect((await anvil.rpc('eth_getCode', [clock, 'latest'])).result).toBe('0x4360005260206000f3');
  // Past 64 blocks, anvil reports a finalized block (latest - 64) that a reorg of depth 10 cannot reach.
  await anvil.mine(100);
  // A node behind a CDN that sets its own X-Cache (and another header of its own),
  // and holds eth_getBalance until a test lets it answer.
  cdn = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const answer = (result: string) => {
        const body = `{"jsonrpc":"2.0","id":${JSON.stringify((JSON.parse(text) as { id?: unknown }).id ?? null)},"result":"${result}"}`;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length, 'x-cache': 'HIT from cdn', 'x-served-by': 'cdn-edge-1' }).end(body);
      };
      if (text.includes('"eth_getBalance"')) {
        cdnBalanceCalls++;
        cdnHeld.push(() => answer('0x0'));
      } else answer('0x5208');
    });
  });
  const cdnUrl = await listen(cdn);
  rig = await gateway({
    name: 'cache-oracle',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
      evmChain('cdn', ['CDN_URL']),
      evmChain('unchecked', ['ETH_URL'], { validate: 'off' }),
    ],
    header: { cache: { maxBytes: 8388608, headPollMs: HEAD_POLL_MS }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'oracle', key: KEY }],
    standIns: { anvil, ETH_URL: proxy, cdn },
    env: { CDN_URL: cdnUrl },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

// ------------------------------------------------------------------ talking

interface GwAnswer {
  xCache: string;
  body: { id?: unknown; result?: unknown; error?: { code: number; message: string } };
}

let nextId = 1;
async function viaGateway(method: string, params: unknown[], id: unknown = nextId++): Promise<GwAnswer> {
  const res = await fetch(gw.url('rpc', '/ethereum'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  });
  const body = (await res.json()) as GwAnswer['body'];
  return { xCache: res.headers.get('x-cache') ?? '', body };
}

/** A metric's value for the ethereum chain (labels '' for one without labels). */
function metric(name: string, labels = '{chain="ethereum"}'): Promise<number> {
  return metricValue(gw, name, labels);
}

/** The receipt of a transaction anvil has taken, once its block is mined (anvil may answer the send first). */
async function mined(hash: string): Promise<unknown> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await anvil.rpc('eth_getTransactionReceipt', [hash]);
    if (r.result !== null && r.result !== undefined) return r.result;
    if (Date.now() > deadline) throw new Error(`transaction ${hash} not mined within 15 s`);
    await new Promise((res) => setTimeout(res, 5));
  }
}

const hexToNum = (h: unknown): number => Number.parseInt(String(h), 16);
const num = (n: number): string => `0x${n.toString(16)}`;

async function anvilHead(): Promise<{ number: number; hash: string }> {
  const b = (await anvil.rpc('eth_getBlockByNumber', ['latest', false])).result as { number: string; hash: string };
  return { number: hexToNum(b.number), hash: b.hash };
}

// ------------------------------------------------------------------ what the test knows

/** Block and transaction hashes seen so far, reorged-out ones included. */
const blockHashes: string[] = [];
const txHashes: string[] = [];
/** Per call, the last answer the gateway gave that anvil confirmed, and the state it belonged to. */
const confirmed = new Map<string, { result: unknown; state: number }>();
/** Bumped by every operation that changes anvil's state. */
let state = 0;
/**
 * gateway_cache_head_changes_total just before the last operation that moved
 * anvil's head, while the gateway may not have seen that head yet; null once
 * it has.
 */
let unseenSince: number | null = null;

const figures = { reads: 0, batches: 0, batchCalls: 0, batchHits: 0, strict: 0, lenient: 0, staleServed: 0, hits: 0, misses: 0, bypass: 0, mines: 0, txs: 0, reorgs: 0, settles: 0, maxSettleMs: 0 };

/** Has the gateway seen anvil's current head? Its head gauge shows that number, and it counted a change since the last move. */
async function gatewaySeesHead(): Promise<boolean> {
  if (unseenSince === null) return true;
  const [head, changes, seen] = await Promise.all([anvilHead(), metric('gateway_cache_head_changes_total'), metric('gateway_cache_head_block')]);
  if (changes > unseenSince && seen === head.number) {
    unseenSince = null;
    return true;
  }
  return false;
}

/** Waits until the gateway has seen anvil's current head (number and hash), by its metrics. */
async function settle(): Promise<void> {
  if (unseenSince === null) return;
  const t0 = Date.now();
  const deadline = t0 + 15_000;
  while (!(await gatewaySeesHead())) {
    if (Date.now() > deadline) throw new Error(`the gateway did not see anvil's head within 15 s (${await metric('gateway_cache_head_changes_total')} changes, head ${await metric('gateway_cache_head_block')})`);
    await new Promise((r) => setTimeout(r, 10));
  }
  figures.maxSettleMs = Math.max(figures.maxSettleMs, Date.now() - t0);
  figures.settles++;
}

async function changing(op: () => Promise<void>): Promise<void> {
  // One change at a time: once the gateway has seen the last one its change
  // count stands still, so the count read here is the one before this change.
  await settle();
  const base = await metric('gateway_cache_head_changes_total');
  const before = await anvilHead();
  await op();
  state++;
  const after = await anvilHead();
  // A reorg of empty blocks can rebuild the very same blocks: then nothing moved.
  if (after.number !== before.number || after.hash !== before.hash) unseenSince = base;
  const b = (await anvil.rpc('eth_getBlockByNumber', ['latest', true])).result as { hash: string; transactions: { hash: string }[] };
  blockHashes.push(b.hash);
  for (const t of b.transactions) txHashes.push(t.hash);
}

// ------------------------------------------------------------------ operations

type Pick = (xs: readonly string[]) => string;
interface Read {
  kind: 'read';
  build: (pick: Pick, head: number) => [string, unknown[]];
  choice: number;
}
type Again = { kind: 'again'; choice: number };
type Op = Read | Again | { kind: 'batch'; parts: Array<Read | Again> } | { kind: 'mine'; n: number } | { kind: 'tx'; to: number; wei: number } | { kind: 'reorg'; depth: number } | { kind: 'settle' };

/** A block parameter: a tag, a number near the head or deep below it, or EIP-1898 objects. */
const blockParam = fc.oneof(
  fc.constantFrom('latest', 'latest', 'safe', 'finalized', 'earliest'),
  fc.integer({ min: 0, max: 6 }).map((back) => (_p: Pick, head: number) => num(Math.max(0, head - back))),
  fc.integer({ min: 66, max: 90 }).map((back) => (_p: Pick, head: number) => num(Math.max(0, head - back))),
  fc.integer({ min: 0, max: 6 }).map((back) => (_p: Pick, head: number) => ({ blockNumber: num(Math.max(0, head - back)) })),
  fc.constant((p: Pick) => ({ blockHash: p(blockHashes) })),
  // Other spellings geth reads (the one block-parameter reader, kinds/evm/call.ts): hex digits in upper case, a tag in
  // EIP-1898's object, a hash as a string. Each is kept as its own text, by the block it names.
  fc.integer({ min: 0, max: 6 }).map((back) => (_p: Pick, head: number) => `0x${Math.max(0, head - back).toString(16).toUpperCase()}`),
  fc.constantFrom('latest', 'safe', 'finalized').map((tag) => () => ({ blockNumber: tag })),
  fc.constant((p: Pick) => p(blockHashes)),
);
type BlockArg = string | ((p: Pick, head: number) => unknown);
const at = (b: BlockArg, p: Pick, head: number): unknown => (typeof b === 'string' ? b : b(p, head));
const blockNumberParam = fc.oneof(
  fc.constantFrom('latest', 'safe', 'finalized', 'earliest'),
  fc.integer({ min: -2, max: 6 }).map((back) => (_p: Pick, head: number) => num(Math.max(0, head - back))),
  fc.integer({ min: 66, max: 90 }).map((back) => (_p: Pick, head: number) => num(Math.max(0, head - back))),
);

const read: fc.Arbitrary<Read> = fc
  .oneof(
    fc.constant((): [string, unknown[]] => ['eth_blockNumber', []]),
    fc.constant((): [string, unknown[]] => ['eth_chainId', []]),
    fc.constant((): [string, unknown[]] => ['net_version', []]),
    fc.constant((): [string, unknown[]] => ['web3_sha3', ['0x68656c6c6f']]),
    fc.constant((): [string, unknown[]] => ['eth_gasPrice', []]),
    fc.tuple(fc.nat(3), blockParam).map(([a, b]) => (p: Pick, h: number): [string, unknown[]] => ['eth_getBalance', [accounts[a], at(b, p, h)]]),
    fc.tuple(fc.nat(3), blockParam).map(([a, b]) => (p: Pick, h: number): [string, unknown[]] => ['eth_getTransactionCount', [accounts[a], at(b, p, h)]]),
    blockParam.map((b) => (p: Pick, h: number): [string, unknown[]] => ['eth_call', [{ to: clock, data: '0x' }, at(b, p, h)]]),
    blockParam.map((b) => (p: Pick, h: number): [string, unknown[]] => ['eth_getCode', [clock, at(b, p, h)]]),
    blockParam.map((b) => (p: Pick, h: number): [string, unknown[]] => ['eth_getStorageAt', [clock, '0x0', at(b, p, h)]]),
    fc.tuple(blockNumberParam, fc.boolean()).map(([b, full]) => (p: Pick, h: number): [string, unknown[]] => ['eth_getBlockByNumber', [at(b, p, h), full]]),
    blockNumberParam.map((b) => (p: Pick, h: number): [string, unknown[]] => ['eth_getBlockTransactionCountByNumber', [at(b, p, h)]]),
    blockNumberParam.map((b) => (p: Pick, h: number): [string, unknown[]] => ['eth_getTransactionByBlockNumberAndIndex', [at(b, p, h), '0x0']]),
    blockNumberParam.map((b) => (p: Pick, h: number): [string, unknown[]] => ['eth_getUncleCountByBlockNumber', [at(b, p, h)]]),
    fc.boolean().map((full) => (p: Pick): [string, unknown[]] => ['eth_getBlockByHash', [p(blockHashes), full]]),
    fc.constant((p: Pick): [string, unknown[]] => ['eth_getBlockTransactionCountByHash', [p(blockHashes)]]),
    fc.constant((p: Pick): [string, unknown[]] => ['eth_getTransactionByBlockHashAndIndex', [p(blockHashes), '0x0']]),
    fc.constant((p: Pick): [string, unknown[]] => ['eth_getTransactionByHash', [p(txHashes)]]),
    fc.constant((p: Pick): [string, unknown[]] => ['eth_getTransactionReceipt', [p(txHashes)]]),
  )
  .chain((build) => fc.nat().map((choice) => ({ kind: 'read' as const, build, choice })));

// The same call as an earlier read, as it was sent: what a cache must get
// right after the head moved under it.
const again: fc.Arbitrary<Again> = fc.nat().map((choice) => ({ kind: 'again' as const, choice }));

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: read, weight: 25 },
  { arbitrary: again, weight: 30 },
  // A client's batch: its calls take part one by one (hits, misses, and the same call twice).
  { arbitrary: fc.array(fc.oneof(read, again), { minLength: 2, maxLength: 5 }).map((parts) => ({ kind: 'batch' as const, parts })), weight: 10 },
  { arbitrary: fc.integer({ min: 1, max: 3 }).map((n) => ({ kind: 'mine' as const, n })), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('tx' as const), to: fc.nat(3), wei: fc.integer({ min: 1, max: 1_000_000 }) }), weight: 3 },
  { arbitrary: fc.integer({ min: 1, max: 10 }).map((depth) => ({ kind: 'reorg' as const, depth })), weight: 6 },
  { arbitrary: fc.constant({ kind: 'settle' as const }), weight: 8 },
);

/** Scope docs/cache.md gives a call: may it ever differ from the node once stored? */
async function isFinal(method: string, params: unknown[]): Promise<boolean> {
  if (method === 'eth_chainId' || method === 'net_version' || method === 'web3_sha3') return true;
  const byNumber: Record<string, number> = { eth_getBalance: 1, eth_getTransactionCount: 1, eth_call: 1, eth_getCode: 1, eth_getStorageAt: 2, eth_getBlockByNumber: 0, eth_getBlockTransactionCountByNumber: 0, eth_getTransactionByBlockNumberAndIndex: 0, eth_getUncleCountByBlockNumber: 0 };
  const i = byNumber[method];
  if (i === undefined) return false;
  const b = params[i];
  const n = b === 'earliest' ? 0 : typeof b === 'string' && b.startsWith('0x') ? hexToNum(b) : typeof b === 'object' && b !== null && 'blockNumber' in b ? hexToNum((b as { blockNumber: string }).blockNumber) : -1;
  if (n < 0) return false;
  const fin = hexToNum(((await anvil.rpc('eth_getBlockByNumber', ['finalized', false])).result as { number: string }).number);
  return n <= fin;
}

/** Every call read so far, in order (repeats included). */
const calls: Array<[string, unknown[]]> = [];

/** The call a read makes: a new one, or one of the last 30 calls (soon enough to meet the entries a change left behind). */
function callOf(r: Read | Again, head: number): [string, unknown[]] | null {
  if (r.kind === 'again') {
    if (calls.length === 0) return null;
    const recent = calls.slice(-30);
    return recent[r.choice % recent.length]!;
  }
  const pick: Pick = (xs) => (xs.length === 0 ? '0x' + '00'.repeat(32) : xs[r.choice % xs.length]!);
  return r.build(pick, head);
}

/**
 * The gateway's answer to one call against anvil's at the same moment. A
 * difference is allowed only within the documented window: the gateway had not
 * seen the last change, the answer came from memory (X-Cache: HIT; in a batch,
 * any call may have), it is exactly the one the gateway gave, and anvil
 * confirmed, for that call before the change, and the call is not final.
 */
async function judge(key: string, method: string, params: unknown[], got: GwAnswer['body'], truth: GwAnswer['body'], unseen: boolean, xCache: string, mayBeFromMemory: boolean): Promise<void> {
  const same = isDeepStrictEqual(got.result, truth.result) && isDeepStrictEqual(got.error?.code, truth.error?.code);
  if (!same) {
    const prior = confirmed.get(key);
    const allowed = mayBeFromMemory && unseen && prior !== undefined && prior.state < state && isDeepStrictEqual(prior.result, got.result) && !(await isFinal(method, params));
    expect(allowed, `${key}: the gateway answered ${JSON.stringify(got).slice(0, 300)} (X-Cache ${xCache}, head change ${unseen ? 'not yet seen' : 'seen'}), anvil ${JSON.stringify(truth).slice(0, 300)}`).toBe(true);
    figures.staleServed++;
    return;
  }
  if (!unseen) figures.strict++;
  else figures.lenient++;
  if (truth.error === undefined) confirmed.set(key, { result: truth.result, state });
}

async function doRead(r: Read | Again): Promise<void> {
  const c = callOf(r, (await anvilHead()).number);
  if (c === null) return;
  const [method, params] = c;
  calls.push(c);
  const key = JSON.stringify([method, params]);
  // Read before the call: had the gateway seen the last change when the call went out?
  const unseen = !(await gatewaySeesHead());
  const before = proxy.requests.length;
  const id = nextId++;
  const g = await viaGateway(method, params, id);
  const reached = proxy.requests.length - before;
  const truth = await anvil.rpc(method, params);

  figures.reads++;
  expect(g.body.id, key).toBe(id);
  // X-Cache agrees with what reached the node.
  expect(['HIT', 'MISS', 'BYPASS'], key).toContain(g.xCache);
  if (g.xCache === 'HIT') figures.hits++;
  if (g.xCache === 'MISS') figures.misses++;
  if (g.xCache === 'BYPASS') figures.bypass++;
  expect(reached, `${key}: X-Cache ${g.xCache}, ${reached} request(s) reached the node`).toBe(g.xCache === 'HIT' ? 0 : 1);
  await judge(key, method, params, g.body, truth, unseen, g.xCache, g.xCache === 'HIT');
}

/** A client's batch of reads: every call's answer against anvil's own answer to the same batch. */
async function doBatch(parts: Array<Read | Again>): Promise<void> {
  const head = (await anvilHead()).number;
  const chosen = parts.map((r) => callOf(r, head)).filter((c): c is [string, unknown[]] => c !== null);
  if (chosen.length === 0) return;
  calls.push(...chosen);
  const unseen = !(await gatewaySeesHead());
  const body = chosen.map(([method, params]) => ({ jsonrpc: '2.0', id: nextId++, method, params }));
  const before = proxy.requests.length;
  const res = await fetch(gw.url('rpc', '/ethereum'), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: JSON.stringify(body) });
  const xCache = res.headers.get('x-cache') ?? '';
  const answers = (await res.json()) as GwAnswer['body'][];
  const reached = proxy.requests.slice(before).flatMap((r) => (Array.isArray(r.json) ? r.json : [r.json])).length;
  const truthRes = await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const truth = new Map(((await truthRes.json()) as GwAnswer['body'][]).map((t) => [t.id, t]));

  figures.batches++;
  figures.batchCalls += body.length;
  const what = `batch ${JSON.stringify(chosen).slice(0, 300)}`;
  // The client's order and ids; X-Cache agrees with what reached the node.
  expect(answers.map((a) => a.id), what).toEqual(body.map((b) => b.id));
  expect(['HIT', 'MISS', 'COALESCED'], what).toContain(xCache);
  if (xCache === 'HIT') expect(reached, `${what}: HIT, yet ${reached} call(s) reached the node`).toBe(0);
  else expect(reached, `${what}: ${xCache}, ${reached} call(s) reached the node`).toBeGreaterThan(0);
  expect(reached).toBeLessThanOrEqual(body.length);
  if (xCache === 'HIT') figures.batchHits++;
  for (const [i, [method, params]] of chosen.entries()) {
    // Which calls of a batch came from memory, X-Cache does not say: any may have (a call the node answered now is anvil's truth).
    await judge(JSON.stringify([method, params]), method, params, answers[i]!, truth.get(body[i]!.id)!, unseen, xCache, true);
  }
}

async function run(o: Op): Promise<void> {
  switch (o.kind) {
    case 'read':
    case 'again':
      return doRead(o);
    case 'batch':
      return doBatch(o.parts);
    case 'mine':
      figures.mines++;
      return changing(() => anvil.mine(o.n));
    case 'tx':
      figures.txs++;
      return changing(async () => {
        const r = await anvil.rpc('eth_sendTransaction', [{ from: accounts[(o.to + 1) % 4], to: accounts[o.to], value: num(o.wei) }]);
        expect(r.error).toBeUndefined();
        await mined(r.result as string);
      });
    case 'reorg':
      figures.reorgs++;
      return changing(async () => {
        const r = await anvil.rpc('anvil_reorg', [o.depth, []]);
        expect(r.error).toBeUndefined();
      });
    case 'settle':
      return settle();
  }
}

describe('cache: every answer agrees with the node (anvil as the oracle)', () => {
  it(`${SEQUENCES} random sequences of ${OPS} reads, transactions, mines and reorgs`, { timeout: 300_000 }, async () => {
    await settle();
    const h = await anvilHead();
    blockHashes.push(h.hash);
    // Final ones too: a block and a transaction 64 and more below the head, kept forever once their hash is known canonical.
    txHashes.push(deployTx);
    blockHashes.push(((await anvil.rpc('eth_getTransactionReceipt', [deployTx])).result as { blockHash: string }).blockHash);
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: OPS, maxLength: OPS }), async (ops) => {
        for (const o of ops) await run(o);
        await settle();
      }),
      // One anvil for all runs: its state carries over, so a failing sequence
      // is reported as it ran, not shrunk against another chain.
      { numRuns: SEQUENCES, endOnFailure: true },
    );
    console.log(
      `cache oracle: ${figures.reads} reads and ${figures.batches} batches of ${figures.batchCalls} calls (${figures.batchHits} batches all from memory; ${figures.strict} after the gateway saw the head, ${figures.lenient} before it did and still right, ${figures.staleServed} stale within the documented window); ` +
        `X-Cache HIT ${figures.hits}, MISS ${figures.misses}, BYPASS ${figures.bypass}; ${figures.txs} txs, ${figures.mines} mines, ${figures.reorgs} reorgs; the gateway saw a change within ${figures.maxSettleMs} ms at most (headPollMs ${HEAD_POLL_MS})`,
    );
    expect(figures.hits).toBeGreaterThan(figures.reads / 10);
    expect(figures.misses).toBeGreaterThan(0);
    expect(figures.reorgs).toBeGreaterThan(0);
    expect(figures.batches).toBeGreaterThan(0);
  });

  it('after a reorg, answers by number, by hash and at latest are the new chain\'s, not the cached ones', { timeout: 60_000 }, async () => {
    await settle();
    // A block with a transaction three below the head, then two empty ones.
    const sent = await anvil.rpc('eth_sendTransaction', [{ from: accounts[1], to: accounts[2], value: '0x7' }]);
    await changing(async () => void (await mined(sent.result as string)));
    await changing(() => anvil.mine(2));
    await settle();
    const head = (await anvilHead()).number;
    const n = num(head - 2);
    const block = ((await anvil.rpc('eth_getBlockByNumber', [n, false])).result as { hash: string }).hash;
    const reads: Array<[string, unknown[]]> = [
      ['eth_getBlockByNumber', [n, false]],
      ['eth_getBlockTransactionCountByNumber', [n]],
      ['eth_getTransactionByBlockNumberAndIndex', [n, '0x0']],
      ['eth_getBalance', [accounts[2], n]],
      ['eth_getBalance', [accounts[2], 'latest']],
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_call', [{ to: clock, data: '0x' }, 'latest']],
      ['eth_getBlockByHash', [block, false]],
      ['eth_getTransactionByHash', [sent.result]],
      ['eth_getTransactionReceipt', [sent.result]],
    ];
    for (const [m, p] of reads) {
      await viaGateway(m, p);
      const again = await viaGateway(m, p);
      expect(again.xCache, `${m} ${JSON.stringify(p)} is kept`).toBe('HIT');
    }
    // Replace the last three blocks (the transaction's among them) with three empty ones.
    await changing(async () => {
      const r = await anvil.rpc('anvil_reorg', [3, []]);
      expect(r.error).toBeUndefined();
    });
    await settle();
    for (const [m, p] of reads) {
      const g = await viaGateway(m, p);
      const truth = await anvil.rpc(m, p);
      expect(g.body.result, `${m} ${JSON.stringify(p)} after the reorg (X-Cache ${g.xCache})`).toEqual(truth.result);
    }
  });

  it('by hash, in a final block whose canonical hash is known: kept forever; a pending transaction: never kept', { timeout: 60_000 }, async () => {
    await settle();
    const receipt = (await anvil.rpc('eth_getTransactionReceipt', [deployTx])).result as { blockNumber: string; blockHash: string };
    expect(await isFinal('eth_getBlockByNumber', [receipt.blockNumber, false])).toBe(true);
    // The final block by number teaches the gateway its canonical hash.
    await viaGateway('eth_getBlockByNumber', [receipt.blockNumber, false]);
    const byHash: Array<[string, unknown[]]> = [
      ['eth_getTransactionReceipt', [deployTx]],
      ['eth_getTransactionByHash', [deployTx]],
      ['eth_getBlockByHash', [receipt.blockHash, false]],
      ['eth_getTransactionByBlockHashAndIndex', [receipt.blockHash, '0x0']],
    ];
    for (const [m, p] of byHash) {
      const first = await viaGateway(m, p);
      expect(first.body.result, m).toEqual((await anvil.rpc(m, p)).result);
    }
    // The head moves: answers bound to the head go, these stay.
    await changing(() => anvil.mine(1));
    await settle();
    const before = proxy.requests.length;
    for (const [m, p] of byHash) {
      const again = await viaGateway(m, p);
      expect(again.xCache, `${m} is kept past a head change`).toBe('HIT');
      expect(again.body.result, m).toEqual((await anvil.rpc(m, p)).result);
    }
    expect(proxy.requests.length - before).toBe(0);

    // A recent transaction by hash is bound to the head: gone once it moves.
    const sent = await anvil.rpc('eth_sendTransaction', [{ from: accounts[1], to: accounts[3], value: '0x9' }]);
    await changing(async () => void (await mined(sent.result as string)));
    await settle();
    await viaGateway('eth_getTransactionReceipt', [sent.result]);
    expect((await viaGateway('eth_getTransactionReceipt', [sent.result])).xCache).toBe('HIT');
    await changing(() => anvil.mine(1));
    await settle();
    expect((await viaGateway('eth_getTransactionReceipt', [sent.result])).xCache, 'a receipt in a block that is not final').toBe('MISS');

    // A transaction still in the mempool (blockHash null) is answered, never kept.
    expect((await anvil.rpc('evm_setAutomine', [false])).error).toBeUndefined();
    try {
      const pending = (await anvil.rpc('eth_sendTransaction', [{ from: accounts[2], to: accounts[3], value: '0xa' }])).result as string;
      for (let i = 0; i < 2; i++) {
        const g = await viaGateway('eth_getTransactionByHash', [pending]);
        expect((g.body.result as { blockHash: unknown }).blockHash).toBeNull();
        expect(g.xCache, 'a pending transaction is not kept').toBe('MISS');
      }
      await changing(() => anvil.mine(1));
      await settle();
      const g = await viaGateway('eth_getTransactionByHash', [pending]);
      expect(g.body.result).toEqual((await anvil.rpc('eth_getTransactionByHash', [pending])).result);
      expect((g.body.result as { blockHash: unknown }).blockHash).not.toBeNull();
    } finally {
      await anvil.rpc('evm_setAutomine', [true]);
    }
  });

  it('by hash, in a final block never asked for by number: the gateway asks for its canonical hash, then keeps it forever', { timeout: 60_000 }, async () => {
    await settle();
    // A transaction in a block 70 below the head (one the test sent earlier, or the deployment).
    const head = (await anvilHead()).number;
    const blockNo = num(head - 70);
    const block = (await anvil.rpc('eth_getBlockByNumber', [blockNo, false])).result as { hash: string; transactions: string[] };
    expect(await isFinal('eth_getBlockByNumber', [blockNo, false])).toBe(true);
    const checksBefore = proxy.healthChecks.length;
    const first = await viaGateway('eth_getBlockByHash', [block.hash, false]);
    expect(first.xCache).toBe('MISS');
    // The gateway's own eth_getBlockByNumber for that number reaches the node (as a health-agent call, not a client's).
    const deadline = Date.now() + 10_000;
    const asked = () => proxy.healthChecks.slice(checksBefore).some((r) => JSON.stringify(r.json).includes(`"eth_getBlockByNumber","params":["${blockNo}",false]`));
    while (!asked()) {
      if (Date.now() > deadline) throw new Error(`the gateway never asked for block ${blockNo}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    await changing(() => anvil.mine(1));
    await settle();
    const again = await viaGateway('eth_getBlockByHash', [block.hash, false]);
    expect(again.xCache, 'kept past a head change once its hash is known canonical').toBe('HIT');
    expect(again.body.result).toEqual((await anvil.rpc('eth_getBlockByHash', [block.hash, false])).result);
  });

  it('coalesces identical reads in flight: one upstream call, each client its own id', { timeout: 60_000 }, async () => {
    // The CDN node holds eth_getBalance until all eight calls are inside the gateway.
    const ids = Array.from({ length: 8 }, (_, i) => `c-${i}`);
    const call = (id: string) =>
      fetch(gw.url('rpc', '/cdn'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: ['0x' + '5a'.repeat(20), 'latest'] }),
      }).then(async (res) => ({ xCache: res.headers.get('x-cache'), body: (await res.json()) as { id: string; result: string } }));
    const pending = ids.map(call);
    const deadline = Date.now() + 15_000;
    while (cdnHeld.length === 0 || (await metric('gateway_inflight_requests', '')) < ids.length) {
      if (Date.now() > deadline) throw new Error(`not all calls reached the gateway: ${cdnHeld.length} held upstream`);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(cdnHeld).toHaveLength(1);
    cdnHeld.shift()!();
    const answers = await Promise.all(pending);
    for (const [i, a] of answers.entries()) expect(a.body).toEqual({ jsonrpc: '2.0', id: ids[i], result: '0x0' });
    expect(answers.map((a) => a.xCache).sort()).toEqual(['COALESCED', 'COALESCED', 'COALESCED', 'COALESCED', 'COALESCED', 'COALESCED', 'COALESCED', 'MISS']);
    expect(cdnBalanceCalls).toBe(1);
  });

  it('answers a hit with the id exactly as the client wrote it', async () => {
    const send = async (id: string) => {
      const res = await fetch(gw.url('rpc', '/ethereum'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: `{"jsonrpc":"2.0","id":${id},"method":"eth_chainId","params":[]}`,
      });
      return { xCache: res.headers.get('x-cache'), text: await res.text() };
    };
    await send('1');
    // A number past 2^53 comes back with every digit, not rounded by a parse.
    const big = await send('123456789012345678901234567890');
    expect(big.xCache).toBe('HIT');
    expect(big.text).toBe('{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":"0x1"}');
    // An escaped string id: the same JSON value (the guard may re-serialize a body with escapes).
    const esc = await send('"\\u00e9t\\u00e9"');
    expect(esc.xCache).toBe('HIT');
    expect(JSON.parse(esc.text)).toEqual({ jsonrpc: '2.0', id: 'été', result: '0x1' });
  });

  it('a call that names a key twice is kept only as what was checked: re-serialized where params are checked, never kept where they are not', async () => {
    // EIP-1898 with blockNumber twice: JSON.parse (and geth) read block 1, a parser that keeps the first key reads latest.
    const body = `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["${accounts[0]}",{"blockNumber":"latest","blockNumber":"0x1"}]}`;
    const send = async (chain: string) => {
      const res = await fetch(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body });
      return { xCache: res.headers.get('x-cache'), json: (await res.json()) as GwAnswer['body'] };
    };
    const atBlock1 = (await anvil.rpc('eth_getBalance', [accounts[0], '0x1'])).result;
    // Once the gateway knows anvil's finalized block, what it keeps of block 1 is kept for good (no head move drops it).
    const fin = hexToNum(((await anvil.rpc('eth_getBlockByNumber', ['finalized', false])).result as { number: string }).number);
    await until(async () => (await metric('gateway_cache_finalized_block')) === fin, "the gateway's finalized block");
    // Checked chain: the node gets the call that was checked, once-keyed, and that is what is kept.
    let before = proxy.requests.length;
    const first = await send('ethereum');
    expect(first).toMatchObject({ xCache: 'MISS', json: { id: 1, result: atBlock1 } });
    const balances = (from: number) => proxy.requests.slice(from).map((r) => r.body.toString('utf8')).filter((t) => t.includes('eth_getBalance'));
    const sent = balances(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.match(/"blockNumber"/g)).toHaveLength(1);
    expect(JSON.parse(sent[0]!).params[1]).toEqual({ blockNumber: '0x1' });
    expect(await send('ethereum')).toMatchObject({ xCache: 'HIT', json: { id: 1, result: atBlock1 } });
    expect(balances(before)).toHaveLength(1);
    // validate: off: the bytes go as sent, and the cache neither keeps nor coalesces them.
    before = proxy.requests.length;
    const a = await send('unchecked');
    const b = await send('unchecked');
    expect([a.xCache, b.xCache]).toEqual(['BYPASS', 'BYPASS']);
    expect(balances(before)).toEqual([body, body]);
  });

  it("a block parameter is kept by the block the pool's reader names (one reader): upper-case hex and a tag in EIP-1898's object are kept, both blockHash and blockNumber never", async () => {
    const head = hexToNum((await anvil.rpc('eth_blockNumber')).result);
    const n = Math.max(1, head - 1);
    const upper = `0x${n.toString(16).toUpperCase()}`;
    const want = (await anvil.rpc('eth_getBalance', [accounts[1], `0x${n.toString(16)}`])).result;
    // geth's hexutil reads either case: the same block, kept by its number.
    expect(await viaGateway('eth_getBalance', [accounts[1], upper])).toMatchObject({ body: { result: want } });
    expect(await viaGateway('eth_getBalance', [accounts[1], upper])).toMatchObject({ xCache: 'HIT', body: { result: want } });
    // A tag inside EIP-1898's object: kept until the head moves, as a bare tag is.
    const tagged = async () => viaGateway('eth_getTransactionCount', [accounts[1], { blockNumber: 'safe' }]);
    await tagged();
    expect((await tagged()).xCache).toBe('HIT');
    // Both: geth refuses it ("cannot specify both BlockHash and BlockNumber"); never kept.
    const hash = ((await anvil.rpc('eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).result as { hash: string }).hash;
    const both = async () => viaGateway('eth_getBalance', [accounts[1], { blockHash: hash, blockNumber: `0x${n.toString(16)}` }]);
    await both();
    expect((await both()).xCache).not.toBe('HIT');
  });

  it('never coalesces or keeps writes (X-Cache: BYPASS); a batch\'s calls take part one by one (cache-client-batch.test.ts)', async () => {
    const raw = '0x02f86a0180843b9aca00850ba43b740082520894' + '00'.repeat(20) + '8080c001a0' + '11'.repeat(32) + 'a0' + '22'.repeat(32);
    const before = proxy.requests.length;
    const sends = await Promise.all([1, 2].map((id) => viaGateway('eth_sendRawTransaction', [raw], id)));
    for (const s of sends) expect(s.xCache).toBe('BYPASS');
    expect(proxy.requests.length - before).toBe(2);
    const res = await fetch(gw.url('rpc', '/ethereum'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }]),
    });
    // eth_chainId is kept from the tests before: the batch is answered from memory.
    expect(res.headers.get('x-cache')).toBe('HIT');
    expect(((await res.json()) as { result: string }[])[0]!.result).toBe('0x1');
    expect(proxy.requests.length - before).toBe(2);
  });

  it('/metrics counts what X-Cache said, and shows the head and finalized block anvil has', async () => {
    await settle();
    // Answers are kept only once the gateway knows the head: wait for its first poll.
    const deadline = Date.now() + 15_000;
    while ((await metric('gateway_cache_head_block')) !== (await anvilHead()).number) {
      if (Date.now() > deadline) throw new Error('the gateway does not know the head after 15 s');
      await new Promise((r) => setTimeout(r, 10));
    }
    const counters = async () => ({
      HIT: await metric('gateway_cache_hits_total'),
      MISS: await metric('gateway_cache_misses_total'),
      COALESCED: await metric('gateway_cache_coalesced_total'),
    });
    const before = await counters();
    // Fresh calls (an address no other test reads): alone, twice in a row, and six at once.
    const tags: string[] = [];
    const solo = ['0x' + '6b'.repeat(20), 'latest'];
    for (let i = 0; i < 2; i++) tags.push((await viaGateway('eth_getBalance', solo)).xCache);
    const crowd = ['0x' + '7c'.repeat(20), 'latest'];
    tags.push(...(await Promise.all(Array.from({ length: 6 }, () => viaGateway('eth_getBalance', crowd)))).map((a) => a.xCache));
    const after = await counters();
    for (const tag of ['HIT', 'MISS', 'COALESCED'] as const) {
      expect(after[tag] - before[tag], tag).toBe(tags.filter((t) => t === tag).length);
    }
    expect(tags.slice(0, 2)).toEqual(['MISS', 'HIT']);
    expect(tags.slice(2).filter((t) => t === 'MISS')).toHaveLength(1);
    expect(await metric('gateway_cache_head_block')).toBe((await anvilHead()).number);
    const fin = hexToNum(((await anvil.rpc('eth_getBlockByNumber', ['finalized', false])).result as { number: string }).number);
    expect(await metric('gateway_cache_finalized_block')).toBe(fin);
  });

  it('the gateway\'s X-Cache is the only one: a node\'s own (a CDN in front of it) is dropped', async () => {
    const res = await fetch(gw.url('rpc', '/cdn'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      // Not a cacheable method: the node's answer streams through, with its headers.
      body: '{"jsonrpc":"2.0","id":1,"method":"eth_estimateGas","params":[{}]}',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-cache')).toBe('BYPASS');
    expect(res.headers.get('x-served-by')).toBe('cdn-edge-1');
    expect(((await res.json()) as { result: string }).result).toBe('0x5208');
  });

  it('every answer carries X-Cache, a CORS preflight\'s and the gateway\'s own refusals too', async () => {
    const pre = await fetch(gw.url('rpc', '/ethereum'), { method: 'OPTIONS', headers: { origin: 'https://wallet.example', 'access-control-request-method': 'POST' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('x-cache')).toBe('BYPASS');
    const noKey = await fetch(gw.url('rpc', '/ethereum'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get('x-cache')).toBe('BYPASS');
    const refused = await fetch(gw.url('rpc', '/ethereum'), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_accounts"}' });
    expect(refused.headers.get('x-cache')).toBe('BYPASS');
    // Refused before the chain's own flow: an expectation the gateway does not take.
    const expects = await rawRequest(gw.url('rpc', '/'), { method: 'POST', path: '/ethereum', headers: { 'x-api-key': KEY, expect: 'something-else' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
    expect(expects.status).toBe(417);
    expect(expects.headers['x-cache']).toBe('BYPASS');
  });
});
