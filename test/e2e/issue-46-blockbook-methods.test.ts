// Blockbook's WebSocket methods that no REST call answers exactly (issue 46):
// longTermFeeRate, getMempoolFilters, getBlockFilter, getBlockFiltersBatch,
// getBlock of another page size than 1000 and an EVM coin's estimateFee, sent
// on the upstreams' own sockets (one each, shared with their heads) under the
// gateway's ids, answered under the client's; failover when the carrying
// socket is lost or silent mid-call; admission per message. The stand-ins
// (blockbook-socket-standin.ts) answer as websocket.go does and record what
// reached them; blockchain-link's own BlockbookAPI is a client where it has
// the call.
import { createRequire } from 'node:module';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { until } from './harness.ts';
import { standInFilter, startBlockbookWithSocket, type BlockbookWithSocket } from '../support/blockbook-socket-standin.ts';
import { connect, wsUrl } from '../support/ws-client.ts';

const require = createRequire(import.meta.url);
interface BlockbookApi {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  getBlockFilter(hash: string): Promise<any>;
  getBlockFiltersBatch(hash: string, pageSize: number): Promise<any>;
  getMempoolFilters(fromTimestamp: number): Promise<any>;
}
const { BlockbookAPI } = require('@trezor/blockchain-link/lib/workers/blockbook/websocket') as { BlockbookAPI: new (o: object) => BlockbookApi };

/** The script type blockchain-link asks filters of, which the stand-ins index. */
const SCRIPTS = 'taproot-noordinals';
const FILTER = { P: 19, M: 784931, zeroedKey: false };
/** A timeout short enough for the silent-upstream case, long enough for a loaded machine's answers. */
const TIMEOUT_MS = 3000;
const MAX_INFLIGHT = 2;

const upstream = () => startBlockbookWithSocket({ bestHeight: 100 });
const evm = () => startBlockbookWithSocket({ bestHeight: 100, coin: 'Ethereum' });

let rig: Gateway<{ A: ReturnType<typeof upstream>; B: ReturnType<typeof upstream>; E: ReturnType<typeof evm> }>;
let A: BlockbookWithSocket;
let B: BlockbookWithSocket;
let E: BlockbookWithSocket;

beforeAll(async () => {
  rig = await gateway({
    name: 'issue-46-blockbook-methods',
    chains: [
      { path: 'btc', interface: 'blockbook', listener: 'explorer', websocket: true, coin: 'Bitcoin', limits: { timeoutMs: TIMEOUT_MS }, upstreams: ['${A}', '${B}'] },
      { path: 'eth', interface: 'blockbook', listener: 'explorer', websocket: true, coin: 'Ethereum', upstreams: ['${E}'] },
    ],
    header: { health: { intervalMs: 100, timeoutMs: 2000 }, websocket: { maxConnectionsPerKey: 100, maxInflightPerConnection: MAX_INFLIGHT } },
    keys: [{ id: 'wallet' }, { id: 'few', rateLimit: '2/min' }],
    standIns: { A: upstream(), B: upstream(), E: evm() },
  });
  ({ A, B, E } = rig.standIns);
  await live();
}, 60_000);

afterAll(() => rig?.close());

/** Every upstream's socket is up (verified and subscribed to heads), as the status page shows it. */
async function live(): Promise<void> {
  await until(async () => {
    const r = await request(rig.gw.url('admin', '/status.json'));
    const d = (await r.body.json()) as { chains: { upstreams: { socket: string | null }[] }[] };
    return d.chains.every((c) => c.upstreams.every((u) => u.socket === 'up'));
  }, 'every upstream socket up');
}

const url = (chain: string, key = 'wallet') => wsUrl(rig.gw.url('explorer', `/${chain}/${rig.keys[key]!}/websocket`));
const sent = (u: BlockbookWithSocket, method: string) => u.ws.messages.filter((m) => m.method === method);
const both = (method: string) => [...sent(A, method), ...sent(B, method)];

