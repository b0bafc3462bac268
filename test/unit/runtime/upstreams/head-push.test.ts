// Issue 46: a head an upstream's socket pushes is a report to the chain view
// under the polls' rules (ChainView.pushed), and an upstream's socket URL is
// resolved at start without ever being echoed (head-sockets.ts socketUrl).
import { describe, expect, it } from 'vitest';
import { ChainView, type HeadPush } from '../../../../runtime/upstreams/chain-view.ts';
import type { PollReport } from '../../../../runtime/upstreams/upstream-view.ts';
import { socketUrl } from '../../../../runtime/upstreams/head-sockets.ts';
import type { RouteSpec, UpstreamSpec } from '../../../../runtime/types.ts';
import { Upstream } from '../../../../runtime/upstreams/upstream.ts';

const ROUTE = { path: 'eth', interface: 'evm-jsonrpc', maxLag: 10, limits: { timeoutMs: 1000 }, upstreams: [] } as unknown as RouteSpec;
const SPEC = { name: 'eth#0', url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec;

function setup(n = 1) {
  const ups = Array.from({ length: n }, (_, i) => {
    const u = new Upstream({ ...SPEC, name: `eth#${i}` }, ROUTE);
    u.state = 'up';
    return u;
  });
  const view = new ChainView(ups, 'all');
  return { ups, view, v: ups[0]!.view };
}

const poll = (over: Partial<PollReport> = {}): PollReport => ({ identity: 'chainId 1', own: true, genesis: '0xGEN', number: 100, hash: '0xh100', finalized: 36, safe: 68, canonical: [], ...over });
const push = (over: Partial<HeadPush> = {}): HeadPush => ({ identity: 'chainId 1', genesis: '0xgen', number: 101, hash: '0xh101', ...over });

describe('ChainView.pushed: a socket head is a report under the polls rules', () => {
  it('moves the head, the epoch and the served tip at once', () => {
    const { ups, view, v } = setup(2);
    const tips: number[] = [];
    view.listen({ epoch: () => undefined, reset: () => undefined, canonical: () => undefined, tip: () => tips.push(view.tip) });
    for (const u of ups) view.report(u.view, poll());
    const epoch = view.epoch;
    expect(view.pushed(v, push())).toBe(true);
    // One of two upstreams at 101: the chain's head moves; the served tip (every current upstream has it) waits for the other.
    expect([view.number, view.hash, view.epoch > epoch, view.tip]).toEqual([101, '0xh101', true, 100]);
    expect(view.pushed(ups[1]!.view, push())).toBe(true);
    expect(view.tip).toBe(101);
    expect(tips).toEqual([100, 101]);
    expect(view.numberOf('0xh101')).toBe(101);
  });

  it('counts only for an upstream a poll verified, from a socket that serves what the poll found', () => {
    const { view, v } = setup();
    expect(view.pushed(v, push())).toBe(false); // no poll yet
    view.report(v, poll());
    expect(view.pushed(v, push({ identity: 'chainId 999' }))).toBe(false);
    expect(view.pushed(v, push({ genesis: '0xother' }))).toBe(false);
    expect(view.pushed(v, push({ genesis: '' }))).toBe(false); // the socket has not said its genesis yet
    expect(view.number).toBe(100);
    // A failed poll (a timeout) says nothing of which chain: the socket's heads go on counting.
    view.report(v, null);
    expect(view.pushed(v, push())).toBe(true);
    expect(view.number).toBe(101);
    // Found on another chain (its head forgotten): what its socket pushes is not taken, whatever it says it serves.
    v.state = 'wrong_chain'; // as the poller marks it
    view.report(v, poll({ own: false, identity: 'chainId 999' }));
    expect(view.pushed(v, push({ identity: 'chainId 999' }))).toBe(false);
    expect(view.number).toBe(-1);
  });

  it('a poll sent before a push does not take the head back; one sent after it does, and a higher one always counts', () => {
    const { view, v } = setup();
    view.report(v, poll(), false, Date.now() - 10);
    const sent = Date.now() - 5;
    view.pushed(v, push({ number: 101, hash: '0xh101' }));
    view.report(v, poll({ number: 100, hash: '0xh100' }), false, sent);
    expect([view.number, view.hash]).toEqual([101, '0xh101']);
    view.report(v, poll({ number: 101, hash: '0xold' }), false, sent); // the same height, older: kept
    expect(view.hash).toBe('0xh101');
    view.report(v, poll({ number: 102, hash: '0xh102' }), false, sent);
    expect(view.number).toBe(102);
    view.report(v, poll({ number: 102, hash: '0xreorg' }), false, Date.now() + 1);
    expect(view.hash).toBe('0xreorg');
  });

  it('a reorg pushed (the same height, another hash) ends the epoch; the served tip never goes back', () => {
    const { view, v } = setup();
    view.report(v, poll());
    view.pushed(v, push());
    const epoch = view.epoch;
    view.pushed(v, push({ hash: '0xh101b' }));
    expect([view.number, view.hash, view.epoch > epoch, view.hashAt(101)]).toEqual([101, '0xh101b', true, '0xh101b']);
    view.pushed(v, push({ number: 99, hash: '0xh99' }));
    expect([view.number, view.tip]).toEqual([99, 101]);
  });
});

describe('socketUrl: the upstream ws URL, never echoed', () => {
  const env = (name: string, value: string) => {
    process.env[name] = value;
    return { ...SPEC, ws: { parts: [{ env: name }] } } as unknown as UpstreamSpec;
  };

  it("takes the manifest's ws: or wss:, else the kind's default, else none", () => {
    expect(socketUrl(env('HP_WS', 'wss://mainnet.example/ws/v3/KEY'), ROUTE, null)).toBe('wss://mainnet.example/ws/v3/KEY');
    expect(socketUrl(SPEC, ROUTE, null)).toBeNull();
    expect(socketUrl(SPEC, ROUTE, (base) => `ws://${base.host}/websocket`)).toBe('ws://127.0.0.1:9/websocket');
  });

  it('refuses another scheme or no URL at start, naming the upstream and not the URL', () => {
    expect(() => socketUrl(env('HP_WS', 'https://mainnet.example/v3/SECRETKEY'), ROUTE, null)).toThrow(/^chain eth \(eth#0\): upstream ws must be ws: or wss:$/);
    expect(() => socketUrl(env('HP_WS', 'SECRETKEY not a url'), ROUTE, null)).toThrow(/^chain eth \(eth#0\): upstream ws is not a valid URL$/);
  });
});
