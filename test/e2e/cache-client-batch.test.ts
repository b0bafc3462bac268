// A client's batch on a cached chain (issue 20: "a batch's items take part
// individually"): each call the cache takes is answered from memory, joins an
// identical call in flight, or goes upstream as a miss, and the other calls
// (writes, methods the cache does not keep, notifications) go to the node
// together as one smaller batch; the client gets one batch answer, in its own
// order, with its own ids. Against a real anvil behind a recording proxy (what
// reached the node), a stand-in node that holds eth_getBalance until the test
// lets it answer (coalescing), and one that fails every batch (failures).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { metricValue, newKey, pipelinedRequests, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { createSafeServer, listen, parseJson, record } from '../support/http.ts';
import type { Server } from 'node:http';
import { createPublicClient, createWalletClient, defineChain, http } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { FetchRequest, JsonRpcProvider, Network } from 'ethers';

const KEY = newKey();

let anvil: Anvil;
let proxy: RecordingProxy;
let rig: Gateway;
let gw: RunningGateway;
let accounts: string[] = [];
/** The holding stand-in: its calls as received, and the answers it holds back. */
let holder: Server;
const held: Array<() => void> = [];
const holderCalls: unknown[] = [];
/** Fails every JSON-RPC batch with a 503; answers the gateway's own checks. */
let failing: Server;

interface Call {
  jsonrpc: '2.0';
  id?: unknown;
  method: string;
  params: unknown[];
}

const call = (id: unknown, method: string, params: unknown[]): Call => ({ jsonrpc: '2.0', id, method, params });
const note = (method: string, params: unknown[]): Call => ({ jsonrpc: '2.0', method, params });

/** Head and chain answers for the gateway's health checks and head polls (block 16, finalized 8). */
function ownAnswer(d: { id?: unknown; method?: string; params?: unknown[] }): Record<string, unknown> {
  const finalized = d.params?.[0] === 'finalized';
  const block = finalized ? { number: '0x8', hash: '0x' + '22'.repeat(32) } : { number: '0x10', hash: '0x' + '11'.repeat(32) };
  const result = d.method === 'eth_getBlockByNumber' ? block : d.method === 'eth_chainId' ? '0x1' : '0x10';
  return { jsonrpc: '2.0', id: d.id, result };
}

async function standIn(answer: (doc: unknown, health: boolean, reply: (status: number, v: unknown) => void) => void): Promise<{ server: Server; url: string }> {
  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const health = String(r.headers['user-agent'] ?? '').startsWith('chain-gateway-health');
    answer(parseJson(r.body), health, (status, v) => {
      const text = JSON.stringify(v);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
    });
  });
  return { server, url: await listen(server) };
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1 });
  proxy = await startRecordingProxy(anvil.url);
  accounts = (await anvil.rpc('eth_accounts')).result as string[];
  await anvil.mine(3);
  const h = await standIn((doc, health, reply) => {
    const items = (Array.isArray(doc) ? doc : [doc]) as { id?: unknown; method?: string; params?: unknown[] }[];
    if (health) return reply(200, Array.isArray(doc) ? items.map(ownAnswer) : ownAnswer(items[0]!));
    holderCalls.push(doc);
    const answers = items.map((it) => ({ jsonrpc: '2.0', id: it.id, result: it.method === 'eth_getBalance' ? '0x' + String(it.params?.[0]).slice(-4) : '0x5208' }));
    const send = () => reply(200, Array.isArray(doc) ? answers : answers[0]);
    if (items.some((it) => it.method === 'eth_getBalance')) held.push(send);
    else send();
  });
  holder = h.server;
  const f = await standIn((doc, health, reply) => {
    const items = (Array.isArray(doc) ? doc : [doc]) as { id?: unknown; method?: string; params?: unknown[] }[];
    if (health) return reply(200, Array.isArray(doc) ? items.map(ownAnswer) : ownAnswer(items[0]!));
    if (Array.isArray(doc)) return reply(503, { error: 'overloaded' });
    reply(200, { jsonrpc: '2.0', id: items[0]!.id, result: '0x1' });
  });
  failing = f.server;
  rig = await gateway({
    name: 'cache-client-batch',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
      evmChain('held', ['HELD_URL']),
      evmChain('failing', ['FAILING_URL']),
      evmChain('nocache', ['ETH_URL'], { cache: 'off' }),
    ],
    header: { cache: { maxBytes: 8388608, headPollMs: 200 }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'batch-client', key: KEY }],
    standIns: { anvil, ETH_URL: proxy, holder, failing },
    env: { HELD_URL: h.url, FAILING_URL: f.url },
  });
  gw = rig.gw;
  // Entries are kept only once the gateway knows the head.
  await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')) >= 3, "the gateway knows anvil's head");
  await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="held"}')) === 16, "the gateway knows the stand-in's head");
}, 60_000);

