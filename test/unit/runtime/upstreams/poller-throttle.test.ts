// A poll the upstream throttles (runtime/upstreams/poller.ts pollOnce): which
// answers are a throttle (HTTP 429 with its headers, a JSON-RPC throttle error
// in the answer or in one of a batch's answers, a Blockbook or rate limiter's
// {"error": ...} text) and which are a failed poll as before; and a poll that
// answers after throttles ends their run (Poller). Fake pools: the upstream
// answers what each case says; fake timers for the cooldown's clock.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Poller, pollOnce } from '../../../../runtime/upstreams/poller.ts';
import { ChainView } from '../../../../runtime/upstreams/chain-view.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import type { Metrics } from '../../../../runtime/observe/metrics.ts';
import { moduleOf } from '../../../../runtime/kinds/index.ts';
import type { RouteSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';

const EVM = { path: 'eth', interface: 'evm-jsonrpc', maxLag: 10, limits: { timeoutMs: 1000 }, upstreams: [{}] } as unknown as RouteSpec;
const PROBE = moduleOf('evm-jsonrpc').probe;
const opened: Upstream[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((u) => u.pool.close()));
});

/** An upstream whose every request is answered with `status`, `headers` and `body`. */
function answering(status: number, body: string, headers: Record<string, string> = {}): Upstream {
  const u = new Upstream({ name: 'a', url: { parts: ['http://127.0.0.1:1'] }, weight: 1, role: 'primary', archive: false, connections: 1, idleTimeoutMs: 1000, headers: {} }, EVM);
  opened.push(u);
  const real = u.pool;
  Object.defineProperty(u, 'pool', { value: { request: async () => ({ statusCode: status, headers, body: { text: async () => body } }), close: () => real.close() } });
  return u;
}

const INFURA = '{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"project ID request rate exceeded"}}';

describe('a throttled poll', () => {
  it('HTTP 429: a throttle, with its Retry-After', async () => {
    const out = await pollOnce(EVM, PROBE, answering(429, INFURA, { 'retry-after': '30' }), 1000, false);
    expect('failure' in out && out.failure.throttle).toEqual({ headers: { 'retry-after': '30' }, body: INFURA });
  });

  it('a -32005 in a 200, for the whole batch (Infura), or in one of a batch\'s answers: a throttle', async () => {
    for (const body of [INFURA, `[{"jsonrpc":"2.0","id":1,"result":"0x1"},${INFURA.replace('null', '2')}]`]) {
      const out = await pollOnce(EVM, PROBE, answering(200, body), 1000, false);
      expect('failure' in out && out.failure.throttle !== undefined, body).toBe(true);
    }
  });

  it('a provider\'s sentence in an {"error": ...} of a 503: a throttle; a rate limiter\'s loose "Too many requests" there is a failed poll (issue 43)', async () => {
    const out = await pollOnce(EVM, PROBE, answering(503, '{"error":"project ID request rate exceeded"}'), 1000, false);
    expect('failure' in out && out.failure.throttle !== undefined).toBe(true);
    const loose = await pollOnce(EVM, PROBE, answering(503, '{"error":"Too many requests, rate limit exceeded"}'), 1000, false);
    expect('failure' in loose ? loose.failure.throttle : undefined).toBeUndefined();
  });

  it('a revert whose reason reads as a throttle, in a batch\'s answer: no throttle (issue 43)', async () => {
    const body = '[{"jsonrpc":"2.0","id":1,"result":"0x1"},{"jsonrpc":"2.0","id":2,"error":{"code":3,"message":"execution reverted: project ID request rate exceeded","data":"0x08c379a0"}}]';
    const out = await pollOnce(EVM, PROBE, answering(200, body), 1000, false);
    expect('failure' in out ? out.failure.throttle : undefined, body).toBeUndefined();
  });

  it('a 500, a node\'s own error and a -32005 that names a result limit: failed polls, not throttles', async () => {
    const bodies: [number, string][] = [
      [500, 'Internal Server Error'],
      [200, '{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"the method eth_chainId does not exist/is not available"}}'],
      [200, '{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"query returned more than 10000 results"}}'],
    ];
    for (const [status, body] of bodies) {
      const out = await pollOnce(EVM, PROBE, answering(status, body), 1000, false);
      expect('failure' in out, `a failed poll: ${body}`).toBe(true);
      expect('failure' in out && out.failure.throttle, body).toBeUndefined();
    }
  });
});

describe('a poll that answers after throttled ones', () => {
  afterEach(() => void vi.useRealTimers());

  it('ends the run of throttles, as a client call\'s answer does: the next throttle\'s cooldown is the first one (1 s), not the doubled one', async () => {
    vi.useFakeTimers();
    const answers = [INFURA, '{"jsonrpc":"2.0","id":1,"result":"0x10"}', INFURA];
    const u = answering(200, '');
    Object.defineProperty(u, 'pool', { value: { request: async () => ({ statusCode: 200, headers: {}, body: { text: async () => answers.shift()! } }), close: async () => undefined } });
    const chain = { route: EVM, group: new UpstreamGroup([u]), view: new ChainView([u]), everyMs: null, heads: false, probe: PROBE };
    const poller = new Poller([chain], { intervalMs: 1000, timeoutMs: 1000 }, { warn: vi.fn(), error: vi.fn() } as unknown as Logger, { upstream: vi.fn() } as unknown as Metrics);
    await poller.round(chain);
    expect(u.view.throttleRun).toBe(1);
    expect(u.view.throttledUntil - Date.now()).toBe(1000);
    vi.advanceTimersByTime(1500); // the cooldown is over: polled again
    await poller.round(chain);
    expect(u.state).toBe('up');
    expect(u.view.throttleRun).toBe(0);
    vi.advanceTimersByTime(500);
    await poller.round(chain);
    expect(u.view.throttleRun).toBe(1);
    expect(u.view.throttledUntil - Date.now()).toBe(1000);
    expect(answers).toEqual([]);
  });

  it('Retry-After: 86400 keeps it unpolled for 300 s only (issue 43): then a poll probes it, and a throttled poll extends the cooldown', async () => {
    vi.useFakeTimers();
    let asked = 0;
    const answers: [Record<string, string>, string][] = [
      [{ 'retry-after': '86400' }, INFURA],
      [{ 'retry-after': '86400' }, INFURA],
    ];
    const u = answering(200, '');
    Object.defineProperty(u, 'pool', {
      value: {
        request: async () => {
          asked++;
          const [headers, body] = answers.shift()!;
          return { statusCode: 429, headers, body: { text: async () => body } };
        },
        close: async () => undefined,
      },
    });
    const chain = { route: EVM, group: new UpstreamGroup([u]), view: new ChainView([u]), everyMs: null, heads: false, probe: PROBE };
    const poller = new Poller([chain], { intervalMs: 1000, timeoutMs: 1000 }, { warn: vi.fn(), error: vi.fn() } as unknown as Logger, { upstream: vi.fn() } as unknown as Metrics);
    await poller.round(chain);
    expect(u.view.throttledUntil - Date.now()).toBe(300_000);
    // Within the 300 s: not polled.
    vi.advanceTimersByTime(299_000);
    await poller.round(chain);
    expect(asked).toBe(1);
    // After them: polled, throttled again, out for another 300 s from now.
    vi.advanceTimersByTime(1000);
    await poller.round(chain);
    expect(asked).toBe(2);
    expect(u.view.throttledUntil - Date.now()).toBe(300_000);
    expect(u.view.throttledTotal).toBe(2);
  });
});
