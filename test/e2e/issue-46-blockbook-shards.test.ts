// A Blockbook chain's address union past one upstream socket's worth, through
// the built gateway (issue 46), on a chain of two Blockbook stand-ins with
// their WebSockets (blockbook-socket-standin.ts, which counts sockets and each
// one's address set, and holds Blockbook's 1,000 a socket): the union in
// shards of 1,000, each on its own socket to the carrying upstream (the first
// on its head socket), every notification to its holders only, the extra
// socket emptied when the union shrinks back and closed once spare for
// websocket.spareSocketMs (a union crossing 1,000 back and forth meanwhile
// opens no socket per crossing), failover moving every shard, and
// the two bounds: the chain's total (here 2,500) and each key's share (the
// default, 1,000) over all its sockets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { until } from './harness.ts';
import { startBlockbookWithSocket, type BlockbookWithSocket } from '../support/blockbook-socket-standin.ts';
import { connect, RpcSocket, wsUrl } from '../support/ws-client.ts';

/** An address in every block of the stand-in chain (the example block's first transaction pays it). */
const IN_EVERY_BLOCK = 'D6ravJL6Fgxtgp8k2XZZt1QfUmwwGuLwQJ';
const TOTAL = 2500;
const PER_KEY = 1000;
/** websocket.spareSocketMs here: long enough for the crossings below, short enough to see a spare closed. */
const SPARE_MS = 4000;

type Upstream = BlockbookWithSocket;
const upstream = () => startBlockbookWithSocket({ bestHeight: 100 });

let rig: Gateway<{ A: ReturnType<typeof upstream>; B: ReturnType<typeof upstream> }>;
let A: Upstream;
let B: Upstream;

beforeAll(async () => {
  rig = await gateway({
    name: 'issue-46-blockbook-shards',
    chains: [{ path: 'btc', interface: 'blockbook', listener: 'explorer', websocket: { maxAddresses: TOTAL, spareSocketMs: SPARE_MS }, coin: 'Bitcoin', upstreams: ['${A}', '${B}'] }],
    header: { health: { intervalMs: 100, timeoutMs: 2000 } },
    keys: [{ id: 'ka' }, { id: 'kb' }, { id: 'kc' }, { id: 'kd' }],
    standIns: { A: upstream(), B: upstream() },
  });
  A = rig.standIns.A;
  B = rig.standIns.B;
}, 60_000);

afterAll(() => rig?.close());

/** A socket of key `k`. */
const open = (k: string): Promise<RpcSocket> => connect(wsUrl(rig.gw.url('explorer', `/btc/${rig.keys[k]!}/websocket`)));

/** `n` addresses named by `tag`. */
const addrs = (tag: string, n: number, from = 0): string[] => Array.from({ length: n }, (_, i) => `${tag}-${from + i}`);

/** subscribeAddresses under `id`: its answer's data. */
async function subscribe(s: RpcSocket, id: string, addresses: readonly string[], newBlockTxs = false): Promise<any> {
  return (await s.send({ id, method: 'subscribeAddresses', params: { addresses, newBlockTxs } }, id)).data;
}

/** Frames under a subscription id after its answer: its notifications. */
const notes = (s: RpcSocket, id: string): any[] => s.strays.filter((m) => m.id === id).map((m) => m.data);

/** The address sets an upstream's sockets hold, the empty ones (its head socket's, when it carries none) left out. */
const sets = (u: Upstream): string[][] => u.ws.subscriptions().filter((x) => x.length > 0);

/** The upstream whose sockets carry the chain's addresses: exactly one. */
function carrier(): Upstream {
  const carrying = [A, B].filter((u) => u.ws.carriers() > 0);
  expect(carrying).toHaveLength(1);
  return carrying[0]!;
}

/** Waits until one upstream (`on`, where given) carries exactly `union` on `shards` sockets (each within Blockbook's 1,000), its head socket one of them. */
async function carried(union: readonly string[], shards: number, on: readonly Upstream[] = [A, B]): Promise<Upstream> {
  const want = [...union].sort().join();
  await until(async () => on.some((u) => u.ws.open === shards && sets(u).length === shards && sets(u).flat().sort().join() === want), `${union.length} addresses on ${shards} sockets`, 20_000);
  const c = carrier();
  for (const set of sets(c)) expect(set.length).toBeLessThanOrEqual(1000);
  return c;
}

const tx = (txid: string) => ({ txid: txid.repeat(32), vin: [], vout: [], confirmations: 0 });

/** A round trip on `s`: whatever the gateway sent it before this answer has arrived. */
async function settled(s: RpcSocket): Promise<void> {
  expect((await s.send({ id: 'ping', method: 'ping', params: {} }, 'ping')).data).toEqual({});
}

/** Every socket closed, and nothing left to carry upstream: each upstream back to its one head socket. */
async function closeAll(sockets: readonly RpcSocket[]): Promise<void> {
  await Promise.all(sockets.map((s) => s.close()));
  await until(async () => [A, B].every((u) => u.ws.carriers() === 0 && u.ws.open === 1), "nothing carried, each upstream's head socket only", 20_000);
}

