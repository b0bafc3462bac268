// Mempool transactions across a carrier switch (issue 46), through the built
// gateway, on a chain of two Blockbook stand-ins with their WebSockets
// (blockbook-socket-standin.ts): while the union of subscribed addresses moves
// from the lost upstream to the other (its subscribe answer held, so the
// switch is under way for as long as the test needs), transactions reach the
// nodes' mempools (both: the network's) that no socket announces. Once the
// other carries the union, the gateway reads them from the addresses' lists
// (through the chain's layers, the pool picking the node) and sends each to the
// clients that held its address before the loss, once: not again when the
// old carrier had announced it, nor when the new one announces it as well,
// and not to a client that subscribed after the loss.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { until } from './harness.ts';
import { startBlockbookWithSocket, type BlockbookWithSocket } from '../support/blockbook-socket-standin.ts';
import { connect, RpcSocket, wsUrl } from '../support/ws-client.ts';

type Upstream = BlockbookWithSocket;
const upstream = () => startBlockbookWithSocket({ bestHeight: 100 });

let rig: Gateway<{ A: ReturnType<typeof upstream>; B: ReturnType<typeof upstream> }>;
let A: Upstream;
let B: Upstream;

beforeAll(async () => {
  rig = await gateway({
    name: 'issue-46-blockbook-replay',
    chains: [{ path: 'btc', interface: 'blockbook', listener: 'explorer', websocket: true, coin: 'Bitcoin', upstreams: ['${A}', '${B}'] }],
    header: { health: { intervalMs: 100, timeoutMs: 2000 } },
    keys: [{ id: 'ka' }, { id: 'kb' }, { id: 'kc' }, { id: 'kd' }],
    standIns: { A: upstream(), B: upstream() },
  });
  A = rig.standIns.A;
  B = rig.standIns.B;
}, 60_000);

afterAll(() => rig?.close());

const open = (k: string): Promise<RpcSocket> => connect(wsUrl(rig.gw.url('explorer', `/btc/${rig.keys[k]!}/websocket`)));

async function subscribe(s: RpcSocket, id: string, addresses: readonly string[]): Promise<unknown> {
  return (await s.send({ id, method: 'subscribeAddresses', params: { addresses, newBlockTxs: false } }, id)).data;
}

/** Notifications under a subscription id. */
const notes = (s: RpcSocket, id: string): any[] => s.strays.filter((m) => m.id === id).map((m) => m.data);
/** The txids notified under `id` for `address`, in order. */
const txids = (s: RpcSocket, id: string, address: string): string[] => notes(s, id).filter((n) => n.address === address).map((n) => n.tx.txid);

/** A round trip on `s`: whatever the gateway sent it before this answer has arrived. */
async function settled(s: RpcSocket): Promise<void> {
  expect((await s.send({ id: 'ping', method: 'ping', params: {} }, 'ping')).data).toEqual({});
}

/** `tx` in both nodes' mempools, as the network spreads it: listed with `address`'s transactions. */
function inMempools(address: string, tx: object): void {
  for (const u of [A, B]) u.bb.addMempoolTx(address, tx);
}

/** An unconfirmed transaction paying `address`, as Blockbook's notification and address list carry it. */
const payment = (n: string, address: string) => ({
  txid: n.repeat(64 / n.length),
  version: 2,
  vin: [{ txid: 'ee'.repeat(32), n: 0, addresses: ['bc1qsender'], isAddress: true, value: '70000' }],
  vout: [{ value: '50000', n: 0, addresses: [address], isAddress: true }],
  blockHeight: -1,
  confirmations: 0,
  blockTime: 1_700_000_000,
  value: '50000',
  fees: '20000',
});

