// schema/gateway.schema.json -> runtime/chain-types.gen.ts: the types of a
// chain of the manifest, per interface kind, so that a chain's fields are
// written down once, in the schema:
//   InterfaceKind                the schema's `interface` enum;
//   <Kind>ChainConfig            a chain as the manifest writes it, for each kind
//                                (the fields its if/then block leaves it), and
//                                UpstreamConfig (normalize.ts reads these);
//   <Kind>Settings               what the runtime reads of such a chain as the
//                                manifest set it, its default filled by the
//                                build, and UpstreamSettings; ChainSettings,
//                                every kind's settings in one (the model's);
//                                LimitsSpec, the request limits, filled.
// A setting is every field of a chain or upstream but those the model builds
// in a shape of its own (BUILT_CHAIN_FIELDS, BUILT_UPSTREAM_FIELDS): a new
// field in the schema is a new setting, typed, filled and emitted with no other
// change. The file is committed; `npm run gen:types` writes it, and a test
// keeps it equal to what this module makes.
import { StructureKind, type InterfaceDeclarationStructure, type OptionalKind, type PropertySignatureStructure, type StatementStructures } from 'ts-morph';
import schema from '../schema/gateway.schema.json' with { type: 'json' };
import { lit, scalarType } from './emit/literal.ts';
import { declarationsText, generatedProject } from './emit/source.ts';

export const GATEWAY_SCHEMA_PATH = 'schema/gateway.schema.json';
export const CHAIN_TYPES_PATH = 'runtime/chain-types.gen.ts';

export interface SchemaNode {
  description?: string;
  type?: string;
  enum?: readonly unknown[];
  const?: unknown;
  default?: unknown;
  properties?: Record<string, SchemaNode | false>;
  required?: readonly string[];
  items?: SchemaNode;
  anyOf?: readonly SchemaNode[];
  additionalProperties?: SchemaNode | boolean;
  allOf?: readonly { if?: SchemaNode; then?: SchemaNode }[];
}

const ROOT = schema as unknown as SchemaNode;
/** A chain's schema, and an upstream object's, in a gateway schema (the project's unless a test gives another). */
const chainOf = (root: SchemaNode): SchemaNode => (root.properties!.chains as SchemaNode).items!;
const upstreamOf = (root: SchemaNode): SchemaNode => (chainOf(root).properties!.upstreams as SchemaNode).items!.anyOf!.find((s) => s.type === 'object')!;

/** Fields of a chain the model builds in a shape of its own (normalize.ts); every other field is a setting. */
export const BUILT_CHAIN_FIELDS: ReadonlySet<string> = new Set(['path', 'interface', 'listener', 'upstreams', 'limits', 'validate', 'methods', 'cache', 'finality']);
/** Fields of an upstream the model builds itself (templates); every other field is a setting. */
export const BUILT_UPSTREAM_FIELDS: ReadonlySet<string> = new Set(['url', 'ws', 'headers', 'rateLimit']);
/** Settings with no schema default whose default normalize.ts works out (from the chain's upstreams): always filled. */
export const COMPUTED_DEFAULTS: ReadonlySet<string> = new Set(['rewriteTags', 'broadcast']);

/** One field of a chain or upstream, as one kind has it. */
export interface Field {
  readonly name: string;
  readonly schema: SchemaNode;
  /** The manifest must write it. */
  readonly required: boolean;
}

/** The schema's interface kinds, in its order. */
export function interfaceKinds(root = ROOT): readonly string[] {
  return (chainOf(root).properties!.interface as SchemaNode).enum as string[];
}

/** The kind's if/then block: what it forbids, requires or narrows. */
function kindRule(kind: string, root: SchemaNode): SchemaNode {
  const rule = (chainOf(root).allOf ?? []).find((r) => (r.if?.properties?.interface as SchemaNode | undefined)?.const === kind);
  return rule?.then ?? {};
}

/** A field's schema narrowed by a kind's rule: where the rule names a type, only the alternatives of that type. */
function narrowed(base: SchemaNode, rule: SchemaNode | undefined): SchemaNode {
  if (rule === undefined || rule.type === undefined || base.anyOf === undefined) return base;
  const anyOf = base.anyOf.filter((a) => a.type === rule.type);
  // The field's default stays where it is of the narrowed type (websocket's false on evm-jsonrpc; not finality's 'tag' on rosetta).
  const kept = typeof base.default === rule.type ? { default: base.default } : {};
  return anyOf.length === 1 ? { ...anyOf[0]!, description: base.description, ...kept } : { ...base, anyOf };
}