afterAll(() => rig?.close());

interface BatchAnswer {
  status: number;
  xCache: string | null;
  text: string;
  body: unknown;
}

async function batch(path: string, body: unknown): Promise<BatchAnswer> {
  const res = await fetch(gw.url('rpc', path), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, xCache: res.headers.get('x-cache'), text, body: text === '' ? undefined : JSON.parse(text) };
}

/** The JSON-RPC calls that reached anvil since `since`, batches flattened, ids left out. */
function reached(since: number): string[] {
  return proxy.requests
    .slice(since)
    .flatMap((r) => (Array.isArray(r.json) ? r.json : [r.json]) as { method: string; params: unknown }[])
    .map((c) => `${c.method} ${JSON.stringify(c.params)}`);
}

/** anvil's own answer to every call of the batch (the same body), in the client's order. */
async function truthOf(calls: readonly Call[]): Promise<unknown[]> {
  const res = await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(calls) });
  const answers = (await res.json()) as { id: unknown }[];
  // anvil answers in order; only calls with an id are answered.
  return answers;
}

describe('a client batch on a cached chain: each call takes part', () => {
  it('answers a repeated batch from memory (X-Cache: HIT, nothing reaches the node), in the client\'s order with its ids', { timeout: 60_000 }, async () => {
    const calls = [call(1, 'eth_chainId', []), call('b', 'eth_getBalance', [accounts[0], 'latest']), call(3, 'eth_getBlockByNumber', ['0x1', false]), call(4, 'eth_getTransactionCount', [accounts[1], 'latest'])];
    const truth = await truthOf(calls);
    const since = proxy.requests.length;
    const first = await batch('/ethereum', calls);
    expect(first.status).toBe(200);
    expect(first.xCache).toBe('MISS');
    expect(first.body).toEqual(truth);
    // The misses went to the node together, as the client sent them: one request. eth_chainId is the manifest's
    // (chainId: 1): it never reaches a node.
    expect(proxy.requests.length - since).toBe(1);
    expect(reached(since).sort()).toEqual(calls.filter((c) => c.method !== 'eth_chainId').map((c) => `${c.method} ${JSON.stringify(c.params)}`).sort());

    // The same calls with other ids, in another order: all from memory.
    const again = [call('z', 'eth_getTransactionCount', [accounts[1], 'latest']), call('big', 'eth_chainId', []), call(null, 'eth_getBalance', [accounts[0], 'latest']), call(0, 'eth_getBlockByNumber', ['0x1', false])];
    const since2 = proxy.requests.length;
    const second = await batch('/ethereum', again);
    expect(second.xCache).toBe('HIT');
    expect(proxy.requests.length - since2).toBe(0);
    expect(second.body).toEqual(await truthOf(again));
    // A number id past 2^53 comes back with every digit.
    const big = await batch('/ethereum', '[{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"eth_chainId","params":[]}]');
    expect(big.xCache).toBe('HIT');
    expect(big.text).toBe('[{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":"0x1"}]');
  });

  it('sends only what memory cannot answer: writes, other methods and notifications go together, refused calls are answered in place', { timeout: 60_000 }, async () => {
    // Warm one call.
    await batch('/ethereum', [call(1, 'eth_getBalance', [accounts[2], 'latest'])]);
    const raw = '0x02f86a0180843b9aca00850ba43b740082520894' + '00'.repeat(20) + '8080c001a0' + '11'.repeat(32) + 'a0' + '22'.repeat(32);
    const calls = [
      call('hit', 'eth_getBalance', [accounts[2], 'latest']),
      call('est', 'eth_estimateGas', [{ from: accounts[0], to: accounts[1], value: '0x1' }]),
      call('nope', 'eth_sign', [accounts[0], '0x00']),
      note('eth_blockNumber', []),
      call('miss', 'eth_getCode', [accounts[3], 'latest']),
      call('send', 'eth_sendRawTransaction', [raw]),
      call('bad', 'eth_getBalance', ['0x1234', 'latest']),
    ];
    const truthCalls = [calls[0]!, calls[1]!, calls[4]!, calls[5]!];
    const truth = (await truthOf(truthCalls)) as { id: unknown }[];
    const since = proxy.requests.length;
    const a = await batch('/ethereum', calls);
    expect(a.status).toBe(200);
    expect(a.xCache).toBe('MISS');
    const answers = a.body as { id: unknown; result?: unknown; error?: { code: number } }[];
    // One answer per call with an id, in the client's order (the notification has none).
    expect(answers.map((x) => x.id)).toEqual(['hit', 'est', 'nope', 'miss', 'send', 'bad']);
    expect(answers[0]).toEqual(truth[0]);
    expect(answers[1]).toEqual(truth[1]);
    expect(answers[2]!.error!.code).toBe(-32601);
    expect(answers[3]).toEqual(truth[2]);
    expect(answers[4]!.error).toBeDefined();
    expect(answers[4]!.error!.code).toBe((truth[3] as unknown as { error: { code: number } }).error.code);
    expect(answers[5]!.error!.code).toBe(-32602);
    // What reached the node: the miss, and the rest as one batch (estimate, notification, send); never the hit, the refused or the invalid call.
    const got = reached(since);
    expect(got.sort()).toEqual([calls[1]!, calls[3]!, calls[4]!, calls[5]!].map((c) => `${c.method} ${JSON.stringify(c.params)}`).sort());
    const rest = proxy.requests.slice(since).find((r) => Array.isArray(r.json) && (r.json as Call[]).some((c) => c.method === 'eth_sendRawTransaction'));
    expect((rest!.json as Call[]).map((c) => c.method)).toEqual(['eth_estimateGas', 'eth_blockNumber', 'eth_sendRawTransaction']);
  });

  it('a batch of notifications and calls the cache does not take is forwarded as before (X-Cache: BYPASS)', async () => {
    const since = proxy.requests.length;
    const a = await batch('/ethereum', [call(1, 'eth_estimateGas', [{ from: accounts[0], to: accounts[1] }]), note('eth_chainId', [])]);
    expect(a.xCache).toBe('BYPASS');
    expect((a.body as { id: number }[]).map((x) => x.id)).toEqual([1]);
    expect(proxy.requests.length - since).toBe(1);
    expect((proxy.requests[since]!.json as Call[]).map((c) => c.method)).toEqual(['eth_estimateGas', 'eth_chainId']);
  });

  it('a batch whose calls join a call in flight or hit says COALESCED: the node is asked once', { timeout: 60_000 }, async () => {
    const addr = '0x' + '00'.repeat(18) + 'c0de';
    // eth_chainId kept (the holder answers it at once), so the batch's second call is a hit.
    expect((await batch('/held', call(1, 'eth_chainId', []))).xCache).toBe('MISS');
    const calledBefore = holderCalls.length;
    // The lone call and the batch in one write: the gateway reads both in one turn, so the batch's
    // eth_getBalance finds the lone call's flight, which the holder keeps until the test lets it answer.
    const both = pipelinedRequests(gw.ports.rpc!, '/held', KEY, [
      JSON.stringify(call('solo', 'eth_getBalance', [addr, 'latest'])),
      JSON.stringify([call(7, 'eth_getBalance', [addr, 'latest']), call(8, 'eth_chainId', [])]),
    ]);
    await until(async () => held.length === 1, 'the lone call is held upstream');
    held.shift()!();
    const [s, b] = await both;
    expect(s!.xCache).toBe('MISS');
    expect(JSON.parse(s!.text)).toEqual({ jsonrpc: '2.0', id: 'solo', result: '0xc0de' });
    expect(b!.xCache).toBe('COALESCED');
    expect(JSON.parse(b!.text)).toEqual([
      { jsonrpc: '2.0', id: 7, result: '0xc0de' },
      { jsonrpc: '2.0', id: 8, result: '0x5208' },
    ]);
    // One call reached the node: the lone one.
    expect(holderCalls.slice(calledBefore)).toEqual([call('solo', 'eth_getBalance', [addr, 'latest'])]);
    // Now from memory.
    const again = await batch('/held', [call(9, 'eth_getBalance', [addr, 'latest'])]);
    expect(again.xCache).toBe('HIT');
  });

  it('a failure of a call sent for the batch fails the batch in the JSON-RPC envelope; nothing is kept', { timeout: 60_000 }, async () => {
    const a = await batch('/failing', [call(1, 'eth_getBalance', ['0x' + '01'.repeat(20), 'latest']), call(2, 'eth_getBalance', ['0x' + '02'.repeat(20), 'latest'])]);
    expect(a.status).toBe(502);
    expect(a.xCache).toBe('MISS');
    // One error per call, each with its id (issue 43, rule 11).
    expect((a.body as { id: number; error: { code: number } }[]).map((m) => [m.id, m.error.code])).toEqual([
      [1, -32053],
      [2, -32053],
    ]);
    // Single calls reach that node fine; nothing of the failed batch was kept.
    const solo = await batch('/failing', call(3, 'eth_getBalance', ['0x' + '01'.repeat(20), 'latest']));
    expect(solo.xCache).toBe('MISS');
    expect(solo.body).toEqual({ jsonrpc: '2.0', id: 3, result: '0x1' });
  });

  it('metrics count a batch\'s calls as they went: hits, misses, coalesced', async () => {
    const m = async () => ({
      hits: await metricValue(gw, 'gateway_cache_hits_total', '{chain="ethereum"}'),
      misses: await metricValue(gw, 'gateway_cache_misses_total', '{chain="ethereum"}'),
      coalesced: await metricValue(gw, 'gateway_cache_coalesced_total', '{chain="ethereum"}'),
    });
    const fresh = (n: number) => call(n, 'eth_getBalance', ['0x' + n.toString(16).padStart(40, 'f'), 'latest']);
    const before = await m();
    // Two fresh calls, one of them twice (the second joins the first), then the same again: three hits.
    const first = await batch('/ethereum', [fresh(1), fresh(2), fresh(1)]);
    expect(first.xCache).toBe('MISS');
    const second = await batch('/ethereum', [fresh(1), fresh(2), fresh(1)]);
    expect(second.xCache).toBe('HIT');
    const after = await m();
    expect(after.misses - before.misses).toBe(2);
    expect(after.coalesced - before.coalesced).toBe(1);
    expect(after.hits - before.hits).toBe(3);
  });

  it('a chain with cache: off sends a batch to the node whole, byte for byte, every time, with no X-Cache', async () => {
    const since = proxy.requests.length;
    const body = '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},{"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":[]}]';
    await batch('/nocache', body);
    const a = await batch('/nocache', body);
    expect(a.xCache).toBeNull();
    expect(proxy.requests.length - since).toBe(2);
    expect(proxy.requests[since + 1]!.body.toString()).toBe(body);
  });
});

