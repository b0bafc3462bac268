// Blockbook's WebSocket subscriptions through the built gateway (issue 46), on
// a chain of two Blockbook stand-ins, each with its WebSocket
// (blockbook-socket-standin.ts): subscribeNewBlock from the served tip with
// its gap filled, subscribeAddresses (mempool from the upstream's socket,
// mined from the blocks) and subscribeFiatRates multiplexed on one upstream
// socket for 200 clients, failover with no lost notification, unsubscribe,
// and a slow consumer. @trezor/blockchain-link is the client where it can be.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { until } from './harness.ts';
import { startBlockbookWithSocket, type BlockbookWithSocket } from '../support/blockbook-socket-standin.ts';
import { connect, RpcSocket, wsUrl } from '../support/ws-client.ts';

const require = createRequire(import.meta.url);
const BlockchainLink = (require('@trezor/blockchain-link') as { default: new (o: object) => Link }).default;
const WORKER = (require('@trezor/blockchain-link/lib/workers/blockbook') as { default: unknown }).default;

interface Link {
  connect(): Promise<boolean>;
  disconnect(): Promise<boolean>;
  dispose(): void;
  subscribe(p: object): Promise<any>;
  unsubscribe(p: object): Promise<any>;
  on(event: string, cb: (e: any) => void): void;
}

/** An address in every block of the stand-in chain (the example block's first transaction pays it). */
const IN_EVERY_BLOCK = 'D6ravJL6Fgxtgp8k2XZZt1QfUmwwGuLwQJ';

type Upstream = BlockbookWithSocket;
const upstream = () => startBlockbookWithSocket({ bestHeight: 100 });

let rig: Gateway<{ A: ReturnType<typeof upstream>; B: ReturnType<typeof upstream> }>;
let A: Upstream;
let B: Upstream;
let url: string;

beforeAll(async () => {
  rig = await gateway({
    name: 'issue-46-blockbook-feeds',
    chains: [{ path: 'btc', interface: 'blockbook', listener: 'explorer', websocket: true, coin: 'Bitcoin', upstreams: ['${A}', '${B}'] }],
    header: { health: { intervalMs: 100, timeoutMs: 2000 }, websocket: { maxConnectionsPerKey: 300, maxBufferedBytes: 65536 } },
    keys: [{ id: 'wallet' }],
    standIns: { A: upstream(), B: upstream() },
  });
  A = rig.standIns.A;
  B = rig.standIns.B;
  url = wsUrl(rig.gw.url('explorer', `/btc/${rig.keys.wallet!}/websocket`));
}, 60_000);

afterAll(() => rig?.close());

/** Both upstreams at height `h`: the served tip moves there. */
function mine(h: number): void {
  for (const u of [A, B]) {
    u.bb.setBestHeight(h);
    // As Blockbook announces its new block on its socket (one that did not would be quiet, and opened again).
    u.ws.newBlock(h, u.bb.blockHash(h));
  }
}

/** The upstream whose socket carries the chain's subscriptions: exactly one across both stand-ins, on its one socket (which carries its heads too). */
function carrier(): Upstream {
  const carrying = [A, B].filter((u) => u.ws.carriers() > 0);
  expect(carrying).toHaveLength(1);
  expect(carrying[0]!.ws.carriers()).toBe(1);
  expect(carrying[0]!.ws.open).toBe(1);
  return carrying[0]!;
}

/** Frames for a subscription id (its notifications: every frame under the id after its answer). */
function notes(s: RpcSocket, id: string): any[] {
  return s.strays.filter((m) => m.id === id).map((m) => m.data);
}

async function subscribe(s: RpcSocket, id: string, method: string, params: object = {}): Promise<void> {
  const a = await s.send({ id, method, params }, id);
  expect(a.data).toEqual({ subscribed: true });
}

