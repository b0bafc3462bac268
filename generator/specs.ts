// The published specs, with the reviewed overlay applied, as the JSON Schemas
// the request validators are compiled from: EVM params per method (OpenRPC),
// Rosetta request bodies per endpoint (OpenAPI 3.0), Blockbook path and query
// parameters per endpoint (OpenAPI 3.1). Read once per process.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export const SPECS_DIR = join(PROJECT_ROOT, 'schema', 'specs');

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

interface OverlayChange {
  readonly at: string;
  readonly set: Json;
  readonly why: string;
}

/** A JSON pointer segment: `~1` is `/`, `~0` is `~`. */
function unescape(seg: string): string {
  return seg.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** Applies one change; throws naming the pointer when its parent is missing. */
function applyChange(doc: Json, change: OverlayChange, file: string): void {
  const segs = change.at.split('/').slice(1).map(unescape);
  let node: Json = doc;
  for (let i = 0; i < segs.length - 1; i++) {
    const seg = segs[i]!;
    let next: Json | undefined;
    if (Array.isArray(node)) {
      next = seg.startsWith('@name=') ? node.find((e) => (e as Obj)?.name === seg.slice(6)) : node[Number(seg)];
    } else if (node !== null && typeof node === 'object') {
      next = node[seg];
    }
    if (next === undefined || next === null || typeof next !== 'object') {
      throw new Error(`schema/specs/overlay.yaml: ${file} ${change.at}: no ${segs.slice(0, i + 1).join('/')} in the document`);
    }
    node = next;
  }
  const last = segs[segs.length - 1]!;
  if (Array.isArray(node)) {
    if (last === '-') node.push(structuredClone(change.set));
    else node[Number(last)] = structuredClone(change.set);
  } else (node as Obj)[last] = structuredClone(change.set);
}

export interface Specs {
  readonly openrpc: Obj;
  readonly rosetta: Obj;
  readonly blockbook: Obj;
}

let loaded: Specs | null = null;

/** The three documents with the overlay applied. */
export function loadSpecs(): Specs {
  if (loaded !== null) return loaded;
  const read = (f: string) => readFileSync(join(SPECS_DIR, f), 'utf8');
  const docs: Record<string, Obj> = {
    'eth-openrpc.json': JSON.parse(read('eth-openrpc.json')) as Obj,
    'rosetta-api.json': JSON.parse(read('rosetta-api.json')) as Obj,
    'blockbook-openapi.yaml': parseYaml(read('blockbook-openapi.yaml')) as Obj,
  };
  const overlay = parseYaml(read('overlay.yaml')) as Record<string, OverlayChange[]>;
  for (const [file, changes] of Object.entries(overlay)) {
    const doc = docs[file];
    if (doc === undefined) throw new Error(`schema/specs/overlay.yaml: no spec document ${file}`);
    for (const c of changes) applyChange(doc, c, file);
  }
  loaded = { openrpc: docs['eth-openrpc.json']!, rosetta: docs['rosetta-api.json']!, blockbook: docs['blockbook-openapi.yaml']! };
  return loaded;
}

/** Descriptions and examples are for people; the validators keep titles (for messages) and rules. */
function strip(v: Json): Json {
  if (Array.isArray(v)) return v.map(strip);
  if (v === null || typeof v !== 'object') return v;
  const out: Obj = {};
  for (const k of Object.keys(v)) {
    if (k === 'description' || k === 'example' || k === 'examples' || k.startsWith('x-')) continue;
    out[k] = strip(v[k]!);
  }
  return out;
}

// ---- EVM -----------------------------------------------------------------

/** The schema id the EVM method schemas refer to for shared definitions. */
export const EVM_DEFS = 'evm';
export const ROSETTA_DEFS = 'rosetta';

/** The document of shared EVM definitions, referred to as `evm#/components/schemas/...`: those `roots` need. */
export function evmDefinitions(roots: readonly Obj[]): Obj {
  return { $id: EVM_DEFS, components: { schemas: reachable(loadSpecs().openrpc, roots, EVM_DEFS) } };
}

/**
 * The component schemas that `roots` refer to, directly or through each
 * other: the documents also describe answers, which no request validator needs.
 */
function reachable(doc: Obj, roots: readonly Obj[], id: string): Obj {
  const all = (doc.components as Obj).schemas as Obj;
  const out: Obj = {};
  const prefix = `${id}#/components/schemas/`;
  const visit = (v: Json): void => {
    if (Array.isArray(v)) return v.forEach(visit);
    if (v === null || typeof v !== 'object') return;
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string') {
        const name = x.startsWith(prefix) ? x.slice(prefix.length) : x.startsWith('#/components/schemas/') ? x.slice(21) : null;
        if (name !== null && !(name in out) && all[name] !== undefined) {
          out[name] = strip(all[name]!);
          visit(out[name]!);
        }
      } else visit(x);
    }
  };
  roots.forEach(visit);
  return Object.fromEntries(Object.keys(out).sort().map((k) => [k, out[k]!]));
}

interface OpenRpcParam {
  readonly name: string;
  readonly required?: boolean;
  readonly schema: Obj;
}

function rebase(schema: Json, id: string): Json {
  if (Array.isArray(schema)) return schema.map((s) => rebase(s, id));
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Obj = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#') ? `${id}${v}` : rebase(v, id);
  return out;
}