describe('methods with no REST twin, on the upstreams’ sockets', () => {
  it("answers longTermFeeRate, the three filters and getBlock of page size 5000 with the client's id, as the upstream answers them, sent under the gateway's ids", async () => {
    const s = await connect(url('btc'));
    const hash = A.bb.blockHash(90);
    const asks = {
      lt: ['longTermFeeRate', {}],
      mf: ['getMempoolFilters', { scriptType: SCRIPTS, fromTimestamp: 1700000000, junk: 'not forwarded' }],
      bf: ['getBlockFilter', { scriptType: SCRIPTS, blockHash: hash }],
      bfx: ['getBlockFilter', { scriptType: 'p2pkh', blockHash: hash }],
      bb: ['getBlockFiltersBatch', { scriptType: SCRIPTS, bestKnownBlockHash: A.bb.blockHash(97), pageSize: 2 }],
      gb: ['getBlock', { id: hash, pageSize: 5000 }],
    } as const;
    const got = Object.fromEntries(await Promise.all(Object.entries(asks).map(async ([id, [method, params]]) => [id, await s.send({ id, method, params }, id)] as const)));
    expect(got.lt).toEqual({ id: 'lt', data: { feePerUnit: '1500', blocks: 1008 } });
    expect(got.mf.id).toBe('mf');
    expect(got.mf.data).toMatchObject(FILTER);
    expect(Object.values(got.mf.data.entries)).toEqual([standInFilter('mempool:1700000000')]);
    expect(got.bf).toEqual({ id: 'bf', data: { ...FILTER, blockFilter: standInFilter(hash) } });
    // The node's own error is the chain's answer, under the client's id.
    expect(got.bfx).toEqual({ id: 'bfx', data: { error: { message: 'Unsupported script type p2pkh' } } });
    expect(got.bb).toEqual({ id: 'bb', data: { ...FILTER, blockFiltersBatch: [98, 99].map((h) => `${h}:${A.bb.blockHash(h)}:${standInFilter(A.bb.blockHash(h))}`) } });
    expect(got.gb).toMatchObject({ id: 'gb', data: { hash, height: 90, itemsOnPage: 5000, txs: A.bb.txids(90).map((txid) => ({ txid })) } });
    const upstreamIds = ['longTermFeeRate', 'getMempoolFilters', 'getBlockFilter', 'getBlockFiltersBatch', 'getBlock'].flatMap((m) => both(m).map((x) => x.id));
    expect(upstreamIds).toHaveLength(6);
    // The gateway's own ids, each once: never a client's.
    expect(new Set(upstreamIds).size).toBe(6);
    for (const id of upstreamIds) expect(Object.keys(asks)).not.toContain(id);
    // Only the fields websocket.go reads reach the node.
    expect(both('getMempoolFilters').at(-1)!.params).toEqual({ scriptType: SCRIPTS, fromTimestamp: 1700000000 });
    await s.close();
  }, 60_000);

  it("serves blockchain-link's BlockbookAPI its getBlockFilter, getBlockFiltersBatch and getMempoolFilters", async () => {
    const api = new BlockbookAPI({ url: rig.gw.url('explorer', `/btc/${rig.keys.wallet!}`), timeout: 20_000, pingTimeout: 20_000, keepAlive: false });
    await api.connect();
    const hash = A.bb.blockHash(50);
    expect(await api.getBlockFilter(hash)).toEqual({ ...FILTER, blockFilter: standInFilter(hash) });
    expect((await api.getBlockFiltersBatch(A.bb.blockHash(99), 10)).blockFiltersBatch).toEqual([`100:${A.bb.blockHash(100)}:${standInFilter(A.bb.blockHash(100))}`]);
    expect(Object.values((await api.getMempoolFilters(5)).entries)).toEqual([standInFilter('mempool:5')]);
    await api.disconnect();
  }, 60_000);

  it("carries 50 clients' calls on ONE socket per upstream, each answered under its client's own id", async () => {
    const before = { A: A.ws.opened, B: B.ws.opened, calls: both('longTermFeeRate').length };
    const clients = await Promise.all(Array.from({ length: 50 }, () => connect(url('btc'))));
    // Every client uses the same id: on the upstream socket they would collide.
    const answers = await Promise.all(clients.map((s) => s.send({ id: 'same', method: 'longTermFeeRate' }, 'same')));
    for (const a of answers) expect(a).toEqual({ id: 'same', data: { feePerUnit: '1500', blocks: 1008 } });
    const ids = both('longTermFeeRate').slice(before.calls).map((m) => m.id);
    expect(ids).toHaveLength(50);
    expect(new Set(ids).size).toBe(50);
    expect(ids).not.toContain('same');
    for (const [u, opened] of [
      [A, before.A],
      [B, before.B],
    ] as const) {
      expect(u.ws.open).toBe(1);
      expect(u.ws.opened).toBe(opened);
    }
    // The calls spread over both upstreams.
    expect(sent(A, 'longTermFeeRate').length).toBeGreaterThan(0);
    expect(sent(B, 'longTermFeeRate').length).toBeGreaterThan(0);
    await Promise.all(clients.map((s) => s.close()));
  }, 60_000);
});

