// Schema first (ajv, every error), then the checks a schema cannot express
// (cross-references, uniqueness, URLs). Every problem is collected, with the
// line and column of the offending key or value, and sorted; nothing stops at
// the first one.
import { Ajv, type ErrorObject } from 'ajv';
import { closest, distance } from 'fastest-levenshtein';
import schema from '../schema/gateway.schema.json' with { type: 'json' };
import type { LoadedManifest, Problem, YamlPath } from './load.ts';
import { parseTemplate, templateDefaultValue, TemplateError } from './template.ts';
import { KNOWN_METHODS } from './known-methods.ts';

const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, strictRequired: false, allowUnionTypes: true });
const validateSchema = ajv.compile(schema);

/** Paths the server itself serves on every listener. */
export const RESERVED_PATHS = ['healthz', 'readyz', 'metrics'] as const;
export const ROSETTA_NETWORKS = ['mainnet', 'preprod', 'preview'] as const;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  if (candidates.length === 0) return undefined;
  const best = closest(word, candidates as string[]);
  return distance(word, best) <= Math.max(2, Math.floor(word.length / 4)) ? `did you mean '${best}'?` : undefined;
}

function pathText(path: YamlPath): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : s === '' ? p : `.${p}`;
  return s === '' ? '(top level)' : s;
}

function toPath(instancePath: string): (string | number)[] {
  if (instancePath === '') return [];
  return instancePath
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

function getAt(root: unknown, path: YamlPath): unknown {
  let v = root;
  for (const p of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string | number, unknown>)[p];
  }
  return v;
}

function jsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' && Number.isInteger(v) ? 'integer' : typeof v;
}

export function validateManifest(m: LoadedManifest): Problem[] {
  if (m.syntax.length) return m.syntax;
  const problems: Problem[] = [];
  const at = (kind: 'key' | 'value', path: YamlPath, message: string, hint?: string) => {
    const p = kind === 'key' ? m.keyAt(path) : m.valueAt(path);
    problems.push(hint === undefined ? { file: m.file, ...p, message } : { file: m.file, ...p, message, hint });
  };
  const value = m.value;
  const chainLabel = (path: YamlPath): string => {
    if (path[0] === 'chains' && typeof path[1] === 'number') {
      const c = getAt(value, ['chains', path[1]]);
      const name = isObj(c) && typeof c.path === 'string' ? ` (${c.path})` : '';
      return `chains[${path[1]}]${name}`;
    }
    return '';
  };
  const where = (path: YamlPath): string => {
    const chain = chainLabel(path);
    if (!chain) return pathText(path);
    const rest = pathText(path.slice(2));
    return rest === '(top level)' ? chain : `${chain} ${rest}`;
  };

  if (!validateSchema(value)) schemaProblems(validateSchema.errors ?? [], value, at, where);
  if (isObj(value)) semanticProblems(value, at, where);

  const seen = new Set<string>();
  return problems
    .filter((p) => {
      const k = `${p.line}:${p.col}:${p.message}`;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    })
    .sort((a, b) => a.line - b.line || a.col - b.col || (a.message < b.message ? -1 : 1));
}

type At = (kind: 'key' | 'value', path: YamlPath, message: string, hint?: string) => void;

