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
import { metricValue, until } from './harness.ts';
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

/** A block of 12,500 light transactions, and one whose page of 10,000 is over the upstream socket's 32 MiB message bound. */
const BIG = 60;
const HUGE = 61;
const upstream = () => startBlockbookWithSocket({ bestHeight: 100, bigBlocks: { [BIG]: { txs: 12_500 }, [HUGE]: { txs: 12_000, padBytes: 3400 } } });
/** How late the stand-ins answer a logged call: its access-log line's latency is at least this. */
const SLOW_MS = 400;
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
    keys: [{ id: 'wallet' }, { id: 'few', rateLimit: '2/min' }, { id: 'logged' }],
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
  it("answers longTermFeeRate, the three filters and getBlock of page size 5000 with the client's id, as the upstream answers them, the filters sent under the gateway's ids", async () => {
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
    const upstreamIds = ['longTermFeeRate', 'getMempoolFilters', 'getBlockFilter', 'getBlockFiltersBatch'].flatMap((m) => both(m).map((x) => x.id));
    expect(upstreamIds).toHaveLength(5);
    // The gateway's own ids, each once: never a client's.
    expect(new Set(upstreamIds).size).toBe(5);
    // A block of any page size is REST's: its page could be more than an upstream socket takes in one message.
    expect(both('getBlock')).toEqual([]);
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

describe("no client's message can close an upstream's socket", () => {
  /** Each upstream's sockets opened so far, and open now. */
  const sockets = () => [A, B].map((u) => [u.ws.opened, u.ws.open]);

  it('answers getBlock of page size 10000 on a 12,500-transaction block exactly, from REST, and sends nothing on the upstream sockets', async () => {
    const before = sockets();
    const s = await connect(url('btc'));
    const one = await s.send({ id: 'p1', method: 'getBlock', params: { id: String(BIG), pageSize: 10000 } }, 'p1');
    const two = await s.send({ id: 'p2', method: 'getBlock', params: { id: A.bb.blockHash(BIG), page: 2, pageSize: 10000 } }, 'p2');
    const odd = await s.send({ id: 'p3', method: 'getBlock', params: { id: String(BIG), page: 3, pageSize: 4999 } }, 'p3');
    // What websocket.go answers: the node's own page of that size (the stand-in pages a block as api/worker.go does).
    expect(one).toEqual({ id: 'p1', data: A.bb.block(BIG, 1, 10000) });
    expect(one.data).toMatchObject({ page: 1, totalPages: 2, itemsOnPage: 10000, txCount: 12_500 });
    expect(one.data.txs).toHaveLength(10000);
    expect(two).toEqual({ id: 'p2', data: A.bb.block(BIG, 2, 10000) });
    expect(two.data.txs).toHaveLength(2500);
    expect(odd).toEqual({ id: 'p3', data: A.bb.block(BIG, 3, 4999) });
    expect(both('getBlock')).toEqual([]);
    expect(sockets()).toEqual(before);
    await s.close();
  }, 60_000);

  it('answers a page over the merge bound with an error, and the upstream sockets stay open (none reopened)', async () => {
    const before = sockets();
    const s = await connect(url('btc'));
    // 10,000 transactions of 3.4 KB: 36 MB, over the 32 MiB an upstream socket takes in one message.
    const a = await s.send({ id: 'huge', method: 'getBlock', params: { id: String(HUGE), pageSize: 10000 } }, 'huge');
    expect(a.id).toBe('huge');
    expect(a.data.error.message).toMatch(/over \d+ bytes/);
    // The socket goes on.
    expect(await s.send({ id: 'after', method: 'longTermFeeRate' }, 'after')).toEqual({ id: 'after', data: { feePerUnit: '1500', blocks: 1008 } });
    expect(both('getBlock')).toEqual([]);
    expect(sockets()).toEqual(before);
    await s.close();
  }, 60_000);

  it('asks getBlockFiltersBatch of pageSize 10000 in pieces of at most 100 blocks, each after the last, and answers them as one page', async () => {
    const s = await connect(url('btc'));
    const seen = [A, B].map((u) => sent(u, 'getBlockFiltersBatch').length);
    const a = await s.send({ id: 'all', method: 'getBlockFiltersBatch', params: { scriptType: SCRIPTS, bestKnownBlockHash: A.bb.blockHash(0), pageSize: 10000 } }, 'all');
    const heights = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(a).toEqual({ id: 'all', data: { ...FILTER, blockFiltersBatch: heights.map((h) => `${h}:${A.bb.blockHash(h)}:${standInFilter(A.bb.blockHash(h))}`) } });
    const pieces = [A, B].flatMap((u, i) => sent(u, 'getBlockFiltersBatch').slice(seen[i]));
    // Blocks 1..100, then none after 100 (the tip): two pieces, none asking more than 100 blocks.
    expect(pieces.map((m) => (m.params as { pageSize: number }).pageSize)).toEqual([100, 100]);
    expect(pieces.map((m) => (m.params as { bestKnownBlockHash: string }).bestKnownBlockHash).sort()).toEqual([A.bb.blockHash(0), A.bb.blockHash(100)].sort());
    await s.close();
  }, 60_000);

  it('refuses getBlockFiltersBatch over pageSize 10000 as websocket.go does, before any upstream', async () => {
    const s = await connect(url('btc'));
    const seen = both('getBlockFiltersBatch').length;
    const a = await s.send({ id: 'fb', method: 'getBlockFiltersBatch', params: { scriptType: SCRIPTS, bestKnownBlockHash: A.bb.blockHash(1), pageSize: 10001 } }, 'fb');
    expect(a).toEqual({ id: 'fb', data: { error: { message: 'pageSize max 10000' } } });
    expect(both('getBlockFiltersBatch').length).toBe(seen);
    await s.close();
  }, 60_000);
});

describe("a relayed message's access-log line", () => {
  /** The access-log lines of the 'logged' key's calls of `method` from line `from` on. */
  const lines = (method: string, from: number) =>
    rig.gw.lines
      .slice(from)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((e) => e.msg === 'request' && e.method === method && e.keyId === 'logged');

  it("names the answer's status 200 and a latency at least the upstream's delay", async () => {
    for (const u of [A, B]) u.ws.delays.set('getMempoolFilters', SLOW_MS);
    const from = rig.gw.lines.length;
    const s = await connect(url('btc', 'logged'));
    const a = await s.send({ id: 'slow', method: 'getMempoolFilters', params: { scriptType: SCRIPTS, fromTimestamp: 7 } }, 'slow');
    expect(Object.values(a.data.entries)).toEqual([standInFilter('mempool:7')]);
    for (const u of [A, B]) u.ws.delays.delete('getMempoolFilters');
    await until(async () => lines('getMempoolFilters', from).length > 0, 'its access-log line');
    const [line, ...more] = lines('getMempoolFilters', from);
    expect(more).toEqual([]);
    expect(line).toMatchObject({ status: 200 });
    expect(line!.ms).toBeGreaterThanOrEqual(SLOW_MS);
    await s.close();
  }, 60_000);

  it("names a silent upstream's timeout as 504, after the chain's timeoutMs", async () => {
    for (const u of [A, B]) u.ws.silent.add('getMempoolFilters');
    const from = rig.gw.lines.length;
    const s = await connect(url('btc', 'logged'));
    const a = await s.send({ id: 'lost', method: 'getMempoolFilters', params: { scriptType: SCRIPTS, fromTimestamp: 8 } }, 'lost');
    expect(a).toEqual({ id: 'lost', data: { error: { message: 'getMempoolFilters: the upstream did not answer' } } });
    for (const u of [A, B]) u.ws.silent.delete('getMempoolFilters');
    await until(async () => lines('getMempoolFilters', from).length > 0, 'its access-log line');
    const [line] = lines('getMempoolFilters', from);
    expect(line).toMatchObject({ status: 504 });
    // Asked twice (once more on the other upstream), each given up after timeoutMs.
    expect(line!.ms).toBeGreaterThanOrEqual(2 * TIMEOUT_MS);
    await s.close();
  }, 60_000);

  it('names a getBlock page over the merge bound as 502 (the answer the gateway could not hold), in the access log and the metrics', async () => {
    const series = '{chain="btc",interface="blockbook",method="block",status="502"}';
    const before = (await metricValue(rig.gw, 'gateway_requests_total', series)) || 0;
    const from = rig.gw.lines.length;
    const s = await connect(url('btc', 'logged'));
    const a = await s.send({ id: 'huge', method: 'getBlock', params: { id: String(HUGE), pageSize: 10000 } }, 'huge');
    expect(a.data.error.message).toMatch(/over \d+ bytes/);
    await until(async () => lines('block', from).length > 0, 'its access-log line');
    // One line for the message (its twin's REST call; the further pages are the gateway's own reads), with the error's status.
    const [line, ...more] = lines('block', from);
    expect(more).toEqual([]);
    expect(line).toMatchObject({ status: 502 });
    expect(await metricValue(rig.gw, 'gateway_requests_total', series)).toBe(before + 1);
    await s.close();
  }, 60_000);
});
