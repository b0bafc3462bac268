// What `gateway keys add|set|list` do to a key's record, whether it lives in a
// file or in a key store, for every field the schema has: the flags (one per
// settable field, named after it), an edit applied to a record and checked as
// the server would check it, the record written as one-line YAML text, and
// the one-line summary `keys list` prints. No field is named here but those
// `keys list` gives a column of their own.
import { KEY_FIELDS, LINE_FIELDS, recordProblems, TOP_FIELDS, valueOf, type KeyField, type KeyFieldName, type KeyRecord } from '../runtime/keys/key-record.ts';
import { NOT_STRING } from '../runtime/keys/keys-fast.ts';
import { pathText, type YamlPath } from '../runtime/config/schema-problems.ts';

export class KeysError extends Error {}

/** A change to a key: a field's new value, or null to remove it. */
export type KeyEdit = Partial<Record<KeyFieldName, unknown>>;

// ------------------------------------------------------------------ flags

export interface KeyFlag {
  readonly field: KeyField;
  /** `rate-limit` for rateLimit, `origins` for allow.origins. */
  readonly flag: string;
  /** What the flag takes, as help shows it: `<list>`, `<n>`, `<value>`. */
  readonly arg: string;
}

const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/**
 * The fields `keys add|set` take as flags: every optional string, integer
 * and list of strings, named after the field (its last name, in kebab case).
 * A mapping of such lists (allow) gives a flag per list; jwt (a PEM from a
 * file) has flags of its own.
 */
export const KEY_FLAGS: readonly KeyFlag[] = KEY_FIELDS.filter((f) => !f.required && (f.kind === 'string' || f.kind === 'integer' || (f.kind === 'list' && f.items === 'string'))).map((field) => ({
  field,
  flag: kebab(field.path[field.path.length - 1]!),
  arg: field.kind === 'list' ? '<list>' : field.kind === 'integer' ? '<n>' : '<value>',
}));

/** A flag's text -> the edit's value: `none` (a scalar) or an empty list removes the field. */
export function flagValue(f: KeyField, text: string): unknown {
  if (f.kind === 'list') {
    const items = text
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
    return items.length === 0 ? null : items;
  }
  if (text === 'none') return null;
  // Not a whole number: left a string, so the check says the field must be an integer.
  if (f.kind === 'integer') return /^-?[0-9]{1,15}$/.test(text) ? Number(text) : text;
  return text;
}

/**
 * A problem's place in words of the CLI: the flag when the field was given
 * (`--rate-limit`, `--chains[1]`, `--id`), else the field as the key has it
 * (`quota (as it is)`).
 */
function placeOf(path: YamlPath, given: ReadonlySet<string>): string {
  const at = path.slice(2); // keys[0]
  if (at[0] === 'id' && given.has('id')) return '--id';
  for (const { field, flag } of KEY_FLAGS) {
    if (field.path.every((p, i) => at[i] === p)) return given.has(field.name) ? `--${flag}${pathText(at.slice(field.path.length))}` : `${pathText(at)} (as it is)`;
  }
  // A field given by flags of its own (jwt), or not given.
  return given.has(String(at[0])) ? pathText(at) : `${pathText(at) || 'the key'} (as it is)`;
}

// ------------------------------------------------------------------ edits

/** The record with the edit applied (a copy; a mapping left empty goes too). */
export function applyEdit(r: KeyRecord, edit: KeyEdit): KeyRecord {
  const out = structuredClone(r) as unknown as Record<string, unknown>;
  for (const f of KEY_FIELDS) {
    if (!(f.name in edit)) continue;
    const v = edit[f.name];
    if (v === undefined) continue;
    let parent = out;
    for (const p of f.path.slice(0, -1)) {
      if (typeof parent[p] !== 'object' || parent[p] === null) parent[p] = {};
      parent = parent[p] as Record<string, unknown>;
    }
    const last = f.path[f.path.length - 1]!;
    if (v === null) delete parent[last];
    else parent[last] = v;
    if (f.path.length > 1 && Object.keys(parent).length === 0) delete out[f.path[0]!];
  }
  return out as unknown as KeyRecord;
}

