// `gateway keys add|list|revoke`: the keys file holds only SHA-256 hashes.
// Edits keep comments and other entries (yaml Document API) and replace the
// file atomically with mode 0600.
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { isMap, isSeq, parseDocument, Scalar, YAMLMap, YAMLSeq, type Document } from 'yaml';
import { KeyStore, parseKeysFile } from '../runtime/keys.ts';
import type { RawPolicy } from '../runtime/key-policy.ts';
import { GiveUp, KeyScan, type EntrySpan, type ScannedEntry } from '../runtime/keys-fast.ts';
import { parseRate } from '../runtime/rate.ts';

const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
/** The manifest's rateLimit syntax (schema), narrower than what the runtime reads. */
const RATE = /^[1-9][0-9]*\/(s|min|h)$/;
/** A chain path, as in the manifest schema. */
const CHAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

const NEW_FILE = `# API keys for the gateway: SHA-256 hashes only, never the keys themselves.
# Managed with \`gateway keys add|set|list|revoke|check\`; a running server reloads this file.
keys: []
`;

export class KeysError extends Error {}

function open(file: string): Document {
  if (!existsSync(file)) return parseDocument(NEW_FILE);
  const text = readFileSync(file, 'utf8');
  try {
    parseKeysFile(text, file); // refuse to edit a file the server would refuse
  } catch (err) {
    throw new KeysError((err as Error).message);
  }
  return parseDocument(text);
}

/** Write to a temporary file, flush, then rename: a reader (the server) sees the old file or the new one. */
function save(file: string, doc: Document | string): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, typeof doc === 'string' ? doc : doc.toString());
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    chmodSync(tmp, 0o600); // a leftover tmp file would keep its old mode
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

function keysList(doc: Document): YAMLSeq {
  const list = doc.get('keys', true);
  if (!isSeq(list)) throw new KeysError("the keys file has no 'keys' list");
  return list;
}

/**
 * A key's policy fields as `keys add` and `keys set` take them. A list given
 * empty removes it (allows everything again); `expires: 'none'` removes the
 * expiry; `jwtKeys` replaces the JWT keys (empty: no JWT).
 */
export interface PolicyOptions extends NonNullable<RawPolicy['allow']> {
  readonly expires?: string;
  /** N/day or N/month; 'none' removes it. */
  readonly quota?: string;
  readonly jwtKeys?: readonly { readonly kid: string; readonly alg: string; readonly pem: string }[];
}

export interface AddKeyOptions extends PolicyOptions {
  readonly id: string;
  readonly chains?: readonly string[];
  readonly rateLimit?: string;
}

const LISTS = ['origins', 'ips', 'userAgents', 'methods', 'contracts'] as const;

/** Writes the policy options into an entry of the document. */
function applyPolicy(doc: Document, entry: YAMLMap, o: PolicyOptions): void {
  for (const name of LISTS) {
    const v = o[name];
    if (v === undefined) continue;
    const found: unknown = entry.get('allow', true);
    let a: YAMLMap;
    if (isMap(found)) a = found as YAMLMap;
    else {
      a = new YAMLMap();
      entry.set('allow', a);
    }
    if (v.length === 0) a.delete(name);
    else {
      const seq = doc.createNode([...v]) as YAMLSeq;
      seq.flow = true;
      a.set(name, seq);
    }
    if (a.items.length === 0) entry.delete('allow');
  }
  if (o.expires !== undefined) {
    if (o.expires === 'none') entry.delete('expires');
    else {
      const at = new Scalar(o.expires);
      at.type = Scalar.QUOTE_DOUBLE;
      entry.set('expires', at);
    }
  }
  if (o.quota !== undefined) {
    if (o.quota === 'none') entry.delete('quota');
    else entry.set('quota', o.quota);
  }
  if (o.jwtKeys !== undefined) {
    if (o.jwtKeys.length === 0) entry.delete('jwt');
    else entry.set('jwt', doc.createNode({ keys: o.jwtKeys.map((k) => ({ kid: k.kid, alg: k.alg, pem: k.pem })) }));
  }
}

