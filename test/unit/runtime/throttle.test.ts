// The throttle table (runtime/upstreams/throttle.ts): the providers' texts are throttles,
// a node's own errors and a range limit are not; Retry-After in both forms;
// the cooldown doubles with each throttle in a row and an answer ends the run.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { allThrottled, answerThrottled, blockbookThrottled, mayBeError, retryAfterMs, saysThrottled, throttled, THROTTLE_TEXTS, COOLDOWN_MAX_MS } from '../../../runtime/upstreams/throttle.ts';
import { Upstream, UpstreamGroup } from '../../../runtime/upstreams/upstream.ts';
import type { RouteSpec, UpstreamSpec } from '../../../runtime/types.ts';

const rpcError = (code: number, message: string) => Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code, message } }));

describe('mayBeError: which first chunks of a streamed answer are held to be judged', () => {
  it('an error answer, whatever the order of its keys; not an answer whose result comes first', () => {
    const held = ['{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"project ID request rate exceeded"}}', '{"jsonrpc":"2.0","error":{"code":-32005,"message":"limit exceeded"},"id":"a"}', '{"error":{"code":429,"message":"x"}}'];
    for (const t of held) expect(mayBeError(Buffer.from(t)), t).toBe(true);
    const streamed = ['{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}', '{"jsonrpc":"2.0","result":{"error":"a field of the result"},"id":1}', '{"jsonrpc":"2.0","id":1,"result":null}', '', '{"error'];
    for (const t of streamed) expect(mayBeError(Buffer.from(t)), t).toBe(false);
  });
});

describe('throttle texts', () => {
  it('the providers\' answers, as they write them, are throttles', () => {
    const texts: [number, string][] = [
      [-32005, 'daily request count exceeded, request rate limited'],
      [-32005, 'project ID request rate exceeded'],
      [429, 'Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message.'],
      [-32000, 'Your app has exceeded its throughput limit'],
      [-32007, '15/second request limit reached - reduce calls per second or upgrade your account at quicknode.com'],
      [-32600, 'Monthly capacity limit exceeded. Visit https://dashboard.alchemyapi.io/settings/billing to upgrade your scaling policy for continued service.'],
      [-32000, 'Too Many Requests'],
      [-32000, 'rate limit exceeded'],
      [-32005, 'limit exceeded'],
    ];
    for (const [code, message] of texts) expect(answerThrottled(rpcError(code, message)), message).toBe(true);
  });

  it('every entry of the table matches a text of its own', () => {
    for (const t of THROTTLE_TEXTS) expect(t.source.length).toBeGreaterThan(10);
    expect(saysThrottled(undefined, 'request rate exceeded')).toBe(true);
    expect(saysThrottled(undefined, 'backoff_seconds: 30')).toBe(true);
  });

  it('a node\'s own errors, a result or range limit and an answer are not', () => {
    for (const [code, message] of [
      [-32000, 'execution reverted'],
      [-32000, 'missing trie node 1234 (path )'],
      [-32000, 'exceeds block gas limit'],
      [-32005, 'query returned more than 10000 results'],
      [-32602, 'exceed maximum block range: 100'],
      [-32000, 'Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range'],
    ] as const)
      expect(answerThrottled(rpcError(code, message)), message).toBe(false);
    expect(answerThrottled(Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1"}'))).toBe(false);
    expect(answerThrottled(Buffer.from('not json "error"'))).toBe(false);
  });

  it('Blockbook: {"error": ...} with a throttle text', () => {
    expect(blockbookThrottled(Buffer.from('{"error":"Too many requests"}'))).toBe(true);
    expect(blockbookThrottled(Buffer.from('{"error":"Block not found"}'))).toBe(false);
  });
});

describe('Retry-After', () => {
  it('seconds, an HTTP date, or nothing', () => {
    const now = Date.parse('2026-11-28T03:00:00Z');
    expect(retryAfterMs({ 'retry-after': '30' }, now)).toBe(30_000);
    expect(retryAfterMs({ 'retry-after': 'Sat, 28 Nov 2026 03:00:05 GMT' }, now)).toBe(5000);
    expect(retryAfterMs({ 'retry-after': 'Sat, 28 Nov 2026 02:59:00 GMT' }, now)).toBe(0);
    expect(retryAfterMs({}, now)).toBeNull();
    expect(retryAfterMs({ 'retry-after': 'soon' }, now)).toBeNull();
  });
});

describe('cooldown', () => {
  const route = { path: 'c', limits: { timeoutMs: 1000 } } as unknown as RouteSpec;
  const spec = { name: 'c#0', url: { parts: ['http://127.0.0.1:9'] }, role: 'primary', weight: 1, archive: false, headers: {}, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec;

  afterEach(() => vi.useRealTimers());

  it('1 s, doubling with each throttle in a row up to 60 s; not usable meanwhile, usable after; an answer ends the run', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.parse('2026-11-28T03:00:00Z'));
    const u = new Upstream(spec, route);
    u.state = 'up';
    const lengths: number[] = [];
    for (let i = 0; i < 8; i++) {
      throttled(u, {}, Date.now());
      lengths.push(u.view.throttledUntil - Date.now());
      expect(u.usable).toBe(false);
      expect(u.serving).toBe(true);
      // Its cooldown over: usable again (the clock moves only here).
      vi.setSystemTime(u.view.throttledUntil);
      expect(u.usable).toBe(true);
      expect(u.view.throttledUntil).toBe(0);
    }
    expect(lengths).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, COOLDOWN_MAX_MS, COOLDOWN_MAX_MS]);
    expect(u.view.throttleRun).toBe(8);
    u.markSuccess();
    expect(u.view.throttleRun).toBe(0);
    // A throttle of a call sent before the run's cooldown began is the same burst: no repeat.
    throttled(u, {}, Date.now());
    throttled(u, {}, 0);
    expect(u.view.throttleRun).toBe(1);
    expect(u.view.throttledTotal).toBe(10);
    // With a Retry-After, its time.
    throttled(u, { 'retry-after': '30' }, Date.now());
    expect(u.view.throttledUntil - Date.now()).toBe(30_000);
    await u.pool.close();
  });
});

