// The Redis client every runtime store uses (the cache's shared tier, rate
// limits and quotas, keys in Redis, usage): Redis is a help that may be away,
// so a command fails at once while it is (no offline queue, no retry of a
// command), each command waits at most `commandTimeout` ms, and the client
// reconnects on its own, `retryStepMs` more apart each time, up to `retryMaxMs`.
//
// Whether a store may use Redis is its RedisLink's state, not the socket's: a
// stalled Redis (a slow command, a fork, a failover pause, a partition) keeps
// its connection and only lets commands time out, so a reconnect would never
// come to say it is back (issue 44). A timeout counts as a dropped connection;
// from then on a probe asks Redis, `retryStepMs` more apart each time up to
// `retryMaxMs`, and the store is up again once one is answered.
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

/**
 * A store's view of its Redis: `up` (answering), `down` (a command failed or
 * timed out, or the connection dropped), or `empty` (answering, but without
 * what the store needs: the key store's marker, rule 5 of issue 44).
 */
export type RedisState = 'up' | 'down' | 'empty';
export const REDIS_STATES: readonly RedisState[] = ['up', 'down', 'empty'];

/** What a store asks of Redis to learn it is back: true, usable; false, answering but empty. PING by default. */
export type RedisProbe = (redis: Redis) => Promise<boolean>;

const ping: RedisProbe = (r) => r.ping().then(() => true);

/**
 * One store's client and its state (issue 44, rule 1). The store calls
 * `failed()` when a command fails or times out; the link then probes in the
 * background and calls `changed` on each change of state. A store reads `up`
 * before it asks Redis, so while it is away no request pays a timeout.
 */
export class RedisLink {
  private current: RedisState = 'down';
  private timer: NodeJS.Timeout | null = null;
  private probing: Promise<void> | null = null;
  private closed = false;
  private delay: number;

  constructor(
    readonly redis: Redis,
    private readonly times: RedisTimes,
    private readonly changed: (state: RedisState, was: RedisState) => void,
    private readonly probe: RedisProbe = ping,
  ) {
    this.delay = times.retryStepMs;
    redis.on('error', () => this.failed());
    redis.on('close', () => this.failed());
    // A (re)connection is not an answer: the probe is.
    redis.on('ready', () => void this.check());
  }

  get state(): RedisState {
    return this.current;
  }

  get up(): boolean {
    return this.current === 'up';
  }

  /** A command failed or timed out: down until a probe is answered. */
  readonly failed = (): void => {
    this.set('down');
    this.schedule();
  };

  /** Probes now (a reconnect, a change the store was told of); resolves once it is answered or failed. */
  check(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.probing ??= this.probe(this.redis).then(
      (usable) => {
        this.probing = null;
        this.delay = this.times.retryStepMs;
        this.set(usable ? 'up' : 'empty');
        // An empty store is asked again until it is not (an import writes the marker).
        if (!usable) this.schedule();
      },
      () => {
        this.probing = null;
        this.failed();
      },
    );
    return this.probing;
  }

  private schedule(): void {
    if (this.timer !== null || this.probing !== null || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.check();
    }, this.delay);
    this.timer.unref();
    this.delay = Math.min(this.delay + this.times.retryStepMs, this.times.retryMaxMs);
  }

  private set(state: RedisState): void {
    const was = this.current;
    if (state === was || this.closed) return;
    this.current = state;
    this.changed(state, was);
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.redis.disconnect();
  }
}
