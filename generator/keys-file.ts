// `gateway keys add|list|revoke`: the keys file holds only SHA-256 hashes.
// Edits keep comments and other entries (yaml Document API) and replace the
// file atomically with mode 0600.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isMap, isSeq, parseDocument, YAMLMap, type Document } from 'yaml';
import { parseKeysFile } from '../runtime/keys.ts';
import { parseRate } from '../runtime/rate.ts';

const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export class KeysError extends Error {}

function open(file: string): Document {
  if (!existsSync(file)) return parseDocument('# API keys: SHA-256 hashes only. Managed with `gateway keys`.\nkeys: []\n');
  const text = readFileSync(file, 'utf8');
  parseKeysFile(text, file); // refuse to edit a file the server would refuse
  return parseDocument(text);
}

function save(file: string, doc: Document): void {
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, doc.toString(), { mode: 0o600 });
  renameSync(tmp, file);
}

function entries(doc: Document): YAMLMap[] {
  const list = doc.get('keys', true);
  if (!isSeq(list)) throw new KeysError("the keys file has no 'keys' list");
  return list.items.filter(isMap) as YAMLMap[];
}

/** Makes a key, stores its hash, returns the key (to print once). */
export function addKey(file: string, opts: { id: string; chains?: string[]; rateLimit?: string }): string {
  if (!ID.test(opts.id)) throw new KeysError(`id '${opts.id}' must match ${ID.source}`);
  if (opts.rateLimit !== undefined && parseRate(opts.rateLimit) === null) throw new KeysError(`rate limit '${opts.rateLimit}' must be N/s, N/min or N/h`);
  const doc = open(file);
  if (entries(doc).some((e) => e.get('id') === opts.id)) throw new KeysError(`a key with id '${opts.id}' already exists`);
  const key = randomBytes(32).toString('base64url');
  const entry: Record<string, unknown> = { id: opts.id, sha256: createHash('sha256').update(key).digest('hex') };
  if (opts.chains?.length) entry.chains = opts.chains;
  if (opts.rateLimit) entry.rateLimit = opts.rateLimit;
  entry.disabled = false;
  (doc.get('keys', true) as { add(v: unknown): void }).add(doc.createNode(entry));
  save(file, doc);
  return key;
}

export function listKeys(file: string): { id: string; chains: string; disabled: boolean; rateLimit: string; hash: string }[] {
  if (!existsSync(file)) return [];
  return parseKeysFile(readFileSync(file, 'utf8'), file).map((k) => ({
    id: k.id,
    chains: k.chains ? [...k.chains].join(',') : '*',
    disabled: k.disabled,
    rateLimit: k.rateLimit ? `${k.rateLimit.limit}/${k.rateLimit.windowMs === 1000 ? 's' : k.rateLimit.windowMs === 60_000 ? 'min' : 'h'}` : '-',
    hash: `${k.sha256.slice(0, 12)}…`,
  }));
}

export function revokeKey(file: string, id: string, remove: boolean): void {
  if (!existsSync(file)) throw new KeysError(`${file} does not exist`);
  const doc = open(file);
  const list = doc.get('keys', true) as { items: unknown[] };
  const i = list.items.findIndex((e) => isMap(e) && e.get('id') === id);
  if (i === -1) throw new KeysError(`no key with id '${id}'`);
  if (remove) list.items.splice(i, 1);
  else (list.items[i] as YAMLMap).set('disabled', true);
  save(file, doc);
}
