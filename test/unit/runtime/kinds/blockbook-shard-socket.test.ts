// A Blockbook upstream's extra socket for a shard of the address union
// (socket-upstream.ts ShardSocket), against the Blockbook socket stand-in: it
// carries addresses only once its getInfo names the coin the upstream's polls
// verified, says why it could not (another coin, a refused upgrade), and is
// dropped when its peer stops answering pings (it carries no heads to show it).
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { blockbookSocketUrl, ShardSocket } from '../../../../runtime/kinds/blockbook/socket-upstream.ts';
import type { Upstream } from '../../../../runtime/upstreams/upstream.ts';
import { startBlockbookWithSocket, type BlockbookWithSocket } from '../../../support/blockbook-socket-standin.ts';
import { until } from '../../../e2e/harness.ts';

/** An upstream as the shard socket reads it: its headers and what its polls verified. */
const polled = (identity: string) => ({ headers: { authorization: 'Basic dTpw' }, view: { verified: true, identity } }) as unknown as Upstream;

const started: BlockbookWithSocket[] = [];
async function standIn(coin: string): Promise<BlockbookWithSocket> {
  const s = await startBlockbookWithSocket({ coin });
  started.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

describe('ShardSocket', () => {
  it("is live once getInfo names the verified coin, and carries a subscription's answers and notifications to its user", async () => {
    const bb = await standIn('Bitcoin');
    const s = new ShardSocket(polled('coin Bitcoin'), blockbookSocketUrl(new URL(bb.url)), 2000);
    expect(s.live).toBe(false);
    expect(s.send('{}')).toBe(false);
    await s.ready;
    expect(s.live).toBe(true);
    const got: Record<string, unknown>[] = [];
    s.attach({ message: (m) => got.push(m), down: () => got.push({ down: true }) });
    expect(s.send(JSON.stringify({ id: 'a1', method: 'subscribeAddresses', params: { addresses: ['x-1'] } }))).toBe(true);
    await until(async () => got.length === 1, 'the answer');
    expect(got[0]).toEqual({ id: 'a1', data: { subscribed: true } });
    expect(bb.ws.subscriptions()).toEqual([['x-1']]);
    expect(bb.ws.mempoolTx('x-1', { txid: 'ab' })).toBe(1);
    await until(async () => got.length === 2, 'the notification');
    expect(got[1]).toEqual({ id: 'a1', data: { address: 'x-1', tx: { txid: 'ab' } } });
    // Closed by the upstream: its user is told.
    bb.ws.drop();
    await until(async () => got.length === 3, 'down');
    expect(got[2]).toEqual({ down: true });
    expect(s.live).toBe(false);
  });

  it('is never live on a node of another coin, nor when the upgrade is refused, and closes', async () => {
    const ltc = await standIn('Litecoin');
    const wrong = new ShardSocket(polled('coin Bitcoin'), blockbookSocketUrl(new URL(ltc.url)), 2000);
    await expect(wrong.ready).rejects.toThrow('upstream shard socket: serves coin Litecoin');
    await until(async () => ltc.ws.open === 0, 'closed');
    expect(wrong.live).toBe(false);
    ltc.ws.refuse = true;
    await expect(new ShardSocket(polled('coin Litecoin'), blockbookSocketUrl(new URL(ltc.url)), 2000).ready).rejects.toThrow('upstream shard socket: HTTP 503');
  });

  it('is dropped, and its user told, once its peer answers no ping for an interval', async () => {
    // A peer that answers getInfo and then nothing, not even the WebSocket's pings (a connection gone silent).
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong: false });
    await new Promise((r) => wss.once('listening', r));
    wss.on('connection', (ws) => ws.on('message', (d: Buffer) => ws.send(JSON.stringify({ id: JSON.parse(d.toString()).id, data: { name: 'Bitcoin' } }))));
    try {
      const s = new ShardSocket(polled('coin Bitcoin'), `ws://127.0.0.1:${(wss.address() as { port: number }).port}/websocket`, 2000, 50);
      await s.ready;
      let down = false;
      s.attach({ message: () => {}, down: () => (down = true) });
      await until(async () => down, 'dropped for its unanswered ping', 10_000);
      expect(s.live).toBe(false);
    } finally {
      for (const c of wss.clients) c.terminate();
      wss.close();
    }
  });
});