/** A chain's fields as `kind` has them, in schema order. */
export function chainFields(kind: string, root = ROOT): readonly Field[] {
  const chain = chainOf(root);
  const rule = kindRule(kind, root);
  const required = new Set([...(chain.required ?? []), ...(rule.required ?? [])]);
  const out: Field[] = [];
  for (const [name, s] of Object.entries(chain.properties!)) {
    const r = rule.properties?.[name];
    if (r === false || s === false) continue;
    out.push({ name, schema: narrowed(s, r), required: required.has(name) });
  }
  return out;
}

/** A kind's settings: its fields but those the model builds. */
export function chainSettings(kind: string, root = ROOT): readonly Field[] {
  return chainFields(kind, root).filter((f) => !BUILT_CHAIN_FIELDS.has(f.name));
}

/** An upstream's fields, in schema order. */
export function upstreamFields(root = ROOT): readonly Field[] {
  const upstream = upstreamOf(root);
  return Object.entries(upstream.properties!).map(([name, s]) => ({ name, schema: s as SchemaNode, required: (upstream.required ?? []).includes(name) }));
}

/** The request limits, as the top level sets them (every one with a default; a chain may override each). */
export function limitFields(root = ROOT): readonly Field[] {
  const limits = root.properties!.limits as SchemaNode;
  return Object.entries(limits.properties!).map(([name, s]) => ({ name, schema: s as SchemaNode, required: false }));
}

export function upstreamSettings(root = ROOT): readonly Field[] {
  return upstreamFields(root).filter((f) => !BUILT_UPSTREAM_FIELDS.has(f.name));
}

/** Whether a setting left out is null (an object with no default: "omitted: none"). */
export function nullWhenOmitted(f: Field): boolean {
  return f.schema.type === 'object' && f.schema.default === undefined;
}

/** A setting's value on a chain or upstream: the manifest's, else the schema's default, else null for an object; undefined: left out. */
export function settingValue(f: Field, written: unknown): unknown {
  if (written !== undefined) return structuredClone(written);
  if (f.schema.default !== undefined) return structuredClone(f.schema.default);
  return nullWhenOmitted(f) ? null : undefined;
}

const pascal = (s: string): string =>
  s
    .split(/[^A-Za-z0-9]+/)
    .filter((p) => p !== '')
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join('');

/** Turns schemas into TypeScript types, collecting the interfaces of the objects in them (once per name). */
class Types {
  readonly declarations = new Map<string, InterfaceDeclarationStructure>();

  constructor(
    private readonly readonly: boolean,
    private readonly suffix: string,
  ) {}

  of(s: SchemaNode, name: string): string {
    if (s.const !== undefined) return lit(s.const);
    if (s.enum !== undefined) return s.enum.map((v) => lit(v)).join(' | ');
    if (s.anyOf !== undefined) return [...new Set(s.anyOf.map((a) => this.of(a, name)))].join(' | ');
    const scalar = scalarType(s.type);
    if (scalar !== undefined) return scalar;
    switch (s.type) {
      case 'array': {
        const item = this.of(s.items!, name);
        const t = /[ |]/.test(item) ? `(${item})` : item;
        return this.readonly ? `readonly ${t}[]` : `${t}[]`;
      }
      case 'object': {
        if (s.properties === undefined) {
          const v = typeof s.additionalProperties === 'object' ? this.of(s.additionalProperties, name) : 'unknown';
          return this.readonly ? `Readonly<Record<string, ${v}>>` : `Record<string, ${v}>`;
        }
        const n = `${name}${this.suffix}`;
        if (!this.declarations.has(n)) {
          const props = Object.entries(s.properties).flatMap(([k, p]) => (p === false ? [] : [this.property(k, p, (s.required ?? []).includes(k), n)]));
          this.declarations.set(n, { kind: StructureKind.Interface, name: n, isExported: true, docs: s.description ? [s.description] : [], properties: props });
        }
        return n;
      }
      default:
        throw new Error(`${GATEWAY_SCHEMA_PATH}: ${name}: no TypeScript type for ${String(s.type)}`);
    }
  }

  property(name: string, s: SchemaNode, present: boolean, owner: string, orNull = false): OptionalKind<PropertySignatureStructure> {
    const t = this.of(s, pascal(name));
    return {
      name: /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : lit(name),
      isReadonly: this.readonly,
      hasQuestionToken: !present,
      type: orNull ? `${t} | null` : t,
      docs: s.description ? [s.description] : [`${owner}.${name}`],
    };
  }
}

