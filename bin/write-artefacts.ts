// What `npm run gen:keys` and `npm run gen:types` share: write the files a
// generator makes from a schema, each only where it differs from the committed
// one; with `--check`, only say which are not current (exit 1).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PROJECT_ROOT } from '../generator/bundle.ts';

export function writeArtefacts(artefacts: readonly { readonly path: string; readonly text: string }[], script: string): void {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const { path, text } of artefacts) {
    const file = join(PROJECT_ROOT, path);
    let old: string | null = null;
    try {
      old = readFileSync(file, 'utf8');
    } catch {
      old = null;
    }
    if (old === text) continue;
    stale++;
    if (check) process.stderr.write(`${path}: not what npm run ${script} makes\n`);
    else {
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
      process.stdout.write(`${path}: written\n`);
    }
  }
  if (check && stale > 0) process.exitCode = 1;
}
