// The cache's shared tier (`cache: { redis: true }` and REDIS_URL): answers
// that can never change (constants, final blocks, answers by hash in a final
// canonical block) are also kept in Redis, so every replica serves what one of
// them fetched. Answers bound to the head stay in each process's memory.
//
// Redis is a help, never a dependency: while it is unreachable (or slower than
// COMMAND_TIMEOUT_MS) the tier is off, every lookup is a miss at once, and the
// gateway goes to its upstreams as it would without it. It comes back on its
// own when Redis answers again: a probe asks it in the background (redis.ts's
// RedisLink), since a stalled Redis never drops the connection.
import { createHash } from 'node:crypto';
import { failFastRedis, RedisLink, type RedisState } from '../redis.ts';
import type { Logger } from '../observe/log.ts';

/** How long Redis keeps an entry: final answers do not change, but Redis memory is not ours alone. */
const TTL_SECONDS = 24 * 3600;
const COMMAND_TIMEOUT_MS = 100;
/** 2: keys are namespaced by the chain's identity and genesis hash. */
const KEY_PREFIX = 'gw:cache:2:';

/** An entry as two parts: EVM, the answer's bytes before and after its id; Rosetta/Blockbook, its headers (JSON) and its bytes. */
export type Parts = readonly [Buffer, Buffer];

export class SharedTier {
  readonly link: RedisLink;

  constructor(
    url: string,
    private readonly log: Logger,
  ) {
    const times = { commandTimeout: COMMAND_TIMEOUT_MS, retryStepMs: 200, retryMaxMs: 2000 };
    this.link = new RedisLink(failFastRedis(url, times), times, (state) => this.changed(state));
  }

  private changed(state: RedisState): void {
    if (state === 'up') this.log.info({ event: 'cache_shared_up' }, 'Redis reachable: final answers shared by every replica');
    else this.log.error({ event: 'cache_shared_down' }, 'Redis unreachable: the shared cache tier is off, each replica keeps its own');
  }

  get isUp(): boolean {
    return this.link.up;
  }

  /** The Redis key of a cache key (hashed: a call's bytes may be long). */
  static key(cacheKey: string): string {
    return KEY_PREFIX + createHash('sha256').update(cacheKey, 'latin1').digest('base64url');
  }

  /** The entry, or null (not there, or the tier is off). Never rejects. */
  get(key: string): Promise<Parts | null> {
    if (!this.link.up) return Promise.resolve(null);
    return this.link.redis.getBuffer(key).then(unpack, () => {
      this.link.failed();
      return null;
    });
  }

  /** Keeps an entry; a failure only means the next replica asks its upstream. */
  put(key: string, a: Buffer, b: Buffer): void {
    if (!this.link.up) return;
    this.link.redis.set(key, pack(a, b), 'EX', TTL_SECONDS).catch(this.link.failed);
  }

  close(): void {
    this.link.close();
  }
}

function pack(a: Buffer, b: Buffer): Buffer {
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32BE(a.length, 0);
  return Buffer.concat([head, a, b]);
}

function unpack(v: Buffer | null): Parts | null {
  if (v === null || v.length < 4) return null;
  const n = v.readUInt32BE(0);
  if (4 + n > v.length) return null;
  return [v.subarray(4, 4 + n), v.subarray(4 + n)];
}
