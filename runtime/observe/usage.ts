// Usage per key, per UTC day, per chain and per method (or endpoint): calls
// and credits, for ops and for customers' dashboards (admin `GET /usage`,
// `gateway usage`). Not in Prometheus: with thousands of keys the series
// would ruin it.
//
// A request adds to counters in this process: one lookup for its key, chain
// and day, then one per method of the request. With REDIS_URL the counters go
// to Redis once a second, one hash per key and day (`gw:usage:<key id>:<YYYY-MM-DD>`,
// fields `<chain> <method> calls|credits`, kept 400 days), shared by every
// replica and surviving restarts. Each flush is a batch with an id (this
// process's random id and a sequence number) applied by one script, which does
// nothing for a batch of that process already applied: a flush that timed out
// may still run once Redis wakes, so the same batch is sent again, with the
// same id, until Redis says it is applied, and only then is the next one cut
// (issue 44: a frozen Redis billed calls up to three times). Counts made
// meanwhile wait in memory (at most MAX_PENDING counters). Without Redis they
// stay in this process (the last 62 days), and a restart loses them.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from './log.ts';
import { RedisLink, type RedisState, type RedisTimes } from '../redis.ts';

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
/** Buckets (a key's counters on one day and chain) in one batch: one script call stays short. */
const BATCH_BUCKETS = 1000;
/** How long Redis remembers the last batch a process applied: far longer than it would send one again. */
const BATCH_ID_TTL_SECONDS = 86_400;
/** The usage client's times (its own connection: a flush never waits behind a request's rate limit). */
export const USAGE_TIMES: RedisTimes = { commandTimeout: 1000, retryStepMs: 200, retryMaxMs: 2000 };

// KEYS[1]: the last batch applied of this process (gw:usage:batch:<id>); KEYS[2..]: usage hashes.
// ARGV[1]: the batch's sequence number; ARGV[2]: the hashes' TTL; then per hash its number of
// fields and each field and increment. A batch at or below the last one applied changes nothing.
const SCRIPT = `
local seq = tonumber(ARGV[1])
if seq <= tonumber(redis.call('GET', KEYS[1]) or '0') then return 0 end
redis.call('SET', KEYS[1], seq, 'EX', ${BATCH_ID_TTL_SECONDS})
local a = 3
for i = 2, #KEYS do
  local n = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, n do
    redis.call('HINCRBY', KEYS[i], ARGV[a], ARGV[a + 1])
    a = a + 2
  end
  redis.call('EXPIRE', KEYS[i], ARGV[2])
end
return 1
`;

/** One flush's counts, as cut, and the script's arguments (its sequence number among them): sent again as they are until applied. */
interface Batch {
  readonly counts: Map<string, Bucket>;
  readonly args: (string | number)[];
}

type Apply = (...args: (string | number)[]) => Promise<number>;
const SEP = '\u0000';

/** One key's counters on one day and chain: method -> [calls, credits]. */
export type Bucket = Map<string, [number, number]>;

export class Usage {
  /** `day\0keyId\0chain` -> its bucket: all of it in memory mode, the part not yet cut into a batch with Redis. */
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
  private flushing: Promise<void> | null = null;
  /** With Redis: its state (a flush is not tried while it is away), and the batch cut and not yet applied. */
  readonly link: RedisLink | null;
  private readonly apply: Apply | null;
  private unsent: Batch | null = null;
  /** This process's batches: `gw:usage:batch:<id>` holds the last one applied. */
  private readonly batchKey = `gw:usage:batch:${randomBytes(8).toString('hex')}`;
  private seq = 0;

  constructor(
    redis: Redis | null,
    private readonly log: Logger,
  ) {
    if (redis === null) {
      this.link = null;
      this.apply = null;
      return;
    }
    redis.defineCommand('gwUsage', { lua: SCRIPT });
    this.apply = (redis as unknown as { gwUsage: Apply }).gwUsage.bind(redis);
    this.link = new RedisLink(redis, USAGE_TIMES, (state) => this.changed(state));
  }

  private changed(state: RedisState): void {
    if (state === 'up') this.log.info({ event: 'usage_redis_up' }, 'Redis reachable: usage sent again');
    else this.log.error({ event: 'usage_redis_down' }, 'Redis unreachable: usage kept in memory until it answers');
  }

