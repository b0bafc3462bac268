// ajv's errors -> problems at FILE:LINE:COL, in words ops read: one message
// per real mistake (a misspelt field is "unknown field, did you mean", not
// also "missing required field"), the field's description as the hint. The
// manifest (generator/validate.ts) and the keys file (runtime/keys/key-record.ts)
// both report through it; each adds the checks a schema cannot express.
import { closest, distance } from 'fastest-levenshtein';
import type { ErrorObject } from 'ajv';
import type { LoadedYaml, Problem, YamlPath } from './yaml-source.ts';

export type { Problem, YamlPath };

type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

interface SchemaNode {
  description?: string;
  type?: string | string[];
  properties?: Record<string, unknown>;
}

/** "did you mean 'x'?" when a candidate is close enough to be a typo, else undefined. */
export function didYouMean(word: string, candidates: Iterable<string>): string | undefined {
  const list = [...candidates];
  if (list.length === 0) return undefined;
  const best = closest(word, list);
  return distance(word, best) <= Math.max(2, Math.floor(word.length / 4)) ? `did you mean '${best}'?` : undefined;
}

export const orList = (xs: readonly string[]): string => (xs.length < 2 ? xs.join('') : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`);

/** "chains[3].upstreams[0]" */
export function pathText(path: YamlPath): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : s === '' ? p : `.${p}`;
  return s;
}

/**
 * Where a problem is, naming the item of the file's main list by its own
 * name field: "chains[3] (polygon) upstreams[0]", "keys[3] (acme-wallet) allow.origins[1]".
 */
export function whereInList(value: unknown, list: string, nameField: string): (path: YamlPath) => string {
  return (path) => {
    if (path[0] === list && typeof path[1] === 'number') {
      const item = getAt(value, [list, path[1]]);
      const name = isObj(item) && typeof item[nameField] === 'string' ? ` (${item[nameField]})` : '';
      const rest = pathText(path.slice(2));
      return `${list}[${path[1]}]${name}${rest ? ` ${rest}` : ''}`;
    }
    return pathText(path) || '(top level)';
  };
}

export function getAt(root: unknown, path: YamlPath): unknown {
  let v = root;
  for (const p of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string | number, unknown>)[p];
  }
  return v;
}

/** ajv's JSON pointer -> YAML path; a segment is a number only where the value there is a list. */
function toPath(root: unknown, pointer: string): (string | number)[] {
  if (pointer === '') return [];
  const out: (string | number)[] = [];
  let v = root;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const key = Array.isArray(v) ? Number(seg) : seg;
    out.push(key);
    v = v !== null && typeof v === 'object' ? (v as Record<string | number, unknown>)[key] : undefined;
  }
  return out;
}

export function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

export const shown = (v: unknown): string => (typeof v === 'string' ? `'${v}'` : (JSON.stringify(v) ?? String(v)));

/** One problem, one line: `FILE:LINE:COL message (hint: ...)`. */
export function formatProblem(p: Problem): string {
  return `${p.file}:${p.line}:${p.col} ${p.message}${p.hint === undefined ? '' : ` (hint: ${p.hint})`}`;
}

/** Duplicates dropped, in file order. */
export function sortProblems(problems: readonly Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems
    .filter((p) => {
      const k = `${p.line}:${p.col}:${p.message}`;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    })
    .sort((a, b) => a.line - b.line || a.col - b.col || (a.message < b.message ? -1 : a.message > b.message ? 1 : 0));
}

/** 'key': the key at path; 'value': the value at path; 'mapping': the first key of the mapping at path. */
export type Report = (kind: 'key' | 'value' | 'mapping', path: YamlPath, message: string, hint?: string) => void;

/** A Report that places each problem in a loaded YAML file, and the problems it collected. */
export function problemsIn(m: LoadedYaml): { readonly report: Report; readonly problems: Problem[] } {
  const problems: Problem[] = [];
  const report: Report = (kind, path, message, hint) => {
    let p;
    if (kind === 'key') p = m.keyAt(path);
    else if (kind === 'value') p = m.valueAt(path);
    else {
      // A mapping that lacks a field: point at its first key, where the entry starts.
      const v = getAt(m.value, path);
      const first = isObj(v) ? Object.keys(v)[0] : undefined;
      p = first === undefined ? m.valueAt(path) : m.keyAt([...path, first]);
    }
    problems.push(hint === undefined ? { file: m.file, ...p, message } : { file: m.file, ...p, message, hint });
  };
  return { report, problems };
}

export interface SchemaWording {
  /** A field the schema forbids with `false` (one that belongs to other variants): the message. */
  readonly forbidden?: (field: string, base: YamlPath) => string;
  /** A noun for an enum-valued field ("unknown upstream role 'x'"), by field name. */
  readonly enumNouns?: Readonly<Record<string, string>>;
  /** What a `required` missing under an if/then adds ("(required for rosetta chains)"). */
  readonly requiredFor?: (path: YamlPath) => string;
  /** A field's description as the hint on every problem about it that has no better one (a limit, a missing field), not only on a type or pattern. */
  readonly describeAll?: boolean;
  /** The description of the schema node at an ajv schemaPath (`#/properties/...`), for a union's hint. */
  readonly describeAt?: (schemaPath: string) => string | undefined;
}

