// The bounds of the mempool replay after a carrier switch (socket-replay.ts):
// the record of notified txids (RECENT_TXS an address, only for addresses
// with notifications, each client sent a transaction once), and the replay's
// reads (REPLAY_ADDRESSES addresses, REPLAY_CONCURRENCY at once, none started
// past REPLAY_MS or once a later loss's replay takes over).
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../../../runtime/observe/log.ts';
import type { AddressClient } from '../../../../runtime/kinds/blockbook/socket-address.ts';
import { Mempool, Notified, RECENT_TXS, Replay, REPLAY_ADDRESSES, REPLAY_CONCURRENCY, REPLAY_MS, type ReplayHub } from '../../../../runtime/kinds/blockbook/socket-replay.ts';

/** A client of `addresses`, recording what it is sent. */
function client(addresses: readonly string[]): AddressClient & { got: string[] } {
  const got: string[] = [];
  return { key: 'k', idJson: '"s"', addresses: new Set(addresses), newBlockTxs: false, notify: (t) => void got.push(t), got };
}

const txid = (i: number): string => i.toString(16).padStart(64, '0');

/** The holders of each address, as the hub's index has them. */
function index(clients: readonly AddressClient[]): Map<string, Set<AddressClient>> {
  const m = new Map<string, Set<AddressClient>>();
  for (const c of clients) for (const a of c.addresses) (m.get(a) ?? m.set(a, new Set()).get(a)!).add(c);
  return m;
}

/** A hub whose reads answer `list(address)` (none by default) after a turn, counting them. */
function hub(byAddress: Map<string, Set<AddressClient>>, list: (a: string) => object[] = () => []) {
  const logged: Record<string, unknown>[] = [];
  const reads: string[] = [];
  let inFlight = 0;
  let most = 0;
  const h: ReplayHub = {
    get: async (rest, query) => {
      reads.push(`${rest}?${query}`);
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setImmediate(r));
      inFlight--;
      const a = decodeURIComponent(rest.slice('address/'.length));
      return { address: a, transactions: list(a) };
    },
    holders: (a) => byAddress.get(a),
    best: () => 99,
    maxPageSize: 1000,
    log: { info: (o: Record<string, unknown>) => void logged.push(o), warn() {}, debug() {} } as unknown as Logger,
  };
  return { h, reads, logged, most: () => most };
}

afterEach(() => vi.restoreAllMocks());

describe('Notified', () => {
  it('sends each txid of an address to each client once, and remembers the last RECENT_TXS of an address only while it is held', () => {
    const n = new Notified();
    const a = client(['p']);
    const b = client(['p']);
    expect(n.take('p', txid(0), [a, b], true)).toEqual([a, b]);
    expect(n.take('p', txid(0), [a, b], true)).toEqual([]);
    // A replay's send to `a` only: an announcement after it reaches `b`, not `a` again; then no one.
    expect(n.take('p', txid(1), [a], false)).toEqual([a]);
    expect(n.take('p', txid(1), [a], false)).toEqual([]);
    expect(n.take('p', txid(1), [a, b], true)).toEqual([b]);
    expect(n.take('p', txid(1), [a, b], true)).toEqual([]);
    // RECENT_TXS more: the oldest two are forgotten, the newest kept.
    for (let i = 2; i < RECENT_TXS + 2; i++) expect(n.take('p', txid(i), [a], true)).toEqual([a]);
    expect(n.take('p', txid(0), [a], true)).toEqual([a]);
    expect(n.take('p', txid(RECENT_TXS + 1), [a], true)).toEqual([]);
    // Another address has its own record; one that left the union has none.
    expect(n.take('q', txid(RECENT_TXS + 1), [a], true)).toEqual([a]);
    n.forget('p');
    expect(n.take('p', txid(RECENT_TXS + 1), [a], true)).toEqual([a]);
  });
});

describe('Replay', () => {
  it(`reads at most ${REPLAY_ADDRESSES} addresses, ${REPLAY_CONCURRENCY} at a time, each for its mempool alone`, async () => {
    const clients = Array.from({ length: REPLAY_ADDRESSES + 5 }, (_, i) => client([`a-${i}`]));
    const byAddress = index(clients);
    const { h, reads, logged, most } = hub(byAddress);
    await new Replay(byAddress).run(h, new Notified(), 'up');
    expect(reads).toHaveLength(REPLAY_ADDRESSES);
    expect(new Set(reads).size).toBe(REPLAY_ADDRESSES);
    expect(reads[0]).toBe(`address/a-0?details=txs&pageSize=${RECENT_TXS}&from=100`);
    expect(most()).toBe(REPLAY_CONCURRENCY);
    expect(logged).toEqual([expect.objectContaining({ event: 'ws_mempool_replayed', addresses: REPLAY_ADDRESSES + 5, read: REPLAY_ADDRESSES, sent: 0 })]);
  });

  it(`starts no read past ${REPLAY_MS} ms, nor once stopped`, async () => {
    const byAddress = index(Array.from({ length: 50 }, (_, i) => client([`a-${i}`])));
    let now = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    const timed = hub(byAddress);
    const get = timed.h.get;
    // Each read takes half the bound: two start, the third would start at the bound.
    await new Replay(byAddress).run({ ...timed.h, get: (r, q) => ((now += REPLAY_MS / 2), get(r, q)) }, new Notified(), 'up');
    expect(timed.reads).toHaveLength(2);
    const stopped = hub(byAddress);
    const r = new Replay(byAddress);
    // Stopped as its first read starts: the other workers start none.
    await r.run({ ...stopped.h, get: (x, q) => (r.stop(), stopped.h.get(x, q)) }, new Notified(), 'up');
    expect(stopped.reads).toHaveLength(1);
    expect(stopped.logged[0]).toMatchObject({ read: 1, stopped: true });
  });

  it('sends unconfirmed transactions to the clients that held the address at the loss (a replaced set keeping it included), once, as the notification', async () => {
    const before = client(['p']);
    const kept = client(['p']);
    const m = new Mempool(hub(new Map()).h);
    const byAddress = index([before, kept]);
    const listed = [
      { txid: txid(1), confirmations: 0, vout: [{ addresses: ['p'], isOwn: true }] },
      { txid: txid(2), confirmations: 3, vout: [{ addresses: ['p'], isOwn: true }] },
    ];
    const { h } = hub(byAddress, () => structuredClone(listed));
    const r = new Replay(byAddress);
    // After the loss: `kept` replaced by a set that keeps p; `late` subscribes p.
    const replaced = client(['p', 'r']);
    const late = client(['p']);
    r.inherit(replaced, kept);
    byAddress.get('p')!.add(replaced).add(late);
    byAddress.get('p')!.delete(kept);
    r.forget(kept);
    await r.run(h, m.notified, 'up');
    const note = `{"address":"p","tx":${JSON.stringify({ txid: txid(1), confirmations: 0, vout: [{ addresses: ['p'] }] })}}`;
    expect(before.got).toEqual([`{"id":"s","data":${note}}`]);
    expect(replaced.got).toEqual([`{"id":"s","data":${note}}`]);
    expect(late.got).toEqual([]);
    // The same list read again (a later switch): nothing twice.
    await new Replay(byAddress).run(h, m.notified, 'up');
    expect(before.got).toHaveLength(1);
  });
});
