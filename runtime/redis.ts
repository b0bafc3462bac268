// The Redis client every runtime store uses (the cache's shared tier, rate
// limits and quotas, keys in Redis, usage): Redis is a help that may be away,
// so a command fails at once while it is (no offline queue, no retry of a
// command), each command waits at most `commandTimeout` ms, and the client
// reconnects on its own, `retryStepMs` more apart each time, up to `retryMaxMs`.
import { Redis, type RedisOptions } from 'ioredis';

export interface RedisTimes {
  readonly commandTimeout: number;
  readonly retryStepMs: number;
  readonly retryMaxMs: number;
}

/** A client as above; `more`: connect only when asked (lazyConnect), or queue commands until connected (a subscriber). */
export function failFastRedis(url: string, t: RedisTimes, more: Pick<RedisOptions, 'lazyConnect' | 'enableOfflineQueue'> = {}): Redis {
  return new Redis(url, {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: t.commandTimeout,
    retryStrategy: (times) => Math.min(times * t.retryStepMs, t.retryMaxMs),
    ...more,
  });
}
