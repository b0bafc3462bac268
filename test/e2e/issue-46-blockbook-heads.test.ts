// Issue 46, a Blockbook upstream's heads pushed on its ONE socket: the built
// gateway in front of Blockbook REST stand-ins, each with its WebSocket
// stand-in (blockbook-socket-standin.ts), which counts its sockets and what
// each holds.
//  - btc: two upstreams, cached, polled every 10 s (headPollMs): a block
//    announced by the upstreams' sockets that reaches a subscribeNewBlock
//    client and getInfo well within a second can only have been pushed; one
//    socket per upstream carries its heads AND the chain's address
//    subscriptions; an upper-case bech32 address matches its lower-case self;
//  - fall: one upstream, polled every second (a websocket chain without the
//    cache): fallback to the polls while its socket is down, and back;
//  - other: an upstream whose `ws:` reaches another coin's Blockbook.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { until } from './harness.ts';
import { startBlockbookWithSocket, type BlockbookWithSocket } from '../support/blockbook-socket-standin.ts';
import { connect, wsUrl, type RpcSocket } from '../support/ws-client.ts';

/** Far above what a push takes, far below the 10 s between polls. */
const PUSHED_MS = 1000;
/** A valid bech32 (P2WPKH) address, as wallets may write it in upper case (QR codes). */
const SEGWIT = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';

type Bb = BlockbookWithSocket;
const upstream = (coin = 'Bitcoin') => startBlockbookWithSocket({ bestHeight: 100, coin });

let rig: Gateway<{ A: Promise<Bb>; B: Promise<Bb>; F: Promise<Bb>; O: Promise<Bb>; L: Promise<Bb> }>;
let A: Bb;
let B: Bb;

beforeAll(async () => {
  rig = await gateway({
    name: 'issue-46-blockbook-heads',
    header: { health: { intervalMs: 10_000, timeoutMs: 2000 }, cache: { headPollMs: 10_000 }, websocket: { maxConnectionsPerKey: 100 } },
    chains: [
      { path: 'btc', interface: 'blockbook', listener: 'explorer', websocket: true, coin: 'Bitcoin', upstreams: ['${A}', '${B}'] },
      { path: 'fall', interface: 'blockbook', listener: 'explorer', websocket: true, cache: 'off', coin: 'Bitcoin', upstreams: ['${F}'] },
      // Its REST serves Bitcoin; its `ws:` reaches a Litecoin Blockbook.
      { path: 'other', interface: 'blockbook', listener: 'explorer', websocket: true, cache: 'off', coin: 'Bitcoin', upstreams: [{ url: '${O}', ws: '${L_WS}' }] },
    ],
    keys: [{ id: 'wallet' }],
    standIns: { A: upstream(), B: upstream(), F: upstream(), O: upstream(), L: upstream('Litecoin') },
    env: (s) => ({ L_WS: `ws://127.0.0.1:${s.L.bb.port}/websocket` }),
  });
  A = rig.standIns.A;
  B = rig.standIns.B;
  for (const name of ['btc#0', 'btc#1', 'fall#0']) await rig.gw.waitForLog((e) => e.event === 'upstream_socket_open' && e.upstream === name, 20_000);
}, 60_000);

afterAll(() => rig?.close());

const socketUrl = (chain: string) => wsUrl(rig.gw.url('explorer', `/${chain}/${rig.keys.wallet!}/websocket`));

/** Frames for a subscription id (its notifications: every frame under the id after its answer). */
function notes(s: RpcSocket, id: string): any[] {
  return s.strays.filter((m) => m.id === id).map((m) => m.data);
}

async function subscribed(chain: string, id: string, method: string, params: object = {}): Promise<RpcSocket> {
  const s = await connect(socketUrl(chain));
  expect((await s.send({ id, method, params }, id)).data).toEqual({ subscribed: true });
  return s;
}

/** The served tip as getInfo names it. */
async function bestHeight(s: RpcSocket): Promise<number> {
  const id = `info-${Math.random()}`;
  return (await s.send({ id, method: 'getInfo', params: {} }, id)).data.bestHeight as number;
}