/** Refuses to write a file the server would refuse: every problem, at FILE:LINE:COL of the new text. */
function saveChecked(file: string, doc: Document): void {
  try {
    parseKeysFile(doc.toString(), file);
  } catch (err) {
    throw new KeysError(`not written, the result would be invalid:\n${(err as Error).message}`);
  }
  save(file, doc);
}

// ------------------------------------------------------------------ large files
//
// A keys file of the usual shape (what the fast scan reads: runtime/keys-fast.ts)
// is edited as text: the scan says where each entry is, an entry is appended,
// replaced or removed in place, and the file is rewritten atomically. A
// million keys take a few seconds, where the YAML document would take minutes
// and gigabytes. Anything else goes through the YAML document (keeping
// comments), as before.

interface Scanned {
  readonly text: string;
  readonly listIndent: number;
  readonly entries: Map<string, { readonly entry: ScannedEntry; readonly span: EntrySpan }>;
  readonly hashes: Set<string>;
}

/** The file as the fast scan reads it, or null when it must go through the YAML document (or has a problem: that path reports it). */
function scanFile(file: string): Scanned | null {
  if (!existsSync(file)) return null;
  const text = readFileSync(file, 'latin1');
  const entries = new Map<string, { entry: ScannedEntry; span: EntrySpan }>();
  const hashes = new Set<string>();
  const scan = new KeyScan((entry, span) => {
    const sha = entry.sha256.toLowerCase();
    if (entries.has(entry.id) || hashes.has(sha) || span === null) throw new GiveUp();
    entries.set(entry.id, { entry, span });
    hashes.add(sha);
  }, true);
  try {
    scan.feed(text);
    scan.end();
  } catch (err) {
    if (err instanceof GiveUp) return null;
    throw err;
  }
  // `keys: []` is a flow list: appending needs the document.
  return scan.listIndent < 0 ? null : { text, listIndent: scan.listIndent, entries, hashes };
}

/** Options the fast path can write (the scan reads them back): no allow lists, no JWT. */
function plainOptions(o: PolicyOptions): boolean {
  return o.origins === undefined && o.ips === undefined && o.userAgents === undefined && o.methods === undefined && o.contracts === undefined && o.jwtKeys === undefined;
}

/** An entry as block text at the list's indentation. */
function entryText(indent: number, e: ScannedEntry): string {
  const pad = ' '.repeat(indent);
  const lines = [`${pad}- id: ${e.id}`, `${pad}  sha256: "${e.sha256}"`];
  if (e.chains !== undefined && e.chains.length > 0) lines.push(`${pad}  chains: [${e.chains.join(', ')}]`);
  if (e.rateLimit !== undefined) lines.push(`${pad}  rateLimit: ${e.rateLimit}`);
  if (e.quota !== undefined) lines.push(`${pad}  quota: ${e.quota}`);
  if (e.expires !== undefined) lines.push(`${pad}  expires: "${e.expires}"`);
  lines.push(`${pad}  disabled: ${e.disabled === true}`);
  return lines.join('\n') + '\n';
}

/** Checks an entry written as text by the server's own parser (the same checks, no copy of them); KeysError with its problems. */
function checkEntry(file: string, text: string): void {
  try {
    // Positions are in the entry alone (a `keys:` line, then the entry), not in the file.
    parseKeysFile(`keys:\n${text}`, `the entry for ${file}`);
  } catch (err) {
    throw new KeysError(`not written, the entry would be invalid:\n${(err as Error).message}`);
  }
}