function schemaProblems(errors: ErrorObject[], value: unknown, at: At, where: (p: YamlPath) => string): void {
  // anyOf: keep only the errors of the branch whose type fits the value, so an
  // upstream object with a typo reports the typo, not "must be string".
  const drop = new Set<ErrorObject>();
  for (const e of errors) {
    if (e.keyword !== 'anyOf') continue;
    const v = getAt(value, toPath(e.instancePath));
    const branches = (e.schema as { type?: string | string[] }[]).map((b) => b.type);
    const fit = branches.findIndex((t) => t !== undefined && (Array.isArray(t) ? t : [t]).some((x) => x === jsonType(v) || (x === 'number' && jsonType(v) === 'integer')));
    for (const o of errors) {
      if (!o.schemaPath.startsWith(`${e.schemaPath}/`)) continue;
      if (fit === -1 || !o.schemaPath.startsWith(`${e.schemaPath}/${fit}/`)) drop.add(o);
    }
    if (fit !== -1) drop.add(e);
  }
  for (const e of errors) {
    if (drop.has(e) || e.keyword === 'if') continue;
    const path = toPath(e.instancePath);
    const desc = (e.parentSchema as { description?: string } | undefined)?.description;
    switch (e.keyword) {
      case 'additionalProperties': {
        const name = (e.params as { additionalProperty: string }).additionalProperty;
        const allowed = Object.keys((e.parentSchema as { properties?: object }).properties ?? {});
        const hint = didYouMean(name, allowed) ?? (allowed.length ? `allowed here: ${allowed.join(', ')}` : undefined);
        at('key', [...path, name], `${where(path)}: unknown field '${name}'`, hint);
        break;
      }
      case 'required': {
        const name = (e.params as { missingProperty: string }).missingProperty;
        const iface = getAt(value, [...path, 'interface']);
        const forWhat = e.schemaPath.includes('/then/') && typeof iface === 'string' ? ` (required for ${iface} chains)` : '';
        at(path.length ? 'value' : 'key', path, `${where(path)}: missing required field '${name}'${forWhat}`);
        break;
      }
      case 'enum': {
        const allowed = (e.params as { allowedValues: unknown[] }).allowedValues.map(String);
        const v = getAt(value, path);
        at('value', path, `${where(path)}: must be one of ${allowed.join(', ')}`, typeof v === 'string' ? didYouMean(v, allowed) : undefined);
        break;
      }
      case 'const':
        at('value', path, `${where(path)}: must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}`);
        break;
      case 'type':
        at('value', path, `${where(path)}: must be ${(e.params as { type: string | string[] }).type.toString().replace(',', ' or ')}`, desc);
        break;
      case 'pattern':
        at('value', path, `${where(path)}: '${String(getAt(value, path))}' is not valid here`, desc);
        break;
      case 'propertyNames':
        break; // reported through its inner 'pattern' error, with the key
      case 'minItems':
        at('value', path, `${where(path)}: must list at least ${(e.params as { limit: number }).limit}`, desc);
        break;
      case 'anyOf':
        at('value', path, `${where(path)}: ${desc ?? 'has the wrong shape'}`);
        break;
      default:
        at('value', path, `${where(path)}: ${e.message ?? 'is invalid'}`);
    }
    if (e.keyword === 'pattern' && e.propertyName !== undefined) {
      at('key', [...path, e.propertyName], `${where(path)}: '${e.propertyName}' is not a valid name here`);
    }
  }
}