/**
 * Throws KeysError with every problem of the record the edit made, as the
 * server would find them: a field the edit gave, named by its flag (`given`
 * adds `id` for `keys add`).
 */
export function checkRecord(r: KeyRecord, edit: KeyEdit, given: readonly string[] = []): void {
  const names = new Set([...Object.keys(edit), ...given]);
  const problems = recordProblems(r, (path) => placeOf(path, names));
  if (problems.length) throw new KeysError(problems.join('\ngateway keys: '));
}

// ------------------------------------------------------------------ text

/** Written without quotes: YAML and the fast scan read it back as this string. All-hex strings (hashes) are quoted, so no reader takes one for a number. */
const PLAIN_OUT = /^[A-Za-z0-9_./-]+$/;

export function quoted(s: string): boolean {
  return !PLAIN_OUT.test(s) || NOT_STRING.test(s) || /^[0-9a-fA-F]+$/.test(s);
}

export function scalarText(s: string): string {
  return quoted(s) ? JSON.stringify(s) : s;
}

/** True when every field of the record fits on a line of its own (what the text writer and the fast scan handle). */
export function isLineRecord(r: KeyRecord): boolean {
  return Object.keys(r).every((k) => LINE_FIELDS.has(k));
}

/** A record of one-line fields as block text at a list's indentation, fields in schema order; a field with a default is always written. */
export function entryText(indent: number, r: KeyRecord): string {
  const pad = ' '.repeat(indent);
  const lines: string[] = [];
  for (const f of LINE_FIELDS.values()) {
    const v = valueOf(r, f) ?? f.default;
    if (v === undefined) continue;
    const text = Array.isArray(v) ? `[${v.map((x) => scalarText(String(x))).join(', ')}]` : typeof v === 'string' ? scalarText(v) : String(v);
    lines.push(`${pad}${lines.length === 0 ? '- ' : '  '}${f.name}: ${text}`);
  }
  return lines.join('\n') + '\n';
}

// ------------------------------------------------------------------ keys list

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
  /** Every other field in one line, `name=value`, in schema order: `maxBatchSize=10 origins=a,b expires=... jwt=k1:ES256`, or '-'. */
  readonly policy: string;
}

/** The fields with a column of their own. */
const COLUMNS = new Set(['id', 'sha256', 'disabled', 'chains', 'rateLimit', 'quota']);

/** A list of mappings (jwt.keys) is shown by its items' short strings (kid:alg), never a PEM. */
const itemText = (o: unknown): string =>
  Object.values(o as Record<string, unknown>)
    .filter((v) => typeof v === 'string' && v.length <= 64 && !v.includes('\n'))
    .join(':');

export function keySummary(r: KeyRecord): KeySummary {
  const parts: string[] = [];
  for (const f of TOP_FIELDS) {
    if (COLUMNS.has(f.name)) continue;
    const v = valueOf(r, f);
    if (v === undefined) continue;
    if (f.kind !== 'object') parts.push(`${f.name}=${Array.isArray(v) ? v.join(',') : String(v)}`);
    else {
      // A mapping's lists by their own names; a list of mappings by the field holding it.
      for (const c of KEY_FIELDS) {
        if (c.path.length !== 2 || c.path[0] !== f.name) continue;
        const cv = valueOf(r, c);
        if (!Array.isArray(cv) || cv.length === 0) continue;
        parts.push(c.items === 'object' ? `${f.name}=${cv.map(itemText).join(',')}` : `${c.path[1]}=${cv.join(',')}`);
      }
    }
  }
  return {
    id: r.id,
    chains: r.chains === undefined ? '*' : r.chains.join(','),
    disabled: r.disabled === true,
    rateLimit: r.rateLimit ?? '-',
    quota: r.quota ?? '-',
    hash: r.sha256.toLowerCase().slice(0, 12),
    policy: parts.length === 0 ? '-' : parts.join(' '),
  };
}