/** The methods the OpenRPC document describes. */
export function evmMethodNames(): string[] {
  return (loadSpecs().openrpc.methods as Obj[]).map((m) => m.name as string);
}

/**
 * One method's params as a JSON Schema of a positional array: each param in
 * its place, the required ones first and always there, an optional one
 * absent or null, nothing past the last.
 */
export function evmParamsSchema(method: string): Obj {
  const m = (loadSpecs().openrpc.methods as Obj[]).find((x) => x.name === method);
  if (m === undefined) throw new Error(`eth-openrpc.json has no method ${method}`);
  const params = m.params as unknown as OpenRpcParam[];
  let required = 0;
  while (required < params.length && params[required]!.required === true) required++;
  const items = params.map((p, i): Obj => {
    const s = rebase(strip(p.schema), EVM_DEFS) as Obj;
    if (i < required) return { ...s, title: p.name };
    // An optional param's union names what it takes, not the param ("must be a block number, tag, or block hash").
    const ref = typeof p.schema.$ref === 'string' ? (((loadSpecs().openrpc.components as Obj).schemas as Obj)[p.schema.$ref.split('/').pop()!] as Obj | undefined) : undefined;
    return { title: typeof ref?.title === 'string' ? ref.title : p.name, anyOf: [s, { type: 'null' }] };
  });
  const schema: Obj = { $id: `evm.${method}`, type: 'array', minItems: required, maxItems: params.length };
  if (items.length > 0) schema.items = items;
  return schema;
}

/** The OpenRPC document's own examples of a method's params, as arrays. */
export function evmExamples(method: string): Json[][] {
  const m = (loadSpecs().openrpc.methods as Obj[]).find((x) => x.name === method);
  const ex = (m?.examples ?? []) as Obj[];
  return ex.map((e) => (e.params as Obj[]).map((p) => p.value!));
}

// ---- Rosetta ---------------------------------------------------------------

/** The document of shared Rosetta definitions: those `roots` need. */
export function rosettaDefinitions(roots: readonly Obj[]): Obj {
  return { $id: ROSETTA_DEFS, components: { schemas: reachable(loadSpecs().rosetta, roots, ROSETTA_DEFS) } };
}

/** An endpoint's request body schema (`block/transaction` -> BlockTransactionRequest). */
export function rosettaBodySchema(endpoint: string): Obj {
  const paths = loadSpecs().rosetta.paths as Obj;
  const op = (paths[`/${endpoint}`] as Obj | undefined)?.post as Obj | undefined;
  const ref = ((((op?.requestBody as Obj)?.content as Obj)?.['application/json'] as Obj)?.schema as Obj)?.$ref;
  if (typeof ref !== 'string') throw new Error(`rosetta-api.json has no request body for /${endpoint}`);
  return { $id: `rosetta.${endpoint.replace(/\//g, "_")}`, $ref: `${ROSETTA_DEFS}${ref}` };
}

// ---- Blockbook ---------------------------------------------------------------

/** How a query or path string becomes the typed value a schema checks. */
export type ParamKind = 'string' | 'integer' | 'boolean' | 'list' | 'integer-or-string';

export interface BlockbookParams {
  /** The path parameter's name, or null for an endpoint without one. */
  readonly path: string | null;
  /** Every parameter (the path's and the query's) to how its text is read. */
  readonly params: Readonly<Record<string, ParamKind>>;
  /** The schema of `{ [name]: typed value }`, path parameter included. */
  readonly schema: Obj;
}

function kindOf(schema: Obj): ParamKind {
  if (schema.type === 'integer') return 'integer';
  if (schema.type === 'boolean') return 'boolean';
  if (schema.type === 'array') return 'list';
  if (Array.isArray(schema.oneOf) && (schema.oneOf as Obj[]).some((s) => s.type === 'integer')) return 'integer-or-string';
  return 'string';
}

/** A v2 endpoint's parameters (`block` -> GET /api/v2/block/{blockId}). */
export function blockbookParams(endpoint: string, hasParam: boolean): BlockbookParams {
  const doc = loadSpecs().blockbook;
  const paths = doc.paths as Obj;
  const key = Object.keys(paths).find((p) => (hasParam ? p.startsWith(`/api/v2/${endpoint}/{`) : p === `/api/v2/${endpoint}/`));
  if (key === undefined) throw new Error(`blockbook-openapi.yaml has no GET /api/v2/${endpoint}`);
  const shared = ((doc.components as Obj).parameters ?? {}) as Obj;
  const params = (((paths[key] as Obj).get as Obj).parameters ?? []) as Obj[];
  const properties: Obj = {};
  const required: string[] = [];
  const kinds: Record<string, ParamKind> = {};
  let path: string | null = null;
  for (const raw of params) {
    const p = typeof raw.$ref === 'string' ? (shared[(raw.$ref as string).split('/').pop()!] as Obj) : raw;
    const name = p.name as string;
    const schema = strip(p.schema as Obj) as Obj;
    properties[name] = schema;
    if (p.required === true || p.in === 'path') required.push(name);
    if (p.in === 'path') path = name;
    kinds[name] = kindOf(schema);
  }
  return {
    path,
    params: kinds,
    schema: { $id: `blockbook.${endpoint}`, type: 'object', additionalProperties: false, required: required.sort(), properties },
  };
}
