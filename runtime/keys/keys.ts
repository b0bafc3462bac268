import { createHash, timingSafeEqual } from 'node:crypto';
import { closeSync, openSync, readFileSync, readSync, realpathSync, statSync, watch, type FSWatcher } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { compilePolicy, type KeyPolicy } from './key-policy.ts';
import { parseQuota, parseRate, type Quota } from '../config/rate.ts';
import { binaryOfHex, GiveUp, KeyScan, own, type ScannedEntry } from './keys-fast.ts';
import { LINE_FIELDS, readKeyRecords, recordOfStore, recordProblems, valueFits, type KeyRecord } from './key-record.ts';

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
  /** Credits per UTC day or month; null: none. */
  readonly quota: Quota | null;
  /** allow lists, expiry and JWT; null when the key has none (then nothing is checked). */
  readonly policy: KeyPolicy | null;
  /** The key's own JSON-RPC batch limit (the chain's still applies); null: the chain's alone. */
  readonly maxBatchSize: number | null;
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

/**
 * Parses and checks a keys file; throws with every problem listed, each as
 * FILE:LINE:COL path: message (with a hint where one helps), in file order.
 */
export function parseKeysFile(text: string, file: string): KeyEntry[] {
  return readKeyRecords(text, file).map((r) => entryOfRecord(r));
}

const same = (s: string): string => s;

/**
 * A checked record -> the entry requests read, everything a request needs
 * made once (rates parsed, the policy compiled). `copy` gives strings cut
 * from a larger text (the fast scan's lines) a copy of their own; `id`, the
 * id already copied.
 */
export function entryOfRecord(r: KeyRecord, copy: (s: string) => string = same, id: string = copy(r.id)): KeyEntry {
  return entryOf({
    id,
    sha256: copy(r.sha256.toLowerCase()),
    chains: r.chains === undefined ? null : new Set(r.chains.map(copy)),
    disabled: r.disabled === true,
    rateLimit: r.rateLimit === undefined ? null : parseRate(r.rateLimit),
    quota: r.quota === undefined ? null : parseQuota(r.quota),
    policy: compilePolicy(r),
    maxBatchSize: r.maxBatchSize ?? null,
  });
}

const INVALID = { ok: false, reason: 'invalid' } as const;
const FORBIDDEN = { ok: false, reason: 'forbidden' } as const;

export type KeyCheck =
  | { readonly ok: true; readonly entry: KeyEntry }
  /** unavailable: the key store (Redis) cannot be asked, and the key was not looked up lately. */
  | { readonly ok: false; readonly reason: 'invalid' | 'forbidden' | 'unavailable' };

/** Where keys come from: the keys file (KeyStore) or Redis (keys-redis.ts). */
export interface KeyLookup {
  /** Keys known at once (-1: looked up on use). */
  readonly size: number;
  load(): void | Promise<void>;
  watch(): void;
  reload(reason: string): Promise<boolean>;
  close(): void;
  check(key: string, chain: string): KeyCheck | Promise<KeyCheck>;
}

/**
 * A key's entry from the fields a key store keeps (key-record.ts, storeFields),
 * checked as a keys file entry is: throws with the problems.
 */
export function entryFromFields(hex: string, f: Readonly<Record<string, string>>): KeyEntry {
  const r = recordOfStore(hex, f);
  const problems = recordProblems(r);
  if (problems.length) throw new Error(problems.join('\n'));
  return entryOfRecord(r as KeyRecord);
}

/**
 * The keys in force, compact: a key with nothing but its id and hash is one
 * Map slot from its SHA-256 (32 bytes as a latin1 string) to its id; the
 * others (chains, limits, a policy, disabled) keep their whole entry.
 */
interface KeyTable {
  /** By the hash's first byte: 256 Maps, so that none grows big enough for its rehash to pause requests. */
  readonly plain: readonly Map<string, string>[];
  readonly rich: Map<string, KeyEntry>;
  readonly size: number;
}

const SHARDS = 256;
/** The one-line fields the table builder checks (the scan checked id and sha256). */
const CHECKED = [...LINE_FIELDS.values()].filter((f) => f.name !== 'id' && f.name !== 'sha256');
const shards = <V>(): Map<string, V>[] => Array.from({ length: SHARDS }, () => new Map<string, V>());

