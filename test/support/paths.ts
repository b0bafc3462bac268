// Where things are, resolved from this file (never from the working directory,
// never a hard-coded absolute path): the project root is two levels up, and
// the shared interface specs sit next to the project, in ../shared/specs.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root (the folder holding package.json), with a trailing separator. */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** ../shared/specs seen from the project root, with a trailing separator. */
export const SHARED_SPECS = fileURLToPath(new URL('../../../shared/specs/', import.meta.url));

/** Absolute path of a file in shared/specs; throws a clear error when it is missing. */
export function specPath(name: string): string {
  const p = join(SHARED_SPECS, name);
  if (!existsSync(p)) throw new Error(`spec file missing: ${p} (expected ../shared/specs next to the project)`);
  return p;
}