/** Block h on the stand-ins' REST, then announced by their sockets; ms until the client has it and getInfo names it. */
async function announce(ups: readonly Bb[], s: RpcSocket, id: string): Promise<{ h: number; ms: number }> {
  const h = ups[0]!.bb.bestHeight + 1;
  for (const u of ups) u.bb.setBestHeight(h);
  const t0 = performance.now();
  for (const u of ups) u.ws.newBlock(h, u.bb.blockHash(h));
  await s.until(() => notes(s, id).some((b) => b.height === h), 20_000, `block ${h}`);
  await until(async () => (await bestHeight(s)) === h, `getInfo naming ${h}`, 20_000);
  return { h, ms: performance.now() - t0 };
}

describe("a Blockbook upstream's heads, pushed on its one socket (issue 46)", () => {
  it('a block its sockets announce reaches a subscribeNewBlock client and getInfo well before the 10 s poll', async () => {
    const s = await subscribed('btc', 'blocks', 'subscribeNewBlock');
    const { h, ms } = await announce([A, B], s, 'blocks');
    expect(ms).toBeLessThan(PUSHED_MS);
    expect(notes(s, 'blocks').filter((b) => b.height === h)).toMatchObject([{ height: h, hash: A.bb.blockHash(h) }]);
    await s.close();
  }, 60_000);

  it("holds ONE socket per upstream for its heads and the chain's address subscriptions together, whatever the number of clients", async () => {
    const clients = await Promise.all(Array.from({ length: 20 }, (_, i) => subscribed('btc', `b${i}`, 'subscribeNewBlock')));
    await Promise.all(clients.map(async (s, i) => expect((await s.send({ id: `a${i}`, method: 'subscribeAddresses', params: { addresses: [`addr-${i}`] } }, `a${i}`)).data).toEqual({ subscribed: true })));
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.length === 20)), 'the union upstream');
    const { h } = await announce([A, B], clients[0]!, 'b0');
    await Promise.all(clients.map((s, i) => s.until(() => notes(s, `b${i}`).some((b) => b.height === h), 20_000, `client ${i}'s block`)));
    for (const u of [A, B]) {
      // Opened once since the start, subscribed to blocks once, whatever it carries besides.
      expect({ open: u.ws.open, opened: u.ws.opened, blocks: u.ws.blockSubscribers() }).toEqual({ open: 1, opened: 1, blocks: 1 });
      expect(u.ws.messages.filter((m) => m.method === 'subscribeNewBlock')).toHaveLength(1);
    }
    // The union rides on one of those same sockets.
    expect(A.ws.carriers() + B.ws.carriers()).toBe(1);
    await Promise.all(clients.map((s) => s.close()));
  }, 60_000);

  it("gives a client that subscribed an upper-case bech32 address (or a checksummed 0x one) the upstream's notification for its lower-case self", async () => {
    const s = await subscribed('btc', 'up', 'subscribeAddresses', { addresses: [SEGWIT.toUpperCase()] });
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.includes(SEGWIT))), 'the address subscribed upstream as Blockbook matches it');
    const carrier = [A, B].find((u) => u.ws.carriers() > 0)!;
    const tx = { txid: 'bc'.repeat(32), vin: [], vout: [{ n: 0, value: '1000', addresses: [SEGWIT], isAddress: true }], confirmations: 0 };
    expect(carrier.ws.mempoolTx(SEGWIT, tx)).toBe(1);
    await s.until(() => notes(s, 'up').length === 1, 20_000, 'the notification');
    expect(notes(s, 'up')[0]).toMatchObject({ address: SEGWIT, tx: { txid: tx.txid } });
    // An EVM address (a Blockbook ETH backend) is one in any case: checksummed by the client, lower case upstream.
    const evm = '0x52908400098527886E0F7030069857D2E4169EE7';
    expect((await s.send({ id: 'eth', method: 'subscribeAddresses', params: { addresses: [evm] } }, 'eth')).data).toEqual({ subscribed: true });
    await until(async () => carrier.ws.subscriptions().some((set) => set.includes(evm.toLowerCase())), 'the 0x address subscribed upstream in lower case');
    expect(carrier.ws.mempoolTx(evm.toLowerCase(), { ...tx, txid: 'ee'.repeat(32) })).toBe(1);
    await s.until(() => notes(s, 'eth').length === 1, 20_000, 'the 0x notification');
    await s.close();
  }, 60_000);

  it("refuses a subscribe that would take one key's addresses past its share (1,000 by default, over its sockets), keeping the client's previous set", async () => {
    const list = (from: number, n: number) => Array.from({ length: n }, (_, i) => `cap-${from + i}`);
    const x = await subscribed('btc', 'x', 'subscribeAddresses', { addresses: list(0, 600) });
    const y = await subscribed('btc', 'y', 'subscribeAddresses', { addresses: list(600, 100) });
    const over = await y.send({ id: 'y2', method: 'subscribeAddresses', params: { addresses: list(600, 401) } }, 'y2');
    expect(over.data).toEqual({ error: { message: 'addresses max 1000 per API key on this chain, all its sockets together' } });
    // Up to the cap is taken, on the one carrier's socket.
    expect((await y.send({ id: 'y3', method: 'subscribeAddresses', params: { addresses: list(600, 400) } }, 'y3')).data).toEqual({ subscribed: true });
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.length === 1000)), 'the union of 1000 upstream');
    expect(A.ws.carriers() + B.ws.carriers()).toBe(1);
    await Promise.all([x.close(), y.close()]);
  }, 60_000);

  it('falls back to the polls while the socket is down, and is pushed again once it is back', async () => {
    const F = rig.standIns.F;
    const s = await subscribed('fall', 'blocks', 'subscribeNewBlock');
    const down = rig.gw.nextLog((e) => e.event === 'upstream_socket_down' && e.chain === 'fall', 20_000);
    F.ws.refuse = true;
    F.ws.drop();
    await down;
    // Down: the block comes with the next poll (every second), though no socket announces it.
    const h = F.bb.bestHeight + 1;
    F.bb.setBestHeight(h);
    await s.until(() => notes(s, 'blocks').some((b) => b.height === h), 20_000, 'the block through the polls');
    expect(F.ws.open).toBe(0);
    // Back: opened again, subscribed, and a block comes before any poll reached the node.
    const opened = F.ws.opened;
    const open = rig.gw.nextLog((e) => e.event === 'upstream_socket_open' && e.chain === 'fall', 40_000);
    F.ws.refuse = false;
    await open;
    expect(F.ws.opened).toBe(opened + 1);
    let clean = 0;
    for (let i = 0; i < 5 && clean === 0; i++) {
      const before = F.bb.healthChecks.length;
      const t = await announce([F], s, 'blocks');
      // A poll may have fallen between the announcement and the notification (1 s apart): then the sample proves nothing.
      if (F.bb.healthChecks.length === before) {
        clean++;
        expect(t.ms).toBeLessThan(PUSHED_MS);
      }
    }
    expect(clean).toBe(1);
    await s.close();
  }, 90_000);

  it("ignores and closes a socket that serves another coin than the polls verified (its `ws:` reached another Blockbook)", async () => {
    const wrong = await rig.gw.waitForLog((e) => e.event === 'upstream_socket_wrong_chain' && e.chain === 'other', 20_000);
    expect(wrong).toMatchObject({ upstream: 'other#0', serves: 'coin Litecoin', expected: 'coin Bitcoin' });
    const { O, L } = rig.standIns;
    // The manifest's `ws:` is where the socket went, not the REST base's /websocket.
    expect(L.ws.messages.some((m) => m.method === 'getInfo')).toBe(true);
    expect(O.ws.opened).toBe(0);
    await until(async () => L.ws.open === 0, 'the other coin socket closed');
    const s = await subscribed('other', 'blocks', 'subscribeNewBlock');
    const h = O.bb.bestHeight + 1;
    O.bb.setBestHeight(h);
    await s.until(() => notes(s, 'blocks').some((b) => b.height === h), 20_000, 'the own block through the polls');
    expect(await bestHeight(s)).toBe(h);
    await s.close();
  }, 60_000);
});
