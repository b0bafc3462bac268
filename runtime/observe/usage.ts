// Usage per key, per UTC day, per chain and per method (or endpoint): calls
// and credits, for ops and for customers' dashboards (admin `GET /usage`,
// `gateway usage`). Not in Prometheus: with thousands of keys the series
// would ruin it.
//
// A request adds to counters in this process: one lookup for its key, chain
// and day, then one per method of the request. With REDIS_URL the counters go to Redis once a second, one
// hash per key and day (`gw:usage:<key id>:<YYYY-MM-DD>`, fields
// `<chain> <method> calls|credits`, kept 400 days), shared by every replica
// and surviving restarts; counts that could not be sent are kept and sent
// with the next flush. Without Redis they stay in this process (the last 62
// days), and a restart loses them.
import type { Redis } from 'ioredis';
import type { Logger } from './log.ts';

export interface UsageRow {
  readonly day: string;
  readonly chain: string;
  readonly method: string;
  readonly calls: number;
  readonly credits: number;
}

const DAY_MS = 86_400_000;
const KEEP_DAYS_IN_MEMORY = 62;
const REDIS_TTL_SECONDS = 400 * 86_400;
const FLUSH_MS = 1000;
/** Counters waiting for Redis at most (beyond that, the oldest unsent ones are dropped, and it is logged). */
const MAX_PENDING = 100_000;
const SEP = '\u0000';

/** One key's counters on one day and chain: method -> [calls, credits]. */
export type Bucket = Map<string, [number, number]>;

export class Usage {
  /** `day\0keyId\0chain` -> its bucket: all of it in memory mode, the unsent part with Redis. */
  private counts = new Map<string, Bucket>();
  /**
   * Today's buckets in `counts` by key id, then chain: the request path's
   * lookup, on the entry's own strings (V8 keeps their hashes), with no key
   * made per request. Dropped whenever `counts` loses buckets.
   */
  private index = new Map<string, Map<string, Bucket>>();
  private day = '';
  private dayEnds = 0;
  /** With Redis: today's credits and calls per key that this process has sent (for the status page's top keys). */
  private sentToday = new Map<string, [number, number]>();
  private timer: NodeJS.Timeout | null = null;
  private flushing = false;