describe('subscribeNewBlock', () => {
  it('sends every height once, in order, from the served tip, filling a gap, to blockchain-link; unsubscribe stops it', async () => {
    const link = new BlockchainLink({ name: 'gateway', worker: WORKER, server: [rig.gw.url('explorer', `/btc/${rig.keys.wallet!}`)], debug: false });
    await link.connect();
    const blocks: { blockHeight: number; blockHash: string }[] = [];
    link.on('block', (b) => blocks.push(b));
    expect(await link.subscribe({ type: 'block' })).toEqual({ subscribed: true });
    // A raw socket as well, subscribed before the unsubscribe below and kept: the point the test waits for.
    const watch = await connect(url);
    await subscribe(watch, 'nb', 'subscribeNewBlock');
    const heights = () => notes(watch, 'nb').map((b) => b.height);
    mine(101);
    await watch.until(() => heights().includes(101), 20_000, 'block 101');
    // Four blocks at once: the three skipped ones are filled, in order.
    mine(105);
    await watch.until(() => heights().includes(105), 20_000, 'block 105');
    // blockchain-link throttles block events (the newest of a burst is emitted): what it emits is in order and right.
    await until(async () => blocks.at(-1)?.blockHeight === 105, 'blockchain-link has block 105');
    expect(blocks.map((b) => b.blockHeight)).toEqual([...new Set(blocks.map((b) => b.blockHeight))].sort((x, y) => x - y));
    for (const b of blocks) expect(b.blockHash).toBe(A.bb.blockHash(b.blockHeight));
    expect(notes(watch, 'nb')).toEqual([101, 102, 103, 104, 105].map((h) => ({ height: h, hash: A.bb.blockHash(h), evmData: null })));
    expect(await link.unsubscribe({ type: 'block' })).toEqual({ subscribed: false });
    const seen = blocks.length;
    mine(106);
    await watch.until(() => heights().includes(106), 20_000, 'block 106');
    expect(blocks).toHaveLength(seen);
    await link.disconnect();
    link.dispose();
    await watch.close();
  }, 60_000);
});

describe('getInfo on a pool', () => {
  it("names the served tip and its hash, whichever upstream's status answered", async () => {
    const s = await connect(url);
    await subscribe(s, 'tip', 'subscribeNewBlock');
    const h = A.bb.bestHeight + 1;
    mine(h);
    await s.until(() => notes(s, 'tip').some((b) => b.height === h), 20_000, `block ${h}`);
    // One upstream ahead: the chain's served tip (every usable upstream's block) stays at h.
    const polls = A.bb.healthChecks.length;
    A.bb.setBestHeight(h + 1);
    A.ws.newBlock(h + 1, A.bb.blockHash(h + 1));
    await until(async () => A.bb.healthChecks.length > polls + 1, 'a poll of the upstream ahead');
    A.bb.clear();
    const seen = new Set<number>();
    for (let i = 0; i < 8 && !A.bb.requests.some((r) => r.path === '/api/v2/status'); i++) {
      const a = await s.send({ id: `i${i}`, method: 'getInfo', params: {} }, `i${i}`);
      expect(a.data).toMatchObject({ bestHeight: h, bestHash: A.bb.blockHash(h), block0Hash: A.bb.blockHash(0), name: 'Bitcoin' });
      seen.add(a.data.bestHeight);
    }
    expect([...seen]).toEqual([h]);
    // The upstream ahead answered a status (bestHeight h + 1) among them.
    expect(A.bb.requests.some((r) => r.path === '/api/v2/status')).toBe(true);
    mine(h + 1);
    await s.until(() => notes(s, 'tip').some((b) => b.height === h + 1), 20_000, `block ${h + 1}`);
    await s.close();
  }, 60_000);
});

describe('a reorg', () => {
  it('sends the new branch again from the fork, each of its blocks once, in order', async () => {
    const s = await connect(url);
    await subscribe(s, 'r', 'subscribeNewBlock');
    const h = A.bb.bestHeight + 2;
    mine(h);
    await s.until(() => notes(s, 'r').some((b) => b.height === h), 20_000, `block ${h}`);
    const before = notes(s, 'r').length;
    // Blocks h-1 and h are replaced, and the new branch grows one more: h-1, h and h+1 of it come.
    for (const u of [A, B]) u.bb.reorg(h - 1);
    mine(h + 1);
    await s.until(() => notes(s, 'r').some((b) => b.height === h + 1), 20_000, `block ${h + 1}`);
    expect(notes(s, 'r').slice(before)).toEqual([h - 1, h, h + 1].map((n) => ({ height: n, hash: A.bb.blockHash(n), evmData: null })));
    expect(A.bb.blockHash(h)).not.toBe(notes(s, 'r')[before - 1].hash);
    await s.close();
  }, 60_000);

  it('at the same height: the new block at that height is sent', async () => {
    const s = await connect(url);
    await subscribe(s, 'q', 'subscribeNewBlock');
    const h = A.bb.bestHeight + 1;
    mine(h);
    await s.until(() => notes(s, 'q').some((b) => b.height === h), 20_000, `block ${h}`);
    for (const u of [A, B]) u.bb.reorg(h);
    await s.until(() => notes(s, 'q').length === 2, 20_000, 'the replaced block');
    expect(notes(s, 'q')).toEqual([
      { height: h, hash: expect.not.stringMatching(A.bb.blockHash(h)), evmData: null },
      { height: h, hash: A.bb.blockHash(h), evmData: null },
    ]);
    await s.close();
  }, 60_000);
});

