// `gateway keys add|set|list|revoke|import --store redis://...`: the keys of a
// fleet in Redis (runtime/keys-redis.ts has the layout). Every entry written is
// first checked as a keys file entry is; every change is published, so every
// replica drops its cached answer at once.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { entryFromFields, parseKeysFile } from '../runtime/keys.ts';
import { CHANGED, IDS, KEY_PREFIX } from '../runtime/keys-redis.ts';
import { GiveUp, KeyScan, type ScannedEntry } from '../runtime/keys-fast.ts';
import { checkKeysFile, KeysError, type AddKeyOptions, type KeySummary, type PolicyOptions } from './keys-file.ts';

const UNITS: Readonly<Record<number, string>> = { 1000: 's', 60_000: 'min', 3_600_000: 'h' };

const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

async function connect(url: string): Promise<Redis> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
  } catch (err) {
    throw new KeysError(`key store ${url.replace(/\/\/[^@/]*@/, '//***@')}: ${(err as Error).message}`);
  }
  return r;
}

/** The fields of an entry after the options apply ('' removes a field). */
function applyOptions(fields: Record<string, string>, o: PolicyOptions & { readonly chains?: readonly string[]; readonly rateLimit?: string }): Record<string, string> {
  const f = { ...fields };
  const set = (k: string, v: string | undefined) => {
    if (v === undefined) return;
    if (v === '' || v === 'none') delete f[k];
    else f[k] = v;
  };
  if (o.chains !== undefined) set('chains', o.chains.length === 0 ? '' : JSON.stringify(o.chains));
  set('rateLimit', o.rateLimit);
  set('quota', o.quota);
  set('expires', o.expires);
  const allow = f.allow ? (JSON.parse(f.allow) as Record<string, readonly string[]>) : {};
  for (const k of ['origins', 'ips', 'userAgents', 'methods', 'contracts'] as const) {
    const v = o[k];
    if (v === undefined) continue;
    if (v.length === 0) delete allow[k];
    else allow[k] = v;
  }
  set('allow', Object.keys(allow).length === 0 ? '' : JSON.stringify(allow));
  if (o.jwtKeys !== undefined) set('jwt', o.jwtKeys.length === 0 ? '' : JSON.stringify({ keys: o.jwtKeys }));
  return f;
}

/** Checks the fields as the server will read them; KeysError with the problems. */
function check(hex: string, f: Record<string, string>): void {
  try {
    entryFromFields(hex, f);
  } catch (err) {
    throw new KeysError(`not written, the entry would be invalid:\n${(err as Error).message}`);
  }
}

async function write(r: Redis, hex: string, id: string, f: Record<string, string>): Promise<void> {
  const m = r.multi();
  m.del(KEY_PREFIX + hex);
  m.hset(KEY_PREFIX + hex, f);
  m.hset(IDS, id, hex);
  m.publish(CHANGED, hex);
  await m.exec();
}

export async function addKeyToStore(url: string, o: AddKeyOptions): Promise<string> {
  if (!ID.test(o.id)) throw new KeysError(`id '${o.id}' must match ${ID.source}`);
  const r = await connect(url);
  try {
    if ((await r.hexists(IDS, o.id)) === 1) throw new KeysError(`a key with id '${o.id}' already exists`);
    const key = randomBytes(32).toString('base64url');
    const hex = createHash('sha256').update(key).digest('hex');
    const f = applyOptions({ id: o.id, disabled: 'false' }, o);
    check(hex, f);
    await write(r, hex, o.id, f);
    return key;
  } finally {
    r.disconnect();
  }
}

async function find(r: Redis, id: string): Promise<{ hex: string; fields: Record<string, string> }> {
  const hex = await r.hget(IDS, id);
  if (hex === null) throw new KeysError(`no key with id '${id}'`);
  return { hex, fields: await r.hgetall(KEY_PREFIX + hex) };
}

export async function setKeyInStore(url: string, id: string, o: PolicyOptions & { readonly chains?: readonly string[]; readonly rateLimit?: string }): Promise<void> {
  const r = await connect(url);
  try {
    const { hex, fields } = await find(r, id);
    const f = applyOptions(fields, o);
    check(hex, f);
    await write(r, hex, id, f);
  } finally {
    r.disconnect();
  }
}

