import { createHash, createPublicKey, timingSafeEqual } from 'node:crypto';
import { closeSync, openSync, readFileSync, readSync, realpathSync, statSync, watch, type FSWatcher } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { compilePolicy, ipList, parseOrigin, type KeyPolicy, type RawPolicy } from './key-policy.ts';
import { parseRate } from './rate.ts';
import { parseQuota, type Quota } from './ratelimit.ts';
import { binaryOfHex, GiveUp, KeyScan, own, type ScannedEntry } from './keys-fast.ts';

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
  /** The policy as the file states it (for `keys list`); null when it has none. */
  readonly policySource: RawPolicy | null;
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
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const METHOD = /^[A-Za-z0-9_/-]{1,64}$/;
const FIELDS = ['id', 'sha256', 'chains', 'disabled', 'rateLimit', 'quota', 'expires', 'allow', 'jwt'];
const ALLOW_FIELDS = ['origins', 'ips', 'userAgents', 'methods', 'contracts'];
const JWT_ALGS = ['RS256', 'ES256'];
/** RFC 3339 date-time with a zone (Z or an offset). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

type Path = readonly (string | number)[];

/** "keys[3].allow.origins[1]" */
function pathText(path: Path): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

/**
 * Parses and checks a keys file; throws with every problem listed, each as
 * FILE:LINE:COL path: message (with a hint where one helps), in file order.
 */
export function parseKeysFile(text: string, file: string): KeyEntry[] {
  const lines = new LineCounter();
  const ydoc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  const problems: { offset: number; text: string }[] = [];
  const posOf = (path: Path): number => {
    for (let n = path.length; n >= 0; n--) {
      const node = ydoc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | undefined;
      if (node !== undefined && node !== null && typeof node === 'object' && node.range) return node.range[0];
      // a map's key: point at the pair
    }
    return 0;
  };
  const problem = (path: Path, message: string, hint?: string): void => {
    const offset = posOf(path);
    const { line, col } = lines.linePos(offset);
    problems.push({ offset, text: `${file}:${line}:${col} ${pathText(path) || '(file)'}: ${message}${hint ? ` (hint: ${hint})` : ''}` });
  };
  for (const e of ydoc.errors) {
    const { line, col } = lines.linePos(e.pos[0]);
    problems.push({ offset: e.pos[0], text: `${file}:${line}:${col} ${e.message.split('\n')[0]}` });
  }
  const fail = (): never => {
    problems.sort((x, y) => x.offset - y.offset);
    throw new Error(problems.map((p) => p.text).join('\n'));
  };
  if (problems.length) fail();
  const doc = ydoc.toJS() as unknown;
  if (doc === null || typeof doc !== 'object' || !Array.isArray((doc as { keys?: unknown }).keys)) {
    problem([], "expected a mapping with a 'keys' list", 'keys: [ { id: ..., sha256: ... } ]');
    fail();
  }
  const out: KeyEntry[] = [];
  const ids = new Set<string>();
  const hashes = new Set<string>();
  (doc as { keys: unknown[] }).keys.forEach((raw, i) => {
    const at: Path = ['keys', i];
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return problem(at, 'expected a mapping');
    const e = raw as Record<string, unknown>;
    for (const k of Object.keys(e)) {
      if (!FIELDS.includes(k)) problem([...at, k], `unknown field '${k}'`, didYouMean(k, FIELDS));
    }
    const id = e.id;
    if (typeof id !== 'string' || !ID.test(id)) return problem([...at, 'id'], `expected a name matching ${ID.source}`);
    if (ids.has(id)) problem([...at, 'id'], `duplicate id '${id}'`);
    ids.add(id);
    const sha = typeof e.sha256 === 'string' ? e.sha256.toLowerCase() : '';
    if (!HEX64.test(sha)) return problem([...at, 'sha256'], 'expected 64 hex characters (the SHA-256 of the key)', 'npx gateway keys add --id NAME writes it');
    if (hashes.has(sha)) problem([...at, 'sha256'], 'the same key hash appears twice');
    hashes.add(sha);
    let chains: Set<string> | null = null;
    if (e.chains !== undefined && e.chains !== null) {
      if (!Array.isArray(e.chains) || !e.chains.every((c) => typeof c === 'string')) problem([...at, 'chains'], 'expected a list of chain paths');
      else chains = new Set(e.chains as string[]);
    }
    if (e.disabled !== undefined && typeof e.disabled !== 'boolean') problem([...at, 'disabled'], 'expected true or false');
    let rateLimit: KeyEntry['rateLimit'] = null;
    if (e.rateLimit !== undefined && e.rateLimit !== null) {
      rateLimit = typeof e.rateLimit === 'string' ? parseRate(e.rateLimit) : null;
      if (!rateLimit) problem([...at, 'rateLimit'], 'expected N/s, N/min or N/h', '50/s');
    }
    let quota: Quota | null = null;
    if (e.quota !== undefined && e.quota !== null) {
      quota = typeof e.quota === 'string' ? parseQuota(e.quota) : null;
      if (!quota) problem([...at, 'quota'], 'expected N/day or N/month, in credits', '3000000/day');
    }
    const before = problems.length;
    const raw2 = checkPolicy(e, at, problem);
    let policy: KeyPolicy | null = null;
    if (problems.length === before) {
      try {
        policy = compilePolicy(raw2);
      } catch (err) {
        problem(at, (err as Error).message);
      }
    }
    out.push(entryOf(id, sha, chains, e.disabled === true, rateLimit, quota, policy, policy === null ? null : raw2));
  });
  if (problems.length) fail();
  return out;
}