describe('the address union in shards', () => {
  it("one key filling its share does not stop another key's subscribe", async () => {
    const big = await open('ka');
    const other = await open('kb');
    expect(await subscribe(big, 'big', addrs('full', PER_KEY))).toEqual({ subscribed: true });
    expect(await subscribe(other, 'small', ['small-0', 'small-1'])).toEqual({ subscribed: true });
    const c = await carried([...addrs('full', PER_KEY), 'small-0', 'small-1'], 2);
    expect(c.ws.mempoolTx('small-1', tx('51'))).toBe(1);
    await other.until(() => notes(other, 'small').length === 1, 20_000, 'the small wallet notified');
    expect(notes(other, 'small')[0]).toMatchObject({ address: 'small-1', tx: { txid: '51'.repeat(32) } });
    await closeAll([big, other]);
  }, 60_000);

  it('carries a union over 1,000 on two sockets to the carrying upstream, each notification to its holders only', async () => {
    const a = await open('ka');
    const b = await open('kb');
    // a-0 is held by both; the rest by one each: 1,000 + 600 - 1 = 1,599 addresses.
    expect(await subscribe(a, 'a', addrs('a', 1000))).toEqual({ subscribed: true });
    expect(await subscribe(b, 'b', ['a-0', ...addrs('b', 599)])).toEqual({ subscribed: true });
    const c = await carried([...addrs('a', 1000), ...addrs('b', 599)], 2);
    // The first 1,000 fill the head socket's shard; b's own go on the second socket.
    const [first, second] = sets(c).sort((x, y) => y.length - x.length);
    expect(new Set(first)).toEqual(new Set(addrs('a', 1000)));
    expect(new Set(second)).toEqual(new Set(addrs('b', 599)));
    expect(c.ws.blockSubscribers()).toBe(1);
    // An address of the second shard: b only.
    expect(c.ws.mempoolTx('b-598', tx('b5'))).toBe(1);
    await b.until(() => notes(b, 'b').length === 1, 20_000, "b's notification");
    expect(notes(b, 'b')).toEqual([expect.objectContaining({ address: 'b-598' })]);
    await settled(a);
    expect(notes(a, 'a')).toEqual([]);
    // The shared address, on the first shard: both.
    expect(c.ws.mempoolTx('a-0', tx('a0'))).toBe(1);
    await a.until(() => notes(a, 'a').length === 1, 20_000, "a's notification");
    await b.until(() => notes(b, 'b').length === 2, 20_000, "b's second notification");
    expect(notes(a, 'a')[0].address).toBe('a-0');
    expect(notes(b, 'b')[1].address).toBe('a-0');
    await closeAll([a, b]);
  }, 60_000);

  it('empties the extra socket when the union shrinks back to 1,000 (the addresses left on the head socket) and closes it once spare for spareSocketMs', async () => {
    const a = await open('ka');
    const b = await open('kb');
    expect(await subscribe(a, 'a', addrs('s', 700))).toEqual({ subscribed: true });
    expect(await subscribe(b, 'b', addrs('t', 500))).toEqual({ subscribed: true });
    const c = await carried([...addrs('s', 700), ...addrs('t', 500)], 2);
    // b keeps 300 of its 500: 1,000 in all, on the head socket alone; the other socket is emptied, then closed.
    expect(await subscribe(b, 'b2', addrs('t', 300))).toEqual({ subscribed: true });
    const shrunk = performance.now();
    const want = [...addrs('s', 700), ...addrs('t', 300)].sort().join();
    await until(async () => sets(c).length === 1 && sets(c)[0]!.slice().sort().join() === want, 'the union on the head socket alone, the spare emptied', 20_000);
    await until(async () => c.ws.open === 1, 'the spare socket closed', 20_000);
    expect(performance.now() - shrunk).toBeGreaterThanOrEqual(SPARE_MS - 100);
    // One that moved off the closed socket still reaches its holder, once.
    expect(c.ws.mempoolTx('t-299', tx('29'))).toBe(1);
    await b.until(() => notes(b, 'b2').length === 1, 20_000, 'the moved address notified');
    await settled(b);
    expect(notes(b, 'b2')).toEqual([expect.objectContaining({ address: 't-299' })]);
    await closeAll([a, b]);
  }, 60_000);

  it('a union crossing 1,000 back and forth within spareSocketMs opens one extra socket, not one per crossing', async () => {
    const a = await open('ka');
    const b = await open('kb');
    expect(await subscribe(a, 'a', addrs('u', 1000))).toEqual({ subscribed: true });
    const c = await carried(addrs('u', 1000), 1);
    const before = c.ws.opened;
    for (let i = 0; i < 6; i++) {
      // b's one address takes the union to 1,001 (two sockets), its none back to 1,000.
      expect(await subscribe(b, `up${i}`, [`v-${i}`])).toEqual({ subscribed: true });
      await carried([...addrs('u', 1000), `v-${i}`], 2);
      expect(await subscribe(b, `down${i}`, [])).toEqual({ subscribed: true });
      await until(async () => sets(c).length === 1, 'the spare emptied', 20_000);
    }
    expect(c.ws.opened - before).toBe(1);
    await closeAll([a, b]);
    await until(async () => A.ws.open + B.ws.open === 2, 'only the head sockets left', 20_000);
  }, 60_000);

  it('moves every shard to the other upstream when the carrier is lost, and loses no mined transaction meanwhile', async () => {
    const a = await open('ka');
    const b = await open('kb');
    const m = await open('kc');
    expect(await subscribe(a, 'a', addrs('f', 1000))).toEqual({ subscribed: true });
    expect(await subscribe(b, 'b', addrs('g', 400))).toEqual({ subscribed: true });
    expect(await subscribe(m, 'm', [IN_EVERY_BLOCK], true)).toEqual({ subscribed: true });
    const union = [...addrs('f', 1000), ...addrs('g', 400), IN_EVERY_BLOCK];
    const lost = await carried(union, 2);
    const other = lost === A ? B : A;
    lost.ws.refuse = true;
    lost.ws.drop();
    // A block while the shards move: its transaction is found from the block.
    const h = A.bb.bestHeight + 1;
    for (const u of [A, B]) {
      u.bb.setBestHeight(h);
      u.ws.newBlock(h, u.bb.blockHash(h));
    }
    await carried(union, 2, [other]);
    await until(async () => lost.ws.open === 0, 'the lost upstream holds no socket');
    expect(other.ws.mempoolTx('g-399', tx('99'))).toBe(1);
    await b.until(() => notes(b, 'b').length === 1, 20_000, 'the second shard notified from the other upstream');
    await m.until(() => notes(m, 'm').some((n) => n.tx.blockHeight === h), 20_000, 'the mined transaction');
    expect(notes(m, 'm').filter((n) => n.tx.blockHeight === h)).toHaveLength(1);
    lost.ws.refuse = false;
    await closeAll([a, b, m]);
  }, 60_000);
});