describe('every upstream throttled, with one throttled before its first good poll', () => {
  const route = { path: 'q', limits: { timeoutMs: 1000 } } as unknown as RouteSpec;
  const spec = (i: number) => ({ name: `q#${i}`, url: { parts: ['http://127.0.0.1:9'] }, role: 'primary', weight: 1, archive: false, headers: {}, connections: 1, idleTimeoutMs: 1000 }) as unknown as UpstreamSpec;

  it('counts it for a call routed by block although it has no head yet: "throttled", not null (no healthy upstream)', async () => {
    const [a, b] = [new Upstream(spec(0), route), new Upstream(spec(1), route)];
    // a: verified by its first good poll, at block 100; b: its polls so far throttled, so no head and no identity yet.
    a.state = 'up';
    a.view.head = 100;
    b.view.verify = true;
    b.view.pollThrottled = true;
    const group = new UpstreamGroup([a, b]);
    // A call at the tip that a alone cannot serve (a quorum of two needs b too): routing asks for a head at 100.
    const atTip = (u: Upstream) => (u.view.head ?? -1) >= 100;
    const r = allThrottled(group, atTip, null);
    expect(r).toMatchObject({ kind: 'failed', fail: 'throttled' });
    expect(r!.retryAfter).toBeGreaterThanOrEqual(1);
    // Once a poll has answered it is judged as any other: not throttled, so no such answer.
    b.view.pollThrottled = false;
    expect(allThrottled(group, atTip, null)).toBeNull();
    await Promise.all([a.pool.close(), b.pool.close()]);
  });
});