function semanticProblems(doc: Obj, at: At, where: (p: YamlPath) => string): void {
  const listeners = isObj(doc.listeners) ? doc.listeners : {};
  const listenerNames = Object.keys(listeners);
  const methodSets = isObj(doc.methodSets) ? doc.methodSets : {};
  const setNames = Object.keys(methodSets);

  const checkTemplate = (path: YamlPath, s: unknown): ReturnType<typeof parseTemplate> | null => {
    if (typeof s !== 'string') return null;
    try {
      return parseTemplate(s);
    } catch (err) {
      if (err instanceof TemplateError) at('value', path, `${where(path)}: ${err.message}`, 'write ${VAR} or ${VAR:-default}');
      return null;
    }
  };
  const literalPorts = new Map<number, string>();
  const checkPort = (path: YamlPath, v: unknown, owner: string) => {
    if (typeof v === 'number' && (v < 0 || v > 65535 || !Number.isInteger(v))) return; // the schema reports it
    const t = typeof v === 'number' ? { parts: [String(v)] } : checkTemplate(path, v);
    if (!t) return;
    // A port with a default counts at its default: two listeners on 8545 by default clash.
    const literal = templateDefaultValue(t);
    if (literal === null) return;
    const n = Number(literal);
    if (!Number.isInteger(n) || n < 0 || n > 65535) {
      at('value', path, `${where(path)}: '${literal}' is not a port number`, 'use 0..65535, or ${VAR:-default}');
      return;
    }
    if (n === 0) return;
    const other = literalPorts.get(n);
    if (other !== undefined) at('value', path, `${where(path)}: port ${n} is already used by ${other}`);
    else literalPorts.set(n, owner);
  };
  for (const name of listenerNames) {
    const l = listeners[name];
    if (!isObj(l)) continue;
    checkTemplate(['listeners', name, 'host'], l.host);
    checkPort(['listeners', name, 'port'], l.port, `listener '${name}'`);
  }
  if (isObj(doc.admin)) {
    checkTemplate(['admin', 'host'], doc.admin.host);
    checkPort(['admin', 'port'], doc.admin.port, 'the admin listener');
  }

  const checkMethods = (path: YamlPath, list: unknown) => {
    if (!Array.isArray(list)) return;
    const seen = new Set<string>();
    list.forEach((m, i) => {
      if (typeof m !== 'string') return;
      if (seen.has(m)) at('value', [...path, i], `${where([...path, i])}: method '${m}' is listed twice`);
      seen.add(m);
      if (KNOWN_METHODS.has(m)) return;
      const hint = didYouMean(m, [...KNOWN_METHODS]);
      if (hint) at('value', [...path, i], `${where([...path, i])}: unknown method '${m}'`, hint);
    });
  };
  for (const name of setNames) checkMethods(['methodSets', name], methodSets[name]);

  if (!Array.isArray(doc.chains)) return;
  const pathsByListener = new Map<string, Map<string, number>>();
  const idsByListener = new Map<string, Map<number, number>>();
  doc.chains.forEach((c, i) => {
    if (!isObj(c)) return;
    const base: YamlPath = ['chains', i];
    const iface = c.interface;
    const listener = typeof c.listener === 'string' ? c.listener : null;
    if (listener !== null && !listenerNames.includes(listener)) {
      at('value', [...base, 'listener'], `${where(base)}: unknown listener '${listener}'`, didYouMean(listener, listenerNames) ?? `listeners: ${listenerNames.join(', ') || '(none)'}`);
    }
    if (typeof c.path === 'string') {
      if ((RESERVED_PATHS as readonly string[]).includes(c.path)) {
        at('value', [...base, 'path'], `${where(base)}: path '${c.path}' clashes with the server's own /${c.path} route`, `reserved: ${RESERVED_PATHS.join(', ')}`);
      }
      if (listener !== null) {
        const seen = pathsByListener.get(listener) ?? new Map<string, number>();
        pathsByListener.set(listener, seen);
        const first = seen.get(c.path);
        if (first !== undefined) at('value', [...base, 'path'], `${where(base)}: path '${c.path}' is already used on listener '${listener}' by chains[${first}]`);
        else seen.set(c.path, i);
      }
    }
    const only: [string, string][] = [
      ['chainId', 'evm-jsonrpc'],
      ['methods', 'evm-jsonrpc'],
      ['network', 'rosetta'],
      ['sendtx', 'blockbook'],
    ];
    for (const [field, owner] of only) {
      if (c[field] !== undefined && typeof iface === 'string' && iface !== owner) {
        at('key', [...base, field], `${where(base)}: '${field}' applies to ${owner} chains only, not ${iface}`);
      }
    }
    if (iface === 'evm-jsonrpc') {
      if (typeof c.methods === 'string' && !setNames.includes(c.methods)) {
        at('value', [...base, 'methods'], `${where(base)}: unknown methodSet '${c.methods}'`, didYouMean(c.methods, setNames) ?? `methodSets: ${setNames.join(', ') || '(none)'}`);
      }
      checkMethods([...base, 'methods'], c.methods);
      if (typeof c.chainId === 'number' && listener !== null) {
        const ids = idsByListener.get(listener) ?? new Map<number, number>();
        idsByListener.set(listener, ids);
        const first = ids.get(c.chainId);
        if (first !== undefined) at('value', [...base, 'chainId'], `${where(base)}: chainId ${c.chainId} is already used on listener '${listener}' by chains[${first}]`);
        else ids.set(c.chainId, i);
      }
    }
    if (iface === 'rosetta' && typeof c.network === 'string' && !(ROSETTA_NETWORKS as readonly string[]).includes(c.network)) {
      at('value', [...base, 'network'], `${where(base)}: unknown Rosetta network '${c.network}'`, didYouMean(c.network, ROSETTA_NETWORKS) ?? `use ${ROSETTA_NETWORKS.join(', ')}`);
    }
    if (Array.isArray(c.upstreams)) {
      c.upstreams.forEach((u, j) => {
        const path: YamlPath = isObj(u) ? [...base, 'upstreams', j, 'url'] : [...base, 'upstreams', j];
        const raw = isObj(u) ? u.url : u;
        const t = checkTemplate(path, raw);
        if (isObj(u) && isObj(u.headers)) for (const h of Object.keys(u.headers)) checkTemplate([...base, 'upstreams', j, 'headers', h], u.headers[h]);
        if (!t) return;
        const resolved = templateDefaultValue(t);
        if (resolved === null) return; // ${VAR} without a default: checked when the server starts
        let ok = false;
        try {
          const url = new URL(resolved);
          ok = (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
        } catch {
          ok = false;
        }
        if (!ok) at('value', path, `${where(base)}: upstream '${resolved}' is not an http(s) URL`, 'write http://host:port/path or https://...');
      });
    }
  });
}
