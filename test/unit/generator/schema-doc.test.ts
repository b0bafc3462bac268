// The schema is the single source of truth: closed, every field described,
// and the manifest reference (docs/manifest.md) is rendered from it.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderManifestReference } from '../../../generator/schema-doc.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

const schema = JSON.parse(readFileSync(join(PROJECT_ROOT, 'schema/gateway.schema.json'), 'utf8'));
const START = '<!-- manifest-reference:start -->';
const END = '<!-- manifest-reference:end -->';

type S = Record<string, any>;

describe('schema/gateway.schema.json', () => {
  it('is closed everywhere and describes every field', () => {
    const walk = (s: S, path: string) => {
      if (s.type === 'object') {
        expect(s.additionalProperties === false || typeof s.additionalProperties === 'object', `${path} is closed or a typed map`).toBe(true);
        if (s.properties) expect(s.additionalProperties, `${path} is closed`).toBe(false);
      }
      for (const [k, v] of Object.entries(s.properties ?? {})) {
        expect((v as S).description, `${path}.${k} has a description`).toBeTruthy();
        walk(v as S, `${path}.${k}`);
      }
      if (typeof s.additionalProperties === 'object') {
        expect(s.additionalProperties.description, `${path}.<name> has a description`).toBeTruthy();
        walk(s.additionalProperties, `${path}.<name>`);
      }
      if (s.items) walk(s.items, `${path}[]`);
      for (const b of s.anyOf ?? []) walk(b, path);
    };
    walk(schema, '');
  });

  it('renders one row per field, with defaults and requirements', () => {
    const doc = renderManifestReference(schema);
    const lines = doc.split('\n');
    expect(lines[0]).toBe('| YAML path | type | default | description |');
    expect(lines).toContain('| `limits.maxBodyBytes` | integer | `1048576` | Largest request body accepted, in bytes; larger bodies get HTTP 413. |');
    expect(doc).toMatch(/\| `chains\[\]\.network` \| `mainnet` \\\| `preprod` \\\| `preview` \|  \| .*\(required when interface is rosetta\) \|/);
    expect(doc).toContain('| `chains[].upstreams[].role` | `primary` \\| `fallback` | `"primary"` |');
    // A union's object form adds its fields, not a second row for the union's own path.
    expect(lines.filter((l) => l.startsWith('| `chains[].finality` |'))).toHaveLength(1);
    expect(doc).toContain('| `chains[].finality.depth` | integer |');
    // Every row has exactly four cells (escaped pipes do not split cells).
    for (const l of lines) expect(l.replace(/\\\|/g, '').split('|').length, l).toBe(6);
  });
});

describe('docs/manifest.md', () => {
  it('is the reference rendered from the schema (npx gateway schema-doc)', () => {
    // docs/manifest.md is part of the project: missing markers are a failure, not a reason to skip.
    const text = readFileSync(join(PROJECT_ROOT, 'docs/manifest.md'), 'utf8');
    expect(text.split(START), `docs/manifest.md has exactly one ${START}`).toHaveLength(2);
    expect(text.split(END), `docs/manifest.md has exactly one ${END}`).toHaveLength(2);
    expect(text.indexOf(START)).toBeLessThan(text.indexOf(END));
    const between = text.slice(text.indexOf(START) + START.length, text.indexOf(END)).trim();
    expect(between).toBe(renderManifestReference(schema));
  });
});
