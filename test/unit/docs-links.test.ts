// Every relative link of the README and docs/ resolves: the file is in the
// repository, and a #fragment is an anchor GitHub generates for a heading of
// the target. Markdown files they link to (bench/RESULTS.md, ...) are followed
// and checked the same way.
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brokenLinks, parseMarkdown } from '../support/doc-links.ts';
import { PROJECT_ROOT } from '../support/paths.ts';

const markdownIn = (dir: string) =>
  readdirSync(join(PROJECT_ROOT, dir))
    .filter((f) => f.endsWith('.md'))
    .map((f) => (dir === '.' ? f : `${dir}/${f}`));

describe('links in the documentation', () => {
  it('makes the anchors GitHub makes for headings', () => {
    const { anchors } = parseMarkdown(
      ['# Errors', '## Rosetta (`rosetta`) — always HTTP 500', '## Shared by replicas (`cache.redis`)', '## Usage', '### Usage', '## Issues 19–22, 2026-11-25'].join('\n\n'),
      'x.md',
    );
    expect([...anchors]).toEqual(['errors', 'rosetta-rosetta--always-http-500', 'shared-by-replicas-cacheredis', 'usage', 'usage-1', 'issues-1922-2026-11-25']);
  });

  it('finds links and images outside code, and reports a missing file, a missing anchor, and an ignored file', () => {
    const root = mkdtempSync(join(tmpdir(), 'doc-links-'));
    try {
      execFileSync('git', ['init', '-q'], { cwd: root });
      mkdirSync(join(root, 'docs'));
      mkdirSync(join(root, 'dist'));
      writeFileSync(join(root, '.gitignore'), 'dist/\n');
      writeFileSync(join(root, 'dist', 'out.js'), '');
      writeFileSync(join(root, 'docs', 'a.md'), '# A\n\n## Two words\n\nBack to [the README](../README.md#top).\n');
      writeFileSync(
        join(root, 'README.md'),
        [
          '# Top',
          '[ok](docs/a.md#two-words) [ok too](#top) ![pic](docs/a.md) [web](https://example.com/x#y)',
          '[no file](docs/b.md) [no anchor](docs/a.md#three-words) [built](dist/out.js)',
          '```md',
          '[in code](nowhere.md)',
          '```',
        ].join('\n'),
      );
      expect(brokenLinks(root, ['README.md'])).toEqual([
        'README.md:3: docs/b.md: no such file in the repository',
        'README.md:3: docs/a.md#three-words: docs/a.md has no heading with the anchor #three-words',
        'README.md:3: dist/out.js: ignored by git, so not in a clone',
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('every relative link of the README and docs/ resolves, anchors included', () => {
    const start = [...markdownIn('.'), ...markdownIn('docs')];
    expect(start).toContain('README.md');
    expect(start.filter((f) => f.startsWith('docs/')).length).toBeGreaterThan(0);
    expect(brokenLinks(PROJECT_ROOT, start)).toEqual([]);
  });
});
