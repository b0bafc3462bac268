// Blockbook's WebSocket API on a blockbook chain with websocket: true (issue
// 46), through the built gateway in front of the Blockbook stand-in: the key
// placements and the refusals before the upgrade, Trezor Suite's
// @trezor/blockchain-link (unmodified) asking what a wallet asks, the message
// envelope's errors, admission per message, and subscribeNewBlock from the
// served tip with its gap filled.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { metricValue, newKey, sha256, until } from './harness.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { connect, openSocket, RpcSocket, wsUrl, type Refusal } from '../support/ws-client.ts';

const require = createRequire(import.meta.url);
// The client as Trezor Suite ships it (CommonJS), in plain Node.
const BlockchainLink = (require('@trezor/blockchain-link') as { default: new (o: object) => Link }).default;
const WORKER = (require('@trezor/blockchain-link/lib/workers/blockbook') as { default: unknown }).default;

interface Link {
  connect(): Promise<boolean>;
  disconnect(): Promise<boolean>;
  dispose(): void;
  getInfo(): Promise<any>;
  getAccountInfo(p: object): Promise<any>;
  getAccountUtxo(d: string): Promise<any>;
  getBlockHash(h: number): Promise<string>;
  estimateFee(p: object): Promise<any>;
  getTransaction(txid: string): Promise<any>;
  subscribe(p: object): Promise<any>;
  unsubscribe(p: object): Promise<any>;
  on(event: string, cb: (e: any) => void): void;
}

const ADDRESS = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
const KEYS = { wallet: newKey(), 'quiet-only': newKey(), few: newKey(), metered: newKey(), narrow: newKey() };

let bb: BlockbookStub;
let rig: Gateway<{ bb: Promise<BlockbookStub> }>;
let base: string;

beforeAll(async () => {
  rig = await gateway({
    name: 'issue-46-blockbook-socket',
    chains: [
      { path: 'btc', interface: 'blockbook', listener: 'explorer', websocket: true, upstreams: ['${bb}'] },
      { path: 'quiet', interface: 'blockbook', listener: 'explorer', upstreams: ['${bb}'] },
      { path: 'send', interface: 'blockbook', listener: 'explorer', websocket: true, sendtx: true, upstreams: ['${bb}'] },
    ],
    header: { websocket: { maxConnectionsPerKey: 3, maxSubscriptionsPerConnection: 2 }, health: { intervalMs: 100, timeoutMs: 2000 } },
    keys: [
      `keys:`,
      `  - { id: wallet, sha256: "${sha256(KEYS.wallet)}" }`,
      `  - { id: quiet-only, sha256: "${sha256(KEYS['quiet-only'])}", chains: [quiet] }`,
      `  - { id: few, sha256: "${sha256(KEYS.few)}", rateLimit: 3/min }`,
      `  - { id: metered, sha256: "${sha256(KEYS.metered)}", quota: 3/day }`,
      `  - { id: narrow, sha256: "${sha256(KEYS.narrow)}", allow: { methods: [address, subscribeNewBlock] } }`,
      '',
    ].join('\n'),
    standIns: { bb: startBlockbookStub({ bestHeight: 100 }) },
  });
  bb = rig.standIns.bb;
  base = wsUrl(rig.gw.url('explorer', '/btc'));
}, 60_000);

afterAll(() => rig?.close());

/** One message, answered: its `data`. */
async function ask(s: RpcSocket, method: string, params: object = {}, id = `${method}-${Math.random()}`): Promise<any> {
  const a = await s.send({ id, method, params }, id);
  expect(a.id).toBe(id);
  return a.data;
}

