import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { parseRate } from './rate.ts';

export interface KeyEntry {
  readonly id: string;
  /** The access log's `"keyId":...` field, made once. */
  readonly logField: string;
  /** Lower-case hex SHA-256 of the key. */
  readonly sha256: string;
  readonly digest: Buffer;
  /** null: every chain. */
  readonly chains: ReadonlySet<string> | null;
  readonly disabled: boolean;
  readonly rateLimit: { readonly limit: number; readonly windowMs: number } | null;
}

/** A key is 16 to 128 characters of [A-Za-z0-9_-]. Checked without a regex: hot path. */
export function isKeyShaped(s: string): boolean {
  const n = s.length;
  if (n < 16 || n > 128) return false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (
      !(
        (c >= 97 && c <= 122) || // a-z
        (c >= 65 && c <= 90) || // A-Z
        (c >= 48 && c <= 57) || // 0-9
        c === 95 || // _
        c === 45 // -
      )
    )
      return false;
  }
  return true;
}

const HEX64 = /^[0-9a-f]{64}$/;
const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Parses and checks a keys file; throws with every problem listed. */
export function parseKeysFile(text: string, file: string): KeyEntry[] {
  const doc = parseYaml(text) as unknown;
  const problems: string[] = [];
  if (doc === null || typeof doc !== 'object' || !Array.isArray((doc as { keys?: unknown }).keys)) {
    throw new Error(`${file}: expected a mapping with a 'keys' list`);
  }
  const out: KeyEntry[] = [];
  const ids = new Set<string>();
  const hashes = new Set<string>();
  (doc as { keys: unknown[] }).keys.forEach((raw, i) => {
    const at = `${file}: keys[${i}]`;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      problems.push(`${at}: expected a mapping`);
      return;
    }
    const e = raw as Record<string, unknown>;
    for (const k of Object.keys(e)) {
      if (!['id', 'sha256', 'chains', 'disabled', 'rateLimit'].includes(k)) problems.push(`${at}: unknown field '${k}'`);
    }
    const id = e.id;
    if (typeof id !== 'string' || !ID.test(id)) {
      problems.push(`${at}.id: expected a name matching ${ID.source}`);
      return;
    }
    if (ids.has(id)) problems.push(`${at}.id: duplicate id '${id}'`);
    ids.add(id);
    const sha = typeof e.sha256 === 'string' ? e.sha256.toLowerCase() : '';
    if (!HEX64.test(sha)) {
      problems.push(`${at}.sha256: expected 64 hex characters (the SHA-256 of the key)`);
      return;
    }
    if (hashes.has(sha)) problems.push(`${at}.sha256: the same key hash appears twice`);
    hashes.add(sha);
    let chains: Set<string> | null = null;
    if (e.chains !== undefined && e.chains !== null) {
      if (!Array.isArray(e.chains) || !e.chains.every((c) => typeof c === 'string')) {
        problems.push(`${at}.chains: expected a list of chain paths`);
      } else chains = new Set(e.chains as string[]);
    }
    if (e.disabled !== undefined && typeof e.disabled !== 'boolean') problems.push(`${at}.disabled: expected true or false`);
    let rateLimit: KeyEntry['rateLimit'] = null;
    if (e.rateLimit !== undefined && e.rateLimit !== null) {
      rateLimit = typeof e.rateLimit === 'string' ? parseRate(e.rateLimit) : null;
      if (!rateLimit) problems.push(`${at}.rateLimit: expected N/s, N/min or N/h`);
    }
    out.push({
      id,
      logField: `,"keyId":${JSON.stringify(id)}`,
      sha256: sha,
      digest: Buffer.from(sha, 'hex'),
      chains,
      disabled: e.disabled === true,
      rateLimit,
    });
  });
  if (problems.length) throw new Error(problems.join('\n'));
  return out;
}

const INVALID = { ok: false, reason: 'invalid' } as const;
const FORBIDDEN = { ok: false, reason: 'forbidden' } as const;

export type KeyCheck =
  | { readonly ok: true; readonly entry: KeyEntry }
  | { readonly ok: false; readonly reason: 'invalid' | 'forbidden' };

/**
 * The keys in force. Lookup is by SHA-256 digest, so the raw key is never
 * stored; the final comparison is constant-time. `reload()` swaps the whole
 * table at once, so a request sees either the old keys or the new ones.
 */
export class KeyStore {
  private byHash = new Map<string, KeyEntry>();
  /**
   * Recently verified keys, so a busy key is hashed once, not per request.
   * Cleared whenever the keys file is (re)loaded, so a revoked or disabled key
   * is refused from the next request on. Bounded: cleared when full.
   */
  private recent = new Map<string, KeyEntry>();
  private watcher: FSWatcher | null = null;
  private pending: NodeJS.Timeout | null = null;
  readonly path: string;

  constructor(
    path: string,
    private readonly log: { info(o: object, m: string): void; error(o: object, m: string): void },
  ) {
    this.path = resolve(path);
  }

  get size(): number {
    return this.byHash.size;
  }

  /** First load: throws, so a bad keys file stops the start. */
  load(): void {
    const entries = parseKeysFile(readFileSync(this.path, 'utf8'), this.path);
    this.byHash = new Map(entries.map((e) => [e.sha256, e]));
    this.recent = new Map();
  }

  /** Later loads: a bad file keeps the old keys and logs why. */
  reload(reason: string): boolean {
    try {
      const entries = parseKeysFile(readFileSync(this.path, 'utf8'), this.path);
      this.byHash = new Map(entries.map((e) => [e.sha256, e]));
      this.recent = new Map();
      this.log.info({ event: 'keys_reloaded', reason, keys: entries.length }, 'keys reloaded');
      return true;
    } catch (err) {
      this.log.error(
        { event: 'keys_reload_failed', reason, error: (err as Error).message },
        'keys file invalid; keeping the previous keys',
      );
      return false;
    }
  }

  /**
   * Watches the directory, not the file: editors and `gateway keys` replace
   * the file by rename, which a file watch would lose.
   */
  watch(): void {
    const name = basename(this.path);
    try {
      this.watcher = watch(dirname(this.path), (_event, file) => {
        if (file !== null && file !== name) return;
        if (this.pending) clearTimeout(this.pending);
        this.pending = setTimeout(() => {
          this.pending = null;
          this.reload('file changed');
        }, 50);
      });
      this.watcher.unref();
    } catch (err) {
      this.log.error({ event: 'keys_watch_failed', error: (err as Error).message }, 'cannot watch keys file; use SIGHUP');
    }
  }

  close(): void {
    this.watcher?.close();
    if (this.pending) clearTimeout(this.pending);
  }

  check(key: string, chain: string): KeyCheck {
    let entry = this.recent.get(key);
    if (entry === undefined) {
      const digest = createHash('sha256').update(key).digest();
      const found = this.byHash.get(digest.toString('hex'));
      if (found === undefined || found.disabled || !timingSafeEqual(found.digest, digest)) return INVALID;
      if (this.recent.size >= 4096) this.recent.clear();
      this.recent.set(key, found);
      entry = found;
    }
    if (entry.chains !== null && !entry.chains.has(chain)) return FORBIDDEN;
    return { ok: true, entry };
  }
}
