// The seam's rules that a reader checks by looking (issue 45): facts about the
// request kept in one place, which the code can only keep by not copying them.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from '../../e2e/harness.ts';

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? tsFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

const runtime = tsFiles(join(ROOT, 'runtime'));
const text = (f: string) => readFileSync(f, 'utf8');
const rel = (f: string) => relative(ROOT, f);
const matching = (re: RegExp) => runtime.filter((f) => re.test(text(f))).map(rel);

describe('the seam', () => {
  it('the time left of a call is worked out once, from its absolute deadline (no layer keeps a timeoutMs from a start of its own)', () => {
    expect(matching(/deadline - performance\.now\(\)/)).toEqual(['runtime/proxy.ts']);
    expect(matching(/timeoutMs - \(|Math\.max\(1, Math\.round\(left\)\)|timeoutMs: Math\./)).toEqual([]);
  });

  it("no layer searches a request's bytes for the method it takes: it reads the request's calls (pool/call.ts carries)", () => {
    expect(matching(/includes\('eth_getLogs'\)/)).toEqual([]);
  });
});