function header(): string {
  return `// Generated by \`npm run gen:types\` (generator/chain-types.ts) from ${GATEWAY_SCHEMA_PATH}. DO NOT EDIT.\n// Change the schema and run npm run gen:types.`;
}

/** runtime/chain-types.gen.ts, from the project's schema (or, in a test, another). */
export function emitChainTypes(root = ROOT): string {
  const project = generatedProject();
  const kinds = interfaceKinds(root);
  const chain = chainOf(root);
  const config = new Types(false, 'Config');
  const spec = new Types(true, 'Spec');
  const statements: StatementStructures[] = [];

  statements.push({
    kind: StructureKind.TypeAlias,
    name: 'InterfaceKind',
    isExported: true,
    docs: [(chain.properties!.interface as SchemaNode).description!],
    type: kinds.map((k) => lit(k)).join(' | '),
  });

  // The manifest's shapes.
  const upstreamConfig = config.of(upstreamOf(root), 'Upstream');
  const chainConfigs: InterfaceDeclarationStructure[] = kinds.map((kind) => ({
    kind: StructureKind.Interface,
    name: `${pascal(kind)}ChainConfig`,
    isExported: true,
    docs: [`A chain of interface ${kind} as the manifest writes it.`],
    properties: chainFields(kind, root).map((f) =>
      f.name === 'interface'
        ? { name: 'interface', type: lit(kind), docs: [f.schema.description!] }
        : f.name === 'upstreams'
          ? { name: 'upstreams', type: `(string | ${upstreamConfig})[]`, docs: [f.schema.description!] }
          : config.property(f.name, f.schema, f.required, kind),
    ),
  }));

  // The settings, as the runtime reads them.
  const settingsOf = (f: Field) => spec.property(f.name, f.schema, f.required || f.schema.default !== undefined || COMPUTED_DEFAULTS.has(f.name) || nullWhenOmitted(f), 'setting', nullWhenOmitted(f));
  const settings: InterfaceDeclarationStructure[] = kinds.map((kind) => ({
    kind: StructureKind.Interface,
    name: `${pascal(kind)}Settings`,
    isExported: true,
    docs: [`What the runtime reads of a chain of interface ${kind} as the manifest set it, defaults filled by the build.`],
    properties: chainSettings(kind, root).map(settingsOf),
  }));
  // Every kind's settings in one: a setting every kind has keeps its presence, any other is optional.
  const all = new Map<string, OptionalKind<PropertySignatureStructure>>();
  for (const kind of kinds) {
    for (const f of chainSettings(kind, root)) {
      const everywhere = kinds.every((k) => chainSettings(k, root).some((g) => g.name === f.name));
      if (!all.has(f.name)) all.set(f.name, everywhere ? settingsOf(f) : { ...settingsOf(f), hasQuestionToken: true });
    }
  }
  const limits: InterfaceDeclarationStructure = {
    kind: StructureKind.Interface,
    name: 'LimitsSpec',
    isExported: true,
    docs: ["A chain's request limits: the top level's, each one overridden where the chain's limits set it."],
    properties: limitFields(root).map(settingsOf),
  };
  const upstream: InterfaceDeclarationStructure = {
    kind: StructureKind.Interface,
    name: 'UpstreamSettings',
    isExported: true,
    docs: ["What the runtime reads of an upstream as the manifest set it, defaults filled by the build."],
    properties: upstreamSettings(root).map(settingsOf),
  };

  statements.push(
    ...chainConfigs,
    { kind: StructureKind.TypeAlias, name: 'ChainConfig', isExported: true, docs: ['A chain as the manifest writes it.'], type: chainConfigs.map((c) => c.name).join(' | ') },
    ...config.declarations.values(),
    ...settings,
    {
      kind: StructureKind.Interface,
      name: 'SettingsKinds',
      isExported: true,
      docs: ["Each kind's settings."],
      properties: kinds.map((k, i) => ({ name: /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? k : lit(k), isReadonly: true, type: settings[i]!.name })),
    },
    { kind: StructureKind.Interface, name: 'ChainSettings', isExported: true, docs: ["Every kind's settings in one (the build's model of a chain)."], properties: [...all.values()] },
    upstream,
    limits,
    ...spec.declarations.values(),
  );
  const file = project.createSourceFile('/chain-types.gen.ts', { statements: [header(), ...statements] });
  return declarationsText(file);
}

/** Every generated file and its text. */
export function chainTypesArtefacts(): { readonly path: string; readonly text: string }[] {
  return [{ path: CHAIN_TYPES_PATH, text: emitChainTypes() }];
}
