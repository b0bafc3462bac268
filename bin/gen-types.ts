// `npm run gen:types`: writes what generator/chain-types.ts makes from
// schema/gateway.schema.json (runtime/chain-types.gen.ts, a chain's types per
// interface kind). `--check` only says whether the committed file is current.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../generator/bundle.ts';
import { chainTypesArtefacts } from '../generator/chain-types.ts';

const check = process.argv.includes('--check');
let stale = 0;
for (const { path, text } of chainTypesArtefacts()) {
  const file = join(PROJECT_ROOT, path);
  let old: string | null = null;
  try {
    old = readFileSync(file, 'utf8');
  } catch {
    old = null;
  }
  if (old === text) continue;
  stale++;
  if (check) process.stderr.write(`${path}: not what npm run gen:types makes\n`);
  else {
    writeFileSync(file, text);
    process.stdout.write(`${path}: written\n`);
  }
}
if (check && stale > 0) process.exitCode = 1;