describe('real clients that batch (viem batch: true, ethers v6 by default)', () => {
  const chain = defineChain({ id: 1, name: 'anvil-1', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } });
  /** anvil's head, seen by the gateway: its cache has dropped what the last block changed. */
  async function gatewayAtAnvilHead(): Promise<void> {
    const head = Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
    await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')) === head, 'the gateway has seen anvil\'s head');
  }

  it('viem: a batched read is answered from memory the second time, and a transfer in between shows in the next batch', { timeout: 60_000 }, async () => {
    const bodies: string[] = [];
    const transport = http(gw.url('rpc', '/ethereum'), {
      batch: true,
      fetchOptions: { headers: { 'X-API-Key': KEY } },
      onFetchRequest: async (r) => void bodies.push(await r.clone().text()),
    });
    const pub = createPublicClient({ chain, transport });
    // anvil's default mnemonic; account 9 is the test's own sender.
    const account = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 9 });
    const wallet = createWalletClient({ chain, transport, account });
    const to = accounts[5] as `0x${string}`;
    const read = () => Promise.all([pub.getBalance({ address: account.address }), pub.getBalance({ address: to }), pub.getTransactionCount({ address: account.address }), pub.getChainId()]);
    const truth = async () => [
      BigInt((await anvil.rpc('eth_getBalance', [account.address, 'latest'])).result as string),
      BigInt((await anvil.rpc('eth_getBalance', [to, 'latest'])).result as string),
      Number.parseInt((await anvil.rpc('eth_getTransactionCount', [account.address, 'latest'])).result as string, 16),
      1,
    ];
    await gatewayAtAnvilHead();
    const since = proxy.requests.length;
    expect(await read()).toEqual(await truth());
    const sent = proxy.requests.length - since;
    // The same reads again: one batch from the client, nothing to the node.
    const again = proxy.requests.length;
    expect(await read()).toEqual(await truth());
    expect(proxy.requests.length - again).toBe(0);
    expect(sent).toBeGreaterThan(0);
    // viem sent them as one batch each time.
    expect(bodies.filter((b) => Array.isArray(JSON.parse(b)) && JSON.parse(b).length === 4)).toHaveLength(2);

    const hash = await wallet.sendTransaction({ to, value: 12345n });
    const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    expect(receipt.status).toBe('success');
    await gatewayAtAnvilHead();
    const after = await read();
    expect(after).toEqual(await truth());
    expect(after[2]).toBeGreaterThan(0);
  });

  it('ethers v6: calls it batches by default get anvil\'s answers, and repeat from memory', { timeout: 60_000 }, async () => {
    const req = new FetchRequest(gw.url('rpc', '/ethereum'));
    req.setHeader('X-API-Key', KEY);
    const bodies: string[] = [];
    req.preflightFunc = async (r) => {
      bodies.push(Buffer.from(r.body ?? new Uint8Array()).toString('utf8'));
      return r;
    };
    const provider = new JsonRpcProvider(req, Network.from(1), { staticNetwork: true, cacheTimeout: -1 });
    await gatewayAtAnvilHead();
    const read = () => Promise.all([provider.getBalance(accounts[6]!), provider.getTransactionCount(accounts[6]!), provider.getBlockNumber(), provider.getCode(accounts[7]!)]);
    const first = await read();
    const since = proxy.requests.length;
    const second = await read();
    expect(proxy.requests.length - since).toBe(0);
    expect(second).toEqual(first);
    // ethers sent each round as one batch of the four calls.
    expect(bodies.filter((b) => Array.isArray(JSON.parse(b)) && JSON.parse(b).length === 4)).toHaveLength(2);
    expect(first).toEqual([
      BigInt((await anvil.rpc('eth_getBalance', [accounts[6], 'latest'])).result as string),
      Number.parseInt((await anvil.rpc('eth_getTransactionCount', [accounts[6], 'latest'])).result as string, 16),
      Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16),
      (await anvil.rpc('eth_getCode', [accounts[7], 'latest'])).result,
    ]);
    provider.destroy();
  });
});

