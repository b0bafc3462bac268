// The manifest reference (docs/manifest.md), rendered from the schema (the
// single source of truth). A test keeps docs/manifest.md equal to this;
// `gateway schema-doc` prints it for pasting. The keys file's reference
// (docs/keys-reference.md) is rendered the same way, from its own schema.
interface S {
  description?: string;
  type?: string | string[];
  enum?: readonly unknown[];
  const?: unknown;
  default?: unknown;
  properties?: Record<string, S | boolean>;
  additionalProperties?: S | boolean;
  items?: S;
  anyOf?: readonly S[];
  required?: readonly string[];
  allOf?: readonly { if?: { properties?: Record<string, { const?: unknown }> }; then?: { required?: readonly string[] } }[];
}

function typeOf(s: S): string {
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(' | ');
  if (s.anyOf) return s.anyOf.map(typeOf).join(' or ');
  if (s.type === 'array' && s.items) return `list of ${typeOf(s.items)}`;
  if (Array.isArray(s.type)) return s.type.join(' or ');
  if (s.type === 'object' && typeof s.additionalProperties === 'object' && !s.properties) return 'map';
  return s.type ?? 'any';
}

/** "required", or "required when interface is rosetta" when an if/then rule requires it. */
function requirement(parent: S, name: string): string {
  if (parent.required?.includes(name)) return ' (required)';
  const when = (parent.allOf ?? [])
    .filter((r) => r.then?.required?.includes(name))
    .map((r) => Object.entries(r.if?.properties ?? {}).map(([k, v]) => `${k} is ${String(v.const)}`).join(' and '));
  return when.length ? ` (required when ${when.join('; or when ')})` : '';
}

const cell = (s: string) => s.replace(/\|/g, '\\|');

/** A markdown table: YAML path, type, default, description; in schema order. */
export function renderSchemaReference(schema: S): string {
  const rows: string[] = ['| YAML path | type | default | description |', '|---|---|---|---|'];
  const walk = (s: S, path: string, parent: S | null, name: string, row = true) => {
    if (parent && row) {
      const def = s.default === undefined ? '' : `\`${JSON.stringify(s.default)}\``;
      rows.push(`| \`${path}\` | ${cell(typeOf(s))} | ${def} | ${cell(s.description ?? '')}${requirement(parent, name)} |`);
    }
    for (const [k, v] of Object.entries(s.properties ?? {})) if (typeof v === 'object') walk(v, path ? `${path}.${k}` : k, s, k);
    if (s.type === 'object' && typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${path}.<name>`, {}, '');
    // Lists and unions: document the object form, where the fields are.
    const obj = (s.items ? [s.items, ...(s.items.anyOf ?? [])] : (s.anyOf ?? [])).find((b) => b.properties);
    // A union's object form has the same path as the union: its fields, not a second row for it.
    if (obj) walk(obj, s.items ? `${path}[]` : path, {}, '', s.items !== undefined);
  };
  walk(schema, '', null, '');
  return rows.join('\n');
}

export const renderManifestReference = renderSchemaReference;
