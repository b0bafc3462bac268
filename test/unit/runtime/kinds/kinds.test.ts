// Every interface kind (issue 45: "a fourth interface is one new folder"): what
// a kind needs beside its module, which the compiler cannot see, is checked
// here for each kind the schema names. test/support/kinds.ts is keyed by
// InterfaceKind, so a kind the schema adds is asked for its row (its folder,
// its error catalogue, its stand-in) before this file compiles; the cases then
// ask for its folder's files and its docs. docs/architecture.md "Adding an
// interface" lists them.
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../../../e2e/harness.ts';
import { interfaceKinds } from '../../../../generator/chain-types.ts';
import { INTERFACES } from '../../../../runtime/kinds/index.ts';
import type { InterfaceKind } from '../../../../runtime/types.ts';
import { KINDS } from '../../../support/kinds.ts';

const doc = (name: string) => readFileSync(join(ROOT, 'docs', name), 'utf8');
const kinds = interfaceKinds() as InterfaceKind[];

/** The catalogue names in the table under the heading that names `kind` in backticks (docs/errors.md). */
function documentedNames(text: string, kind: string): string[] | null {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.startsWith('## ') && l.includes(`(\`${kind}\`)`));
  if (start === -1) return null;
  const names: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('## ')) break;
    const m = /^\| `(GW_[A-Z_]+)`/.exec(line);
    if (m !== null) names.push(m[1]!);
  }
  return names;
}

describe('every interface kind', () => {
  it("every kind of the schema has its row here (the modules' table: chain-types.test.ts)", () => {
    expect([...kinds].sort()).toEqual(Object.keys(KINDS).sort());
  });

  it.each(kinds)('%s: its folder holds its module, guard and errors, and docs/architecture.md names the folder', (kind) => {
    const { folder } = KINDS[kind];
    for (const file of ['module.ts', 'guard.ts', 'errors.ts']) expect(existsSync(join(ROOT, 'runtime/kinds', folder, file)), `runtime/kinds/${folder}/${file}`).toBe(true);
    expect(doc('architecture.md')).toMatch(new RegExp(`^ {4}(?:[a-z-]+/, )*${folder}/`, 'm'));
  });

  it.each(kinds)('%s: docs/errors.md has a table of exactly its catalogue', (kind) => {
    expect(documentedNames(doc('errors.md'), kind), `a "## ... (\`${kind}\`)" table`).toEqual(Object.keys(KINDS[kind].errors));
  });

  it.each(kinds)('%s: docs/requests.md says which chains its section is for', (kind) => {
    expect(doc('requests.md')).toContain(`for the chains whose \`interface\` is \`${kind}\``);
  });

  it.each(kinds)('%s: its module says what credits may name (the build checks a manifest against these names only)', (kind) => {
    expect(INTERFACES[kind].creditNames.length).toBeGreaterThan(0);
  });
});
