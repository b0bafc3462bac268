// `gateway usage --key ID [--from --to] [--redis URL | --admin URL]`: a key's
// calls and credits per day, chain and method, from Redis (shared by every
// replica) or from a running gateway's admin listener (GET /usage).
import { Redis } from 'ioredis';
import { daysBetween, totals, Usage, type UsageRow } from '../runtime/observe/usage.ts';

interface Options {
  readonly key: string;
  readonly from?: string;
  readonly to?: string;
  readonly redis?: string;
  readonly admin: string;
}

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as never;

/** Prints the table; returns the exit code. */
export async function printUsage(o: Options): Promise<number> {
  const today = new Date().toISOString().slice(0, 10);
  const from = o.from ?? o.to ?? today;
  const to = o.to ?? (o.from === undefined ? today : from);
  try {
    daysBetween(from, to);
  } catch (err) {
    process.stderr.write(`gateway usage: ${(err as Error).message}\n`);
    return 2;
  }
  let rows: UsageRow[];
  const url = o.redis ?? process.env.REDIS_URL;
  try {
    if (url) {
      const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
      redis.on('error', () => undefined);
      await redis.connect();
      try {
        rows = await new Usage(redis, quiet).query(o.key, from, to);
      } finally {
        redis.disconnect();
      }
    } else {
      const u = new URL('/usage', o.admin);
      u.search = new URLSearchParams({ key: o.key, from, to }).toString();
      const res = await fetch(u);
      const body = (await res.json()) as { days?: UsageRow[]; error?: string };
      if (!res.ok || body.days === undefined) throw new Error(body.error ?? `HTTP ${res.status}`);
      rows = body.days;
    }
  } catch (err) {
    process.stderr.write(`gateway usage: ${url ? 'Redis' : o.admin}: ${(err as Error).message}\n`);
    return 1;
  }
  const t = totals(rows);
  const table = [['day', 'chain', 'method', 'calls', 'credits'], ...rows.map((r) => [r.day, r.chain, r.method, String(r.calls), String(r.credits)]), ['total', '', '', String(t.calls), String(t.credits)]];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  process.stdout.write(`usage of key '${o.key}', ${from} to ${to} (UTC)\n`);
  for (const r of table) process.stdout.write(`${r.map((c, i) => (i >= 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd()}\n`);
  return 0;
}