describe('failover', () => {
  /** A call both upstreams leave unanswered: resolves with the one it was sent to first, and the other made to answer. */
  async function stalled(method: string, id: string, params: object): Promise<{ answer: Promise<any>; first: BlockbookWithSocket; other: BlockbookWithSocket; close: () => Promise<unknown> }> {
    const s = await connect(url('btc'));
    const onA = sent(A, method).length;
    const seen = both(method).length;
    for (const u of [A, B]) u.ws.silent.add(method);
    const answer = s.send({ id, method, params }, id);
    await until(async () => both(method).length > seen, `${method} upstream`);
    const first = sent(A, method).length > onA ? A : B;
    const other = first === A ? B : A;
    other.ws.silent.delete(method);
    return { answer, first, other, close: () => s.close() };
  }

  it('sends a read once more on another upstream when the socket carrying it is lost mid-call', async () => {
    const { answer, first, other, close } = await stalled('getBlockFilter', 'lost', { scriptType: SCRIPTS, blockHash: A.bb.blockHash(7) });
    const before = sent(other, 'getBlockFilter').length;
    first.ws.drop();
    expect(await answer).toEqual({ id: 'lost', data: { ...FILTER, blockFilter: standInFilter(A.bb.blockHash(7)) } });
    expect(sent(other, 'getBlockFilter').length).toBe(before + 1);
    first.ws.silent.delete('getBlockFilter');
    await close();
    await live();
  }, 60_000);

  it("gives up a silent upstream after the chain's timeoutMs and asks another", async () => {
    const { answer, first, other, close } = await stalled('longTermFeeRate', 'quiet', {});
    expect(await answer).toEqual({ id: 'quiet', data: { feePerUnit: '1500', blocks: 1008 } });
    // The slow call was given up, not the socket: it carries heads and subscriptions that are fine.
    expect(first.ws.open).toBe(1);
    expect(sent(other, 'longTermFeeRate').at(-1)!.id).not.toBe(sent(first, 'longTermFeeRate').at(-1)!.id);
    first.ws.silent.delete('longTermFeeRate');
    await close();
  }, 60_000);
});

describe('admission and the rest', () => {
  it("admits each message on its own: a rate-limited key's message gets the error answer with its id and reaches no upstream", async () => {
    const s = await connect(url('btc', 'few'));
    const seen = both('getBlockFiltersBatch').length;
    const ask = (id: string) => s.send({ id, method: 'getBlockFiltersBatch', params: { scriptType: SCRIPTS, bestKnownBlockHash: A.bb.blockHash(99) } }, id);
    expect((await ask('1')).data.blockFiltersBatch).toHaveLength(1);
    expect((await ask('2')).data.blockFiltersBatch).toHaveLength(1);
    const refused = await ask('3');
    expect(refused.id).toBe('3');
    expect(refused.data).toEqual({ error: { message: 'Rate limit exceeded' } });
    expect(both('getBlockFiltersBatch').length).toBe(seen + 2);
    await s.close();
  }, 60_000);

  it("answers an EVM coin's estimateFee as its node does (gas limit, fee per transaction, EIP-1559); getBlock of page size 1000 and a bitcoin-type estimateFee stay REST calls", async () => {
    const s = await connect(url('eth'));
    const specific = { from: '0x' + '11'.repeat(20), to: '0x' + '22'.repeat(20), data: '0x' + 'ab'.repeat(4), value: '0x0', extra: 'not forwarded' };
    const a = await s.send({ id: 'fee', method: 'estimateFee', params: { blocks: [1, 2], specific } }, 'fee');
    const gas = 21000 + 16 * 4;
    const fee = { feePerUnit: '2000000000', feeLimit: String(gas), feePerTx: String(2_000_000_000n * BigInt(gas)), eip1559: { baseFeePerGas: '1500000000', low: { maxFeePerGas: '1600000000', maxPriorityFeePerGas: '100000000' } } };
    expect(a).toEqual({ id: 'fee', data: [fee, fee] });
    const { extra: _extra, ...read } = specific;
    expect(sent(E, 'estimateFee').at(-1)!.params).toEqual({ blocks: [1, 2], specific: read });
    expect(E.bb.requests.filter((r) => r.path.includes('estimatefee'))).toEqual([]);
    await s.close();
    const b = await connect(url('btc'));
    const seen = both('getBlock').length + both('estimateFee').length;
    expect((await b.send({ id: 'g', method: 'getBlock', params: { id: A.bb.blockHash(3), pageSize: 1000 } }, 'g')).data.hash).toBe(A.bb.blockHash(3));
    expect((await b.send({ id: 'f', method: 'estimateFee', params: { blocks: [2], specific: { txsize: 200 } } }, 'f')).data).toHaveLength(1);
    expect(both('getBlock').length + both('estimateFee').length).toBe(seen);
    await b.close();
  }, 60_000);

  it("holds a client's upstream calls to maxInflightPerConnection: its next message is read once one is answered", async () => {
    const s = await connect(url('btc'));
    const seen = both('getBlockFilter').length;
    for (const u of [A, B]) u.ws.silent.add('getBlockFilter');
    const params = { scriptType: SCRIPTS, blockHash: A.bb.blockHash(9) };
    const calls = [s.send({ id: 'c1', method: 'getBlockFilter', params }, 'c1'), s.send({ id: 'c2', method: 'getBlockFilter', params }, 'c2')];
    const ping = s.send({ id: 'p', method: 'ping' }, 'p');
    await until(async () => both('getBlockFilter').length === seen + 2, 'two calls upstream');
    // Both upstream calls are under way (MAX_INFLIGHT): the ping waits unread.
    expect(s.frames).toEqual([]);
    for (const u of [A, B]) {
      u.ws.silent.delete('getBlockFilter');
      u.ws.drop();
    }
    await ping;
    const order = s.frames.map((f) => JSON.parse(f).id as string);
    expect(order.indexOf('p')).toBeGreaterThan(Math.min(order.indexOf('c1'), order.indexOf('c2')));
    await Promise.all(calls);
    await s.close();
    await live();
  }, 60_000);
});
