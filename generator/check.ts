// load -> validate -> model, for one manifest file: what `gateway check` and
// `gateway build` share. No printing and no exiting here, so tests call it.
import { readFileSync } from 'node:fs';
import { isAbsolute, relative } from 'node:path';
import { loadManifest, type Problem } from './load.ts';
import { validateManifest } from './validate.ts';
import { buildModel } from './normalize.ts';
import type { GatewayModel } from './model.ts';

export type CheckResult = { readonly ok: true; readonly model: GatewayModel } | { readonly ok: false; readonly problems: readonly Problem[] };

export { formatProblem } from '../runtime/config/schema-problems.ts';

/**
 * The manifest path as the model (and the generated header) records it:
 * relative to the working directory, with forward slashes, never absolute.
 */
export function modelSourcePath(file: string, cwd = process.cwd()): string {
  const rel = isAbsolute(file) ? relative(cwd, file) || file : file;
  return rel.split('\\').join('/');
}

/** Problems are reported against `file` exactly as given, so editors can jump to them. */
export function checkManifestFile(file: string): CheckResult {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const message = code === 'ENOENT' ? 'manifest not found' : `cannot read the manifest (${code ?? (err as Error).message})`;
    return { ok: false, problems: [{ file, line: 1, col: 1, message }] };
  }
  const loaded = loadManifest(file, text);
  const problems = validateManifest(loaded);
  if (problems.length) return { ok: false, problems };
  return { ok: true, model: buildModel(loaded.value, modelSourcePath(file), text) };
}
