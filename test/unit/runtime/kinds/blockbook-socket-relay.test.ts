// The Blockbook methods sent on the upstreams' own sockets (socket-relay.ts),
// against sockets that record what is sent and answer as told: the gateway's
// ids, an upstream at the served tip first, one retry on another upstream
// when the socket is lost or silent, and the error when none answers; each
// exchange reported to the upstream's tally and breaker, and an upstream the
// pool's score leaves out left by these calls too. getMempoolFilters' sockets
// of their own (socket-own.ts) against a real WebSocket server on loopback
// that never answers: the cap, and the error of a call that found no place.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { MAX_OWN_SOCKETS } from '../../../../runtime/kinds/blockbook/socket-own.ts';
import { rank, UpstreamScore, type Scored } from '../../../../runtime/upstreams/upstream-score.ts';
import { UpstreamCalls } from '../../../../runtime/kinds/blockbook/socket-relay.ts';
import type { ChainView } from '../../../../runtime/upstreams/chain-view.ts';
import type { SocketUser, UpstreamSocket } from '../../../../runtime/upstreams/upstream-socket.ts';
import type { Upstream } from '../../../../runtime/upstreams/upstream.ts';
import { Budget } from '../../../../runtime/upstreams/upstream-budget.ts';
import { UpstreamTally } from '../../../../runtime/upstreams/tally.ts';
import type { BlockbookRouteSpec } from '../../../../runtime/types.ts';

class FakeSocket implements UpstreamSocket {
  live = true;
  readonly sent: { id: string; method: string; params: unknown }[] = [];
  readonly users = new Set<SocketUser>();
  attach(u: SocketUser): void {
    this.users.add(u);
  }
  detach(u: SocketUser): void {
    this.users.delete(u);
  }
  send(text: string): boolean {
    if (!this.live) return false;
    this.sent.push(JSON.parse(text));
    return true;
  }
  /** The node's answer to the last message sent. */
  answer(data: unknown): void {
    for (const u of this.users) u.message({ id: this.sent.at(-1)!.id, data });
  }
  down(): void {
    this.live = false;
    for (const u of this.users) u.down();
  }
}

let made = 0;
/** An upstream as the calls see it: its socket, view and counters (a real tally; its breaker's marks counted). */
function upstream(head: number): { u: Upstream; s: FakeSocket; marks: { ok: number; failed: number } } {
  const s = new FakeSocket();
  const marks = { ok: 0, failed: 0 };
  const u = { name: `u${head}-${++made}`, weight: 1, share: 1, serving: true, usable: true, headers: {}, view: { head, throttledTotal: 0 }, socket: s, tally: new UpstreamTally(), score: null, markSuccess: () => void marks.ok++, markFailure: () => void marks.failed++ };
  return { u: u as unknown as Upstream, s, marks };
}

/** A chain's route with no upstream socket URL (nothing here opens a socket of its own). */
const ROUTE = { path: 'btc', upstreams: [] } as unknown as BlockbookRouteSpec;

/** Resolves once `s` was sent `n` messages; rejects if it is not within 5 s. */
async function sentTo(s: FakeSocket, n: number): Promise<void> {
  const end = Date.now() + 5000;
  while (s.sent.length < n) {
    if (Date.now() > end) throw new Error(`${n} messages were not sent`);
    await new Promise((r) => setImmediate(r));
  }
}

