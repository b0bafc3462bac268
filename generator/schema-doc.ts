// The README's manifest reference, rendered from the schema (the single
// source of truth). A test keeps README.md equal to this.
type S = {
  description?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  properties?: Record<string, S>;
  additionalProperties?: S | boolean;
  items?: S;
  anyOf?: S[];
  required?: string[];
};

function typeOf(s: S): string {
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(' \\| ');
  if (s.anyOf) return s.anyOf.map(typeOf).join(' or ');
  if (s.type === 'array' && s.items) return `list of ${typeOf(s.items)}`;
  if (Array.isArray(s.type)) return s.type.join(' or ');
  if (s.type === 'object' && s.additionalProperties && typeof s.additionalProperties === 'object' && !s.properties) return 'map';
  return s.type ?? 'any';
}

export function renderManifestReference(schema: S): string {
  const rows: string[] = ['| field | type | default | description |', '|---|---|---|---|'];
  const walk = (s: S, path: string, required: readonly string[], name: string) => {
    if (path !== '') {
      const req = required.includes(name) ? ' (required)' : '';
      const def = s.default === undefined ? '' : `\`${JSON.stringify(s.default)}\``;
      rows.push(`| \`${path}\` | ${typeOf(s)} | ${def} | ${(s.description ?? '').replace(/\|/g, '\\|')}${req} |`);
    }
    if (s.properties) for (const [k, v] of Object.entries(s.properties)) walk(v, path ? `${path}.${k}` : k, s.required ?? [], k);
    if (s.type === 'object' && typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${path}.<name>`, [], '');
    if (s.items) {
      const obj = s.items.properties ? s.items : s.items.anyOf?.find((b) => b.properties);
      if (obj) walk(obj, `${path}[]`, [], '');
    }
    if (s.anyOf && !s.items) {
      const obj = s.anyOf.find((b) => b.properties);
      if (obj) walk(obj, path, [], '');
    }
  };
  walk(schema, '', [], '');
  return rows.join('\n');
}
