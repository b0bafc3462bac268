// Rate limits and quotas shared by every replica, counted in Redis (REDIS_URL):
// one counter per key id and window, updated by one atomic script; quotas
// survive restarts.
//
// A Redis outage FAILS OPEN to per-process counting, for rate limits and
// quotas alike: the gateway keeps serving, each replica counting on its own
// from the last count Redis gave it for that key and window, and says so in
// the log. Availability of the chains wins over exactness of a quota while
// Redis is away (a key can overrun its quota by what it uses on each replica
// during the outage); counting returns to Redis as soon as it answers again.
import type { Redis } from 'ioredis';
import { failFastRedis } from '../redis.ts';
import type { Logger } from '../observe/log.ts';
import { MemoryRateLimiter, type CountWindow, type RateLimiter, type Taken } from './ratelimit.ts';

// KEYS[1] the window's counter; ARGV: credits, the window's end (ms), the limit.
// Refused takes are given back, so a refused request costs nothing.
const SCRIPT = `
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used == tonumber(ARGV[1]) then redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[2]) + 60000) end
if used > tonumber(ARGV[3]) then
  return {0, redis.call('DECRBY', KEYS[1], ARGV[1])}
end
return {1, used}
`;

type Take = (key: string, n: number, endsAt: number, limit: number) => Promise<[number, number]>;

export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  private readonly fallback = new MemoryRateLimiter();
  private degraded = false;

  constructor(url: string, private readonly log: Logger) {
    this.redis = failFastRedis(url, { commandTimeout: 250, retryStepMs: 200, retryMaxMs: 2000 });
    this.redis.defineCommand('gwTake', { numberOfKeys: 1, lua: SCRIPT });
    this.redis.on('error', () => this.setDegraded(true));
    this.redis.on('ready', () => this.setDegraded(false));
  }

  private setDegraded(on: boolean): void {
    if (on === this.degraded) return;
    this.degraded = on;
    if (on) this.log.error({ event: 'ratelimit_redis_down' }, 'Redis unreachable: rate limits and quotas counted per process (fail open)');
    else this.log.info({ event: 'ratelimit_redis_up' }, 'Redis reachable: rate limits and quotas shared again');
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

  async take(keyId: string, w: CountWindow, n: number): Promise<Taken> {
    try {
      const take = (this.redis as unknown as { gwTake: Take }).gwTake.bind(this.redis);
      // gw:<key id>:rl:<window ms>:<start> or gw:<key id>:q:day|month:<start>
      const [ok, used] = await take(`gw:${keyId}:${w.slot}:${w.start}`, n, w.endsAt, w.limit);
      // What Redis counted, so that counting here during an outage starts from it, not from zero.
      this.fallback.seed(keyId, w, used);
      return { ok: ok === 1, used, limit: w.limit, endsAt: w.endsAt };
    } catch {
      this.setDegraded(true);
      return this.fallback.take(keyId, w, n);
    }
  }

  /** The Redis client, for the usage counters that share it. */
  get client(): Redis {
    return this.redis;
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