/** Resolves once `cond` holds; rejects naming `what` if it does not within 5 s. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`not within 5 s: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('UpstreamCalls', () => {
  it("sends under the gateway's own ids, on an upstream at the served tip, and resolves with the answer's data", async () => {
    const behind = upstream(99);
    const atTip = upstream(100);
    const calls = new UpstreamCalls(ROUTE, [behind.u, atTip.u], { tip: 100 } as ChainView, 10_000);
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const p = calls.call('longTermFeeRate', {});
      await sentTo(atTip.s, i + 1);
      ids.add(atTip.s.sent[i]!.id);
      atTip.s.answer({ feePerUnit: String(i), blocks: 1008 });
      expect(await p).toEqual({ feePerUnit: String(i), blocks: 1008 });
    }
    expect(ids.size).toBe(3);
    expect(behind.s.sent).toEqual([]);
  });

  it('sends a call once more on another upstream when its socket is lost, and fails when none is left', async () => {
    const a = upstream(100);
    const b = upstream(100);
    const calls = new UpstreamCalls(ROUTE, [a.u, b.u], { tip: 100 } as ChainView, 10_000);
    const p = calls.call('getBlockFilter', { blockHash: 'h' });
    const first = a.s.sent.length === 1 ? a : b;
    const other = first === a ? b : a;
    first.s.down();
    await sentTo(other.s, 1);
    expect(other.s.sent[0]).toMatchObject({ method: 'getBlockFilter', params: { blockHash: 'h' } });
    other.s.answer({ blockFilter: 'f' });
    expect(await p).toEqual({ blockFilter: 'f' });
    first.s.live = true;
    const q = calls.call('getBlockFilter', {});
    a.s.down();
    b.s.down();
    await expect(q).rejects.toThrow('getBlockFilter: the upstream did not answer');
  });

  it("gives up a silent upstream after timeoutMs and asks another; with none live, says so", async () => {
    const a = upstream(100);
    const b = upstream(100);
    const calls = new UpstreamCalls(ROUTE, [a.u, b.u], { tip: 100 } as ChainView, 50);
    const p = calls.call('getBlockFilter', {});
    const first = a.s.sent.length === 1 ? a : b;
    const other = first === a ? b : a;
    await sentTo(other.s, 1);
    other.s.answer({ entries: {} });
    expect(await p).toEqual({ entries: {} });
    // The silent one's late answer is dropped.
    first.s.answer({ late: true });
    a.s.live = false;
    b.s.live = false;
    await expect(calls.call('longTermFeeRate', {})).rejects.toThrow('longTermFeeRate: no upstream socket is live');
  });

  it("reports each exchange to the upstream's tally (latency, outcome) and breaker, as a forwarded attempt is", async () => {
    const a = upstream(100);
    const calls = new UpstreamCalls(ROUTE, [a.u], { tip: 100 } as ChainView, 50);
    const p = calls.call('longTermFeeRate', {});
    await sentTo(a.s, 1);
    setTimeout(() => a.s.answer({ feePerUnit: '1', blocks: 1008 }), 20);
    await p;
    expect({ ok: a.u.tally.ok, failed: a.u.tally.failed, marks: a.marks }).toEqual({ ok: 1, failed: 0, marks: { ok: 1, failed: 0 } });
    // Seconds, from the send to the answer.
    expect(a.u.tally.sum).toBeGreaterThanOrEqual(0.015);
    // Silent: a failed attempt after timeoutMs (none other to ask).
    await expect(calls.call('getBlockFilter', {})).rejects.toThrow('getBlockFilter: the upstream did not answer');
    expect({ ok: a.u.tally.ok, failed: a.u.tally.failed, marks: a.marks }).toEqual({ ok: 1, failed: 1, marks: { ok: 1, failed: 1 } });
  });

  it("takes each message from the upstream's rateLimit budget, and sends none once it has no room", async () => {
    const a = upstream(100);
    // Upstream.usable's rule: with a budget, usable only while it has room (upstream-budget.ts); 10/s holds 2.
    const budget = new Budget(10);
    Object.defineProperty(a.u, 'usable', { get: () => budget.ready() });
    Object.defineProperty(a.u, 'budget', { value: budget });
    const calls = new UpstreamCalls(ROUTE, [a.u], { tip: 100 } as ChainView, 10_000);
    for (let i = 0; i < 2; i++) {
      const p = calls.call('longTermFeeRate', {});
      await sentTo(a.s, i + 1);
      a.s.answer({ feePerUnit: '1', blocks: 1008 });
      await p;
    }
    expect(budget.sent).toBe(2);
    await expect(calls.call('longTermFeeRate', {})).rejects.toThrow(/no upstream socket is live/);
    expect(a.s.sent).toHaveLength(2);
  });

  it("leaves a slow upstream socket once the pool's score puts it out of the preferred band", async () => {
    const slow = upstream(100);
    const fast = upstream(100);
    for (const x of [slow, fast]) x.u.score = new UpstreamScore(x.u as unknown as Scored);
    const calls = new UpstreamCalls(ROUTE, [slow.u, fast.u], { tip: 100 } as ChainView, 10_000);
    /** One call, answered by whichever socket got it: the slow one 100 ms late. */
    const one = async (): Promise<void> => {
      const before = slow.s.sent.length;
      const p = calls.call('longTermFeeRate', {});
      if (slow.s.sent.length > before) setTimeout(() => slow.s.answer({}), 100);
      else fast.s.answer({});
      await p;
    };
    for (let i = 0; i < 6; i++) await one();
    expect(slow.s.sent.length).toBe(3);
    rank([slow.u, fast.u] as unknown as Scored[], 100);
    expect([slow.u.score!.preferred, fast.u.score!.preferred]).toEqual([false, true]);
    for (let i = 0; i < 6; i++) await one();
    expect(slow.s.sent.length).toBe(3);
    expect(fast.s.sent.length).toBe(9);
  });
});