describe('a cached chain answers every batch as a chain without the cache does', () => {
  // Nothing changes anvil's state here (no transaction, no mining), so the two
  // chains, in front of the same anvil, must give the same answers to the same
  // batch: the cache's hits, joins and split-off rest included. The batches mix
  // calls the cache takes (repeated, at tags, numbers, hashes), calls it does
  // not (pending, other methods, a write anvil refuses), refused methods,
  // invalid parameters, invalid items, notifications, and ids of every kind,
  // some of them shared.
  const raw = '0x02f86a0180843b9aca00850ba43b740082520894' + '00'.repeat(20) + '8080c001a0' + '11'.repeat(32) + 'a0' + '22'.repeat(32);
  let blockHash = '';
  const callArb = (): fc.Arbitrary<unknown> => {
    const addr = fc.constantFrom(...accounts.slice(0, 3), '0x' + 'ab'.repeat(20));
    const tag = fc.constantFrom('latest', 'earliest', 'pending', 'safe', 'finalized', '0x0', '0x1', '0x2', '0x3', '0x64');
    const method: fc.Arbitrary<[string, unknown[]]> = fc.oneof(
      fc.constant(['eth_chainId', []] as [string, unknown[]]),
      fc.constant(['eth_blockNumber', []] as [string, unknown[]]),
      fc.constant(['net_version', []] as [string, unknown[]]),
      fc.constant(['eth_gasPrice', []] as [string, unknown[]]),
      fc.tuple(addr, tag).map(([a, t]) => ['eth_getBalance', [a, t]] as [string, unknown[]]),
      fc.tuple(addr, tag).map(([a, t]) => ['eth_getTransactionCount', [a, t]] as [string, unknown[]]),
      // (Not the pending block: anvil makes it anew, with the clock's timestamp, at every call.)
      fc.tuple(tag.filter((t) => t !== 'pending'), fc.boolean()).map(([t, f]) => ['eth_getBlockByNumber', [t, f]] as [string, unknown[]]),
      fc.boolean().map((f) => ['eth_getBlockByHash', [blockHash, f]] as [string, unknown[]]),
      fc.constant(['eth_getTransactionReceipt', ['0x' + '01'.repeat(32)]] as [string, unknown[]]),
      fc.constant(['eth_estimateGas', [{ from: accounts[0], to: accounts[1] }]] as [string, unknown[]]),
      fc.constant(['eth_sendRawTransaction', [raw]] as [string, unknown[]]),
      fc.constant(['eth_accounts', []] as [string, unknown[]]),
      fc.constant(['eth_getBalance', ['0x12', 'latest']] as [string, unknown[]]),
    );
    const id = fc.oneof(fc.integer({ min: -3, max: 5 }), fc.constantFrom('a', 'b', '', 'é'), fc.constant(null));
    return fc.oneof(
      { arbitrary: fc.tuple(method, id).map(([[m, p], i]) => ({ jsonrpc: '2.0', id: i, method: m, params: p })), weight: 12 },
      { arbitrary: method.map(([m, p]) => ({ jsonrpc: '2.0', method: m, params: p })), weight: 2 },
      { arbitrary: fc.constantFrom(1, 'x', null, [], { jsonrpc: '1.0', id: 1, method: 'eth_chainId' }, { id: 2, method: 'eth_chainId', params: [] }), weight: 1 },
    );
  };

  it('random batches: the same status and the same answers, item for item', { timeout: 120_000 }, async () => {
    blockHash = ((await anvil.rpc('eth_getBlockByNumber', ['0x1', false])).result as { hash: string }).hash;
    const post = async (path: string, body: unknown) => {
      const res = await fetch(gw.url('rpc', path), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: JSON.stringify(body) });
      const text = await res.text();
      return { status: res.status, xCache: res.headers.get('x-cache'), answer: text === '' ? null : (JSON.parse(text) as unknown) };
    };
    const seen = { HIT: 0, MISS: 0, COALESCED: 0, BYPASS: 0 } as Record<string, number>;
    await fc.assert(
      fc.asyncProperty(fc.array(callArb(), { minLength: 1, maxLength: 12 }), async (batchBody) => {
        // Twice through the cached chain (the second meets what the first kept), once through the other.
        const cached1 = await post('/ethereum', batchBody);
        const cached2 = await post('/ethereum', batchBody);
        const plain = await post('/nocache', batchBody);
        seen[cached1.xCache ?? '']!++;
        seen[cached2.xCache ?? '']!++;
        for (const c of [cached1, cached2]) {
          expect({ status: c.status, answer: c.answer }, JSON.stringify(batchBody)).toEqual({ status: plain.status, answer: plain.answer });
        }
      }),
      { numRuns: 150 },
    );
    console.log(`cached batches against uncached ones: X-Cache ${JSON.stringify(seen)}`);
    expect(seen.HIT).toBeGreaterThan(0);
    expect(seen.MISS).toBeGreaterThan(0);
    expect(seen.BYPASS).toBeGreaterThan(0);
  });
});
