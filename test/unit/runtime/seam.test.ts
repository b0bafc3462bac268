// The seam's rules that a reader checks by looking (issue 45): facts about the
// request kept in one place, which the code can only keep by not copying them.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from '../../e2e/harness.ts';
import { ANY_DEPTH } from '../../../runtime/jsonrpc/scan.ts';
import { Answer, answerOf, answerSpans } from '../../../runtime/jsonrpc/answer.ts';

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
    expect(matching(/deadline\s*-\s*(?:now|performance\.now\(\))/)).toEqual(['runtime/dispatch.ts']);
    expect(matching(/timeoutMs - \(|Math\.max\(1, Math\.round\(left\)\)|timeoutMs: Math\./)).toEqual([]);
  });

  it('the seam types are declared in dispatch.ts alone, and Forward in upstreams/forward.ts', () => {
    const seam = /export (?:interface|type) (?:Call|Calls|CallBlock|Transport|ForwardRequest|ForwardResult|HeldRequest|HeldTarget|ForwardTarget|Dispatch|Front|Next(?!<)|Attempt|Cancelable|Verdict|FailKind)\b/;
    expect(matching(seam)).toEqual(['runtime/dispatch.ts']);
    expect(matching(/export class Forward\b/)).toEqual(['runtime/upstreams/forward.ts']);
  });

  it('one Dispatch: the top layers, the layers and the plain dispatch are one type (no Front, no Next), and dispatch.ts names no kind', () => {
    const seam = text(join(ROOT, 'runtime/dispatch.ts'));
    expect(seam).not.toMatch(/from '\.\/kinds\//);
    expect(matching(/\b(?:type|interface) (?:Front|Next)\b(?!<)/)).toEqual([]);
  });

  it("the request is its calls and its transport: no kind's passenger at its top (decision, doc, tail, together, a lone call)", () => {
    const seam = text(join(ROOT, 'runtime/dispatch.ts'));
    const request = /export interface ForwardRequest\b[^{]*\{([^}]*)\}/.exec(seam)?.[1] ?? '';
    const fields = [...request.matchAll(/readonly (\w+)\??:/g)].map((m) => m[1]);
    expect(fields).toEqual(['calls', 'transport']);
  });

  it("no layer searches a request's bytes for the method it takes: it reads the request's calls (kinds/evm/pool-call.ts carries)", () => {
    expect(matching(/includes\('eth_getLogs'\)/)).toEqual([]);
  });

  it("no layer scans a JSON-RPC object's spans of its own: answerSpans is read only under jsonrpc/, every other reader asks the Answer (read once)", () => {
    expect(matching(/\banswerSpans\(/).filter((f) => !f.startsWith('runtime/jsonrpc/'))).toEqual([]);
  });
});

describe('an Answer', () => {
  /** A JSON-RPC answer whose result nests `depth` arrays deep, with the id and error given. */
  const answer = fc
    .record({ id: fc.oneof(fc.integer(), fc.string(), fc.constant(null)), depth: fc.nat(12), error: fc.boolean(), spaces: fc.constantFrom('', ' ', '\n ') })
    .map(({ id, depth, error, spaces }) => {
      const result = '['.repeat(depth) + '"0x1"' + ']'.repeat(depth);
      return Buffer.from(`{${spaces}"jsonrpc":"2.0",${spaces}"id":${JSON.stringify(id)},${error ? '"error":{"code":-1,"message":"m"}' : `"result":${result}`}}`);
    });

  it('reads what answerSpans reads, at every depth a reader allows (the scans counted: issue-37-call.test.ts)', () => {
    fc.assert(
      fc.property(answer, fc.integer({ min: 1, max: 16 }), (body, maxDepth) => {
        const a = new Answer(body);
        const direct = answerSpans(body, maxDepth);
        const within = a.spansWithin(maxDepth);
        if (direct === null) expect(within).toBeNull();
        else expect({ ...within, depth: 0 }).toEqual({ ...direct, depth: 0 });
        expect(a.spans).toEqual(answerSpans(body, ANY_DEPTH));
      }),
    );
  });

  it('is one per held body: every layer that judges the same bytes gets the same Answer, another body another, its spans read once', () => {
    const body = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
    expect(answerOf(body)).toBe(answerOf(body));
    expect(answerOf(body)).not.toBe(answerOf(Buffer.from(body)));
    // Its spans are read at the first ask and kept: every reader after gets the same object.
    expect(answerOf(body).spans).toBe(answerOf(body).spansWithin(4));
  });
});