/** Checks `expires`, `allow` and `jwt` of one entry, reporting each problem; returns them as read. */
function checkPolicy(e: Record<string, unknown>, at: Path, problem: (path: Path, message: string, hint?: string) => void): RawPolicy {
  const out: { allow?: Record<string, string[]>; expires?: string; jwt?: RawPolicy['jwt'] } = {};
  if (e.expires !== undefined) {
    // YAML reads an unquoted timestamp as a date: both forms are fine.
    const v = e.expires instanceof Date ? e.expires.toISOString() : e.expires;
    if (typeof v !== 'string' || !DATE_TIME.test(v) || Number.isNaN(Date.parse(v))) problem([...at, 'expires'], 'expected a date-time with a zone', 'RFC 3339: YYYY-MM-DDThh:mm:ssZ, quoted');
    else out.expires = v;
  }
  if (e.allow !== undefined && e.allow !== null) {
    if (typeof e.allow !== 'object' || Array.isArray(e.allow)) problem([...at, 'allow'], 'expected a mapping of lists', 'allow: { origins: [...], ips: [...] }');
    else {
      const allow: Record<string, string[]> = {};
      for (const [k, list] of Object.entries(e.allow as Record<string, unknown>)) {
        const p: Path = [...at, 'allow', k];
        if (!ALLOW_FIELDS.includes(k)) {
          problem(p, `unknown list '${k}'`, didYouMean(k, ALLOW_FIELDS) ?? `one of ${ALLOW_FIELDS.join(', ')}`);
          continue;
        }
        if (list === null) continue;
        if (!Array.isArray(list)) {
          problem(p, 'expected a list');
          continue;
        }
        const items: string[] = [];
        list.forEach((v, j) => {
          const why = typeof v === 'string' ? entryProblem(k, v) : { message: 'expected a string' };
          if (why !== null) problem([...p, j], why.message, why.hint);
          else items.push(v as string);
        });
        allow[k] = items;
      }
      out.allow = allow;
    }
  }
  if (e.jwt !== undefined && e.jwt !== null) {
    const keys = (e.jwt as { keys?: unknown }).keys;
    const extra = typeof e.jwt === 'object' && !Array.isArray(e.jwt) ? Object.keys(e.jwt).filter((k) => k !== 'keys') : [];
    for (const k of extra) problem([...at, 'jwt', k], `unknown field '${k}'`, 'jwt: { keys: [ { kid, alg, pem } ] }');
    if (!Array.isArray(keys) || keys.length === 0) problem([...at, 'jwt'], 'expected keys: a non-empty list of { kid, alg, pem }');
    else {
      const list: { kid: string; alg: 'RS256' | 'ES256'; pem: string }[] = [];
      const kids = new Set<string>();
      keys.forEach((k, j) => {
        const p: Path = [...at, 'jwt', 'keys', j];
        const o = (k ?? {}) as Record<string, unknown>;
        if (typeof o.kid !== 'string' || o.kid === '') return problem(p, 'expected kid: a non-empty string');
        if (kids.has(o.kid)) problem([...p, 'kid'], `duplicate kid '${o.kid}'`);
        kids.add(o.kid);
        if (typeof o.alg !== 'string' || !JWT_ALGS.includes(o.alg)) return problem([...p, 'alg'], 'expected RS256 or ES256', didYouMean(String(o.alg), JWT_ALGS));
        if (typeof o.pem !== 'string') return problem([...p, 'pem'], 'expected a PEM public key');
        const why = pemProblem(o.pem, o.alg);
        if (why !== null) return problem([...p, 'pem'], why);
        list.push({ kid: o.kid, alg: o.alg as 'RS256' | 'ES256', pem: o.pem });
      });
      out.jwt = { keys: list };
    }
  }
  return out;
}