  start(): void {
    if (this.link === null) return;
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /** Sends what is left (after a flush under way; Redis asked first if it was away), then closes the client. */
  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.flushing;
    if (this.link !== null && !this.link.up) await this.link.check();
    await this.flush();
    this.link?.close();
  }

  private today(): string {
    const now = Date.now();
    if (now >= this.dayEnds) {
      this.day = new Date(now).toISOString().slice(0, 10);
      this.dayEnds = now - (now % DAY_MS) + DAY_MS;
      this.sentToday = new Map();
      this.index = new Map();
      if (this.link === null) this.prune(now);
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

  /** Sends what was counted to Redis, a batch at a time; what fails waits for the next flush. */
  flush(): Promise<void> {
    if (this.link === null || this.flushing !== null) return this.flushing ?? Promise.resolve();
    // While Redis is away nothing is sent (the probe brings the link back), but what waits stays within MAX_PENDING.
    if (!this.link.up) return Promise.resolve(this.trim());
    this.flushing = this.send().finally(() => (this.flushing = null));
    return this.flushing;
  }

  private async send(): Promise<void> {
    try {
      for (;;) {
        // The batch that failed goes again as it was: it may have been applied after all.
        const b = this.unsent ?? this.cut();
        if (b === null) return;
        this.unsent = b;
        await this.apply!(...b.args);
        this.unsent = null;
        const day = this.today();
        for (const [k, bucket] of b.counts) if (k.startsWith(day)) for (const [calls, credits] of bucket.values()) add(this.sentToday, k.split(SEP)[1]!, calls, credits);
      }
    } catch {
      this.link!.failed();
      this.trim();
    }
  }

  /** Drops the oldest unsent counters past MAX_PENDING (and says so). */
  private trim(): void {
    if (this.counts.size <= MAX_PENDING) return;
    this.log.error({ event: 'usage_dropped', counters: this.counts.size - MAX_PENDING }, 'Redis unreachable: oldest unsent usage counters dropped');
    for (const k of [...this.counts.keys()].slice(0, this.counts.size - MAX_PENDING)) this.counts.delete(k);
    this.index = new Map();
  }

  /** The next batch: up to BATCH_BUCKETS buckets taken out of `counts`, with the script's arguments; null when nothing waits. */
  private cut(): Batch | null {
    if (this.counts.size === 0) return null;
    let counts: Map<string, Bucket>;
    if (this.counts.size <= BATCH_BUCKETS) {
      counts = this.counts;
      this.counts = new Map();
    } else {
      counts = new Map();
      for (const [k, b] of this.counts) {
        if (counts.size === BATCH_BUCKETS) break;
        counts.set(k, b);
        this.counts.delete(k);
      }
    }
    // Requests find their buckets anew, in `counts`.
    this.index = new Map();
    const fields = new Map<string, (string | number)[]>();
    for (const [k, bucket] of counts) {
      const [day, keyId, chain] = k.split(SEP) as [string, string, string];
      const h = hashKey(keyId, day);
      let f = fields.get(h);
      if (f === undefined) fields.set(h, (f = []));
      for (const [method, [calls, credits]] of bucket) f.push(`${chain} ${method} calls`, calls, `${chain} ${method} credits`, credits);
    }
    const args: (string | number)[] = [1 + fields.size, this.batchKey, ...fields.keys(), ++this.seq, REDIS_TTL_SECONDS];
    for (const f of fields.values()) args.push(f.length / 2, ...f);
    return { counts, args };
  }

  /** What this process counted and Redis has not confirmed: the batch under way, then the rest. */
  private *waiting(): Iterable<[string, Bucket]> {
    if (this.unsent !== null) yield* this.unsent.counts;
    yield* this.counts;
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
    if (this.link !== null) {
      const p = this.link.redis.pipeline();
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
    // What this process counted and has not sent yet (all of it without Redis; a batch that timed out may be in both).
    const wanted = new Set(days);
    for (const [k, bucket] of this.waiting()) {
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
    for (const [k, bucket] of this.waiting()) {
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