describe('subscribeAddresses', () => {
  it('gives blockchain-link a mempool transaction of its address, and nothing after unsubscribe', async () => {
    const link = new BlockchainLink({ name: 'gateway', worker: WORKER, server: [rig.gw.url('explorer', `/btc/${rig.keys.wallet!}`)], debug: false });
    await link.connect();
    const got: any[] = [];
    link.on('notification', (n) => got.push(n));
    const address = 'bc1qlinkaddress0000000000000000000000000000';
    expect(await link.subscribe({ type: 'addresses', addresses: [address] })).toEqual({ subscribed: true });
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.includes(address))), 'the address subscribed upstream');
    const tx = { txid: 'ab'.repeat(32), vin: [], vout: [{ n: 0, value: '1000', addresses: [address], isAddress: true }], blockHeight: -1, confirmations: 0, blockTime: 1_700_000_000, value: '1000', valueIn: '0', fees: '0' };
    expect(carrier().ws.mempoolTx(address, tx)).toBe(1);
    await until(async () => got.length === 1, 'the notification');
    expect(got[0]).toMatchObject({ descriptor: address, tx: { txid: tx.txid } });
    expect(await link.unsubscribe({ type: 'addresses', addresses: [address] })).toEqual({ subscribed: false });
    await until(async () => [A, B].every((u) => u.ws.carriers() === 0), 'nothing left to carry upstream');
    // Each upstream's one socket stays: it carries the upstream's heads.
    await until(async () => [A, B].every((u) => u.ws.open === 1 && u.ws.blockSubscribers() === 1), "each upstream's socket, for its heads");
    await link.disconnect();
    link.dispose();
    expect(got).toHaveLength(1);
  }, 60_000);

  it('sends a mined transaction (newBlockTxs) found from the served block, under the subscribe id', async () => {
    const s = await connect(url);
    await subscribe(s, 'addr', 'subscribeAddresses', { addresses: [IN_EVERY_BLOCK], newBlockTxs: true });
    const h = A.bb.bestHeight + 1;
    mine(h);
    await s.until(() => notes(s, 'addr').length > 0, 20_000, 'the mined transaction');
    expect(notes(s, 'addr')[0]).toMatchObject({ address: IN_EVERY_BLOCK, tx: { txid: A.bb.txids(h)[0], blockHeight: h } });
    await s.close();
  }, 60_000);

  it('carries 200 clients on ONE upstream socket, the union subscribed once, each notification only to its holders', async () => {
    const clients: RpcSocket[] = [];
    for (let i = 0; i < 200; i++) clients.push(await connect(url));
    await Promise.all(clients.map((s, i) => subscribe(s, `a${i}`, 'subscribeAddresses', { addresses: [`addr-${i % 50}`, `addr-${(i % 50) + 50}`] })));
    await Promise.all(clients.map((s, i) => subscribe(s, `b${i}`, 'subscribeNewBlock')));
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.length === 100)), 'the union upstream');
    const c = carrier();
    expect(new Set(c.ws.subscriptions()[0])).toEqual(new Set(Array.from({ length: 100 }, (_, i) => `addr-${i}`)));
    // One address held by four clients (7, 57, 107, 157).
    expect(c.ws.mempoolTx('addr-7', { txid: '07'.repeat(32), vin: [], vout: [], confirmations: 0 })).toBe(1);
    const holders = [7, 57, 107, 157];
    await Promise.all(holders.map((i) => clients[i]!.until(() => notes(clients[i]!, `a${i}`).length === 1, 20_000, `client ${i}'s notification`)));
    // Every client's block too, through the same one socket count.
    const h = A.bb.bestHeight + 1;
    mine(h);
    await Promise.all(clients.map((s, i) => s.until(() => notes(s, `b${i}`).some((b) => b.height === h), 30_000, `client ${i}'s block`)));
    expect(clients.filter((s, i) => notes(s, `a${i}`).length > 0).length).toBe(holders.length);
    expect(carrier()).toBe(c);
    await Promise.all(clients.map((s) => s.close()));
  }, 120_000);

  it('moves the union to the other upstream when the carrier is lost, and loses no mined transaction meanwhile', async () => {
    const s = await connect(url);
    await subscribe(s, 'm', 'subscribeAddresses', { addresses: [IN_EVERY_BLOCK, 'addr-failover'], newBlockTxs: true });
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.includes('addr-failover'))), 'subscribed upstream');
    const lost = carrier();
    const other = lost === A ? B : A;
    lost.ws.refuse = true;
    lost.ws.drop();
    // A block while the union moves: its transaction is found from the block.
    const h = A.bb.bestHeight + 1;
    mine(h);
    await until(async () => other.ws.subscriptions().some((set) => set.includes('addr-failover')), 'the union on the other upstream');
    expect(other.ws.mempoolTx('addr-failover', { txid: 'fa'.repeat(32), vin: [], vout: [], confirmations: 0 })).toBe(1);
    await s.until(() => notes(s, 'm').some((n) => n.address === 'addr-failover') && notes(s, 'm').some((n) => n.tx.blockHeight === h), 20_000, 'both notifications');
    expect(notes(s, 'm').filter((n) => n.tx.blockHeight === h)).toHaveLength(1);
    lost.ws.refuse = false;
    await s.close();
  }, 60_000);
});

