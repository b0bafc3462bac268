// A key's record: what a keys file entry, a key store's hash and `gateway keys
// add|set` hold. Its fields are schema/keys.schema.json's, through the
// generated table (keys-schema.gen.ts) and validator (keys-validate.gen.ts):
// nothing here lists them. A whole file is checked as the manifest is (the
// same loader and wording, every problem at FILE:LINE:COL with a hint), then
// for what a schema cannot say (a real date, an origin, a PEM, duplicates).
// The fast scan of large files (keys-fast.ts) does not come through here per
// key: it reads the table's patterns and gives up to this on anything else.
import type { ErrorObject } from 'ajv';
import { createPublicKey } from 'node:crypto';
import validateKeysFile from './keys-validate.gen.ts';
import { KEY_FIELDS, type KeyField, type KeyFieldName, type KeyRecord } from './keys-schema.gen.ts';
import { ipList, parseOrigin } from './key-policy.ts';
import { parseQuota, parseRate } from '../config/rate.ts';
import { formatProblem, getAt, isObj, pathText, problemsIn, schemaProblems, sortProblems, whereInList, type Report } from '../config/schema-problems.ts';
import { loadYaml, type YamlPath } from '../config/yaml-source.ts';

export { KEY_FIELDS };
export type { KeyField, KeyFieldName, KeyRecord };

const validate = validateKeysFile as unknown as { (value: unknown): boolean; errors?: ErrorObject[] | null };

/** Every field by name ('rateLimit', 'allow.origins'). */
export const FIELDS: ReadonlyMap<string, KeyField> = new Map(KEY_FIELDS.map((f) => [f.name, f]));

/** A key's own fields (not the lists inside allow), in schema order. */
export const TOP_FIELDS: readonly KeyField[] = KEY_FIELDS.filter((f) => f.path.length === 1);

/** The fields a line of plain YAML holds: scalars and lists of strings (what the fast scan reads and `keys add` writes as text). */
export const LINE_FIELDS: ReadonlyMap<string, KeyField> = new Map(TOP_FIELDS.filter((f) => f.kind !== 'object' && f.items !== 'object').map((f) => [f.name, f]));

/** A field's value in a record (undefined: not there). */
export function valueOf(r: object, f: KeyField): unknown {
  return f.path.length === 1 ? (r as Record<string, unknown>)[f.path[0]!] : getAt(r, f.path);
}

/**
 * The checks the table holds (kind, pattern, minimum), without the
 * validator: what the fast scan asks of a value it read. A value that fails
 * goes to the full check, which says why.
 */
export function valueFits(f: KeyField, v: unknown): boolean {
  switch (f.kind) {
    case 'string':
      return typeof v === 'string' && (f.pattern === undefined || f.pattern.test(v)) && meaningOk(f, v);
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v) && (f.minimum === undefined || v >= f.minimum);
    case 'boolean':
      return typeof v === 'boolean';
    case 'list':
      return Array.isArray(v) && f.items === 'string' && v.every((s) => typeof s === 'string' && (f.pattern === undefined || f.pattern.test(s)) && meaningOk(f, s));
    default:
      return false;
  }
}

// ------------------------------------------------------------------ what a schema cannot say

interface Why {
  readonly message: string;
  readonly hint?: string;
}

/** What a string of a field means beyond its pattern: a real date, a rate that fits, an origin, an address. By field; null: fine. */
const MEANING: Partial<Record<KeyFieldName, (v: string) => Why | null>> = {
  rateLimit: (v) => (parseRate(v) === null ? { message: `'${v}' is too large a rate`, hint: '100/s' } : null),
  quota: (v) => (parseQuota(v) === null ? { message: `'${v}' is too large a quota`, hint: '3000000/day' } : null),
  expires: (v) => (Number.isNaN(Date.parse(v)) ? { message: `'${v}' is not a real date-time`, hint: 'RFC 3339: YYYY-MM-DDThh:mm:ssZ, quoted' } : null),
  'allow.origins': (v) => (parseOrigin(v, true) === null ? { message: `'${v}' is not an origin`, hint: 'scheme://host[:port], or https://*.example.com for its subdomains' } : null),
  'allow.ips': (v) => {
    try {
      ipList([v]);
      return null;
    } catch {
      return { message: `'${v}' is not an IP address or CIDR block`, hint: '203.0.113.7, 203.0.113.0/24, 2001:db8::/32' };
    }
  },
};

