// The cache core and the chain view it judges by, without HTTP: the rules of
// each interface as data, epochs, flights, eviction, namespacing and resets.
// Upstreams are real Upstream objects (nothing is ever sent to them); what a
// poll would report is given to the chain's view directly, as the poller does.
import { describe, expect, it, vi } from 'vitest';
import { ChainView, type ResetReason } from '../../../../runtime/upstreams/chain-view.ts';
import type { PollReport } from '../../../../runtime/upstreams/upstream-view.ts';
import { CacheCore, type FlightLanding } from '../../../../runtime/cache/core.ts';
import { BLOCKBOOK_RULES, ROSETTA_RULES } from '../../../../runtime/cache/doc-rules.ts';
import { CacheStore } from '../../../../runtime/cache/store.ts';
import type { SharedTier } from '../../../../runtime/cache/shared.ts';
import type { ClientTarget } from '../../../../runtime/exchange.ts';
import { DocCall } from '../../../../runtime/kinds/doc-call.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import type { ForwardRequest, Transport } from '../../../../runtime/dispatch.ts';
import type { RouteSpec, UpstreamSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';

const ROUTE = { path: 'eth', interface: 'evm-jsonrpc', maxLag: 10, limits: { timeoutMs: 1000 } } as unknown as RouteSpec;

function upstream(name: string): Upstream {
  const spec = { name, url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec;
  const u = new Upstream(spec, ROUTE);
  u.state = 'up';
  return u;
}

function report(over: Partial<PollReport>): PollReport {
  return { identity: 'chainId 1', own: true, genesis: '0xgen', number: 100, hash: '0xh100', finalized: 36, safe: 68, canonical: [], ...over };
}

function setup(n = 2, maxBytes = 1 << 20) {
  const ups = Array.from({ length: n }, (_, i) => upstream(`u${i}`));
  const group = new UpstreamGroup(ups);
  const view = new ChainView(ups);
  const log = { warn: vi.fn(), info: vi.fn(), error: vi.fn() };
  const puts: string[] = [];
  const shared = { isUp: true, put: (key: string) => puts.push(key), get: async () => null } as unknown as SharedTier;
  const core = new CacheCore('eth', group, new CacheStore(maxBytes), view, shared, log as unknown as Logger, () => ({ cancel: () => undefined }));
  return { ups, group, view, core, log, puts };
}

const TRANSPORT = { method: 'POST', path: () => '/', headers: [], body: '{}', idempotent: true, retries: 0, maxBuffer: 1024, deadline: performance.now() + 1000, emptyOk: false, classify: () => 'stream' } as Transport;
const REQUEST: ForwardRequest = { calls: { one: new DocCall('block', null, true) }, transport: TRANSPORT };
const NOWHERE: FlightLanding<null> = { landed: () => undefined };
const b = (s: string) => Buffer.from(s);

describe('chain view: epochs', () => {
  it('ends the epoch on every change of the head: up, down, and the same height with another hash', () => {
    const { ups, view } = setup(1);
    const epochs: number[] = [];
    const record = () => epochs.push(view.epoch);
    view.report(ups[0]!.view, report({}));
    record();
    view.report(ups[0]!.view, report({})); // nothing changed
    record();
    view.report(ups[0]!.view, report({ number: 101, hash: '0xh101' }));
    record();
    view.report(ups[0]!.view, report({ number: 101, hash: '0xother' }));
    record();
    view.report(ups[0]!.view, report({ number: 99, hash: '0xh99' }));
    record();
    expect(epochs).toEqual([1, 1, 2, 3, 4]);
    expect(view.number).toBe(99);
  });

  it('ends the epoch when the finalized or safe block moves while the head stands still', () => {
    const { ups, view } = setup(1);
    view.report(ups[0]!.view, report({}));
    const e = view.epoch;
    view.report(ups[0]!.view, report({ safe: 70 }));
    expect(view.epoch).toBe(e + 1);
    view.report(ups[0]!.view, report({ safe: 70, finalized: 40 }));
    expect(view.epoch).toBe(e + 2);
  });

  it('moves as soon as one upstream reports a newer head: a slow one holds up no one', () => {
    const { ups, view } = setup(2);
    view.report(ups[0]!.view, report({}));
    view.report(ups[1]!.view, report({}));
    const e = view.epoch;
    // u1's poll has not come back; u0's report alone moves the chain.
    view.report(ups[0]!.view, report({ number: 101, hash: '0xh101' }));
    expect(view.epoch).toBe(e + 1);
    expect(view.number).toBe(101);
    expect(view.atHead(ups[0]!.view, view.seq)).toBe(true);
    expect(view.atHead(ups[1]!.view, view.seq)).toBe(false);
  });

  it('takes the lowest finalized block of the usable upstreams, and no head from one serving another chain', () => {
    const { ups, view } = setup(2);
    view.report(ups[0]!.view, report({ finalized: 40 }));
    view.report(ups[1]!.view, report({ finalized: 30 }));
    expect(view.finalized).toBe(30);
    expect(view.isFinal(30)).toBe(true);
    expect(view.isFinal(31)).toBe(false);
    ups[1]!.state = 'wrong_chain';
    view.report(ups[1]!.view, report({ identity: 'chainId 5', own: false, number: 5000, hash: '0xc5' }));
    expect(view.number).toBe(100);
    expect(view.finalized).toBe(40);
  });
});

describe('chain view: eth_blockNumber floor and resets', () => {
  it('holds the floor against an upstream that lags or dips, and every one coming back behind; a reset ends it', () => {
    const { ups, view } = setup(2);
    view.report(ups[0]!.view, report({ number: 110, hash: '0xa', finalized: 46 }));
    view.report(ups[1]!.view, report({ number: 108, hash: '0xb', finalized: 46 }));
    expect(view.blockNumber(110)).toBe(-1); // passed on as it is
    expect(view.blockNumber(108)).toBe(110); // a lagging node's answer: the floor
    // Both nodes come back behind, their finalized blocks where they were: the floor holds (issue 37, defect 3).
    view.report(ups[0]!.view, report({ number: 107, hash: '0xr', finalized: 46 }));
    view.report(ups[1]!.view, report({ number: 107, hash: '0xr', finalized: 46 }));
    expect(view.blockNumber(107)).toBe(110);
    // The chain itself went back below a block it called final: a reset, and the floor with it.
    view.report(ups[0]!.view, report({ number: 10, hash: '0xr', finalized: 0 }));
    view.report(ups[1]!.view, report({ number: 10, hash: '0xr', finalized: 0 }));
    expect(view.blockNumber(10)).toBe(-1);
  });

  it('resets when an upstream goes back below its finalized block, or when its identity or genesis changes', () => {
    const { ups, view } = setup(1);
    const reasons: ResetReason[] = [];
    view.listen({ epoch: () => undefined, reset: (r) => reasons.push(r), canonical: () => undefined });
    view.report(ups[0]!.view, report({ finalized: 46, number: 110, hash: '0x110' }));
    view.report(ups[0]!.view, report({ finalized: 0, number: 10, hash: '0x10' }));
    view.report(ups[0]!.view, report({ finalized: 0, number: 10, hash: '0x10', genesis: '0xother' }));
    view.report(ups[0]!.view, report({ identity: 'chainId 5', own: false }));
    expect(reasons).toEqual(['finalized_backwards', 'identity', 'identity']);
    expect(view.resets).toBe(3);
  });

  it('one upstream of two going back below its finalized block is behind, not a reset: out of the tip, finality and traffic until it is back (issue 43)', () => {
    const { ups, view } = setup(2);
    const reasons: ResetReason[] = [];
    view.listen({ epoch: () => undefined, reset: (r) => reasons.push(r), canonical: () => undefined });
    view.report(ups[0]!.view, report({ number: 150, hash: '0x150', finalized: 86 }));
    view.report(ups[1]!.view, report({ number: 150, hash: '0x150', finalized: 86 }));
    expect(view.blockNumber(150)).toBe(-1);
    view.report(ups[0]!.view, report({ number: 149, hash: '0x149', finalized: 85 }));
    expect(reasons).toEqual([]);
    expect(ups[0]!.view.finalBehind).toBe(86);
    expect([ups[0]!.serving, ups[0]!.usable, ups[1]!.usable]).toEqual([false, false, true]);
    expect([view.tip, view.finalized, view.blockNumber(150)]).toEqual([150, 86, -1]);
    // Going further back keeps the block it must reach; back there, it counts again.
    view.report(ups[0]!.view, report({ number: 148, hash: '0x148', finalized: 84 }));
    view.report(ups[0]!.view, report({ number: 149, hash: '0x149', finalized: 85 }));
    expect(ups[0]!.view.finalBehind).toBe(86);
    view.report(ups[0]!.view, report({ number: 150, hash: '0x150', finalized: 86 }));
    expect([ups[0]!.view.finalBehind, ups[0]!.usable]).toEqual([-1, true]);
    expect(reasons).toEqual([]);
  });

  it('the finalized block going back at more than half of the usable upstreams, or at the only usable one, is a reset (issue 43)', () => {
    const three = setup(3);
    const reasons: ResetReason[] = [];
    three.view.listen({ epoch: () => undefined, reset: (r) => reasons.push(r), canonical: () => undefined });
    for (const u of three.ups) three.view.report(u.view, report({ number: 150, hash: '0x150', finalized: 86 }));
    three.view.report(three.ups[0]!.view, report({ number: 10, hash: '0x10', finalized: 0 }));
    expect(reasons).toEqual([]);
    three.view.report(three.ups[1]!.view, report({ number: 10, hash: '0x10', finalized: 0 }));
    expect(reasons).toEqual(['finalized_backwards']);
    expect(three.ups.map((u) => u.view.finalBehind)).toEqual([-1, -1, -1]);
    // The third, on the old history until its next poll, is judged afresh: its report of the reset chain is no second reset.
    three.view.report(three.ups[2]!.view, report({ number: 10, hash: '0x10', finalized: 0 }));
    expect(reasons).toEqual(['finalized_backwards']);
    expect([three.view.tip, three.ups[2]!.usable]).toEqual([10, true]);

    // Two upstreams, one of them down: the other is the only usable one.
    const two = setup(2);
    const more: ResetReason[] = [];
    two.view.listen({ epoch: () => undefined, reset: (r) => more.push(r), canonical: () => undefined });
    for (const u of two.ups) two.view.report(u.view, report({ number: 150, hash: '0x150', finalized: 86 }));
    two.ups[1]!.state = 'down';
    two.view.report(two.ups[0]!.view, report({ number: 149, hash: '0x149', finalized: 85 }));
    expect(more).toEqual(['finalized_backwards']);
    // Behind while the other was up; the other goes down: the behind one is the only usable one, and its next report resets.
    two.ups[1]!.state = 'up';
    for (const u of two.ups) two.view.report(u.view, report({ number: 150, hash: '0x150', finalized: 86 }));
    two.view.report(two.ups[0]!.view, report({ number: 149, hash: '0x149', finalized: 85 }));
    expect(more).toEqual(['finalized_backwards']);
    two.ups[1]!.state = 'down';
    two.view.report(two.ups[0]!.view, report({ number: 149, hash: '0x149', finalized: 85 }));
    expect(more).toEqual(['finalized_backwards', 'finalized_backwards']);
    expect(two.ups[0]!.usable).toBe(true);
  });

  it('names the namespace by identity and genesis, and none while the usable upstreams disagree', () => {
    const { ups, view } = setup(2);
    view.report(ups[0]!.view, report({}));
    view.report(ups[1]!.view, report({}));
    expect(view.namespace).toBe('chainId 1 0xgen');
    view.report(ups[1]!.view, report({ genesis: '0xreset' }));
    expect(view.namespace).toBe('');
  });
});

describe('cache core', () => {
  it('lets a call join a flight only if it started in the current epoch; a flight that ends removes only itself', () => {
    const { ups, view, core } = setup(1);
    view.report(ups[0]!.view, report({}));
    const old = core.open('k', null, NOWHERE, REQUEST);
    expect(core.joinable('k')).toBe(old);
    view.report(ups[0]!.view, report({ number: 101, hash: '0xh101' }));
    expect(core.joinable('k')).toBeUndefined();
    const fresh = core.open('k', null, NOWHERE, REQUEST);
    core.close(old);
    expect(core.joinable('k')).toBe(fresh);
    core.close(fresh);
    expect(core.joinable('k')).toBeUndefined();
  });

  it('keeps head-bound answers for their epoch only, and only from an upstream at the head since before the call', () => {
    const { ups, view, core } = setup(2);
    view.report(ups[0]!.view, report({}));
    view.report(ups[1]!.view, report({ number: 99, hash: '0xh99' }));
    const f = core.open('k', null, NOWHERE, REQUEST);
    expect(core.current(f, ups[0]!)).toBe(true);
    expect(core.current(f, ups[1]!)).toBe(false); // behind the head
    core.keepForHead('k', b('{"id":'), b(',"result":"0x1"}'), -1);
    expect(core.hit('k')).toBeDefined();
    view.report(ups[0]!.view, report({ number: 101, hash: '0xh101' }));
    expect(core.hit('k')).toBeUndefined();
    expect(core.current(f, ups[0]!)).toBe(false); // sent under the old epoch
  });

  it('trusts an answer only if no identity check failed between sending and landing', () => {
    const { ups, view, core } = setup(2);
    view.report(ups[0]!.view, report({}));
    view.report(ups[1]!.view, report({}));
    const f = core.open('k', null, NOWHERE, REQUEST);
    expect(core.trusted(f, ups[0]!)).toBe(true);
    ups[1]!.state = 'wrong_chain';
    view.report(ups[1]!.view, report({ identity: 'chainId 5', own: false }));
    expect(core.trusted(f, ups[0]!)).toBe(false);
  });

  it('keeps forever entries in the namespace, drops them at a reset (logged once as cache_reset, counted), and keeps nothing forever without one', () => {
    const { ups, view, core, log } = setup(1);
    view.report(ups[0]!.view, report({ finalized: 46, number: 110, hash: '0x110' }));
    core.keepForever('final', b('{"id":'), b(',"result":"0xb"}'), -1, null);
    core.keepForHead('head', b('{"id":'), b(',"result":"0xc"}'), -1);
    expect(core.hit('final')?.ns).toBe('chainId 1 0xgen');
    view.report(ups[0]!.view, report({ finalized: 0, number: 10, hash: '0x10' }));
    expect(core.hit('final')).toBeUndefined();
    expect(core.hit('head')).toBeUndefined();
    expect(core.stats.resets).toEqual({ identity: 0, finalized_backwards: 1 });
    expect(log.warn).toHaveBeenCalledTimes(1);
    expect(log.warn.mock.calls[0]![0]).toMatchObject({ event: 'cache_reset', chain: 'eth', reason: 'finalized_backwards' });
    // Upstreams that disagree on the genesis: no namespace, nothing kept forever.
    const two = setup(2);
    two.view.report(two.ups[0]!.view, report({}));
    two.view.report(two.ups[1]!.view, report({ genesis: '0xelse' }));
    two.core.keepForever('final', b('a'), b('b'), -1, null);
    expect(two.core.hit('final')).toBeUndefined();
  });

  it('shares a forever answer with Redis only after its upstream passes a poll begun after the answer came', () => {
    const { ups, view, core, puts } = setup(1);
    const u = ups[0]!;
    view.report(u.view, report({}));
    core.keepForever('final', b('{"id":'), b(',"result":"0xb"}'), -1, u);
    expect(puts).toHaveLength(0);
    // A poll that was already under way when the answer came does not count.
    u.view.settled(u.view.begun, true);
    expect(puts).toHaveLength(0);
    const failing = ++u.view.begun;
    u.view.settled(failing, false);
    expect(puts).toHaveLength(0); // dropped: that poll found another chain or no answer
    core.keepForever('final2', b('{"id":'), b(',"result":"0xc"}'), -1, u);
    const next = ++u.view.begun;
    u.view.settled(next, true);
    expect(puts).toHaveLength(1);
  });

  it('copies what it keeps out of the buffer it came in, and evicts to stay within maxBytes', () => {
    const { ups, view, core } = setup(1, 1 << 20);
    view.report(ups[0]!.view, report({}));
    const slab = Buffer.from('x'.repeat(8192)); // as a socket's read: many answers in one buffer
    const prefix = slab.subarray(10, 40);
    const suffix = slab.subarray(50, 60);
    const e = core.keepForHead('k', prefix, suffix, -1)!;
    expect(e.prefix.buffer).not.toBe(slab.buffer);
    expect(e.prefix.buffer.byteLength).toBe(40);
    expect(e.prefix.equals(prefix) && e.suffix.equals(suffix)).toBe(true);
    for (let i = 0; i < 20_000; i++) core.keepForHead(`k${i}`, b('p'.repeat(100)), b('s'), -1);
    expect(core.stats.bytes).toBeLessThanOrEqual(1 << 20);
    expect(core.stats.evictions).toBeGreaterThan(0);
  });
});

describe('the rules of Rosetta and Blockbook, as data', () => {
  const x = (headers: Record<string, string> = {}) => ({ req: { headers } }) as unknown as ClientTarget;
  const post = (body: string, idempotent = true): Transport => ({ ...TRANSPORT, body, idempotent });
  const get = (): Transport => ({ ...TRANSPORT, method: 'GET', body: null });
  const doc = (endpoint: string, read = true, tail?: string) => new DocCall(endpoint, null, read, tail);

  it('Rosetta: reads take part, construction does not; a block by number is final-able, the tip is head-bound', () => {
    expect(ROSETTA_RULES.key(x(), post('{"b":1}'), doc('block'))).toBe('block\n\n{"b":1}');
    expect(ROSETTA_RULES.key(x(), post('{}', false), doc('construction/submit', false))).toBeNull();
    expect(ROSETTA_RULES.mayLast('block')).toBe(true);
    expect(ROSETTA_RULES.mayLast('account/balance')).toBe(false);
    const block = (index: number, hash: string) => b(JSON.stringify({ block: { block_identifier: { index, hash } } }));
    expect(ROSETTA_RULES.keep('block', '{"block_identifier":{"index":5}}', block(5, 'h5'), {})).toEqual({ kind: 'block', number: 5, hash: 'h5', byNumber: true });
    expect(ROSETTA_RULES.keep('block', '{"block_identifier":{"hash":"h5"}}', block(5, 'h5'), {})).toEqual({ kind: 'block', number: 5, hash: 'h5', byNumber: false });
    expect(ROSETTA_RULES.keep('block', '{}', block(9, 'h9'), {})).toEqual({ kind: 'head' });
    expect(ROSETTA_RULES.keep('block', '{"block_identifier":{"index":6}}', block(5, 'h5'), {})).toBeNull();
    expect(ROSETTA_RULES.keep('account/balance', '{}', b('{}'), {})).toBeNull();
  });

  it('Blockbook: plain reads take part (never sendtx, never conditional); blocks and confirmed transactions until the next block', () => {
    expect(BLOCKBOOK_RULES.key(x({ accept: 'application/json' }), get(), doc('block', true, '/block/5'))).toBe('/block/5\n\napplication/json\n');
    expect(BLOCKBOOK_RULES.key(x(), get(), doc('sendtx', false, '/sendtx/00'))).toBeNull();
    expect(BLOCKBOOK_RULES.key(x({ 'if-none-match': '"e"' }), get(), doc('block', true, '/block/5'))).toBeNull();
    expect(BLOCKBOOK_RULES.mayLast('block')).toBe(false);
    expect(BLOCKBOOK_RULES.keep('block', '', b('{}'), {})).toEqual({ kind: 'head' });
    expect(BLOCKBOOK_RULES.keep('tx', '', b('{"confirmations":2}'), {})).toEqual({ kind: 'head' });
    expect(BLOCKBOOK_RULES.keep('tx', '', b('{"confirmations":0}'), {})).toBeNull();
    expect(BLOCKBOOK_RULES.keep('address', '', b('{}'), {})).toBeNull();
  });
});