/** What is wrong with one entry of an allow list, or null. */
function entryProblem(list: string, v: string): { message: string; hint?: string } | null {
  switch (list) {
    case 'origins':
      return parseOrigin(v, true) === null ? { message: `'${v}' is not an origin`, hint: 'scheme://host[:port], or https://*.example.com for its subdomains' } : null;
    case 'ips':
      try {
        ipList([v]);
        return null;
      } catch {
        return { message: `'${v}' is not an IP address or CIDR block`, hint: '203.0.113.7, 203.0.113.0/24, 2001:db8::/32' };
      }
    case 'userAgents':
      return v === '' ? { message: 'an empty string would match every User-Agent' } : null;
    case 'methods':
      return METHOD.test(v) ? null : { message: `'${v}' is not a method or endpoint name`, hint: 'eth_call, network/status, address' };
    case 'contracts':
      return ADDRESS.test(v) ? null : { message: `'${v}' is not an address`, hint: '0x and 40 hex digits' };
    default:
      return null;
  }
}

function pemProblem(pem: string, alg: string): string | null {
  try {
    const k = createPublicKey(pem);
    const type = k.asymmetricKeyType;
    if (alg === 'RS256' && type !== 'rsa') return `an RS256 key must be RSA, not ${type}`;
    if (alg === 'ES256' && (type !== 'ec' || k.asymmetricKeyDetails?.namedCurve !== 'prime256v1')) return 'an ES256 key must be EC on P-256';
    return null;
  } catch {
    return 'not a PEM public key (-----BEGIN PUBLIC KEY-----)';
  }
}

/** "did you mean 'x'?" for a near miss. */
function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best !== undefined && bestD <= Math.max(1, Math.floor(best.length / 3)) ? `did you mean '${best}'?` : undefined;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
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
 * A key's entry from the fields a key store keeps (strings; chains, allow and
 * jwt as JSON), checked as a keys file entry is: throws with the problems.
 */
export function entryFromFields(hex: string, f: Record<string, string>): KeyEntry {
  const e: Record<string, unknown> = { id: f.id, sha256: hex };
  if (f.chains) e.chains = JSON.parse(f.chains);
  if (f.disabled) e.disabled = f.disabled === 'true';
  for (const k of ['rateLimit', 'quota', 'expires']) if (f[k]) e[k] = f[k];
  if (f.allow) e.allow = JSON.parse(f.allow);
  if (f.jwt) e.jwt = JSON.parse(f.jwt);
  return parseKeysFile(JSON.stringify({ keys: [e] }), `redis key ${f.id}`)[0]!;
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
const shards = <V>(): Map<string, V>[] => Array.from({ length: SHARDS }, () => new Map<string, V>());

/** Builds a table from scanned entries, checking what the scan does not: duplicates and the fields' values (GiveUp: the full parser will report it). */
class TableBuilder {
  readonly plain = shards<string>();
  readonly rich = new Map<string, KeyEntry>();
  /** Ids seen, for duplicates (sharded like the table, by the id's last character). */
  private readonly ids: Set<string>[] = Array.from({ length: SHARDS }, () => new Set<string>());
  size = 0;

  readonly add = (e: ScannedEntry): void => {
    const ids = this.ids[e.id.charCodeAt(e.id.length - 1)]!;
    if (ids.has(e.id)) throw new GiveUp();
    const bin = binaryOfHex(e.sha256);
    const plain = this.plain[bin.charCodeAt(0)]!;
    if (plain.has(bin) || this.rich.has(bin)) throw new GiveUp();
    this.size++;
    const id = own(e.id);
    ids.add(id);
    if (e.chains === undefined && e.disabled !== true && e.rateLimit === undefined && e.quota === undefined && e.expires === undefined) {
      plain.set(bin, id);
      return;
    }
    const rateLimit = e.rateLimit === undefined ? null : parseRate(e.rateLimit);
    const quota = e.quota === undefined ? null : parseQuota(e.quota);
    if ((e.rateLimit !== undefined && rateLimit === null) || (e.quota !== undefined && quota === null)) throw new GiveUp();
    if (e.expires !== undefined && (!DATE_TIME.test(e.expires) || Number.isNaN(Date.parse(e.expires)))) throw new GiveUp();
    const policySource: RawPolicy | null = e.expires === undefined ? null : { expires: e.expires };
    this.rich.set(bin, entryOf(id, own(e.sha256.toLowerCase()), e.chains === undefined ? null : new Set(e.chains.map(own)), e.disabled === true, rateLimit, quota, policySource === null ? null : compilePolicy(policySource), policySource));
  };

  table(): KeyTable {
    return { plain: this.plain, rich: this.rich, size: this.size };
  }
}

function entryOf(
  id: string,
  sha256: string,
  chains: ReadonlySet<string> | null,
  disabled: boolean,
  rateLimit: KeyEntry['rateLimit'],
  quota: Quota | null,
  policy: KeyPolicy | null,
  policySource: RawPolicy | null,
): KeyEntry {
  return { id, logField: `,"keyId":${JSON.stringify(id)}`, sha256, digest: Buffer.from(sha256, 'hex'), chains, disabled, rateLimit, quota, policy, policySource };
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
        found = entryOf(id, digest.toString('hex'), null, false, null, null, null, null);
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
