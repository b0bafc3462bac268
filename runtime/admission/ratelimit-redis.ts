// Rate limits and quotas shared by every replica, counted in Redis (REDIS_URL):
// one counter per key id and window; a request's rate window and quota are
// taken by one script, in one round trip; quotas survive restarts.
//
// A Redis outage FAILS OPEN to per-process counting, for rate limits and
// quotas alike: the gateway keeps serving, each replica counting on its own
// from the last count Redis gave it for that key and window, and says so in
// the log. Availability of the chains wins over exactness of a quota while
// Redis is away (a key can overrun its quota by what it uses on each replica
// during the outage). A command that fails or times out sends counting here
// at once, and the requests after it do not wait on Redis: a probe runs in the
// background (redis.ts's RedisLink) and counting returns to Redis as soon as
// it is answered.
import { failFastRedis, RedisLink, type RedisState } from '../redis.ts';
import type { Logger } from '../observe/log.ts';
import { MemoryRateLimiter, type Admitted, type CountWindow, type RateLimiter, type Taken } from './ratelimit.ts';

// KEYS: the counters to take from, in order (the rate window's, then the
// quota's); ARGV[1]: the credits, then per key its window's end (ms) and its
// limit. Returns the first key that refused (0: none), then each key's count:
// a refused key's before the take, the keys before it given back (a refused
// request costs nothing), the keys after it not asked (-1).
const SCRIPT = `
local n = tonumber(ARGV[1])
local out = {0}
for i = 1, #KEYS do out[i + 1] = -1 end
for i = 1, #KEYS do
  local used = redis.call('INCRBY', KEYS[i], n)
  if used == n then redis.call('PEXPIREAT', KEYS[i], tonumber(ARGV[2 * i]) + 60000) end
  if used > tonumber(ARGV[2 * i + 1]) then
    out[1] = i
    out[i + 1] = redis.call('DECRBY', KEYS[i], n)
    for j = 1, i - 1 do out[j + 1] = redis.call('DECRBY', KEYS[j], n) end
    return out
  end
  out[i + 1] = used
end
return out
`;

const TIMES = { commandTimeout: 250, retryStepMs: 200, retryMaxMs: 2000 };

type Script = (...args: (string | number)[]) => Promise<number[]>;

export class RedisRateLimiter implements RateLimiter {
  readonly link: RedisLink;
  private readonly script: Script;
  private readonly fallback = new MemoryRateLimiter();
  private readonly waiting: (() => void)[] = [];

  constructor(url: string, private readonly log: Logger) {
    const redis = failFastRedis(url, TIMES);
    redis.defineCommand('gwAdmit', { lua: SCRIPT });
    this.script = (redis as unknown as { gwAdmit: Script }).gwAdmit.bind(redis);
    this.link = new RedisLink(redis, TIMES, (state) => this.changed(state));
  }

  private changed(state: RedisState): void {
    if (state === 'up') {
      this.log.info({ event: 'ratelimit_redis_up' }, 'Redis reachable: rate limits and quotas shared again');
      for (const done of this.waiting.splice(0)) done();
    } else this.log.error({ event: 'ratelimit_redis_down' }, 'Redis unreachable: rate limits and quotas counted per process (fail open)');
  }

  /** Waits up to 2 s for Redis to answer; past that the gateway starts anyway, failing open. */
  ready(): Promise<void> {
    if (this.link.up) return Promise.resolve();
    return new Promise((done) => {
      const t = setTimeout(() => {
        this.log.error({ event: 'ratelimit_redis_down' }, 'Redis unreachable: rate limits and quotas counted per process (fail open)');
        done();
      }, 2000);
      t.unref();
      this.waiting.push(() => {
        clearTimeout(t);
        done();
      });
    });
  }

  admit(keyId: string, rate: CountWindow | null, quota: CountWindow | null, n: number): Admitted | Promise<Admitted> {
    // While Redis is away, nothing waits on it.
    if (!this.link.up) return this.fallback.admit(keyId, rate, quota, n);
    const windows = rate === null ? [quota!] : quota === null ? [rate] : [rate, quota];
    // gw:<key id>:rl:<window ms>:<start> or gw:<key id>:q:day|month:<start>
    const args: (string | number)[] = [windows.length];
    for (const w of windows) args.push(`gw:${keyId}:${w.slot}:${w.start}`);
    args.push(n);
    for (const w of windows) args.push(w.endsAt, w.limit);
    return this.script(...args).then(
      (out) => {
        const refused = out[0]!;
        const taken = windows.map((w, i): Taken | null => {
          const used = out[i + 1]!;
          if (used < 0) return null;
          // What Redis counted, so that counting here during an outage starts from it, not from zero.
          this.fallback.seed(keyId, w, used);
          return { ok: refused !== i + 1, used, limit: w.limit, endsAt: w.endsAt };
        });
        return rate === null ? { rate: null, quota: taken[0]! } : { rate: taken[0]!, quota: quota === null ? null : taken[1]! };
      },
      () => {
        this.link.failed();
        return this.fallback.admit(keyId, rate, quota, n);
      },
    );
  }

  async close(): Promise<void> {
    this.link.close();
  }
}
