import { fileURLToPath } from 'node:url';

/** ../shared/specs, seen from the project root. */
export const SHARED_SPECS = fileURLToPath(new URL('../../../shared/specs/', import.meta.url));
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
