// The Blockbook methods sent on the upstreams' own sockets (socket-relay.ts),
// against sockets that record what is sent and answer as told: the gateway's
// ids, an upstream at the served tip first, one retry on another upstream
// when the socket is lost or silent, and the error when none answers.
import { describe, expect, it } from 'vitest';
import { UpstreamCalls } from '../../../../runtime/kinds/blockbook/socket-relay.ts';
import type { ChainView } from '../../../../runtime/upstreams/chain-view.ts';
import type { SocketUser, UpstreamSocket } from '../../../../runtime/upstreams/upstream-socket.ts';
import type { Upstream } from '../../../../runtime/upstreams/upstream.ts';
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

/** An upstream as the calls see it: its socket, view and counters (a real tally; its breaker's marks counted). */
function upstream(head: number): { u: Upstream; s: FakeSocket; marks: { ok: number; failed: number } } {
  const s = new FakeSocket();
  const marks = { ok: 0, failed: 0 };
  const u = { usable: true, view: { head }, socket: s, tally: new UpstreamTally(), score: null, markSuccess: () => void marks.ok++, markFailure: () => void marks.failed++ };
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
});
