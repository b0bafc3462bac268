// Usage waiting for Redis stays bounded (keys.md: up to 100,000 counters, the
// oldest dropped past that, usage_dropped logged) also while Redis is down, when
// no flush is tried at all: the bound must not depend on a flush failing.
import { afterEach, describe, expect, it } from 'vitest';
import { Usage } from '../../../../runtime/observe/usage.ts';
import { failFastRedis } from '../../../../runtime/redis.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import { freePort } from '../../../support/http.ts';

let usage: Usage | null = null;
afterEach(async () => {
  await usage?.stop();
  usage = null;
});

describe('Usage while Redis is down', () => {
  it('keeps at most 100,000 unsent counters, drops the oldest, and logs usage_dropped', { timeout: 60_000 }, async () => {
    const logged: Record<string, unknown>[] = [];
    const log = { error: (o: Record<string, unknown>) => logged.push(o), info: () => undefined, warn: () => undefined } as unknown as Logger;
    // Nothing listens there: the link never comes up.
    const redis = failFastRedis(`redis://127.0.0.1:${await freePort()}`, { commandTimeout: 200, retryStepMs: 1000, retryMaxMs: 1000 });
    redis.on('error', () => undefined);
    usage = new Usage(redis, log);
    expect(usage.link!.up).toBe(false);
    for (let i = 0; i <= 100_000; i++) usage.record(`key-${i}`, 'ethereum', 'eth_call', 1, 1);
    await usage.flush();
    expect(logged.filter((o) => o.event === 'usage_dropped')).toEqual([{ event: 'usage_dropped', counters: 1 }]);
    const kept = usage.topToday(200_000);
    expect(kept).toHaveLength(100_000);
    // The oldest went.
    expect(kept.some((k) => k.id === 'key-0')).toBe(false);
    expect(kept.some((k) => k.id === 'key-100000')).toBe(true);
  });
});