describe('the bounds', () => {
  it("refuses a subscribe past the chain's total, naming it, and keeps the client's set", async () => {
    const [a, b, c, d] = await Promise.all(['ka', 'kb', 'kc', 'kd'].map(open));
    expect(await subscribe(a!, 'a', addrs('u', 1000))).toEqual({ subscribed: true });
    expect(await subscribe(b!, 'b', addrs('v', 1000))).toEqual({ subscribed: true });
    expect(await subscribe(c!, 'c', addrs('w', 500))).toEqual({ subscribed: true });
    const union = [...addrs('u', 1000), ...addrs('v', 1000), ...addrs('w', 500)];
    const carrying = await carried(union, 3);
    const over = { error: { message: `addresses max ${TOTAL} on this chain, for all clients together` } };
    expect(await subscribe(d!, 'd', ['one-more'])).toEqual(over);
    // c asks for one more than it has: refused, and its 500 stay (and notify).
    expect(await subscribe(c!, 'c2', addrs('w', 501))).toEqual(over);
    // A replacement that frees as many as it takes fits.
    expect(await subscribe(b!, 'b2', [...addrs('v', 999), 'one-more'])).toEqual({ subscribed: true });
    expect(await carried([...addrs('u', 1000), ...addrs('v', 999), 'one-more', ...addrs('w', 500)], 3)).toBe(carrying);
    expect(carrying.ws.mempoolTx('w-499', tx('49'))).toBe(1);
    await c!.until(() => notes(c!, 'c').length === 1, 20_000, "c's notification under its first subscribe");
    expect(notes(c!, 'c2')).toEqual([]);
    await closeAll([a!, b!, c!, d!]);
  }, 60_000);

  it("refuses a key past its share over all its sockets, naming it, keeps the client's set, and lets other keys subscribe", async () => {
    const one = await open('ka');
    const two = await open('ka');
    const other = await open('kb');
    const share = { error: { message: `addresses max ${PER_KEY} per API key on this chain, all its sockets together` } };
    expect(await subscribe(one, 'x', addrs('k', 800))).toEqual({ subscribed: true });
    // The key's second socket: 300 more would be 1,100 of the key's.
    expect(await subscribe(two, 'y', addrs('k', 300, 800))).toEqual(share);
    // Addresses its other socket holds count once: 800 + 200.
    expect(await subscribe(two, 'y2', [...addrs('k', 400), ...addrs('k', 200, 800)])).toEqual({ subscribed: true });
    // Replaced by 201 new ones: 1,001. Refused, and the 600 it held stay.
    expect(await subscribe(two, 'y3', addrs('k', 201, 1000))).toEqual(share);
    // The key is full; another key is not.
    expect(await subscribe(other, 'z', addrs('k', 300, 2000))).toEqual({ subscribed: true });
    const c = await carried([...addrs('k', 1000), ...addrs('k', 300, 2000)], 2);
    expect(c.ws.mempoolTx('k-999', tx('99'))).toBe(1);
    await two.until(() => notes(two, 'y2').length === 1, 20_000, "the second socket's set, kept");
    expect(notes(two, 'y3')).toEqual([]);
    await settled(one);
    expect(notes(one, 'x')).toEqual([]);
    await closeAll([one, two, other]);
  }, 60_000);
});
