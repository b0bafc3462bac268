// Keys in Redis, for a fleet of gateways (issue 22): `keys:` (or GATEWAY_KEYS)
// is a redis:// or rediss:// URL. A key is a hash `gw:key:<sha256 hex>` with
// the fields of a keys file entry (lists and mappings as JSON, numbers and
// booleans as text: key-record.ts, storeFields), checked as one; the hash
// `gw:keys:ids` maps each id to its key's hash, and `gw:keys:marker` says the
// store was written to (`gateway keys add|set|import`). `gateway keys ...
// --store URL` writes them and publishes the hash (or `*` for all) on
// `gw:keys:changed`.
//
// A key is looked up on first use and kept in a bounded LRU (cache/clock.ts), found
// or not, for keyCache.ttlMs; a change published by any replica drops it at
// once on every replica, and an answer that a change overtook on its way (a
// revoke published while the lookup was on the wire) serves its own request
// but is not kept (issue 44, rule 3). While Redis is down (a command failed or
// timed out, or the connection dropped: redis.ts's RedisLink) a key looked up
// less than ttlMs ago keeps its answer; any other key is refused with the
// interface's 503 (GW_AUTH_KEY_STORE_UNAVAILABLE), never served unchecked.
// Once a probe is answered the whole cache is dropped, since changes published
// meanwhile were missed: a key revoked during an outage cannot come back. A
// Redis that answers with neither the marker nor any key (restarted without
// persistence) is `empty`: logged as keys_store_empty and refused with the
// same 503, never taken for "every key invalid" (rule 5).
import { createHash, timingSafeEqual } from 'node:crypto';
import { Clock } from '../cache/clock.ts';
import type { Redis } from 'ioredis';
import { failFastRedis, RedisLink, type RedisState } from '../redis.ts';
import type { KeyCheck, KeyEntry, KeyLookup } from './keys.ts';
import { entryFromFields } from './keys.ts';

export const KEY_PREFIX = 'gw:key:';
export const IDS = 'gw:keys:ids';
export const CHANGED = 'gw:keys:changed';
/** Written by `gateway keys add|set|import`: a store without it (and without ids) lost its keys. */
export const MARKER = 'gw:keys:marker';

const INVALID: KeyCheck = { ok: false, reason: 'invalid' };
const FORBIDDEN: KeyCheck = { ok: false, reason: 'forbidden' };
const UNAVAILABLE: KeyCheck = { ok: false, reason: 'unavailable' };

export interface KeyCacheSpec {
  readonly size: number;
  readonly ttlMs: number;
}

interface Cached {
  readonly entry: KeyEntry | null;
  readonly at: number;
  /** Read since the clock's hand last passed it. */
  used: boolean;
}

export class RedisKeyStore implements KeyLookup {
  readonly link: RedisLink;
  private readonly sub: Redis;
  /** By the key's SHA-256 hex, in the order they came; the clock picks what goes. */
  private readonly lru = new Map<string, Cached>();
  private readonly clock = new Clock(this.lru);
  private subscribed = false;
  /**
   * Changes heard (published, or the whole cache dropped): a lookup keeps its
   * answer only if none came while it was on the wire, since the change may
   * have reached this replica before the older answer did.
   */
  private changes = 0;

  constructor(
    url: string,
    private readonly cache: KeyCacheSpec,
    private readonly log: { info(o: object, m: string): void; error(o: object, m: string): void },
  ) {
    const times = { commandTimeout: 1000, retryStepMs: 100, retryMaxMs: 1000 };
    this.link = new RedisLink(failFastRedis(url, times, { lazyConnect: true }), times, (state) => this.changed(state), (r) => r.exists(MARKER, IDS).then((n) => n > 0));
    this.sub = failFastRedis(url, times, { lazyConnect: true, enableOfflineQueue: true });
    this.sub.on('error', () => undefined);
    this.sub.on('close', () => (this.subscribed = false));
    this.sub.on('ready', () => void this.subscribe());
    this.sub.on('message', (_channel: string, hex: string) => {
      this.changes++;
      if (hex === '*') this.lru.clear();
      else this.lru.delete(hex);
      // An empty store written to (an import after Redis lost its keys) is asked again now.
      if (this.link.state === 'empty') void this.link.check();
    });
  }