describe('a carrier that no longer serves the chain', () => {
  it("gives the union to another upstream: a node repointed at another coin carries none of the chain's notifications", async () => {
    const s = await connect(url);
    await subscribe(s, 'w', 'subscribeAddresses', { addresses: ['addr-wrong'] });
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.includes('addr-wrong'))), 'subscribed upstream');
    const wrong = carrier();
    const other = wrong === A ? B : A;
    wrong.bb.setCoin('Litecoin');
    await until(async () => other.ws.subscriptions().some((set) => set.includes('addr-wrong')), 'the union on the other upstream');
    // The other chain's node carries nothing more (its socket's heads count for nothing while its polls find another coin).
    await until(async () => wrong.ws.carriers() === 0, 'the wrong upstream carries nothing');
    expect(other.ws.mempoolTx('addr-wrong', { txid: 'cc'.repeat(32), vin: [], vout: [], confirmations: 0 })).toBe(1);
    await s.until(() => notes(s, 'w').length === 1, 20_000, 'the notification');
    wrong.bb.setCoin('Bitcoin');
    await s.close();
    await until(async () => [A, B].every((u) => u.ws.carriers() === 0), 'nothing carried');
  }, 60_000);
});

describe('subscribeFiatRates', () => {
  it('sends each client its currency, or every rate, from one upstream subscription', async () => {
    const usd = await connect(url);
    const all = await connect(url);
    await subscribe(usd, 'usd', 'subscribeFiatRates', { currency: 'USD' });
    await subscribe(all, 'all', 'subscribeFiatRates', {});
    await until(async () => [A, B].some((u) => u.ws.carriers() > 0), 'subscribed upstream');
    carrier().ws.fiat({ usd: 91_000.5, eur: 80_000.25 });
    await usd.until(() => notes(usd, 'usd').length === 1, 20_000, 'usd');
    await all.until(() => notes(all, 'all').length === 1, 20_000, 'all');
    expect(notes(usd, 'usd')).toEqual([{ rates: { usd: 91_000.5 } }]);
    expect(notes(all, 'all')).toEqual([{ rates: { usd: 91_000.5, eur: 80_000.25 } }]);
    await usd.close();
    await all.close();
  }, 60_000);

  it('closes a client that reads nothing with 1013 once its unsent data passes maxBufferedBytes', async () => {
    const slow = await connect(url);
    await subscribe(slow, 'f', 'subscribeFiatRates', {});
    await until(async () => [A, B].some((u) => u.ws.carriers() > 0), 'subscribed upstream');
    const sock = (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    sock.pause();
    const closing = rig.gw.nextLog((e) => e.event === 'ws_closing' && e.reason === 'slow', 60_000);
    let closed = false;
    void closing.then(() => (closed = true));
    const rates = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`c${i}`, i + 0.5]));
    for (let i = 0; i < 200 && !closed; i++) {
      carrier().ws.fiat(rates);
      await new Promise((r) => setImmediate(r));
    }
    await closing;
    sock.resume();
    expect((await slow.closed).code).toBe(1013);
  }, 60_000);
});
