// The admission stage: the key steps, and the rate step answering at once
// from the in-memory limiter (no promise on the request path) and later only
// when a store must be asked.
import { describe, expect, it, vi } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { AdmissionStage, RateStep } from '../../../../runtime/admission/admission.ts';
import type { Exchange } from '../../../../runtime/exchange.ts';
import { KeyStore, type KeyEntry } from '../../../../runtime/keys/keys.ts';
import { MemoryRateLimiter, type Admitted, type RateLimiter } from '../../../../runtime/admission/ratelimit.ts';
import type { Metrics } from '../../../../runtime/observe/metrics.ts';
import type { RouteSpec } from '../../../../runtime/types.ts';

const KEY = 'admission-test-key-0123456789';
const OTHER = 'another-key-abcdefghijklmnop';
const sha = (k: string) => createHash('sha256').update(k).digest('hex');

function stage(limiter: RateLimiter = new MemoryRateLimiter()) {
  const dir = mkdtempSync(join(tmpdir(), 'admission-'));
  const file = join(dir, 'keys.yaml');
  writeFileSync(
    file,
    `keys:\n  - { id: free, sha256: "${sha(KEY)}", chains: [eth] }\n  - { id: metered, sha256: "${sha(OTHER)}", rateLimit: 2/s }\n`,
  );
  const keys = new KeyStore(file, { info() {}, error() {} });
  keys.load();
  const inc = vi.fn();
  const metrics = { rateLimited: { labels: () => ({ inc }) } } as unknown as Metrics;
  return { s: new AdmissionStage(keys, new RateStep(limiter, null, metrics)), inc };
}

function exchange(headers: Record<string, string> = {}) {
  const refused: unknown[] = [];
  const x = { req: { headers }, key: null, refuse: (r: unknown) => refused.push(r), later: (f: () => void) => f(), internal: vi.fn() };
  return { x: x as unknown as Exchange, refused };
}

const eth = { path: 'eth' } as RouteSpec;
const btc = { path: 'btc' } as RouteSpec;

describe('admission: the key', () => {
  it('takes the key from the header, the path or the query, and refuses conflicts, absence, bad shapes and other chains', () => {
    const { s } = stage();
    expect(s.identify(exchange({ 'x-api-key': KEY }).x, eth, null, [], null)).toMatchObject({ id: 'free' });
    expect(s.identify(exchange().x, eth, KEY, [KEY], null)).toMatchObject({ id: 'free' });
    expect(s.identify(exchange({ 'x-api-key': KEY }).x, eth, OTHER, [], null)).toMatchObject({ ok: false, reason: 'auth-conflict' });
    expect(s.identify(exchange().x, eth, null, [KEY, OTHER], null)).toMatchObject({ ok: false, reason: 'auth-conflict' });
    expect(s.identify(exchange().x, eth, null, [], null)).toMatchObject({ ok: false, reason: 'auth-missing' });
    expect(s.identify(exchange({ 'x-api-key': 'short' }).x, eth, null, [], null)).toMatchObject({ ok: false, reason: 'auth-invalid' });
    expect(s.identify(exchange({ 'x-api-key': 'x'.repeat(20) }).x, eth, null, [], null)).toMatchObject({ ok: false, reason: 'auth-invalid' });
    expect(s.identify(exchange({ 'x-api-key': KEY }).x, btc, null, [], null)).toMatchObject({ ok: false, reason: 'auth-forbidden' });
  });

  it("checks a key's methods against the endpoint the interface names, and leaves them to the interface when it names none", () => {
    const dir = mkdtempSync(join(tmpdir(), 'admission-'));
    const file = join(dir, 'keys.yaml');
    writeFileSync(file, `keys:\n  - { id: blocks, sha256: "${sha(KEY)}", allow: { methods: [block] } }\n`);
    const keys = new KeyStore(file, { info() {}, error() {} });
    keys.load();
    const s = new AdmissionStage(keys, new RateStep(new MemoryRateLimiter(), null, {} as Metrics));
    expect(s.identify(exchange({ 'x-api-key': KEY }).x, eth, null, [], 'block')).toMatchObject({ id: 'blocks' });
    expect(s.identify(exchange({ 'x-api-key': KEY }).x, eth, null, [], 'account/balance')).toMatchObject({ ok: false, reason: 'policy-method' });
    // JSON-RPC: the handler checks each call of a batch against the key's list itself.
    expect(s.identify(exchange({ 'x-api-key': KEY }).x, eth, null, [], null)).toMatchObject({ id: 'blocks' });
  });

  it('tells the exchange its key only once the key is verified', () => {
    const { s } = stage();
    const ok = exchange({ 'x-api-key': KEY }).x;
    s.identify(ok, eth, null, [], null);
    expect(ok.key).toMatchObject({ id: 'free' });
    const no = exchange({ 'x-api-key': KEY }).x;
    s.identify(no, btc, null, [], null);
    expect(no.key).toBeNull();
  });
});

describe('admission: the steps', () => {
  it('goes on synchronously without a limit, and with the in-memory limiter, until the limit refuses', () => {
    const { s, inc } = stage();
    const free = exchange({ 'x-api-key': KEY }).x;
    const freeNext = vi.fn();
    const freeKey = s.identify(free, eth, null, [], null) as KeyEntry;
    for (let i = 0; i < 10; i++) s.admit(free, freeKey, 5, freeNext, i);
    expect(freeNext).toHaveBeenCalledTimes(10);
    const { x, refused } = exchange({ 'x-api-key': OTHER });
    const key = s.identify(x, eth, null, [], null) as KeyEntry;
    const next = vi.fn();
    s.admit(x, key, 1, next, 'a');
    s.admit(x, key, 1, next, 'b');
    // Synchronous: called before admit returned, no microtask in between.
    expect(next.mock.calls).toEqual([
      [x, 'a'],
      [x, 'b'],
    ]);
    s.admit(x, key, 1, next, 'c');
    expect(next).toHaveBeenCalledTimes(2);
    expect(refused).toEqual([{ ok: false, reason: 'rate-limited', retryAfter: 1 }]);
    expect(inc).toHaveBeenCalledTimes(1);
  });

  it('counts a batch as its calls', () => {
    const { s } = stage();
    const { x, refused } = exchange({ 'x-api-key': OTHER });
    const key = s.identify(x, eth, null, [], null) as KeyEntry;
    const next = vi.fn();
    s.admit(x, key, 3, next, null);
    expect(next).not.toHaveBeenCalled();
    expect(refused).toHaveLength(1);
  });

  it('waits for a store only when the limiter answers with a promise', async () => {
    let answer!: (v: Admitted) => void;
    const store: RateLimiter = { ready: async () => {}, close: async () => {}, admit: () => new Promise((r) => (answer = r)) };
    const { s } = stage(store);
    const { x, refused } = exchange({ 'x-api-key': OTHER });
    const key = s.identify(x, eth, null, [], null) as KeyEntry;
    const next = vi.fn();
    s.admit(x, key, 1, next, 'later');
    expect(next).not.toHaveBeenCalled();
    answer({ rate: { ok: true, used: 1, limit: 2, endsAt: Date.now() + 1000 }, quota: null });
    await vi.waitFor(() => expect(next).toHaveBeenCalledWith(x, 'later'));
    expect(refused).toEqual([]);
  });
});