/** Makes a key, stores its hash, returns the key (to print once). */
export function addKey(file: string, opts: AddKeyOptions): string {
  if (!ID.test(opts.id)) throw new KeysError(`id '${opts.id}' must match ${ID.source}`);
  if (opts.rateLimit !== undefined && (!RATE.test(opts.rateLimit) || parseRate(opts.rateLimit) === null)) {
    throw new KeysError(`rate limit '${opts.rateLimit}' must be N/s, N/min or N/h`);
  }
  for (const c of opts.chains ?? []) if (!CHAIN.test(c)) throw new KeysError(`chain '${c}' is not a chain path`);
  const fast = plainOptions(opts) ? scanFile(file) : null;
  if (fast !== null) {
    if (fast.entries.has(opts.id)) throw new KeysError(`a key with id '${opts.id}' already exists`);
    const key = randomBytes(32).toString('base64url');
    const sha256 = createHash('sha256').update(key).digest('hex');
    const e: ScannedEntry = { id: opts.id, sha256, chains: opts.chains ? [...opts.chains] : undefined, rateLimit: opts.rateLimit, quota: opts.quota === 'none' ? undefined : opts.quota, expires: opts.expires === 'none' ? undefined : opts.expires };
    const text = entryText(fast.listIndent, e);
    checkEntry(file, text);
    save(file, fast.text + (fast.text.endsWith('\n') || fast.text === '' ? '' : '\n') + text);
    return key;
  }
  const doc = open(file);
  const list = keysList(doc);
  if (list.items.some((e) => isMap(e) && e.get('id') === opts.id)) throw new KeysError(`a key with id '${opts.id}' already exists`);

  // 32 random bytes: 43 base64url characters, inside the 16..128 [A-Za-z0-9_-] a key may be.
  const key = randomBytes(32).toString('base64url');
  const entry = new YAMLMap();
  entry.set('id', opts.id);
  const hash = new Scalar(createHash('sha256').update(key).digest('hex'));
  hash.type = Scalar.QUOTE_DOUBLE;
  entry.set('sha256', hash);
  if (opts.chains?.length) {
    const chains = doc.createNode([...opts.chains]) as YAMLSeq;
    chains.flow = true;
    entry.set('chains', chains);
  }
  if (opts.rateLimit) entry.set('rateLimit', opts.rateLimit);
  applyPolicy(doc, entry, opts);
  entry.set('disabled', false);
  // `keys: []` in a new file is a flow list; entries read better in block style.
  if (list.items.length === 0) list.flow = false;
  list.add(entry);
  saveChecked(file, doc);
  return key;
}

/** Changes an existing key's chains, rate limit and policy; the key itself stays. */
export function setKey(file: string, id: string, opts: PolicyOptions & { readonly chains?: readonly string[]; readonly rateLimit?: string }): void {
  if (!existsSync(file)) throw new KeysError(`${file} does not exist`);
  const fast = plainOptions(opts) ? scanFile(file) : null;
  if (fast !== null) {
    const found = fast.entries.get(id);
    if (found === undefined) throw new KeysError(`no key with id '${id}'`);
    const e: ScannedEntry = { ...found.entry, sha256: found.entry.sha256.toLowerCase() };
    if (opts.chains !== undefined) e.chains = opts.chains.length === 0 ? undefined : [...opts.chains];
    if (opts.rateLimit !== undefined) e.rateLimit = opts.rateLimit === 'none' ? undefined : opts.rateLimit;
    if (opts.quota !== undefined) e.quota = opts.quota === 'none' ? undefined : opts.quota;
    if (opts.expires !== undefined) e.expires = opts.expires === 'none' ? undefined : opts.expires;
    const { span } = found;
    const text = entryText(fast.listIndent, e);
    checkEntry(file, text);
    save(file, fast.text.slice(0, span.start) + text + fast.text.slice(span.end));
    return;
  }
  const doc = open(file);
  const entry = keysList(doc).items.find((e) => isMap(e) && e.get('id') === id) as YAMLMap | undefined;
  if (entry === undefined) throw new KeysError(`no key with id '${id}'`);
  if (opts.chains !== undefined) {
    if (opts.chains.length === 0) entry.delete('chains');
    else {
      const chains = doc.createNode([...opts.chains]) as YAMLSeq;
      chains.flow = true;
      entry.set('chains', chains);
    }
  }
  if (opts.rateLimit !== undefined) {
    if (opts.rateLimit === 'none') entry.delete('rateLimit');
    else if (!RATE.test(opts.rateLimit) || parseRate(opts.rateLimit) === null) throw new KeysError(`rate limit '${opts.rateLimit}' must be N/s, N/min or N/h`);
    else entry.set('rateLimit', opts.rateLimit);
  }
  applyPolicy(doc, entry, opts);
  saveChecked(file, doc);
}

