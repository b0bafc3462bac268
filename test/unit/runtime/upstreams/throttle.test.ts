// The throttle table (runtime/upstreams/throttle.ts): the providers' texts are throttles,
// a node's own errors and a range limit are not; Retry-After in both forms;
// the cooldown doubles with each throttle in a row and an answer ends the run.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { allThrottled, answerFailed, answerThrottled, blockbookThrottled, mayBeError, retryAfterMs, saysThrottled, throttled, THROTTLE_TEXTS, COOLDOWN_MAX_MS, MAX_RETRY_AFTER_MS } from '../../../../runtime/upstreams/throttle.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';
import type { RouteSpec, UpstreamSpec } from '../../../../runtime/types.ts';

const rpcError = (code: number, message: string) => Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code, message } }));

describe('mayBeError: which first chunks of a streamed answer are held to be judged', () => {
  it('an error answer, whatever the order of its keys; not an answer whose result comes first', () => {
    const held = ['{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"project ID request rate exceeded"}}', '{"jsonrpc":"2.0","error":{"code":-32005,"message":"limit exceeded"},"id":"a"}', '{"error":{"code":429,"message":"x"}}'];
    for (const t of held) expect(mayBeError(Buffer.from(t)), t).toBe(true);
    const streamed = ['{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}', '{"jsonrpc":"2.0","result":{"error":"a field of the result"},"id":1}', '{"jsonrpc":"2.0","id":1,"result":null}', '', '{"error'];
    for (const t of streamed) expect(mayBeError(Buffer.from(t)), t).toBe(false);
  });
});

describe('throttle texts (issue 43: judged narrowly)', () => {
  it('the providers\' answers, as they write them, are throttles', () => {
    const texts: [number, string][] = [
      [-32005, 'daily request count exceeded, request rate limited'],
      [-32005, 'project ID request rate exceeded'],
      [429, 'Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message.'],
      [-32000, 'Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message. If not, check out https://docs.alchemy.com/reference/throughput'],
      [-32000, 'Your app has exceeded its throughput limit'],
      [-32007, '15/second request limit reached - reduce calls per second or upgrade your account at quicknode.com'],
      [-32000, '25/second request limit reached - reduce calls per second or upgrade your account at quicknode.com'],
      [-32600, 'Monthly capacity limit exceeded. Visit https://dashboard.alchemyapi.io/settings/billing to upgrade your scaling policy for continued service.'],
      [-32005, 'limit exceeded'],
      [-32007, 'whatever QuickNode says'],
    ];
    for (const [code, message] of texts) expect(answerThrottled(rpcError(code, message)), message).toBe(true);
  });

  it('every entry of the table names its provider and source, and matches its own sentence only whole from the start', () => {
    for (const t of THROTTLE_TEXTS) {
      expect(t.provider.length).toBeGreaterThan(3);
      expect(t.source.length).toBeGreaterThan(10);
      expect(t.pattern.source.startsWith('^'), t.pattern.source).toBe(true);
    }
    expect(saysThrottled(undefined, 'project ID request rate exceeded')).toBe(true);
    expect(saysThrottled(undefined, 'the project ID request rate exceeded')).toBe(false);
  });

  it('the loose words of old are no throttle: "rate limit", "too many requests", "exceeded ... limit", "throughput"', () => {
    for (const message of ['rate limit exceeded', 'Too Many Requests', 'Too many requests, rate limit exceeded', 'you exceeded the gas limit', 'exceeded its quota', 'low throughput', 'backoff_seconds: 30'])
      expect(answerThrottled(rpcError(-32000, message)), message).toBe(false);
  });

  it('an execution result is never a throttle, whatever its text and code: code 3, "execution reverted...", revert data, geth\'s init code limit', () => {
    const revert = (code: number, message: string, data?: unknown) => Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code, message, data } }));
    // Error(string) with "rate limit exceeded", as anvil and geth write a revert.
    const data = '0x08c379a0' + '20'.padStart(64, '0') + '13'.padStart(64, '0') + Buffer.from('rate limit exceeded').toString('hex').padEnd(64, '0');
    for (const b of [
      revert(3, 'execution reverted: rate limit exceeded', data),
      revert(3, 'Too Many Requests'),
      revert(-32005, 'execution reverted: daily request count exceeded, request rate limited'),
      revert(-32000, 'execution reverted: project ID request rate exceeded'),
      revert(429, 'project ID request rate exceeded', data),
      revert(-32005, 'project ID request rate exceeded', 'Reverted 0x08c379a0'),
      revert(-32005, 'max initcode size exceeded: code size 50000 limit 49152'),
    ])
      expect(answerThrottled(b), b.toString()).toBe(false);
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

  it('Blockbook: {"error": ...} is a throttle only with a provider\'s sentence', () => {
    expect(blockbookThrottled(Buffer.from('{"error":"project ID request rate exceeded"}'))).toBe(true);
    expect(blockbookThrottled(Buffer.from('{"error":"Too many requests"}'))).toBe(false);
    expect(blockbookThrottled(Buffer.from('{"error":"Block not found"}'))).toBe(false);
  });
});

