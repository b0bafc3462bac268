// Where things are, resolved from this file (never from the working directory,
// never a hard-coded absolute path): the project root is two levels up. The
// interface specs the tests and stand-ins are built against are copies of
// ../shared/specs kept in test/specs, so a clone anywhere runs its tests; a
// test keeps the copies equal to ../shared/specs wherever that folder exists.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root (the folder holding package.json), with a trailing separator. */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** test/specs: the project's copies of the shared specs, with a trailing separator. */
export const SPECS = fileURLToPath(new URL('../specs/', import.meta.url));
/** ../shared/specs seen from the project root (where the copies come from; absent in a clone elsewhere). */
export const SHARED_SPECS = fileURLToPath(new URL('../../../shared/specs/', import.meta.url));

/** Absolute path of a spec file in test/specs; throws a clear error when it is missing. */
export function specPath(name: string): string {
  const p = join(SPECS, name);
  if (!existsSync(p)) throw new Error(`spec file missing: ${p} (copy it from ../shared/specs)`);
  return p;
}