/**
 * A node that takes WebSocket upgrades and then says nothing, not even to a
 * close (so a socket to it holds its place until dropped): the sockets open
 * now, the most at once, and the paths asked.
 */
async function silentNode(): Promise<{ port: number; open: () => number; peak: () => number; paths: string[]; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let peak = 0;
  const paths: string[] = [];
  const server = createServer();
  server.on('upgrade', (req, socket: Socket) => {
    sockets.add(socket);
    peak = Math.max(peak, sockets.size);
    paths.push(req.url ?? '');
    socket.on('close', () => sockets.delete(socket));
    // What it is sent is read and ignored; the client's end of the connection closes it (an upgraded socket is half-open otherwise).
    socket.resume();
    socket.on('end', () => socket.destroy());
    const accept = createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    open: () => sockets.size,
    peak: () => peak,
    paths,
    close: () => {
      for (const x of sockets) x.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('getMempoolFilters on sockets of its own', () => {
  it(`opens at most ${MAX_OWN_SOCKETS} to an upstream at once; a call that finds no place in time says so`, async () => {
    const node = await silentNode();
    onTestFinished(node.close);
    const a = upstream(100);
    const route = { path: 'btc', upstreams: [{ name: 'a', url: { parts: [`http://127.0.0.1:${node.port}/api`] }, headers: {} }] } as unknown as BlockbookRouteSpec;
    const calls = new UpstreamCalls(route, [a.u], { tip: 100 } as ChainView, 300);
    const results = await Promise.allSettled(Array.from({ length: MAX_OWN_SOCKETS + 1 }, (_, i) => calls.call('getMempoolFilters', { scriptType: 'taproot', fromTimestamp: i })));
    const messages = results.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'answered'));
    expect(messages).toEqual([...Array(MAX_OWN_SOCKETS).fill('getMempoolFilters: the upstream did not answer'), 'getMempoolFilters: no upstream had a socket free for it in time: ask again later']);
    expect(node.peak()).toBe(MAX_OWN_SOCKETS);
    // Beside the base, as the shared socket is; nothing of the shared socket's was used.
    expect(node.paths).toEqual(Array(MAX_OWN_SOCKETS).fill('/websocket'));
    expect(a.s.sent).toEqual([]);
    // Waiting for a place is no exchange with the upstream: only the silent ones count against it.
    expect(a.u.tally.failed).toBe(MAX_OWN_SOCKETS);
    // A socket that does not finish its closing handshake is dropped: its place comes free.
    await until(() => node.open() === 0, 'the silent sockets dropped');
  });
});