export async function revokeKeyInStore(url: string, id: string, remove: boolean): Promise<void> {
  const r = await connect(url);
  try {
    const { hex, fields } = await find(r, id);
    if (remove) {
      const m = r.multi();
      m.del(KEY_PREFIX + hex);
      m.hdel(IDS, id);
      m.publish(CHANGED, hex);
      await m.exec();
    } else await write(r, hex, id, { ...fields, disabled: 'true' });
  } finally {
    r.disconnect();
  }
}

export async function listKeysInStore(url: string): Promise<KeySummary[]> {
  const r = await connect(url);
  try {
    const ids = await r.hgetall(IDS);
    const p = r.pipeline();
    const order = Object.entries(ids).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const [, hex] of order) p.hgetall(KEY_PREFIX + hex);
    const res = (await p.exec()) ?? [];
    return order.map(([id, hex], i) => {
      const f = (res[i]?.[1] ?? {}) as Record<string, string>;
      const policy = [f.allow ? `allow=${f.allow}` : '', f.expires ? `expires=${f.expires}` : '', f.jwt ? 'jwt' : ''].filter(Boolean).join(' ');
      return {
        id,
        chains: f.chains ? (JSON.parse(f.chains) as string[]).join(',') : '*',
        disabled: f.disabled === 'true',
        rateLimit: f.rateLimit ?? '-',
        quota: f.quota ?? '-',
        hash: hex.slice(0, 12),
        policy: policy || '-',
      };
    });
  } finally {
    r.disconnect();
  }
}

/** Moves a keys file into the store (checked whole first); returns how many keys. */
export async function importKeysFile(url: string, file: string): Promise<number> {
  // Checked whole first, as the server would read it (every problem at FILE:LINE:COL).
  const checked = checkKeysFile(file);
  if (!checked.ok) throw new KeysError(`not imported:\n${checked.problems}`);
  const text = readFileSync(file, 'latin1');
  let entries: Array<{ id: string; hex: string; fields: Record<string, string> }> = [];
  const fromScan = (e: ScannedEntry) => {
    const f: Record<string, string> = { id: e.id, disabled: String(e.disabled === true) };
    if (e.chains) f.chains = JSON.stringify(e.chains);
    if (e.rateLimit) f.rateLimit = e.rateLimit;
    if (e.quota) f.quota = e.quota;
    if (e.expires) f.expires = e.expires;
    entries.push({ id: e.id, hex: e.sha256.toLowerCase(), fields: f });
  };
  try {
    const scan = new KeyScan(fromScan);
    scan.feed(text);
    scan.end();
  } catch (err) {
    if (!(err instanceof GiveUp)) throw err;
    entries = [];
    let parsed;
    try {
      parsed = parseKeysFile(readFileSync(file, 'utf8'), file);
    } catch (e) {
      throw new KeysError((e as Error).message);
    }
    for (const k of parsed) {
      const f: Record<string, string> = { id: k.id, disabled: String(k.disabled) };
      if (k.chains) f.chains = JSON.stringify([...k.chains]);
      if (k.rateLimit) f.rateLimit = `${k.rateLimit.limit}/${UNITS[k.rateLimit.windowMs] ?? 's'}`;
      if (k.quota) f.quota = `${k.quota.limit}/${k.quota.per}`;
      const src = k.policySource;
      if (src?.allow) f.allow = JSON.stringify(src.allow);
      if (src?.expires) f.expires = src.expires;
      if (src?.jwt) f.jwt = JSON.stringify(src.jwt);
      entries.push({ id: k.id, hex: k.sha256, fields: f });
    }
  }
  // The scan checks shapes only; duplicates and values as the server would.
  const ids = new Set<string>();
  for (const e of entries) {
    if (ids.has(e.id)) throw new KeysError(`${file}: duplicate id '${e.id}' (gateway keys check ${file} shows where)`);
    ids.add(e.id);
  }
  const r = await connect(url);
  try {
    for (let i = 0; i < entries.length; i += 10_000) {
      const p = r.pipeline();
      for (const e of entries.slice(i, i + 10_000)) {
        p.del(KEY_PREFIX + e.hex);
        p.hset(KEY_PREFIX + e.hex, e.fields);
        p.hset(IDS, e.id, e.hex);
      }
      await p.exec();
    }
    await r.publish(CHANGED, '*');
    return entries.length;
  } finally {
    r.disconnect();
  }
}