describe('URLs and keys', () => {
  it('takes the key in the path, the X-API-Key header and ?api_key=', async () => {
    const key = KEYS.wallet;
    for (const s of [await connect(`${base}/${key}/websocket`), await connect(`${base}/websocket`, { 'x-api-key': key }), await connect(`${base}/websocket?api_key=${key}`)]) {
      const data = await ask(s, 'getBlockHash', { height: 7 });
      expect(data).toEqual({ hash: bb.blockHash(7) });
      await s.close();
    }
  });

  it("refuses before the upgrade, with Blockbook's {\"error\"} body: 401, 403, 404, 429", async () => {
    const refused = async (url: string, headers: Record<string, string> = {}): Promise<Refusal> => {
      const r = await openSocket(url, headers);
      if (r instanceof RpcSocket) throw new Error(`${url} was upgraded`);
      return r;
    };
    const key = KEYS.wallet;
    expect(await refused(`${base}/websocket`)).toMatchObject({ status: 401, body: '{"error":"API key required"}' });
    expect(await refused(`${base}/not-a-key-of-ours-000000000000000000/websocket`)).toMatchObject({ status: 403, body: '{"error":"Invalid API key"}' });
    expect(await refused(`${base}/${KEYS['quiet-only']}/websocket`)).toMatchObject({ status: 403, body: '{"error":"API key not allowed for this chain"}' });
    const quiet = wsUrl(rig.gw.url('explorer', '/quiet'));
    expect((await refused(`${quiet}/${key}/websocket`)).status).toBe(404);
    expect(JSON.parse((await refused(`${quiet}/${key}/websocket`)).body)).toEqual({ error: 'Not found' });
    expect((await refused(wsUrl(rig.gw.url('explorer', `/nochain/${key}/websocket`)))).status).toBe(404);
    // Not the socket's path: no upgrade there.
    expect((await refused(`${base}/${key}/websocket/more`)).status).toBe(404);
    const held = [await connect(`${base}/${key}/websocket`), await connect(`${base}/${key}/websocket`), await connect(`${base}/${key}/websocket`)];
    const over = await refused(`${base}/${key}/websocket`);
    expect(over.status).toBe(429);
    expect(JSON.parse(over.body)).toEqual({ error: 'Limit exceeded: WebSocket connections per key', maxConnectionsPerKey: 3 });
    await Promise.all(held.map((s) => s.close()));
  });
});