describe('answerFailed: which error answers count against the score (issue 43, rule 4)', () => {
  it('an error the call did not cause counts: -32603, -32000 "header not found", -32700 from the node', () => {
    for (const [code, message] of [
      [-32603, 'Internal error'],
      [-32000, 'header not found'],
      [-32700, 'parse error'],
    ] as const)
      expect(answerFailed(rpcError(code, message)), message).toBe(true);
  });

  it('what the call causes does not: -32600, -32601, -32602, an execution result, a log range\'s complaint; nor an answer', () => {
    for (const [code, message] of [
      [-32600, 'invalid request'],
      [-32601, 'the method eth_foo does not exist/is not available'],
      [-32602, 'invalid argument 0: hex string has length 3, want 40 for common.Address'],
      [3, 'execution reverted: Internal error'],
      [-32000, 'execution reverted'],
      [-32005, 'query returned more than 10000 results'],
    ] as const)
      expect(answerFailed(rpcError(code, message)), message).toBe(false);
    expect(answerFailed(Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1"}'))).toBe(false);
    expect(answerFailed(Buffer.from('{"error":"Block not found"}'))).toBe(false);
  });
});

describe('Retry-After (issue 43: bounded and parsed strictly)', () => {
  const now = Date.parse('2026-11-28T03:00:00Z');
  it('seconds, an IMF-fixdate, or nothing', () => {
    expect(retryAfterMs({ 'retry-after': '30' }, now)).toBe(30_000);
    expect(retryAfterMs({ 'retry-after': 'Sat, 28 Nov 2026 03:00:05 GMT' }, now)).toBe(5000);
    expect(retryAfterMs({ 'retry-after': 'Sat, 28 Nov 2026 02:59:00 GMT' }, now)).toBe(0);
    expect(retryAfterMs({}, now)).toBeNull();
    expect(retryAfterMs({ 'retry-after': 'soon' }, now)).toBeNull();
  });

  it('fractional seconds round up; no other text is read as a date ("1.5" is not 2001)', () => {
    expect(retryAfterMs({ 'retry-after': '1.5' }, now)).toBe(2000);
    expect(retryAfterMs({ 'retry-after': '0.1' }, now)).toBe(1000);
    for (const text of ['1,5', '-5', '5s', '2026-11-28T03:00:05Z', 'Sat Nov 28 2026 03:00:05 GMT', 'Saturday, 28-Nov-26 03:00:05 GMT', '1e3', '0x10'])
      expect(retryAfterMs({ 'retry-after': text }, now), text).toBeNull();
  });

  it('at most 300 s is honoured, however long it asks', () => {
    expect(MAX_RETRY_AFTER_MS).toBe(300_000);
    expect(retryAfterMs({ 'retry-after': '86400' }, now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs({ 'retry-after': '99999999999999999999999' }, now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs({ 'retry-after': 'Sun, 29 Nov 2026 03:00:00 GMT' }, now)).toBe(MAX_RETRY_AFTER_MS);
  });

  it('Infura\'s data.rate.backoff_seconds is read as Retry-After (rounded up, bounded); the header wins where both are', () => {
    const infura = (s: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32005, message: 'daily request count exceeded, request rate limited', data: { rate: { allowed_rps: 1, backoff_seconds: s, current_rps: 1.27 } } } });
    expect(retryAfterMs({}, now, infura(30))).toBe(30_000);
    expect(retryAfterMs({}, now, Buffer.from(infura(0.2)))).toBe(1000);
    expect(retryAfterMs({}, now, infura(1e9))).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs({ 'retry-after': '3' }, now, infura(30))).toBe(3000);
    for (const bad of ['30', -1, null]) expect(retryAfterMs({}, now, infura(bad)), String(bad)).toBeNull();
  });

  it('the client is told a whole number of seconds, at most the bound, however long the upstream asked', async () => {
    const route = { path: 'r', limits: { timeoutMs: 1000 } } as unknown as RouteSpec;
    const u = new Upstream({ name: 'r#0', url: { parts: ['http://127.0.0.1:9'] }, role: 'primary', weight: 1, archive: false, headers: {}, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec, route);
    u.state = 'up';
    for (const text of ['99999999999999999999999', '86400', '1.5']) {
      u.view.throttledUntil = 0;
      throttled(u, { 'retry-after': text }, Date.now());
      const r = allThrottled(new UpstreamGroup([u]), undefined, null)!;
      expect(String(r.retryAfter), text).toMatch(/^[1-9]\d*$/);
      expect(r.retryAfter, text).toBeLessThanOrEqual(MAX_RETRY_AFTER_MS / 1000);
    }
    await u.pool.close();
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