/** Builds a table from scanned entries, checking what the scan does not: duplicates and the fields' values (GiveUp: the full parser will report it). */
class TableBuilder {
  readonly plain = shards<string>();
  readonly rich = new Map<string, KeyEntry>();
  /** Ids seen, for duplicates (sharded like the table, by the id's last character). */
  private readonly ids: Set<string>[] = Array.from({ length: SHARDS }, () => new Set<string>());
  /** By CHECKED's index: the last value that passed its field's checks. */
  private readonly passed: unknown[] = [];
  size = 0;

  readonly add = (e: ScannedEntry, _span: unknown, identityOnly: boolean): void => {
    const ids = this.ids[e.id.charCodeAt(e.id.length - 1)]!;
    if (ids.has(e.id)) throw new GiveUp();
    const bin = binaryOfHex(e.sha256);
    const plain = this.plain[bin.charCodeAt(0)]!;
    if (plain.has(bin) || this.rich.has(bin)) throw new GiveUp();
    this.size++;
    const id = own(e.id);
    ids.add(id);
    if (identityOnly) {
      plain.set(bin, id);
      return;
    }
    // The table's checks of each field but the two the scan checked; what fails them, the full parser
    // reports. Many keys share a value (a rate, a quota): the last one that passed is not checked again.
    for (let i = 0; i < CHECKED.length; i++) {
      const f = CHECKED[i]!;
      const v = (e as unknown as Record<string, unknown>)[f.name];
      if (v === undefined || v === this.passed[i]) continue;
      if (!valueFits(f, v)) throw new GiveUp();
      this.passed[i] = v;
    }
    this.rich.set(bin, entryOfRecord(e, own, id));
  };

  table(): KeyTable {
    return { plain: this.plain, rich: this.rich, size: this.size };
  }
}

/** What a key's entry is made of: its id and hash, and what its record sets (each absent one: none, or false). */
type EntryFacts = Pick<KeyEntry, 'id' | 'sha256'> & Partial<Pick<KeyEntry, 'chains' | 'disabled' | 'rateLimit' | 'quota' | 'policy' | 'maxBatchSize'>>;

function entryOf(f: EntryFacts): KeyEntry {
  const { id, sha256 } = f;
  return {
    id,
    logField: `,"keyId":${JSON.stringify(id)}`,
    sha256,
    digest: Buffer.from(sha256, 'hex'),
    chains: f.chains ?? null,
    disabled: f.disabled ?? false,
    rateLimit: f.rateLimit ?? null,
    quota: f.quota ?? null,
    policy: f.policy ?? null,
    maxBatchSize: f.maxBatchSize ?? null,
  };
}

function tableOf(entries: readonly KeyEntry[]): KeyTable {
  const rich = new Map<string, KeyEntry>();
  for (const e of entries) rich.set(e.digest.toString('latin1'), e);
  return { plain: shards<string>(), rich, size: entries.length };
}

/** Bytes the scan reads between two turns of the event loop during a reload (some 5,000 lines). */
const CHUNK = 256 * 1024;

/** Reads a keys file: the fast scan, or the full parser when the scan gives up (which throws with every problem). */
function loadSync(path: string): KeyTable {
  const b = new TableBuilder();
  const scan = new KeyScan(b.add);
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    for (;;) {
      const n = readSync(fd, buf, 0, CHUNK, null);
      if (n === 0) break;
      scan.feed(buf.toString('latin1', 0, n));
    }
    scan.end();
    return b.table();
  } catch (err) {
    if (!(err instanceof GiveUp)) throw err;
    return tableOf(parseKeysFile(readFileSync(path, 'utf8'), path));
  } finally {
    closeSync(fd);
  }
}

/** The same, a chunk at a time, letting requests through in between. */
async function loadInSteps(path: string): Promise<KeyTable> {
  const b = new TableBuilder();
  const scan = new KeyScan(b.add);
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, CHUNK, null);
      if (bytesRead === 0) break;
      scan.feed(buf.toString('latin1', 0, bytesRead));
      await new Promise<void>((r) => setImmediate(r));
    }
    scan.end();
    return b.table();
  } catch (err) {
    if (!(err instanceof GiveUp)) throw err;
    return tableOf(parseKeysFile(await readFile(path, 'utf8'), path));
  } finally {
    await fh.close();
  }
}

