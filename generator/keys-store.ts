// `gateway keys add|set|list|revoke|import --store redis://...`: the keys of a
// fleet in Redis (runtime/keys/keys-redis.ts has the layout). Every entry written is
// first checked as a keys file entry is; every change is published, so every
// replica drops its cached answer at once. Every write also sets the store's
// marker (`gw:keys:marker`), by which a replica tells a store that lost its
// keys (a Redis restarted without persistence) from one with none revoked.
import { createHash, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { CHANGED, IDS, KEY_PREFIX, MARKER } from '../runtime/keys/keys-redis.ts';
import { recordOfStore, storeFields, type KeyRecord } from '../runtime/keys/key-record.ts';
import { checkKeysFile, readRecords } from './keys-file.ts';
import { applyEdit, checkRecord, keySummary, KeysError, type KeyEdit, type KeySummary } from './key-edit.ts';

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

/** Replaces the key's hash with the record's fields and tells every replica. */
async function write(r: Redis, hex: string, id: string, record: KeyRecord): Promise<void> {
  const m = r.multi();
  m.del(KEY_PREFIX + hex);
  m.hset(KEY_PREFIX + hex, storeFields(record));
  m.hset(IDS, id, hex);
  m.set(MARKER, '1');
  m.publish(CHANGED, hex);
  await m.exec();
}

export async function addKeyToStore(url: string, id: string, edit: KeyEdit = {}): Promise<string> {
  const key = randomBytes(32).toString('base64url');
  const hex = createHash('sha256').update(key).digest('hex');
  const record = applyEdit({ id, sha256: hex, disabled: false }, edit);
  checkRecord(record, edit, ['id']);
  const r = await connect(url);
  try {
    if ((await r.hexists(IDS, id)) === 1) throw new KeysError(`a key with id '${id}' already exists`);
    await write(r, hex, id, record);
    return key;
  } finally {
    r.disconnect();
  }
}

/** The key's record as the store holds it (not checked: an edit is, before it is written). */
async function find(r: Redis, id: string): Promise<{ hex: string; record: KeyRecord }> {
  const hex = await r.hget(IDS, id);
  if (hex === null) throw new KeysError(`no key with id '${id}'`);
  return { hex, record: recordOfStore(hex, await r.hgetall(KEY_PREFIX + hex)) as KeyRecord };
}

export async function setKeyInStore(url: string, id: string, edit: KeyEdit): Promise<void> {
  const r = await connect(url);
  try {
    const { hex, record } = await find(r, id);
    const next = applyEdit(record, edit);
    checkRecord(next, edit);
    await write(r, hex, id, next);
  } finally {
    r.disconnect();
  }
}

export async function revokeKeyInStore(url: string, id: string, remove: boolean): Promise<void> {
  const r = await connect(url);
  try {
    const { hex, record } = await find(r, id);
    if (remove) {
      const m = r.multi();
      m.del(KEY_PREFIX + hex);
      m.hdel(IDS, id);
      m.publish(CHANGED, hex);
      await m.exec();
    } else await write(r, hex, id, { ...record, disabled: true });
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
    return order.map(([id, hex], i) => keySummary({ ...(recordOfStore(hex, (res[i]?.[1] ?? {}) as Record<string, string>) as KeyRecord), id }));
  } finally {
    r.disconnect();
  }
}

/** Moves a keys file into the store (checked whole first); returns how many keys. */
export async function importKeysFile(url: string, file: string): Promise<number> {
  // Checked whole first, as the server would read it (every problem at FILE:LINE:COL).
  const checked = checkKeysFile(file);
  if (!checked.ok) throw new KeysError(`not imported:\n${checked.problems}`);
  // As checked: the fast scan's records have no id or hash twice, the full parser's neither.
  const entries = readRecords(file).map((k) => ({ id: k.id, hex: k.sha256.toLowerCase(), record: k }));
  const r = await connect(url);
  try {
    for (let i = 0; i < entries.length; i += 10_000) {
      const p = r.pipeline();
      for (const e of entries.slice(i, i + 10_000)) {
        p.del(KEY_PREFIX + e.hex);
        p.hset(KEY_PREFIX + e.hex, storeFields(e.record));
        p.hset(IDS, e.id, e.hex);
      }
      await p.exec();
    }
    await r.set(MARKER, '1');
    await r.publish(CHANGED, '*');
    return entries.length;
  } finally {
    r.disconnect();
  }
}