function meaningOk(f: KeyField, v: string): boolean {
  const check = MEANING[f.name];
  return check === undefined || check(v) === null;
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

/** One entry's checks beyond the schema, on the values the schema passed. */
function meaningProblems(e: Record<string, unknown>, at: YamlPath, report: Report, where: (p: YamlPath) => string): void {
  for (const f of KEY_FIELDS) {
    const check = MEANING[f.name];
    if (check === undefined) continue;
    const v = valueOf(e, f);
    const one = (s: unknown, path: YamlPath) => {
      // Only what the schema took: a value it refused already has its problem.
      if (typeof s !== 'string' || (f.pattern !== undefined && !f.pattern.test(s))) return;
      const why = check(s);
      if (why !== null) report('value', path, `${where(path)}: ${why.message}`, why.hint);
    };
    if (Array.isArray(v)) v.forEach((s, j) => one(s, [...at, ...f.path, j]));
    else one(v, [...at, ...f.path]);
  }
  const jwtKeys = getAt(e, ['jwt', 'keys']);
  if (Array.isArray(jwtKeys)) {
    const kids = new Map<string, number>();
    jwtKeys.forEach((k, j) => {
      if (!isObj(k)) return;
      const p: YamlPath = [...at, 'jwt', 'keys', j];
      if (typeof k.kid === 'string' && k.kid !== '') {
        const first = kids.get(k.kid);
        if (first !== undefined) report('value', [...p, 'kid'], `${where([...p, 'kid'])}: duplicate kid '${k.kid}'`, `also jwt.keys[${first}]`);
        else kids.set(k.kid, j);
      }
      if (typeof k.pem === 'string' && (k.alg === 'RS256' || k.alg === 'ES256')) {
        const why = pemProblem(k.pem, k.alg);
        if (why !== null) report('value', [...p, 'pem'], `${where([...p, 'pem'])}: ${why}`);
      }
    });
  }
}

const WORDING = { enumNouns: { alg: 'JWT algorithm' }, describeAll: true };

/** A whole keys file's value: the schema, then each entry's meaning, then duplicates across entries. */
function checkFileValue(value: unknown, report: Report, where: (p: YamlPath) => string): void {
  if (!validate(value)) schemaProblems(validate.errors ?? [], value, report, where, WORDING);
  const keys = isObj(value) && Array.isArray(value.keys) ? value.keys : [];
  const ids = new Map<string, number>();
  const hashes = new Map<string, number>();
  keys.forEach((e, i) => {
    if (!isObj(e)) return;
    const at: YamlPath = ['keys', i];
    if (typeof e.id === 'string') {
      const first = ids.get(e.id);
      if (first !== undefined) report('value', [...at, 'id'], `${where([...at, 'id'])}: duplicate id '${e.id}'`, `also keys[${first}]`);
      else ids.set(e.id, i);
    }
    if (typeof e.sha256 === 'string') {
      const sha = e.sha256.toLowerCase();
      const first = hashes.get(sha);
      if (first !== undefined) report('value', [...at, 'sha256'], `${where([...at, 'sha256'])}: the same key hash appears twice`, `also keys[${first}] (${String((keys[first] as { id?: unknown }).id)})`);
      else hashes.set(sha, i);
    }
    meaningProblems(e, at, report, where);
  });
}

export class KeysFileError extends Error {}

/**
 * Reads and checks a keys file: its records, or KeysFileError with every
 * problem, one a line, as FILE:LINE:COL message (hint: ...), in file order.
 */
export function readKeyRecords(text: string, file: string): KeyRecord[] {
  const loaded = loadYaml(file, text);
  if (loaded.syntax.length) throw new KeysFileError(sortProblems(loaded.syntax).map(formatProblem).join('\n'));
  const { report, problems } = problemsIn(loaded);
  checkFileValue(loaded.value, report, whereInList(loaded.value, 'keys', 'id'));
  if (problems.length) throw new KeysFileError(sortProblems(problems).map(formatProblem).join('\n'));
  return (loaded.value as { keys: KeyRecord[] }).keys;
}

/**
 * One record's problems, with no file to place them in (a key store's entry,
 * an edit): `place: message (hint: ...)`, each; `where` names a place (given
 * the path in a file of this one entry: keys[0]...).
 */
export function recordProblems(record: unknown, where: (path: YamlPath) => string = (path) => pathText(path.slice(2)) || '(entry)'): string[] {
  const out: string[] = [];
  const report: Report = (_kind, _path, message, hint) => void out.push(`${message}${hint === undefined ? '' : ` (hint: ${hint})`}`);
  checkFileValue({ keys: [record] }, report, where);
  return [...new Set(out)];
}

// ------------------------------------------------------------------ a key store's hash

/**
 * A record as a key store's hash holds it: one hash field per field of the
 * key; strings as they are, numbers and booleans as text, lists and
 * mappings as JSON. The key's hash is the store's key, not a field.
 */
export function storeFields(r: KeyRecord): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of TOP_FIELDS) {
    if (f.name === 'sha256') continue;
    const v = valueOf(r, f);
    if (v === undefined) continue;
    out[f.name] = typeof v === 'string' ? v : f.kind === 'list' || f.kind === 'object' ? JSON.stringify(v) : String(v);
  }
  return out;
}

/**
 * The record a key store's hash stands for, not yet checked. A value that
 * does not decode as its field's kind stays a string, so the check names
 * the field; an empty value is no value.
 */
export function recordOfStore(hex: string, fields: Readonly<Record<string, string>>): unknown {
  const r: Record<string, unknown> = {};
  for (const [k, s] of Object.entries(fields)) {
    if (s === '') continue;
    const f = FIELDS.get(k);
    switch (f?.kind) {
      case 'list':
      case 'object':
        try {
          r[k] = JSON.parse(s);
        } catch {
          r[k] = s;
        }
        break;
      case 'integer':
        r[k] = /^-?[0-9]{1,15}$/.test(s) ? Number(s) : s;
        break;
      case 'boolean':
        r[k] = s === 'true' ? true : s === 'false' ? false : s;
        break;
      default:
        r[k] = s;
    }
  }
  r.sha256 = hex;
  return r;
}