describe('mempool transactions across a carrier switch', () => {
  it('reaches each holder from before the loss once, after the switch, and no one else', async () => {
    const x = await open('ka'); // holds P and Q since before the loss
    const y = await open('kb'); // holds another address (read too: nothing in its mempool)
    const w = await open('kc'); // holds Q before the loss, and adds R during the switch
    const z = await open('kd'); // subscribes P during the switch
    expect(await subscribe(x, 'x', ['pay-P', 'pay-Q'])).toEqual({ subscribed: true });
    expect(await subscribe(y, 'y', ['pay-O'])).toEqual({ subscribed: true });
    expect(await subscribe(w, 'w', ['pay-Q'])).toEqual({ subscribed: true });
    await until(async () => [A, B].some((u) => u.ws.subscriptions().some((set) => set.length === 3)), 'the union carried', 20_000);
    const lost = A.ws.carriers() > 0 ? A : B;
    const other = lost === A ? B : A;

    // T1: announced by the old carrier before the loss; both nodes have it in their mempool.
    const t1 = payment('a1', 'pay-P');
    expect(lost.ws.mempoolTx('pay-P', t1)).toBe(1);
    inMempools('pay-P', t1);
    await x.until(() => txids(x, 'x', 'pay-P').length === 1, 20_000, 'T1 before the loss');

    // Nothing is replayed on a first subscribe.
    expect(rig.gw.lines.filter((l) => l.includes('"ws_mempool_replayed"'))).toEqual([]);

    // The switch: the old carrier dropped and refusing, the other's subscribe answer held until the test releases it.
    const release = other.ws.hold('subscribeAddresses');
    const replayed = rig.gw.nextLog((e) => e.event === 'ws_mempool_replayed', 30_000);
    lost.ws.refuse = true;
    lost.ws.drop();
    await until(async () => other.ws.messages.some((m) => m.method === 'subscribeAddresses'), 'the other upstream asked to carry the union', 20_000);
    // Meanwhile: a client subscribes P, another adds R to its set, and the mempool gets T2 (P), T3 (Q), T5 (R).
    expect(await subscribe(z, 'z', ['pay-P'])).toEqual({ subscribed: true });
    expect(await subscribe(w, 'w2', ['pay-Q', 'pay-R'])).toEqual({ subscribed: true });
    const [t2, t3, t5] = [payment('b2', 'pay-P'), payment('c3', 'pay-Q'), payment('d5', 'pay-R')];
    inMempools('pay-P', t2);
    inMempools('pay-Q', t3);
    inMempools('pay-R', t5);
    release();
    await x.until(() => txids(x, 'x', 'pay-P').length === 2, 20_000, 'T2 replayed to x');
    const done = await replayed;
    expect(done).toMatchObject({ upstream: expect.any(String), read: 3, failed: 0, sent: 3 });
    await Promise.all([x, y, w, z].map(settled));

    // x: T1 once (before), T2 and T3 once each (the replay); T1 was not sent again.
    expect(txids(x, 'x', 'pay-P')).toEqual([t1.txid, t2.txid]);
    expect(txids(x, 'x', 'pay-Q')).toEqual([t3.txid]);
    // As Blockbook's notification: the address, and the transaction without the list's isOwn marks.
    expect(notes(x, 'x').find((n) => n.tx.txid === t2.txid)).toEqual({ address: 'pay-P', tx: payment('b2', 'pay-P') });
    // w held Q since before the loss (its new set keeps it): T3 under its new id; R is new to it, so T5 is not replayed.
    expect(notes(w, 'w2').map((n) => n.tx.txid)).toEqual([t3.txid]);
    expect(notes(w, 'w')).toEqual([]);
    // z subscribed after the loss; y holds none of these.
    expect(notes(z, 'z')).toEqual([]);
    expect(notes(y, 'y')).toEqual([]);
    // One read an address held before the loss, of its mempool alone (`from` past the tip).
    const reads = [A, B].flatMap((u) => u.bb.requests.filter((r) => r.path.includes('/address/')));
    expect(reads.map((r) => r.path.split('/').pop()).sort()).toEqual(['pay-O', 'pay-P', 'pay-Q']);
    for (const r of reads) expect(r.query).toBe(`details=txs&pageSize=20&from=${other.bb.bestHeight + 1}`);

    // The new carrier announces T2 as well (it came after its subscribe): z gets it, x not again; a new one reaches both.
    await until(async () => other.ws.subscriptions().some((set) => set.length === 4), 'the union on the other upstream', 20_000);
    expect(other.ws.mempoolTx('pay-P', t2)).toBe(1);
    await z.until(() => txids(z, 'z', 'pay-P').length === 1, 20_000, 'T2 announced to z');
    const t4 = payment('e4', 'pay-P');
    expect(other.ws.mempoolTx('pay-P', t4)).toBe(1);
    await z.until(() => txids(z, 'z', 'pay-P').length === 2, 20_000, 'T4 to z');
    await x.until(() => txids(x, 'x', 'pay-P').length === 3, 20_000, 'T4 to x');
    await settled(x);
    expect(txids(x, 'x', 'pay-P')).toEqual([t1.txid, t2.txid, t4.txid]);
    expect(txids(z, 'z', 'pay-P')).toEqual([t2.txid, t4.txid]);
    lost.ws.refuse = false;
    await Promise.all([x, y, w, z].map((s) => s.close()));
  }, 90_000);
});
