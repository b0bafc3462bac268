// `gateway keys add|set|list|revoke|check` on a keys file: the file holds only
// SHA-256 hashes. Edits keep comments and other entries (yaml Document API)
// and replace the file atomically with mode 0600. Every field is the schema's
// (key-edit.ts applies and checks an edit; nothing here names a field but
// id, sha256 and disabled).
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { isMap, isSeq, parseDocument, Scalar, YAMLMap, YAMLSeq, type Document, type Node } from 'yaml';
import { KeyStore } from '../runtime/keys/keys.ts';
import { KEY_FIELDS, KeysFileError, readKeyRecords, TOP_FIELDS, valueOf, type KeyRecord } from '../runtime/keys/key-record.ts';
import { GiveUp, KeyScan, type EntrySpan, type ScannedEntry } from '../runtime/keys/keys-fast.ts';
import { applyEdit, checkRecord, entryText, isLineRecord, keySummary, KeysError, quoted, type KeyEdit, type KeySummary } from './key-edit.ts';

export { KeysError, type KeyEdit, type KeySummary };

const NEW_FILE = `# API keys for the gateway: SHA-256 hashes only, never the keys themselves.
# Managed with \`gateway keys add|set|list|revoke|check\`; a running server reloads this file.
keys: []
`;

/** The records of a file, checked as the server would; KeysError with every problem at FILE:LINE:COL. */
function records(text: string, file: string): KeyRecord[] {
  try {
    return readKeyRecords(text, file);
  } catch (err) {
    if (err instanceof KeysFileError) throw new KeysError(err.message);
    throw err;
  }
}

function open(file: string): Document {
  if (!existsSync(file)) return parseDocument(NEW_FILE);
  const text = readFileSync(file, 'utf8');
  records(text, file); // refuse to edit a file the server would refuse
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

/** A value as a node: lists of strings in flow style, strings quoted where the text writer quotes them, mappings in block style. */
function nodeOf(doc: Document, v: unknown): Node {
  if (typeof v === 'string') {
    const s = new Scalar(v);
    if (quoted(v)) s.type = Scalar.QUOTE_DOUBLE;
    return s;
  }
  if (Array.isArray(v)) {
    const seq = new YAMLSeq();
    for (const x of v) seq.add(nodeOf(doc, x));
    seq.flow = v.every((x) => typeof x === 'string');
    return seq;
  }
  if (v !== null && typeof v === 'object') {
    const map = new YAMLMap();
    for (const [k, x] of Object.entries(v)) map.set(k, nodeOf(doc, x));
    return map;
  }
  return doc.createNode(v) as Node;
}

/** Writes the edited fields into an entry of the document, in place; a mapping left empty goes. */
function applyToNode(doc: Document, entry: YAMLMap, edit: KeyEdit): void {
  for (const f of KEY_FIELDS) {
    const v = edit[f.name];
    if (v === undefined) continue;
    if (v === null) entry.deleteIn(f.path);
    else entry.setIn(f.path, nodeOf(doc, v));
    if (f.path.length > 1) {
      const parent: unknown = entry.getIn(f.path.slice(0, -1), true);
      if (isMap(parent) && parent.items.length === 0) entry.deleteIn(f.path.slice(0, -1));
    }
  }
}

/** Refuses to write a file the server would refuse: every problem, at FILE:LINE:COL of the new text. */
function saveChecked(file: string, doc: Document): void {
  try {
    readKeyRecords(doc.toString(), file);
  } catch (err) {
    if (!(err instanceof KeysFileError)) throw err;
    throw new KeysError(`not written, the result would be invalid:\n${err.message}`);
  }
  save(file, doc);
}

// ------------------------------------------------------------------ large files
//
// A keys file of the usual shape (what the fast scan reads: runtime/keys/keys-fast.ts)
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

/** Checks an entry written as text by the server's own parser; KeysError with its problems. */
function checkEntry(file: string, text: string): void {
  try {
    // Positions are in the entry alone (a `keys:` line, then the entry), not in the file.
    readKeyRecords(`keys:\n${text}`, `the entry for ${file}`);
  } catch (err) {
    if (!(err instanceof KeysFileError)) throw err;
    throw new KeysError(`not written, the entry would be invalid:\n${err.message}`);
  }
}

/** Makes a key, stores its hash with the edit's fields, returns the key (to print once). */
export function addKey(file: string, id: string, edit: KeyEdit = {}): string {
  // 32 random bytes: 43 base64url characters, inside the 16..128 [A-Za-z0-9_-] a key may be.
  const key = randomBytes(32).toString('base64url');
  const record = applyEdit({ id, sha256: createHash('sha256').update(key).digest('hex'), disabled: false }, edit);
  checkRecord(record, edit, ['id']);
  const fast = isLineRecord(record) ? scanFile(file) : null;
  if (fast !== null) {
    if (fast.entries.has(id)) throw new KeysError(`a key with id '${id}' already exists`);
    const text = entryText(fast.listIndent, record);
    checkEntry(file, text);
    save(file, fast.text + (fast.text.endsWith('\n') || fast.text === '' ? '' : '\n') + text);
    return key;
  }
  const doc = open(file);
  const list = keysList(doc);
  if (list.items.some((e) => isMap(e) && e.get('id') === id)) throw new KeysError(`a key with id '${id}' already exists`);
  const entry = new YAMLMap();
  // In schema order, as the text writer puts them.
  for (const f of TOP_FIELDS) {
    const v = valueOf(record, f);
    if (v !== undefined) entry.set(f.name, nodeOf(doc, v));
  }
  // `keys: []` in a new file is a flow list; entries read better in block style.
  if (list.items.length === 0) list.flow = false;
  list.add(entry);
  saveChecked(file, doc);
  return key;
}

/** Changes an existing key's fields by the edit; the key itself stays. */
export function setKey(file: string, id: string, edit: KeyEdit): void {
  if (!existsSync(file)) throw new KeysError(`${file} does not exist`);
  const fast = scanFile(file);
  if (fast !== null) {
    const found = fast.entries.get(id);
    if (found === undefined) throw new KeysError(`no key with id '${id}'`);
    const record = applyEdit({ ...found.entry, sha256: found.entry.sha256.toLowerCase() }, edit);
    checkRecord(record, edit);
    if (isLineRecord(record)) {
      const text = entryText(fast.listIndent, record);
      checkEntry(file, text);
      save(file, fast.text.slice(0, found.span.start) + text + fast.text.slice(found.span.end));
      return;
    }
  }
  const doc = open(file);
  const entry = keysList(doc).items.find((e) => isMap(e) && e.get('id') === id) as YAMLMap | undefined;
  if (entry === undefined) throw new KeysError(`no key with id '${id}'`);
  checkRecord(applyEdit(entry.toJSON() as KeyRecord, edit), edit);
  applyToNode(doc, entry, edit);
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

/** The file's records, as the server reads them (the fast scan first). */
export function readRecords(file: string): KeyRecord[] {
  const fast = scanFile(file);
  if (fast !== null) return [...fast.entries.values()].map(({ entry }) => entry);
  return records(readFileSync(file, 'utf8'), file);
}

export function listKeys(file: string): KeySummary[] {
  if (!existsSync(file)) return [];
  return readRecords(file).map(keySummary);
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
