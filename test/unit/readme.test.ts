// The README's first screen stays true: its two commands are the ones CI
// runs, and its manifest excerpt is gateway.yaml's own lines. (The demo's
// printed lines are checked against the README by test/e2e/demo.test.ts.)
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fencedBlocks } from '../support/doc-links.ts';
import { PROJECT_ROOT } from '../support/paths.ts';

const README = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');

describe('README.md', () => {
  it('starts with the demo and the test command, and the test command is what .ci/run runs', () => {
    const commands = fencedBlocks(README, 'sh')[0]!
      .split('\n')
      .filter(Boolean)
      .map((l) => l.replace(/\s+#.*$/, ''));
    expect(commands).toEqual(['npm ci && npm run demo', 'npm ci && npm test']);
    expect(README.indexOf('npm ci && npm run demo')).toBeLessThan(README.indexOf('\n## A five-minute tour'));
    const ci = readFileSync(join(PROJECT_ROOT, '.ci/run'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'));
    // The last two steps of CI: a clean install, then exactly the README's test command.
    expect(ci.slice(-2).map((l) => l.replace(/ --no-audit --no-fund$/, ''))).toEqual(['npm ci', 'npm test']);
  });

  it('quotes gateway.yaml: every line of its manifest excerpt is a line of the file, in the file’s order', () => {
    const [excerpt] = fencedBlocks(README, 'yaml');
    const quoted = excerpt!.split('\n').filter((l) => l.trim() !== '');
    expect(quoted.length).toBeGreaterThan(20);
    const file = readFileSync(join(PROJECT_ROOT, 'gateway.yaml'), 'utf8').split('\n');
    let at = 0;
    for (const line of quoted) {
      const found = file.indexOf(line, at);
      expect(found, `README line not in gateway.yaml (after line ${at}): ${line}`).toBeGreaterThanOrEqual(0);
      at = found + 1;
    }
  });

  it('stays a first screen and a guide: under 200 lines', () => {
    expect(README.split('\n').length).toBeLessThan(200);
  });
});
