// Golden files of the emitted TypeScript (the tables, before bundling): a
// change to emit/ shows up as a diff of committed output, reviewed like code.
// UPDATE_GOLDEN=1 rewrites them. They sit under test/, so `npm run typecheck`
// also checks that the emitted code typechecks against runtime/.
import { describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadManifest } from '../../../generator/load.ts';
import { validateManifest } from '../../../generator/validate.ts';
import { buildModel } from '../../../generator/normalize.ts';
import { emitServerSource } from '../../../generator/emit/index.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

/** [manifest, golden file], both relative to the project root. */
const CASES = [
  // Every interface, a shared method set, defaults and ${VAR:-default} templates.
  ['gateway.yaml', 'test/golden/gateway.gen.ts'],
  // Weights, fallbacks, provider headers, per-chain limits, an inline method list, sendtx, rateLimit.
  ['test/fixtures/valid/upstream-objects.yaml', 'test/golden/upstream-objects.gen.ts'],
  // Pool settings (issue 33) on every interface, archive upstreams, and chains that set none.
  ['test/fixtures/valid/pool.yaml', 'test/golden/pool.gen.ts'],
] as const;

describe('emitted TypeScript', () => {
  for (const [manifest, golden] of CASES) {
    it(`${manifest} emits exactly ${golden}`, () => {
      const loaded = loadManifest(join(PROJECT_ROOT, manifest));
      expect(validateManifest(loaded)).toEqual([]);
      const text = emitServerSource(buildModel(loaded.value, manifest, loaded.text));
      if (process.env.UPDATE_GOLDEN === '1') writeFileSync(join(PROJECT_ROOT, golden), text);
      expect(text).toBe(readFileSync(join(PROJECT_ROOT, golden), 'utf8'));
    });
  }
});