/** Checks a keys file as the server would: every problem as FILE:LINE:COL. */
export function checkKeysFile(file: string): { ok: true; keys: number } | { ok: false; problems: string } {
  if (!existsSync(file)) return { ok: false, problems: `${file}: no such file` };
  try {
    // As the server reads it: the fast scan, the full parser (with every problem's position) when it gives up.
    const store = new KeyStore(file, { info() {}, error() {} });
    store.load();
    return { ok: true, keys: store.size };
  } catch (err) {
    return { ok: false, problems: (err as Error).message };
  }
}

export interface KeySummary {
  readonly id: string;
  /** Comma-separated chain paths, or `*` for every chain. */
  readonly chains: string;
  readonly disabled: boolean;
  readonly rateLimit: string;
  /** N/day, N/month or '-'. */
  readonly quota: string;
  /** The first 12 hex digits of the hash: enough to tell entries apart, never the key. */
  readonly hash: string;
  /** The policy in one line: `origins=a,b ips=... expires=... jwt=k1,k2`, or '-'. */
  readonly policy: string;
}

export function listKeys(file: string): KeySummary[] {
  if (!existsSync(file)) return [];
  const fast = scanFile(file);
  if (fast !== null) {
    return [...fast.entries.values()].map(({ entry: e }) => ({
      id: e.id,
      chains: e.chains ? e.chains.join(',') : '*',
      disabled: e.disabled === true,
      rateLimit: e.rateLimit ?? '-',
      quota: e.quota ?? '-',
      hash: e.sha256.toLowerCase().slice(0, 12),
      policy: e.expires === undefined ? '-' : `expires=${e.expires}`,
    }));
  }
  let entries;
  try {
    entries = parseKeysFile(readFileSync(file, 'utf8'), file);
  } catch (err) {
    throw new KeysError((err as Error).message);
  }
  const unit = (ms: number) => (ms === 1000 ? 's' : ms === 60_000 ? 'min' : ms === 3_600_000 ? 'h' : `${ms}ms`);
  return entries.map((k) => ({
    id: k.id,
    chains: k.chains ? [...k.chains].join(',') : '*',
    disabled: k.disabled,
    rateLimit: k.rateLimit ? `${k.rateLimit.limit}/${unit(k.rateLimit.windowMs)}` : '-',
    quota: k.quota ? `${k.quota.limit}/${k.quota.per}` : '-',
    hash: k.sha256.slice(0, 12),
    policy: policyText(k.policySource),
  }));
}

/** Disables the key (the entry stays, for the record), or removes it with `remove`. */
export function revokeKey(file: string, id: string, remove: boolean): void {
  if (!existsSync(file)) throw new KeysError(`${file} does not exist`);
  const fast = scanFile(file);
  if (fast !== null) {
    const found = fast.entries.get(id);
    if (found === undefined) throw new KeysError(`no key with id '${id}'`);
    const { span, entry } = found;
    const t = fast.text;
    const tail = t.slice(span.end);
    if (remove) return save(file, t.slice(0, span.start) + tail);
    // Disabled in place: the entry rewritten as a block (a flow one too), the rest untouched.
    return save(file, t.slice(0, span.start) + entryText(fast.listIndent, { ...entry, sha256: entry.sha256.toLowerCase(), disabled: true }) + tail);
  }
  const doc = open(file);
  const list = keysList(doc);
  const i = list.items.findIndex((e) => isMap(e) && e.get('id') === id);
  if (i === -1) throw new KeysError(`no key with id '${id}'`);
  if (remove) list.items.splice(i, 1);
  else (list.items[i] as YAMLMap).set('disabled', true);
  save(file, doc);
}

function policyText(p: RawPolicy | null): string {
  if (p === null) return '-';
  const parts: string[] = [];
  for (const name of LISTS) {
    const v = p.allow?.[name];
    if (v !== undefined && v.length > 0) parts.push(`${name}=${v.join(',')}`);
  }
  if (p.expires !== undefined) parts.push(`expires=${p.expires}`);
  if (p.jwt !== undefined) parts.push(`jwt=${p.jwt.keys.map((k) => `${k.kid}:${k.alg}`).join(',')}`);
  return parts.length === 0 ? '-' : parts.join(' ');
}
