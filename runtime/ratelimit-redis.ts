// Rate limits shared by every replica, counted in Redis (REDIS_URL): one
// fixed-window counter per key id and window, updated by one atomic script.
//
// A Redis outage FAILS OPEN to per-process counting: the gateway keeps
// serving, each replica enforcing the limit on its own, and says so in the
// log. Availability of the chains wins over exactness of the quota while Redis
// is away; counting returns to Redis as soon as it answers again.
import { Redis } from 'ioredis';
import type { Logger } from './log.ts';
import { MemoryRateLimiter, type Rate, type RateLimiter, type RateVerdict } from './ratelimit.ts';

const SCRIPT = `
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if used > tonumber(ARGV[3]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return {0, redis.call('PTTL', KEYS[1])}
end
return {1, 0}
`;

type Take = (key: string, n: number, windowMs: number, limit: number) => Promise<[number, number]>;

export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  private readonly fallback = new MemoryRateLimiter();
  private degraded = false;

  constructor(url: string, private readonly log: Logger) {
    this.redis = new Redis(url, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 250,
      retryStrategy: (times) => Math.min(times * 200, 2000),
    });
    this.redis.defineCommand('gwTake', { numberOfKeys: 1, lua: SCRIPT });
    this.redis.on('error', () => this.setDegraded(true));
    this.redis.on('ready', () => this.setDegraded(false));
  }

  private setDegraded(on: boolean): void {
    if (on === this.degraded) return;
    this.degraded = on;
    if (on) this.log.error({ event: 'ratelimit_redis_down' }, 'Redis unreachable: rate limits counted per process (fail open)');
    else this.log.info({ event: 'ratelimit_redis_up' }, 'Redis reachable: rate limits shared again');
  }

  /** Waits up to 2 s for the first connection; past that the gateway starts anyway, failing open. */
  ready(): Promise<void> {
    if (this.redis.status === 'ready') return Promise.resolve();
    return new Promise((done) => {
      const t = setTimeout(() => {
        this.setDegraded(true);
        done();
      }, 2000);
      t.unref();
      this.redis.once('ready', () => {
        clearTimeout(t);
        done();
      });
    });
  }

  async take(keyId: string, rate: Rate, n: number): Promise<RateVerdict> {
    const now = Date.now();
    const window = now - (now % rate.windowMs);
    try {
      const take = (this.redis as unknown as { gwTake: Take }).gwTake.bind(this.redis);
      const [ok, ttl] = await take(`gw:rl:${keyId}:${rate.windowMs}:${window}`, n, rate.windowMs, rate.limit);
      return ok === 1 ? { ok: true, retryAfter: 0 } : { ok: false, retryAfter: Math.max(1, Math.ceil(ttl / 1000)) };
    } catch {
      this.setDegraded(true);
      return this.fallback.take(keyId, rate, n);
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
