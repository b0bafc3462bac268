// Values generated from a JSON Schema (the subset the specs use: $ref,
// anyOf/oneOf/allOf, objects, tuples and arrays, patterns, enums, numbers),
// and mutations of them. Generated values are meant to be valid, and mostly
// are; mutations mostly are not. The differential test does not trust either:
// it only needs both kinds to be common, and compares two validators on each.
import fc from 'fast-check';

type Schema = Record<string, unknown>;
export type Resolve = (ref: string) => Schema;

const MAX_DEPTH = 6;

const jsonLeaf = fc.oneof(fc.string({ maxLength: 6 }), fc.integer({ min: -5, max: 1000 }), fc.boolean(), fc.constant(null));

/** Arbitraries made once per schema and depth: building one (a regex's above all) costs far more than drawing from it. */
const made = new WeakMap<Schema, Map<number, fc.Arbitrary<unknown>>>();

export function arbitraryOf(schema: Schema | boolean, resolve: Resolve, depth = 0): fc.Arbitrary<unknown> {
  if (schema === true || schema === undefined) return jsonLeaf;
  if (schema === false) return fc.constant(null);
  let byDepth = made.get(schema);
  if (byDepth === undefined) made.set(schema, (byDepth = new Map()));
  let a = byDepth.get(depth);
  if (a === undefined) byDepth.set(depth, (a = make(schema, resolve, depth)));
  return a;
}

function make(schema: Schema, resolve: Resolve, depth: number): fc.Arbitrary<unknown> {
  if (typeof schema.$ref === 'string') return arbitraryOf(resolve(schema.$ref as string), resolve, depth);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if ('const' in schema) return fc.constant(schema.const);
  for (const k of ['anyOf', 'oneOf'] as const) {
    if (Array.isArray(schema[k])) return fc.oneof(...(schema[k] as Schema[]).map((s) => arbitraryOf(s, resolve, depth)));
  }
  if (Array.isArray(schema.allOf)) {
    // Objects in the specs' allOf are merged by properties; anything else takes the first branch.
    const parts = (schema.allOf as Schema[]).map((s) => (typeof s.$ref === 'string' ? resolve(s.$ref) : s));
    const merged: Schema = { type: 'object', properties: {}, required: [] };
    for (const p of parts) {
      Object.assign(merged.properties as Schema, p.properties ?? {});
      (merged.required as string[]).push(...((p.required as string[] | undefined) ?? []));
    }
    return arbitraryOf(merged, resolve, depth);
  }
  const type = Array.isArray(schema.type) ? (schema.type as string[])[0] : (schema.type as string | undefined);
  if (depth > MAX_DEPTH) return type === 'array' ? fc.constant([]) : type === 'object' ? fc.constant({}) : jsonLeaf;
  switch (type) {
    case 'string': {
      if (typeof schema.pattern === 'string') return fc.stringMatching(new RegExp(schema.pattern as string, 'u'));
      const min = (schema.minLength as number | undefined) ?? 0;
      return fc.string({ minLength: min, maxLength: min + 8 });
    }
    case 'integer':
      return fc.integer({ min: (schema.minimum as number | undefined) ?? -10, max: (schema.maximum as number | undefined) ?? 100_000 });
    case 'number':
      return fc.double({ min: -1e6, max: 1e6, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      if (Array.isArray(schema.items)) {
        const items = (schema.items as Schema[]).map((s) => arbitraryOf(s, resolve, depth + 1));
        const min = (schema.minItems as number | undefined) ?? 0;
        return fc.integer({ min, max: items.length }).chain((n) => fc.tuple(...items.slice(0, n)));
      }
      const item = schema.items === undefined ? jsonLeaf : arbitraryOf(schema.items as Schema, resolve, depth + 1);
      return fc.array(item, { minLength: (schema.minItems as number | undefined) ?? 0, maxLength: Math.min(3, (schema.maxItems as number | undefined) ?? 3) });
    }
    default: {
      const props = (schema.properties ?? {}) as Record<string, Schema>;
      const required = new Set((schema.required as string[] | undefined) ?? []);
      const names = Object.keys(props);
      const record = fc.record(Object.fromEntries(names.map((n) => [n, arbitraryOf(props[n]!, resolve, depth + 1)])), { requiredKeys: names.filter((n) => required.has(n)) });
      const extra = schema.additionalProperties;
      if (extra !== undefined && extra !== false && names.length === 0) {
        const key = schema.propertyNames === undefined ? fc.string({ minLength: 1, maxLength: 6 }) : (arbitraryOf(schema.propertyNames as Schema, resolve, depth + 1) as fc.Arbitrary<string>);
        return fc.dictionary(key, arbitraryOf(extra as Schema, resolve, depth + 1), { maxKeys: 2 });
      }
      if (type === undefined && names.length === 0) return jsonLeaf;
      return record;
    }
  }
}

/** Every place in a value (as a path of keys and indexes), the value itself first. */
function places(v: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => places(x, [...at, i], out));
  else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) places(x, [...at, k], out);
  return out;
}

const BAD = ['0x', '0xZZ', '0x01', '0x0g', 'latest ', 'LATEST', '', '0X1', '0x' + 'a'.repeat(41), 1.5, -1, 0, {}, [], null, true, 'x'];

export type Mutation = { readonly op: 'replace' | 'delete' | 'add-key' | 'append' | 'upper'; readonly place: number; readonly bad: unknown };

export const mutation: fc.Arbitrary<Mutation> = fc.record({
  op: fc.constantFrom('replace', 'replace', 'delete', 'add-key', 'append', 'upper'),
  place: fc.nat(),
  bad: fc.constantFrom(...BAD),
});

/** `v` with one change at one of its places. */
export function mutate(v: unknown, m: Mutation): unknown {
  const copy: unknown = structuredClone(v);
  const all = places(copy);
  const path = all[m.place % all.length]!;
  const parentPath = path.slice(0, -1);
  const last = path[path.length - 1];
  let parent: any = copy;
  for (const k of parentPath) parent = parent[k];
  let target: any = path.length === 0 ? copy : parent[last!];
  switch (m.op) {
    case 'replace':
      if (path.length === 0) return m.bad;
      parent[last!] = m.bad;
      return copy;
    case 'delete':
      if (path.length === 0) return undefined;
      if (Array.isArray(parent)) parent.splice(last as number, 1);
      else delete parent[last!];
      return copy;
    case 'add-key':
      if (target !== null && typeof target === 'object' && !Array.isArray(target)) {
        // Another spelling of a field it has (as Go's JSON reader would match it), or a new one.
        const k0 = Object.keys(target)[0];
        target[k0 === undefined ? 'extra' : k0.toUpperCase() !== k0 ? k0.toUpperCase() : `${k0}X`] = m.bad;
        return copy;
      }
      return Array.isArray(target) ? (target.push(m.bad), copy) : { value: copy };
    case 'append':
      if (Array.isArray(target)) {
        target.push(m.bad);
        return copy;
      }
      return [copy, m.bad];
    case 'upper':
      if (typeof target === 'string') {
        target = target.toUpperCase();
        if (path.length === 0) return target;
        parent[last!] = target;
      }
      return copy;
  }
}
