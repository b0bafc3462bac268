// Relative links in markdown files, checked as GitHub would follow them: the
// file must be in the repository (present and not ignored by git), and a
// #fragment must be an anchor GitHub generates for one of the target file's
// headings. markdown-it finds the links (never in code), github-slugger makes
// the anchors, one slugger per file so that repeated headings get -1, -2.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import GithubSlugger from 'github-slugger';
import MarkdownIt, { type Token } from 'markdown-it';

const md = new MarkdownIt({ html: true });

export interface MdLink {
  /** The markdown file the link is in, relative to the root. */
  from: string;
  /** Its line, 1-based. */
  line: number;
  href: string;
}

export interface MdFile {
  links: MdLink[];
  /** The anchors of its headings, as GitHub generates them. */
  anchors: Set<string>;
}

/** A heading's text as GitHub slugs it: its text and code spans, without markup. */
function plainText(inline: Token): string {
  return (inline.children ?? [])
    .filter((t) => t.type === 'text' || t.type === 'code_inline')
    .map((t) => t.content)
    .join('');
}

export function parseMarkdown(text: string, from: string): MdFile {
  const tokens = md.parse(text, {});
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  const links: MdLink[] = [];
  tokens.forEach((t, i) => {
    if (t.type === 'heading_open') anchors.add(slugger.slug(plainText(tokens[i + 1]!)));
    if (t.type !== 'inline') return;
    // A paragraph's line breaks are its inline children's softbreaks.
    let line = (t.map?.[0] ?? 0) + 1;
    for (const c of t.children ?? []) {
      if (c.type === 'softbreak' || c.type === 'hardbreak') line++;
      const href = c.type === 'link_open' ? c.attrGet('href') : c.type === 'image' ? c.attrGet('src') : null;
      if (href !== null) links.push({ from, line, href: String(href) });
    }
  });
  return { links, anchors };
}

const EXTERNAL = /^(?:[a-z][a-z0-9+.-]*:|\/\/)/i;

/**
 * Every broken relative link of the start files and of every markdown file
 * they link to, followed through: one message per link, `FILE:LINE: href: why`.
 */
export function brokenLinks(root: string, start: string[]): string[] {
  const parsed = new Map<string, MdFile>();
  const read = (file: string): MdFile => {
    let f = parsed.get(file);
    if (!f) {
      f = parseMarkdown(readFileSync(join(root, file), 'utf8'), file);
      parsed.set(file, f);
    }
    return f;
  };
  const problems: string[] = [];
  const targets: { link: MdLink; target: string }[] = [];
  const queue = [...start];
  const seen = new Set(queue);
  while (queue.length) {
    const file = queue.shift()!;
    for (const link of read(file).links) {
      if (EXTERNAL.test(link.href)) continue;
      const hash = link.href.indexOf('#');
      const path = decodeURIComponent(hash === -1 ? link.href : link.href.slice(0, hash));
      const fragment = hash === -1 ? null : decodeURIComponent(link.href.slice(hash + 1));
      const where = `${link.from}:${link.line}: ${link.href}`;
      const abs = path === '' ? join(root, file) : path.startsWith('/') ? join(root, path) : resolve(root, dirname(file), path);
      const target = relative(root, abs).split(sep).join('/');
      if (target.startsWith('..') || !existsSync(abs)) {
        problems.push(`${where}: no such file in the repository`);
        continue;
      }
      targets.push({ link, target });
      const markdown = target.endsWith('.md') && !statSync(abs).isDirectory();
      if (markdown && !seen.has(target)) {
        seen.add(target);
        queue.push(target);
      }
      if (fragment === null) continue;
      if (!markdown) problems.push(`${where}: an anchor into a file that is not markdown`);
      else if (!read(target).anchors.has(fragment)) problems.push(`${where}: ${target} has no heading with the anchor #${fragment}`);
    }
  }
  // A file that exists here but that git ignores (dist/, test-results/, ...) is not in a clone.
  const paths = [...new Set(targets.map((t) => t.target))];
  if (paths.length) {
    let ignored = '';
    try {
      ignored = execFileSync('git', ['check-ignore', '--stdin'], { cwd: root, input: paths.join('\n') + '\n', encoding: 'utf8' });
    } catch (err) {
      // Exit status 1: none of them is ignored.
      if ((err as { status?: number }).status !== 1) throw err;
    }
    const out = new Set(ignored.split('\n').filter(Boolean));
    for (const { link, target } of targets) if (out.has(target)) problems.push(`${link.from}:${link.line}: ${link.href}: ignored by git, so not in a clone`);
  }
  return problems;
}

/** The contents of a markdown text's fenced code blocks with the given info string (`sh`, `yaml`, ...), in order. */
export function fencedBlocks(text: string, info: string): string[] {
  return md
    .parse(text, {})
    .filter((t) => t.type === 'fence' && t.info.trim() === info)
    .map((t) => t.content);
}
