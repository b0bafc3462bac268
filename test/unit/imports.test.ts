// The runtime and the generator have no import cycles (type-only imports
// count too): each module can be read, tested and replaced on its own.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { ROOT } from '../e2e/harness.ts';

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? tsFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Relative imports of each file, as paths. */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    const deps = [...text.matchAll(/(?:from|import)\s+['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => normalize(join(dirname(f), m[1]!)));
    graph.set(f, deps);
  }
  return graph;
}

function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (n: string): void => {
    const at = path.indexOf(n);
    if (at !== -1) return void found.push([...path.slice(at), n]);
    if (done.has(n)) return;
    path.push(n);
    for (const m of graph.get(n) ?? []) visit(m);
    path.pop();
    done.add(n);
  };
  for (const n of graph.keys()) visit(n);
  return found;
}

describe('imports', () => {
  it('form no cycle in runtime/ and generator/', () => {
    const files = [...tsFiles(join(ROOT, 'runtime')), ...tsFiles(join(ROOT, 'generator'))];
    const graph = importGraph(files);
    expect(graph.size).toBeGreaterThan(30);
    expect([...graph.values()].flat().length).toBeGreaterThan(50);
    expect(cycles(graph).map((c) => c.map((f) => relative(ROOT, f)).join(' -> '))).toEqual([]);
  });

  it('finds a cycle when there is one', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    expect(cycles(g)).toEqual([['a', 'b', 'c', 'a']]);
  });
});

// The shape issue 31 asked of the runtime: one view of each upstream kept by
// one poller, a cache core the routes do not know, and files small enough to read.
describe('runtime layout', () => {
  const runtime = tsFiles(join(ROOT, 'runtime'));
  const text = (f: string) => readFileSync(f, 'utf8');
  const rel = (f: string) => relative(ROOT, f);

  it('one place in runtime/ asks upstreams about themselves: poller.ts (requests go through Forward)', () => {
    // pool.request is undici's promise API, the one a poll uses; Forward uses pool.dispatch.
    const asking = runtime.filter((f) => /\.pool\s*\.\s*request\s*\(/.test(text(f))).map(rel);
    expect(asking).toEqual(['runtime/upstreams/poller.ts']);
    const dispatching = runtime.filter((f) => /\.pool\s*\.\s*dispatch\s*\(/.test(text(f))).map(rel);
    expect(dispatching).toEqual(['runtime/proxy.ts']);
  });

  it("no route handler mentions the cache: only its interface module's table names the kind's cache rules", () => {
    // interface.ts is the modules' type, which lists the cache rules among what a module gives.
    const handlers = runtime.filter((f) => rel(f).startsWith('runtime/interfaces/') && rel(f) !== 'runtime/interfaces/interface.ts');
    expect(handlers.length).toBeGreaterThanOrEqual(4);
    // A module file: its imports, its handler (what comes before the module's table), then the table.
    const handlerCode = (f: string) =>
      text(f)
        .split(/\nexport const \w+: InterfaceModule/)[0]!
        .split('\n')
        .filter((l) => !l.startsWith('import '))
        .join('\n');
    expect(handlers.filter((f) => /cache/i.test(handlerCode(f))).map(rel)).toEqual([]);
  });

  it('no file under runtime/cache/ is over 300 lines, nor runtime/server.ts', () => {
    const lines = (f: string) => text(f).split('\n').length - 1;
    const cache = runtime.filter((f) => rel(f).startsWith('runtime/cache/'));
    expect(cache.length).toBeGreaterThan(5);
    expect(cache.filter((f) => lines(f) > 300).map((f) => `${rel(f)}: ${lines(f)}`)).toEqual([]);
    expect(lines(join(ROOT, 'runtime/server.ts'))).toBeLessThanOrEqual(300);
  });

  it('the exchange does not call back into the server', () => {
    expect(text(join(ROOT, 'runtime/exchange.ts'))).not.toMatch(/from '\.\/server\.ts'|ExchangeHost/);
  });

  it('the pool imports nothing of the cache (the cache stands above it, as at run time), and the cache nothing of interfaces/', () => {
    const pool = runtime.filter((f) => rel(f).startsWith('runtime/pool/'));
    expect(pool.length).toBeGreaterThan(5);
    expect(pool.filter((f) => /from '\.\.\/cache\//.test(text(f))).map(rel)).toEqual([]);
    const cache = runtime.filter((f) => rel(f).startsWith('runtime/cache/'));
    expect(cache.filter((f) => /from '\.\.\/interfaces\//.test(text(f))).map(rel)).toEqual([]);
  });

  it('layers compose through the dispatch: only dispatch.ts makes a Forward (a pool sends through the dispatch below it)', () => {
    expect(runtime.filter((f) => /new Forward\(/.test(text(f))).map(rel)).toEqual(['runtime/dispatch.ts']);
  });

  it('no layer fakes a client to hold an answer: a held request says hold (proxy.ts), and no NO_SINK is left', () => {
    expect(runtime.filter((f) => /NO_SINK|=== 'stream' \? 'buffer'/.test(text(f))).map(rel)).toEqual([]);
  });
});
