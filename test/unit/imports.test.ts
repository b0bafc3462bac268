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
    // pool.request is undici's promise API, the one a poll uses; Forward uses pool.dispatch (its attempts, forward-attempts.ts).
    const asking = runtime.filter((f) => /\.pool\s*\.\s*request\s*\(/.test(text(f))).map(rel);
    expect(asking).toEqual(['runtime/upstreams/poller.ts']);
    const dispatching = runtime.filter((f) => /\.pool\s*\.\s*dispatch\s*\(/.test(text(f))).map(rel);
    expect(dispatching).toEqual(['runtime/upstreams/forward-attempts.ts']);
  });

  it("no route handler mentions the cache: only its interface module's table names the kind's cache rules", () => {
    // interface.ts is the modules' type, which lists the cache rules among what a module gives.
    const handlers = runtime.filter((f) => /^runtime\/kinds\/[^/]+\/module\.ts$/.test(rel(f)));
    expect(handlers.length).toBeGreaterThanOrEqual(3);
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

  it('no hand-written runtime file (all but *.gen.ts) is over 400 lines (issue 45)', () => {
    const lines = (f: string) => text(f).split('\n').length - 1;
    const over = runtime.filter((f) => !f.endsWith('.gen.ts') && lines(f) > 400);
    expect(over.map((f) => `${rel(f)}: ${lines(f)}`)).toEqual([]);
  });

  it('the exchange does not call back into the server', () => {
    expect(text(join(ROOT, 'runtime/exchange.ts'))).not.toMatch(/from '\.\/server\.ts'|ExchangeHost/);
  });

  it('the pool imports nothing of the cache (the cache stands above it, as at run time), and the cache nothing of the modules', () => {
    // The pool's core (pool/) and EVM's pool (kinds/evm/pool*.ts, its broadcast, filters and learned hashes).
    const pool = runtime.filter((f) => rel(f).startsWith('runtime/pool/') || /^runtime\/kinds\/evm\/(pool|pool-call|fanout|filters|learn)\.ts$/.test(rel(f)));
    expect(pool.length).toBeGreaterThan(8);
    expect(pool.filter((f) => /from '(\.\.\/)+cache\/|from '\.\/cache-/.test(text(f))).map(rel)).toEqual([]);
    const cache = runtime.filter((f) => rel(f).startsWith('runtime/cache/') || /^runtime\/kinds\/evm\/cache-/.test(rel(f)));
    const modules = /^runtime\/kinds\/((index|interface|common)\.ts|[^/]+\/module\.ts)$/;
    const deps = importGraph(cache);
    expect(cache.filter((f) => deps.get(f)!.some((d) => modules.test(rel(d)))).map(rel)).toEqual([]);
  });

  it('layers compose through the dispatch: only the plain dispatch (upstreams/forward.ts) makes a Forward (a pool sends through the dispatch below it)', () => {
    expect(runtime.filter((f) => /new Forward\(/.test(text(f))).map(rel)).toEqual(['runtime/upstreams/forward.ts']);
  });

  it('no layer fakes a client to hold an answer: a held request says hold (dispatch.ts), and no NO_SINK is left', () => {
    expect(runtime.filter((f) => /NO_SINK|=== 'stream' \? 'buffer'/.test(text(f))).map(rel)).toEqual([]);
  });
});


// The direction of the arrows: a file imports only from its own tier or a lower
// one, the tiers in the order a request meets them from the bottom up. A leaf
// (a file that imports nothing of runtime/: tally.ts, log.ts, jsonrpc/scan.ts...)
// stands below every tier. What a lower tier needs of a higher one it declares
// as a narrow shape of its own (observe/metrics.ts's CacheCounts, PoolCounts...)
// or finds in a file moved down to where both can import it (config/rate.ts, jsonrpc/batch-merge.ts).
describe('runtime tiers (no import runs back up)', () => {
  const ROOT_RT = join(ROOT, 'runtime');
  const TIERS: readonly (readonly string[])[] = [
    // 0: plain types and parsing: the manifest's and keys' shapes, JSON-RPC's scanning, each kind's method table and
    // error catalogue
    [
      'types.ts', 'config/', 'jsonrpc/scan.ts', 'jsonrpc/answer.ts', 'kinds/evm/methods.ts',
      'kinds/evm/errors.ts', 'kinds/evm/log-range-errors.ts', 'kinds/evm/state-errors.ts', 'kinds/blockbook/errors.ts', 'kinds/rosetta/errors.ts',
    ],
    // 1: what everything writes to (metrics, logs, usage), and the keys
    ['observe/', 'keys/'],
    // 2: the upstreams, their views and the way out to them (the seam: dispatch.ts); each kind's calls, which are the
    // seam's Call, and the guards that make them; JSON-RPC's batch merging
    [
      'upstreams/', 'dispatch.ts', 'jsonrpc/batch-merge.ts', 'kinds/doc-call.ts', 'kinds/evm/call.ts', 'kinds/evm/decision.ts', 'kinds/evm/guard.ts',
      'kinds/evm/guard-fast.ts', 'kinds/evm/params.ts', 'kinds/blockbook/guard.ts', 'kinds/rosetta/guard.ts',
    ],
    // 3: one request and its admission
    ['envelope.ts', 'exchange.ts', 'kinds/own-call.ts', 'admission/'],
    // 4: the layers over the dispatch: the kind-neutral cores (pool/, cache/, forward batches) and each kind's layers
    // over them (EVM's pool, cache rules and front, eth_getLogs ranges)
    ['pool/', 'cache/', 'jsonrpc/forward-batch.ts', 'kinds/evm/'],
    // 5: the interface modules (each kind's module and its socket protocol), their contract and table
    ['kinds/', 'kinds/evm/module.ts', 'kinds/evm/socket.ts', 'kinds/evm/socket-feed.ts', 'kinds/evm/socket-fetch.ts', 'kinds/evm/socket-logs.ts'],
    // 6: a chain composed
    ['chains.ts'],
    // 7: the edges: listeners, sockets, the admin listener and status, the process
    ['server.ts', 'process/', 'ws/', 'admin/', 'main.ts', 'index.ts'],
  ];
  /** Arrows that still run back up, each to be turned round (the test fails once one is gone, so it leaves this list): none now. */
  const KNOWN: readonly string[] = [];
  const files = tsFiles(ROOT_RT);
  const graph = importGraph(files);
  const inRuntime = (f: string) => f.startsWith(ROOT_RT + '/');
  const leaf = (f: string, g: ReadonlyMap<string, string[]> = graph) => (g.get(f) ?? []).every((d) => !inRuntime(d));
  const tierOf = (f: string): number => {
    const r = relative(ROOT_RT, f);
    let best = -1;
    let len = 0;
    TIERS.forEach((names, i) => {
      for (const n of names) if ((n.endsWith('/') ? r.startsWith(n) : r === n) && n.length > len) [best, len] = [i, n.length];
    });
    return best;
  };
  const upward = (g: ReadonlyMap<string, string[]> = graph) => {
    const found: string[] = [];
    for (const [f, deps] of g) for (const d of deps) if (inRuntime(d) && !leaf(d, g) && tierOf(d) > tierOf(f)) found.push(`${relative(ROOT, f)} -> ${relative(ROOT, d)}`);
    return found;
  };

  it('every file that imports the runtime has a tier (a new folder or file is placed in the table)', () => {
    expect(files.filter((f) => !leaf(f) && tierOf(f) === -1).map((f) => relative(ROOT, f))).toEqual([]);
  });

  it('no import runs from a lower tier up to a higher one, beyond the known ones', () => {
    expect(upward().filter((a) => !KNOWN.includes(a))).toEqual([]);
    expect(KNOWN.filter((a) => !upward().includes(a))).toEqual([]);
  });

  it('nothing below the edges imports chains.ts or server.ts; only main.ts and index.ts import server.ts', () => {
    const importers = (target: string) => files.filter((f) => (graph.get(f) ?? []).includes(join(ROOT_RT, target))).map((f) => relative(ROOT_RT, f));
    expect(importers('chains.ts').filter((f) => tierOf(join(ROOT_RT, f)) < TIERS.length - 1)).toEqual([]);
    expect(importers('server.ts').sort()).toEqual(['index.ts', 'main.ts']);
  });

  it('upstreams/ imports nothing of pool/, cache/, kinds/ or exchange.ts (the poller is handed each chain\'s probe)', () => {
    const ups = files.filter((f) => relative(ROOT_RT, f).startsWith('upstreams/'));
    const bad = ups.flatMap((f) => (graph.get(f) ?? []).filter((d) => /^(pool|cache|kinds)\/|^exchange\.ts$/.test(relative(ROOT_RT, d))).map((d) => `${relative(ROOT, f)} -> ${relative(ROOT, d)}`));
    expect(bad.filter((a) => !KNOWN.includes(a))).toEqual([]);
  });

  it('what observe/ counts it reads through narrow shapes: its instruments import only leaves outside observe/ (the admin page is admin/)', () => {
    const sinks = files.filter((f) => relative(ROOT_RT, f).startsWith('observe/'));
    expect(sinks.length).toBeGreaterThanOrEqual(6);
    expect(sinks.flatMap((f) => (graph.get(f) ?? []).filter((d) => inRuntime(d) && !leaf(d) && !sinks.includes(d)).map((d) => `${relative(ROOT, f)} -> ${relative(ROOT, d)}`))).toEqual([]);
  });

  it('finds an arrow back up when there is one', () => {
    const g = new Map([[join(ROOT_RT, 'upstreams/x.ts'), [join(ROOT_RT, 'pool/y.ts')]], [join(ROOT_RT, 'pool/y.ts'), [join(ROOT_RT, 'dispatch.ts')]]]);
    // The check itself on a graph of two files: the arrow up, not the one down from pool/ to dispatch.ts (a leaf here).
    expect(upward(g)).toEqual(['runtime/upstreams/x.ts -> runtime/pool/y.ts']);
  });
});
