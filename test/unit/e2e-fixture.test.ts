// End-to-end tests get their gateway from one fixture, test/e2e/fixture.ts's
// gateway({ chains, keys, standIns }) (issue 45): a file of test/e2e or
// test/support that builds or starts the gateway with harness.ts's
// buildManifest or startGateway itself says why in its first line, so a new
// test copies the fixture, not a hand-built set-up.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';

/** Where the set-up lives: the harness's builders and the fixture over them. */
const SET_UP = new Set(['test/e2e/harness.ts', 'test/e2e/fixture.ts']);

const BY_HAND = /import\s*\{[^}]*\b(?:buildManifest|startGateway)\b[^}]*\}\s*from\s*'[^']*harness\.ts'/;
const WHY = /^\/\/ Not on fixture\.ts: \S/;

/** The files of test/e2e and test/support that build or start the gateway themselves without saying why. */
function unexplained(): string[] {
  return ['test/e2e', 'test/support'].flatMap((dir) =>
    readdirSync(join(ROOT, dir))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `${dir}/${f}`)
      .filter((f) => {
        if (SET_UP.has(f)) return false;
        const text = readFileSync(join(ROOT, f), 'utf8');
        return BY_HAND.test(text) && !WHY.test(text);
      }),
  );
}

describe('the e2e set-up', () => {
  it('a test file that builds or starts the gateway with the harness itself says why in its first line', () => {
    expect(unexplained()).toEqual([]);
  });
});