/**
 * The keys in force. Lookup is by SHA-256 digest, so the raw key is never
 * stored; the final comparison is constant-time. A reload builds a whole new
 * table, a step at a time, and swaps it in at once, so a request sees either
 * the old keys or the new ones, and requests go on while it builds.
 */
export class KeyStore implements KeyLookup {
  private table: KeyTable = { plain: shards<string>(), rich: new Map(), size: 0 };
  /**
   * Recently verified keys, so a busy key is hashed once, not per request.
   * Cleared whenever the keys file is (re)loaded, so a revoked or disabled key
   * is refused from the next request on. Bounded: cleared when full.
   */
  private recent = new Map<string, KeyEntry>();
  private watcher: FSWatcher | null = null;
  private pending: NodeJS.Timeout | null = null;
  /** A reload under way, and whether another was asked for meanwhile. */
  private reloading: Promise<boolean> | null = null;
  private again: string | null = null;
  /** What the file was at the last load (its target's identity), to tell a real change from a touch of the directory. */
  private seen = '';
  readonly path: string;

  constructor(
    path: string,
    private readonly log: { info(o: object, m: string): void; error(o: object, m: string): void },
  ) {
    this.path = resolve(path);
  }

  get size(): number {
    return this.table.size;
  }

  /** First load: throws, so a bad keys file stops the start. */
  load(): void {
    this.seen = this.identity();
    this.table = loadSync(this.path);
    this.recent = new Map();
  }

  /** Later loads: a bad file keeps the old keys and logs why. Resolves with whether the new keys are in force. */
  reload(reason: string): Promise<boolean> {
    if (this.reloading !== null) {
      this.again = reason;
      return this.reloading;
    }
    this.reloading = this.reloadOnce(reason).finally(() => {
      this.reloading = null;
      const next = this.again;
      this.again = null;
      if (next !== null) void this.reload(next);
    });
    return this.reloading;
  }

  private async reloadOnce(reason: string): Promise<boolean> {
    try {
      this.seen = this.identity();
      const table = await loadInSteps(this.path);
      this.table = table;
      this.recent = new Map();
      this.log.info({ event: 'keys_reloaded', reason, keys: table.size }, 'keys reloaded');
      return true;
    } catch (err) {
      this.log.error({ event: 'keys_reload_failed', reason, error: (err as Error).message }, 'keys file invalid; keeping the previous keys');
      return false;
    }
  }

  /** The file's target as it is now: its real path, inode, size and change time ('' if it cannot be read). */
  private identity(): string {
    try {
      const st = statSync(this.path);
      return `${realpathSync(this.path)} ${st.ino} ${st.size} ${st.mtimeMs} ${st.ctimeMs}`;
    } catch {
      return '';
    }
  }

  /**
   * Watches the directory, not the file: editors and `gateway keys` replace
   * the file by rename, which a file watch would lose, and a Kubernetes Secret
   * or ConfigMap swaps a `..data` symlink, so the event names another entry
   * of the directory. Any event there reloads when the file's target changed.
   */
  watch(): void {
    const name = basename(this.path);
    try {
      this.watcher = watch(dirname(this.path), (_event, file) => {
        if (file !== null && file !== name && !file.startsWith('..')) return;
        if (this.pending) clearTimeout(this.pending);
        this.pending = setTimeout(() => {
          this.pending = null;
          if (this.identity() !== this.seen) void this.reload('file changed');
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
      const bin = digest.toString('latin1');
      const t = this.table;
      let found = t.rich.get(bin);
      if (found === undefined) {
        const id = t.plain[bin.charCodeAt(0)]!.get(bin);
        if (id === undefined) return INVALID;
        // A plain key (the keys file's id and hash only): nothing else to set.
        found = entryOf({ id, sha256: digest.toString('hex') });
      }
      if (found.disabled || !timingSafeEqual(found.digest, digest)) return INVALID;
      if (this.recent.size >= 4096) this.recent.clear();
      this.recent.set(key, found);
      entry = found;
    }
    if (entry.chains !== null && !entry.chains.has(chain)) return FORBIDDEN;
    return { ok: true, entry };
  }
}