  private changed(state: RedisState): void {
    if (state === 'up') {
      // Changes published while we were away were missed: nothing cached may be trusted.
      this.clear();
      this.log.info({ event: 'keys_store_up' }, 'key store reachable');
    } else if (state === 'empty') {
      this.log.error(
        { event: 'keys_store_empty', hint: 'Redis answers without any key or the marker `gateway keys` writes: it lost its data (no persistence?). Import the keys again: gateway keys import FILE --store URL' },
        'key store empty: keys not cached are refused with 503 until keys are written',
      );
    } else this.log.error({ event: 'keys_store_down' }, 'key store unreachable: keys looked up lately keep their answer, others are refused');
  }

  private clear(): void {
    this.changes++;
    this.lru.clear();
  }

  private async subscribe(): Promise<void> {
    try {
      await this.sub.subscribe(CHANGED);
      this.subscribed = true;
      this.clear();
    } catch {
      this.subscribed = false;
    }
  }

  get size(): number {
    return -1;
  }

  /** Connects; throws if Redis cannot be reached at start (like a missing keys file). */
  async load(): Promise<void> {
    await Promise.all([this.link.redis.connect(), this.sub.connect()]);
    await this.subscribe();
    await this.link.check();
    this.log.info({ event: 'keys_store', store: 'redis', state: this.link.state }, 'keys from Redis');
  }

  watch(): void {}

  reload(): Promise<boolean> {
    this.clear();
    return Promise.resolve(true);
  }

  close(): void {
    this.link.close();
    this.sub.disconnect();
  }

  check(key: string, chain: string): KeyCheck | Promise<KeyCheck> {
    const digest = createHash('sha256').update(key).digest();
    const hex = digest.toString('hex');
    const c = this.lru.get(hex);
    const now = Date.now();
    const up = this.link.up;
    // A fresh answer is used; not while Redis is up but the change feed is not (it could be stale): then ask again.
    if (c !== undefined && now - c.at < this.cache.ttlMs && (this.subscribed || !up)) {
      c.used = true;
      return verdict(c.entry, digest, chain);
    }
    if (!up) return UNAVAILABLE;
    const changes = this.changes;
    return this.link.redis.hgetall(KEY_PREFIX + hex).then(
      (fields) => {
        let entry: KeyEntry | null = null;
        if (fields.id !== undefined) {
          try {
            entry = entryFromFields(hex, fields);
          } catch (err) {
            this.log.error({ event: 'keys_store_bad_entry', id: fields.id, error: (err as Error).message }, 'a key in Redis is invalid; refused');
          }
        }
        if (changes === this.changes) this.keep(hex, entry);
        return verdict(entry, digest, chain);
      },
      () => {
        this.link.failed();
        return UNAVAILABLE;
      },
    );
  }

  private keep(hex: string, entry: KeyEntry | null): void {
    // Marked used while it makes room, so that it is not what goes.
    const c: Cached = { entry, at: Date.now(), used: true };
    this.lru.set(hex, c);
    while (this.lru.size > this.cache.size) this.lru.delete(this.clock.victim()[0]);
    c.used = false;
  }
}

function verdict(entry: KeyEntry | null, digest: Buffer, chain: string): KeyCheck {
  if (entry === null || entry.disabled || !timingSafeEqual(entry.digest, digest)) return INVALID;
  if (entry.chains !== null && !entry.chains.has(chain)) return FORBIDDEN;
  return { ok: true, entry };
}

/** Is this `keys:` value a Redis key store? */
export function isRedisStore(s: string): boolean {
  return s.startsWith('redis://') || s.startsWith('rediss://');
}
