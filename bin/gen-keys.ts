// `npm run gen:keys`: writes what generator/keys-schema.ts makes from
// schema/keys.schema.json (the field table and types, the validator, the
// reference). `--check` only says whether the committed files are current.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PROJECT_ROOT } from '../generator/bundle.ts';
import { keysArtefacts } from '../generator/keys-schema.ts';

const check = process.argv.includes('--check');
let stale = 0;
for (const { path, text } of keysArtefacts()) {
  const file = join(PROJECT_ROOT, path);
  let old: string | null = null;
  try {
    old = readFileSync(file, 'utf8');
  } catch {
    old = null;
  }
  if (old === text) continue;
  stale++;
  if (check) process.stderr.write(`${path}: not what npm run gen:keys makes\n`);
  else {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    process.stdout.write(`${path}: written\n`);
  }
}
if (check && stale > 0) process.exitCode = 1;