  constructor(
    private readonly redis: Redis | null,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.redis === null) return;
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }

  private today(): string {
    const now = Date.now();
    if (now >= this.dayEnds) {
      this.day = new Date(now).toISOString().slice(0, 10);
      this.dayEnds = now - (now % DAY_MS) + DAY_MS;
      this.sentToday = new Map();
      this.index = new Map();
      if (this.redis === null) this.prune(now);
    }
    return this.day;
  }

  /** The counters of `keyId` on `chain` today: one lookup per request, then `add` per method. */
  bucket(keyId: string, chain: string): Bucket {
    const day = this.today();
    let byChain = this.index.get(keyId);
    if (byChain === undefined) {
      byChain = new Map();
      this.index.set(keyId, byChain);
    }
    let b = byChain.get(chain);
    if (b === undefined) {
      const k = day + SEP + keyId + SEP + chain;
      b = this.counts.get(k);
      if (b === undefined) {
        b = new Map();
        this.counts.set(k, b);
      }
      byChain.set(chain, b);
    }
    return b;
  }

  record(keyId: string, chain: string, method: string, calls: number, credits: number): void {
    add(this.bucket(keyId, chain), method, calls, credits);
  }

  /** Sends what was counted to Redis; what fails stays for the next flush. */
  async flush(): Promise<void> {
    const redis = this.redis;
    if (redis === null || this.flushing || this.counts.size === 0) return;
    this.flushing = true;
    const batch = this.counts;
    this.counts = new Map();
    this.index = new Map();
    try {
      const p = redis.pipeline();
      const touched = new Set<string>();
      for (const [k, bucket] of batch) {
        const [day, keyId, chain] = k.split(SEP) as [string, string, string];
        const h = hashKey(keyId, day);
        for (const [method, [calls, credits]] of bucket) {
          p.hincrby(h, `${chain} ${method} calls`, calls);
          p.hincrby(h, `${chain} ${method} credits`, credits);
        }
        touched.add(h);
      }
      for (const h of touched) p.expire(h, REDIS_TTL_SECONDS);
      const results = await p.exec();
      if (results === null || results.some(([err]) => err !== null)) throw new Error('usage flush failed');
      const day = this.today();
      for (const [k, bucket] of batch) if (k.startsWith(day)) for (const [calls, credits] of bucket.values()) add(this.sentToday, k.split(SEP)[1]!, calls, credits);
    } catch {
      // Put back what was not sent (a partial pipeline may count some twice at worst: never lose, rarely double).
      for (const [k, bucket] of batch) {
        let b = this.counts.get(k);
        if (b === undefined) {
          b = new Map();
          this.counts.set(k, b);
        }
        for (const [method, [calls, credits]] of bucket) add(b, method, calls, credits);
      }
      if (this.counts.size > MAX_PENDING) {
        this.log.error({ event: 'usage_dropped', counters: this.counts.size - MAX_PENDING }, 'Redis unreachable: oldest unsent usage counters dropped');
        for (const k of [...this.counts.keys()].slice(0, this.counts.size - MAX_PENDING)) this.counts.delete(k);
        this.index = new Map();
      }
    } finally {
      this.flushing = false;
    }
  }

  /** The key's usage on the days from..to (YYYY-MM-DD, inclusive), sorted by day, chain, method. */
  async query(keyId: string, from: string, to: string): Promise<UsageRow[]> {
    const days = daysBetween(from, to);
    const rows = new Map<string, { day: string; chain: string; method: string; calls: number; credits: number }>();
    const addRow = (day: string, chain: string, method: string, calls: number, credits: number): void => {
      const k = day + SEP + chain + SEP + method;
      const r = rows.get(k);
      if (r === undefined) rows.set(k, { day, chain, method, calls, credits });
      else {
        r.calls += calls;
        r.credits += credits;
      }
    };
    if (this.redis !== null) {
      const p = this.redis.pipeline();
      for (const d of days) p.hgetall(hashKey(keyId, d));
      const results = (await p.exec()) ?? [];
      results.forEach(([err, h], i) => {
        if (err !== null) throw err;
        for (const [field, v] of Object.entries(h as Record<string, string>)) {
          const [chain, method, what] = field.split(' ') as [string, string, string];
          addRow(days[i]!, chain, method, what === 'calls' ? Number(v) : 0, what === 'credits' ? Number(v) : 0);
        }
      });
    }
    // What this process counted and has not sent yet (all of it without Redis).
    const wanted = new Set(days);
    for (const [k, bucket] of this.counts) {
      const [day, id, chain] = k.split(SEP) as [string, string, string];
      if (id !== keyId || !wanted.has(day)) continue;
      for (const [method, [calls, credits]] of bucket) addRow(day, chain, method, calls, credits);
    }
    return [...rows.values()].sort((a, b) => (a.day < b.day ? -1 : a.day > b.day ? 1 : a.chain < b.chain ? -1 : a.chain > b.chain ? 1 : a.method < b.method ? -1 : a.method > b.method ? 1 : 0));
  }

  /**
   * The `n` keys with the most credits today (UTC) counted by this process,
   * most first (ties by id): the same counters as /usage. With Redis, what
   * other replicas counted is not included (it would take a scan of every
   * key's hash).
   */
  topToday(n: number): { id: string; credits: number; calls: number }[] {
    const day = this.today();
    const per = new Map<string, [number, number]>();
    for (const [id, [calls, credits]] of this.sentToday) add(per, id, calls, credits);
    for (const [k, bucket] of this.counts) {
      if (!k.startsWith(day)) continue;
      const id = k.split(SEP)[1]!;
      for (const [calls, credits] of bucket.values()) add(per, id, calls, credits);
    }
    return [...per]
      .map(([id, [calls, credits]]) => ({ id, credits, calls }))
      .sort((a, b) => b.credits - a.credits || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .slice(0, n);
  }

  private prune(now: number): void {
    const oldest = new Date(now - KEEP_DAYS_IN_MEMORY * DAY_MS).toISOString().slice(0, 10);
    for (const k of this.counts.keys()) if (k.slice(0, 10) < oldest) this.counts.delete(k);
  }
}

/** Adds to a method's counters in a bucket (or to a key's, in a map of keys' totals). */
export function add(b: Bucket, method: string, calls: number, credits: number): void {
  const c = b.get(method);
  if (c === undefined) b.set(method, [calls, credits]);
  else {
    c[0] += calls;
    c[1] += credits;
  }
}

export function hashKey(keyId: string, day: string): string {
  return `gw:usage:${keyId}:${day}`;
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The days from..to inclusive; throws on a bad range (at most 366 days). */
export function daysBetween(from: string, to: string): string[] {
  if (!DAY.test(from) || !DAY.test(to)) throw new RangeError('from and to must be YYYY-MM-DD');
  const a = Date.parse(`${from}T00:00:00Z`);
  const b = Date.parse(`${to}T00:00:00Z`);
  if (Number.isNaN(a) || Number.isNaN(b) || new Date(a).toISOString().slice(0, 10) !== from || new Date(b).toISOString().slice(0, 10) !== to) throw new RangeError('not a calendar day');
  if (b < a) throw new RangeError('to is before from');
  if ((b - a) / DAY_MS > 366) throw new RangeError('at most 366 days at once');
  const out: string[] = [];
  for (let t = a; t <= b; t += DAY_MS) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

/** Totals of some rows. */
export function totals(rows: readonly UsageRow[]): { calls: number; credits: number } {
  let calls = 0;
  let credits = 0;
  for (const r of rows) {
    calls += r.calls;
    credits += r.credits;
  }
  return { calls, credits };
}