export function schemaProblems(errors: readonly ErrorObject[], value: unknown, report: Report, where: (p: YamlPath) => string, wording: SchemaWording = {}): void {
  const drop = new Set<ErrorObject>();
  const under = (o: ErrorObject, pointer: string) => o.instancePath === pointer || o.instancePath.startsWith(`${pointer}/`);

  // anyOf: keep only the errors of the branch whose type fits the value, so an
  // upstream object with a typo reports the typo, not "must be string".
  for (const e of errors) {
    if (e.keyword !== 'anyOf') continue;
    const t = jsonType(getAt(value, toPath(value, e.instancePath)));
    const fit = (e.schema as SchemaNode[]).findIndex((b) => [b.type ?? []].flat().some((x) => x === t || (x === 'number' && t === 'integer')));
    for (const o of errors) {
      // Same anyOf in the schema, same list item in the document.
      if (!o.schemaPath.startsWith(`${e.schemaPath}/`) || !under(o, e.instancePath)) continue;
      if (fit === -1 || !o.schemaPath.startsWith(`${e.schemaPath}/${fit}/`)) drop.add(o);
    }
    if (fit !== -1) drop.add(e);
  }
  // A variant's rule that narrows a union (evm-jsonrpc's websocket: a boolean only) says what fits there: the union's own error is dropped.
  for (const e of errors) if (e.keyword === 'type' && e.schemaPath.includes('/then/')) for (const o of errors) if (o.keyword === 'anyOf' && o.instancePath === e.instancePath) drop.add(o);
  // A field on the wrong variant gets one message; what is wrong inside it does not matter.
  const forbidden = errors.filter((e) => e.keyword === 'false schema' && !drop.has(e));
  for (const f of forbidden) for (const o of errors) if (o !== f && under(o, f.instancePath)) drop.add(o);

  // A misspelt required field is one problem, not two: keep "unknown field 'chainid'
  // (did you mean 'chainId'?)" and drop "missing required field 'chainId'".
  for (const e of errors) {
    if (e.keyword !== 'additionalProperties') continue;
    const name = (e.params as { additionalProperty: string }).additionalProperty;
    for (const o of errors) {
      if (o.keyword !== 'required' || o.instancePath !== e.instancePath) continue;
      const missing = (o.params as { missingProperty: string }).missingProperty;
      if (didYouMean(name, [missing]) !== undefined) drop.add(o);
    }
  }

  for (const e of errors) {
    if (drop.has(e)) continue;
    const path = toPath(value, e.instancePath);
    const v = getAt(value, path);
    const parent = e.parentSchema as SchemaNode | undefined;
    const desc = parent?.description;
    switch (e.keyword) {
      case 'if': // "must match then schema": its then-errors say what is wrong
      case 'propertyNames': // reported through its inner 'pattern' error, at the key
        break;
      case 'false schema': {
        const field = path[path.length - 1] as string;
        const base = path.slice(0, -1);
        report('key', path, wording.forbidden?.(field, base) ?? `${where(base)}: '${field}' is not allowed here`);
        break;
      }
      case 'additionalProperties': {
        const name = (e.params as { additionalProperty: string }).additionalProperty;
        const allowed = Object.keys(parent?.properties ?? {});
        const hint = didYouMean(name, allowed) ?? (allowed.length ? `allowed here: ${allowed.join(', ')}` : undefined);
        report('key', [...path, name], `${where(path)}: unknown field '${name}'`, hint);
        break;
      }
      case 'required': {
        const name = (e.params as { missingProperty: string }).missingProperty;
        const forWhat = e.schemaPath.includes('/then/') ? (wording.requiredFor?.(path) ?? '') : '';
        const field = parent?.properties?.[name] as SchemaNode | undefined;
        report('mapping', path, `${where(path)}: missing required field '${name}'${forWhat}`, wording.describeAll ? field?.description : undefined);
        break;
      }
      case 'enum': {
        const allowed = (e.params as { allowedValues: unknown[] }).allowedValues.map(String);
        const field = String(path[path.length - 1]);
        const noun = wording.enumNouns?.[field];
        if (typeof v === 'string' && noun) {
          const dym = didYouMean(v, allowed);
          report('value', path, `${where(path.slice(0, -1))}: unknown ${noun} '${v}'`, `${dym ? `${dym} ` : ''}use ${orList(allowed)}`);
        } else report('value', path, `${where(path)}: must be one of ${allowed.join(', ')}, not ${shown(v)}`);
        break;
      }
      case 'const': {
        // One branch of a union (hedge.afterMs: a number or "p95"): the field's description says what else fits.
        const union = /\/anyOf\/\d+\/const$/.test(e.schemaPath) ? wording.describeAt?.(e.schemaPath.replace(/\/anyOf\/\d+\/const$/, '')) : undefined;
        report('value', path, `${where(path)}: must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}, not ${shown(v)}`, union);
        break;
      }
      case 'type':
        // The field's description says what belongs there; the root's would only repeat the README.
        report('value', path, `${where(path)}: must be ${[(e.params as { type: string | string[] }).type].flat().join(' or ')}, not ${jsonType(v)}`, path.length ? desc : undefined);
        break;
      case 'pattern': {
        const pattern = (e.params as { pattern: string }).pattern;
        if (e.propertyName !== undefined) {
          report('key', [...path, e.propertyName], `${where(path)}: '${e.propertyName}' is not a valid name here (must match ${pattern})`);
        } else report('value', path, `${where(path)}: ${shown(v)} does not match ${pattern}`, desc);
        break;
      }
      case 'minItems':
        report('value', path, `${where(path)}: must list at least ${(e.params as { limit: number }).limit}`, desc);
        break;
      case 'minProperties':
        report('value', path, `${where(path)}: must have at least ${(e.params as { limit: number }).limit} entry`, desc);
        break;
      case 'anyOf': {
        const kinds = (e.schema as SchemaNode[]).map((b) => [b.type ?? 'any'].flat().join(' or '));
        report('value', path, `${where(path)}: must be ${orList(kinds)}, not ${jsonType(v)}`, desc);
        break;
      }
      default:
        // minimum, maximum, minLength...: ajv's own words ("must be >= 1") are clear.
        report('value', path, `${where(path)}: ${e.message ?? 'is invalid'}, not ${shown(v)}`, wording.describeAll ? desc : undefined);
    }
  }
}