describe('messages', () => {
  let s: RpcSocket;
  beforeAll(async () => {
    s = await connect(`${base}/${KEYS.wallet}/websocket`);
  });
  afterAll(() => s?.close());

  it('answers ping with {}, an unknown method and a non-JSON message with an error, and stays open', async () => {
    expect(await ask(s, 'ping')).toEqual({});
    expect(await ask(s, 'noSuchMethod', {}, 'u1')).toEqual({ error: { message: "Unknown method 'noSuchMethod'" } });
    const bad = await s.raw('{"id":"x", this is not json');
    expect(bad).toEqual({ id: '', data: { error: { message: 'Invalid message: not JSON' } } });
    expect(await ask(s, 'getBlockHash', { height: 1 })).toEqual({ hash: bb.blockHash(1) });
  });

  it('answers the methods it does not serve with an error that says so, and those sent on an upstream socket (issue-46-blockbook-methods) with one while none is live', async () => {
    for (const m of ['rpcCall', 'subscribeNewTransaction']) expect(await ask(s, m)).toEqual({ error: { message: `${m} is not served by this gateway` } });
    // This chain's one upstream has no WebSocket.
    for (const m of ['getMempoolFilters', 'getBlockFilter', 'getBlockFiltersBatch', 'longTermFeeRate']) expect(await ask(s, m)).toEqual({ error: { message: `${m}: no upstream socket is live` } });
  });

  it('refuses sendTransaction on a chain without sendtx: true, and nothing reaches the upstream', async () => {
    bb.clear();
    expect(await ask(s, 'sendTransaction', { hex: '0200' })).toEqual({ error: { message: 'sendTransaction is not enabled on this chain' } });
    expect(bb.requests.filter((r) => r.path.includes('sendtx'))).toEqual([]);
  });

  it('sends sendTransaction once, as a POST of its hex to sendtx/, on a chain with sendtx: true', async () => {
    const t = await connect(wsUrl(rig.gw.url('explorer', `/send/${KEYS.wallet}/websocket`)));
    bb.clear();
    const data = await ask(t, 'sendTransaction', { hex: '0200000001abcdef' });
    expect(data).toEqual({ result: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const sent = bb.requests.filter((r) => r.path === '/api/v2/sendtx/');
    expect(sent.map((r) => [r.method, r.body.toString('utf8')])).toEqual([['POST', '0200000001abcdef']]);
    // The transaction is the node's now: its id reads it back.
    expect(await ask(t, 'getTransaction', { txid: data.result })).toMatchObject({ txid: data.result, confirmations: 0 });
    await t.close();
  });

  it("asks nothing compressed for a socket, whatever the upgrade's Accept-Encoding (a browser's): its answers go in frames", async () => {
    const t = await connect(`${base}/${KEYS.wallet}/websocket`, { 'accept-encoding': 'gzip, deflate, br' });
    bb.clear();
    expect(await ask(t, 'getBlockHash', { height: 3 })).toEqual({ hash: bb.blockHash(3) });
    expect(bb.requests.map((r) => r.headers['accept-encoding'])).toEqual([undefined]);
    await t.close();
  });

  it("passes Blockbook's own error on as the message's error", async () => {
    expect(await ask(s, 'getBlockHash', { height: 100_000 })).toEqual({ error: { message: 'Block not found' } });
    expect(await ask(s, 'getBlockHash', { height: 'x' })).toEqual({ error: { message: "Invalid params: 'height' must be an integer" } });
  });

  it('counts each subscription type once against maxSubscriptionsPerConnection, whatever its addresses', async () => {
    const t = await connect(`${base}/${KEYS.wallet}/websocket`);
    expect(await ask(t, 'subscribeNewBlock', {}, 's1')).toEqual({ subscribed: true });
    expect(await ask(t, 'subscribeAddresses', { addresses: ['a1', 'a2', 'a3'] }, 's2')).toEqual({ subscribed: true });
    // Replacing a held one is no new subscription.
    expect(await ask(t, 'subscribeAddresses', { addresses: ['a4', 'a5', 'a6', 'a7'] }, 's3')).toEqual({ subscribed: true });
    expect(await ask(t, 'subscribeFiatRates', { currency: 'usd' }, 's4')).toEqual({ error: { message: 'Limit exceeded: subscriptions per connection (maxSubscriptionsPerConnection 2)' } });
    expect(await ask(t, 'unsubscribeNewBlock', {}, 's5')).toEqual({ subscribed: false });
    expect(await ask(t, 'subscribeFiatRates', { currency: 'usd' }, 's6')).toEqual({ subscribed: true });
    await t.close();
  });

  it('closes a message over limits.maxBodyBytes with 1009', async () => {
    const t = await connect(`${base}/${KEYS.wallet}/websocket`);
    t.ws.send(JSON.stringify({ id: '1', method: 'getTransaction', params: { txid: 'a'.repeat(2 * 1024 * 1024) } }));
    expect((await t.closed).code).toBe(1009);
  });
});

describe('admission per message', () => {
  it("holds a key with its own methods list to it: a message it does not name is refused with its id (nothing subscribed, nothing upstream), a twin by its REST endpoint", async () => {
    const s = await connect(`${base}/${KEYS.narrow}/websocket`);
    const refused = { error: { message: "Request not allowed by this key's policy" } };
    const before = bb.requests.length;
    // Named: subscribeNewBlock by its own name, getAccountInfo by its REST twin's endpoint (address).
    expect(await ask(s, 'subscribeNewBlock')).toEqual({ subscribed: true });
    expect((await ask(s, 'getAccountInfo', { descriptor: ADDRESS })).address).toBe(ADDRESS);
    // Not named: refused before anything is made or sent, each with its own id.
    expect(await ask(s, 'subscribeAddresses', { addresses: [ADDRESS] })).toEqual(refused);
    expect(await ask(s, 'subscribeFiatRates', {})).toEqual(refused);
    expect(await ask(s, 'longTermFeeRate')).toEqual(refused);
    expect(await ask(s, 'getTransaction', { txid: 'ab'.repeat(32) })).toEqual(refused);
    expect(bb.requests.slice(before).map((r) => r.url.split('?')[0])).toEqual([`/api/v2/address/${ADDRESS}`]);
    // What asks nothing of the chain is never refused.
    expect(await ask(s, 'ping')).toEqual({});
    expect(await ask(s, 'unsubscribeAddresses')).toEqual({ subscribed: false });
    s.close();
  });

  it("counts every message against the key's rate limit, refusing the one over it with its own id", async () => {
    const s = await connect(`${base}/${KEYS.few}/websocket`);
    const answers = [];
    for (let i = 1; i <= 4; i++) answers.push(await s.send({ id: `m${i}`, method: 'getBlockHash', params: { height: i } }, `m${i}`));
    expect(answers.slice(0, 3).map((a) => a.data)).toEqual([1, 2, 3].map((h) => ({ hash: bb.blockHash(h) })));
    expect(answers[3]).toEqual({ id: 'm4', data: { error: { message: 'Rate limit exceeded' } } });
    // A subscription is admitted the same way.
    expect(await s.send({ id: 'sub', method: 'subscribeNewBlock', params: {} }, 'sub')).toEqual({ id: 'sub', data: { error: { message: 'Rate limit exceeded' } } });
    await s.close();
  });
});

describe('a quota', () => {
  it("takes each notification from the key's quota, and closes the socket with 1008 once it is spent", async () => {
    const s = await connect(`${base}/${KEYS.metered}/websocket`);
    // 3 a day: the subscription, then two blocks; the third block finds it spent.
    expect(await ask(s, 'subscribeNewBlock', {}, 'q')).toEqual({ subscribed: true });
    for (let i = 1; i <= 2; i++) {
      bb.setBestHeight(bb.bestHeight + 1);
      await s.until(() => s.strays.filter((m) => m.id === 'q').length === i, 20_000, `block ${i}`);
    }
    bb.setBestHeight(bb.bestHeight + 1);
    expect((await s.closed).code).toBe(1008);
    expect(s.strays.filter((m) => m.id === 'q')).toHaveLength(2);
  }, 60_000);
});

describe('@trezor/blockchain-link, unmodified', () => {
  let link: Link;
  beforeAll(async () => {
    link = new BlockchainLink({ name: 'gateway', worker: WORKER, server: [rig.gw.url('explorer', `/btc/${KEYS.wallet}`)], debug: false });
    await link.connect();
  }, 30_000);
  afterAll(async () => {
    await link?.disconnect();
    link?.dispose();
  });

  it('getInfo names the coin, its tip and its genesis as the node does', async () => {
    const info = await link.getInfo();
    expect(info).toMatchObject({ name: 'Bitcoin', shortcut: 'BTC', decimals: 8, blockHeight: bb.bestHeight, blockHash: bb.blockHash(bb.bestHeight), testnet: false });
    expect(info.consensusBranchId).toBeUndefined();
  });

  it('getBlockHash, getAccountInfo, getAccountUtxo, getTransaction and estimateFee', async () => {
    expect(await link.getBlockHash(42)).toBe(bb.blockHash(42));
    const account = await link.getAccountInfo({ descriptor: ADDRESS, details: 'txs' });
    expect(account).toMatchObject({ descriptor: ADDRESS, history: { total: 2 } });
    expect(account.history.transactions.map((t: any) => t.txid)).toEqual(bb.txids(1).reverse());
    const utxos = await link.getAccountUtxo(ADDRESS);
    expect(utxos.map((u: any) => u.txid)).toEqual([bb.txids(bb.bestHeight)[1], bb.txids(bb.bestHeight - 46)[0]]);
    const tx = await link.getTransaction(bb.txids(5)[0]!);
    expect(tx).toMatchObject({ txid: bb.txids(5)[0], blockHeight: 5 });
    // The stand-in's REST fee is 2460 sat/kB * 6 / blocks (at least 1000), in BTC; the WebSocket's is in satoshis.
    const fees = await link.estimateFee({ blocks: [1, 6, 12] });
    expect(fees).toEqual([{ feePerUnit: '14760' }, { feePerUnit: '2460' }, { feePerUnit: '1230' }]);
  });

  it('asks getAccountInfo with the WebSocket defaults (basic details, derived tokens, 25 a page)', async () => {
    bb.clear();
    await link.getAccountInfo({ descriptor: ADDRESS });
    const r = bb.requests.find((q) => q.path.startsWith('/api/v2/address/'))!;
    expect(Object.fromEntries(new URLSearchParams(r.query))).toEqual({ details: 'basic', tokens: 'derived', pageSize: '25' });
  });
});

describe('what to watch, and the drain', () => {
  it('counts sockets, subscriptions and notifications by chain, logs the socket and its messages, and closes it with 1001 on a drain', async () => {
    const notified = await metricValue(rig.gw, 'gateway_ws_notifications_total', '{chain="btc",type="newBlock"}');
    const s = await connect(`${base}/${KEYS.wallet}/websocket`);
    expect(await ask(s, 'subscribeNewBlock', {}, 'nb')).toEqual({ subscribed: true });
    // The earlier tests' sockets are closed by now, or soon (a client's close takes its round trip).
    await until(async () => (await metricValue(rig.gw, 'gateway_ws_connections', '{chain="btc"}')) === 1, 'one socket open on the chain');
    expect(await metricValue(rig.gw, 'gateway_ws_subscriptions', '{chain="btc",type="newBlock"}')).toBe(1);
    bb.setBestHeight(bb.bestHeight + 1);
    await s.until(() => s.strays.some((m) => m.id === 'nb'), 20_000, 'a block');
    expect(s.strays.filter((m) => m.id === 'nb').map((m) => m.data)).toEqual([{ height: bb.bestHeight, hash: bb.blockHash(bb.bestHeight), evmData: null }]);
    expect(await metricValue(rig.gw, 'gateway_ws_notifications_total', '{chain="btc",type="newBlock"}')).toBe(notified + 1);
    await rig.gw.waitForLog((e) => e.event === 'ws_open' && e.chain === 'btc');
    // The upgrade and each message are access-log lines of the chain; the key is never logged.
    await rig.gw.waitForLog((e) => e.chain === 'btc' && e.method === 'websocket' && e.status === 101);
    await rig.gw.waitForLog((e) => e.chain === 'btc' && e.method === 'subscribeNewBlock' && e.status === 200);
    await rig.gw.waitForLog((e) => e.chain === 'btc' && e.method === 'block-index' && e.status === 200);
    expect(rig.gw.lines.some((l) => l.includes(KEYS.wallet))).toBe(false);
    const exit = rig.gw.stop('SIGTERM');
    expect(await s.closed).toEqual({ code: 1001, reason: 'server going away' });
    await exit;
  }, 60_000);
});
