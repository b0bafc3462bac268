import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { hasDuplicateKeys, MAX_ANSWER_DEPTH, nestsDeeper, valueEnd } from '../../../../runtime/jsonrpc/scan.ts';
import { splitBatchAnswer } from '../../../../runtime/jsonrpc/answer.ts';
import { checkEvmBodyGeneral, type BatchMerge } from '../../../../runtime/kinds/evm/guard.ts';
import { mergeBatch, mergeItems } from '../../../../runtime/jsonrpc/batch-merge.ts';

const b = (s: string) => Buffer.from(s);
const deep = (n: number, inner = '1') => '['.repeat(n) + inner + ']'.repeat(n);

function depthOf(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  const kids = Array.isArray(v) ? v : Object.values(v);
  return 1 + kids.reduce((m: number, k) => Math.max(m, depthOf(k)), 0);
}

describe('valueEnd', () => {
  it('accepts exactly what JSON.parse accepts, on JSON texts and mutations of them', () => {
    const text = fc.oneof(
      fc.json(),
      fc.tuple(fc.json(), fc.nat(), fc.constantFrom('', '"', '\\', ',', ']', '}', '{', '[', ':', 'x', '\\u12', '\u0001', ' ')).map(
        ([j, i, ins]) => j.slice(0, i % (j.length + 1)) + ins + j.slice(i % (j.length + 1)),
      ),
    );
    fc.assert(
      fc.property(text, (t) => {
        let valid = true;
        try {
          JSON.parse(t);
        } catch {
          valid = false;
        }
        const buf = b(t);
        const start = buf.length - buf.toString().trimStart().length;
        const end = valueEnd(buf, start, 10_000);
        const whole = end !== -1 && buf.toString('utf8', end).trim() === '';
        expect(whole).toBe(valid);
      }),
      { numRuns: 3000 },
    );
  });

  it('walks 100,000 levels without recursion, and stops at the depth it is given', () => {
    const text = b(deep(100_000));
    expect(valueEnd(text, 0, 200_000)).toBe(text.length);
    expect(valueEnd(text, 0, 99_999)).toBe(-1);
    expect(valueEnd(b(deep(3)), 0, 3)).toBe(7);
  });
});

describe('hasDuplicateKeys', () => {
  const dup = (t: string, start?: number, end?: number) => hasDuplicateKeys(b(t), JSON.parse(t.slice(start, end)), start, end);

  it('finds a key named twice in one object, at any depth, however the strings around it look', () => {
    for (const t of [
      '{"a":1,"a":2}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[1],"params":[2]}',
      '{"id":1,"id":1}', // the same value twice is still two keys
      '[{"x":{"y":[{"z":1,"z":1}]}}]',
      '{"p":["a:b","c\\":d"],"q":{"k":"v","k":"w"}}', // colons and escaped quotes inside strings
      '{"__proto__":1,"__proto__":2}',
      '{"a\u0062":1,"ab":2}', // one key, spelled two ways
    ]) expect(dup(t), t).toBe(true);
    for (const t of ['{}', '[]', '1', '"a:b"', '{"a":{"a":{"a":1}}}', '[{"a":1},{"a":1}]', '{"k":"\\":"}', '{"__proto__":{"x":1}}', '{"a:b":"c:d"}']) {
      expect(dup(t), t).toBe(false);
    }
  });

  it('reads only the span it is given', () => {
    const t = '{"params":[{"to":"0x1","to":"0x2"}],"id":1}';
    const s = t.indexOf('[');
    const e = t.indexOf(']') + 1;
    expect(dup(t, s, e)).toBe(true);
    const outer = '{"a":1,"params":[{"to":1}],"a":2}';
    expect(dup(outer, outer.indexOf('['), outer.indexOf(']') + 1)).toBe(false);
    expect(hasDuplicateKeys(b(outer), JSON.parse(outer))).toBe(true);
  });

  it('never finds one in what JSON.stringify writes', () => {
    fc.assert(fc.property(fc.jsonValue(), (v) => {
      const t = JSON.stringify(v);
      expect(hasDuplicateKeys(b(t), JSON.parse(t))).toBe(false);
    }));
  });
});

describe('nestsDeeper', () => {
  it('measures the depth JSON.parse would build, strings and escapes ignored', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat({ max: 8 }), (v, limit) => {
        const t = JSON.stringify(v);
        expect(nestsDeeper(b(t), limit)).toBe(depthOf(v) > limit);
      }),
      { numRuns: 2000 },
    );
    expect(nestsDeeper(b('["[[[[\\"[[["]'), 1)).toBe(false);
  });
});

describe('splitBatchAnswer', () => {
  it('gives each item its bytes and its id as canonical JSON', () => {
    const text = b(' [ {"jsonrpc":"2.0","id":1.0,"result":[1,{"id":9}]} , {"\\u0069d":"a","result":null},{"result":1}] ');
    const items = splitBatchAnswer(text, MAX_ANSWER_DEPTH)!;
    expect(items.map((i) => i.id)).toEqual(['1', '"a"', null]);
    expect(text.toString('utf8', items[1]!.start, items[1]!.end)).toBe('{"\\u0069d":"a","result":null}');
  });

  it('refuses what is not an array of objects, an id named twice, and answers nested too deep', () => {
    for (const t of ['{"id":1}', '[1]', '[{"id":1},]', '[{"id":1}] x', '[{"id":1,"id":2}]', '[{"id":1,"\\u0069d":2}]', '']) {
      expect(splitBatchAnswer(b(t), MAX_ANSWER_DEPTH), t).toBeNull();
    }
    expect(splitBatchAnswer(b(`[{"id":1,"result":${deep(100_000)}}]`), MAX_ANSWER_DEPTH)).toBeNull();
    expect(splitBatchAnswer(b(`[{"id":1,"result":${deep(100)}}]`), MAX_ANSWER_DEPTH)).toHaveLength(1);
  });
});

describe('mergeBatch', () => {
  const allowed = new Set(['eth_chainId']);
  /** A batch of `a` (allowed), a refused call and `b` (allowed). */
  function plan(): BatchMerge {
    const d = checkEvmBodyGeneral(
      b(JSON.stringify([
        { jsonrpc: '2.0', id: 'a', method: 'eth_chainId' },
        { jsonrpc: '2.0', id: 'x', method: 'eth_mining' },
        { jsonrpc: '2.0', id: 'b', method: 'eth_chainId' },
      ])),
      allowed,
      10,
    );
    if (d.kind !== 'forward' || d.merge === null) throw new Error('expected a merge plan');
    return d.merge;
  }
  const answer = (...ids: unknown[]) => JSON.stringify(ids.map((id) => ({ jsonrpc: '2.0', id, result: '0x1' })));

  it('puts the node answers and its own errors in request order, byte for byte', () => {
    const node = '[{"jsonrpc":"2.0","id":"b","result":"0x2"},\n {"id":"a","jsonrpc":"2.0","result":{"x": [1, 2]}}]';
    const merged = mergeBatch(plan(), node)!.toString();
    expect(merged).toBe(
      '[{"id":"a","jsonrpc":"2.0","result":{"x": [1, 2]}},{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"Method not found"}},{"jsonrpc":"2.0","id":"b","result":"0x2"}]',
    );
  });

  it('is no answer when an id is missing, foreign or repeated', () => {
    expect(mergeBatch(plan(), answer('b', 'not-yours'))).toBeNull();
    expect(mergeBatch(plan(), answer('a'))).toBeNull();
    expect(mergeBatch(plan(), answer('a', 'b', 'b'))).toBeNull();
    expect(mergeBatch(plan(), answer('a', 'b', 'x'))).toBeNull();
    expect(mergeBatch(plan(), '')).toBeNull();
    expect(mergeBatch(plan(), answer('b', 'a'))).not.toBeNull();
  });

  it('gives every forwarded call a batch-wide error under its own id, and only if it is an error object', () => {
    const merged = JSON.parse(mergeBatch(plan(), '{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"busy"}}')!.toString());
    expect(merged.map((x: { id: string }) => x.id)).toEqual(['a', 'x', 'b']);
    expect(merged[2].error).toEqual({ code: -32005, message: 'busy' });
    expect(mergeBatch(plan(), '{"jsonrpc":"2.0","id":null,"error":"busy"}')).toBeNull();
    expect(mergeBatch(plan(), `{"jsonrpc":"2.0","id":null,"error":{"data":${deep(100_000)}}}`)).toBeNull();
  });

  it('takes an empty answer when only notifications went to the node', () => {
    const d = checkEvmBodyGeneral(
      b(JSON.stringify([{ jsonrpc: '2.0', method: 'eth_chainId' }, { jsonrpc: '2.0', id: 7, method: 'eth_mining' }])),
      allowed,
      10,
    );
    if (d.kind !== 'forward' || d.merge === null) throw new Error('expected a merge plan');
    expect(d.answered).toBe(false);
    expect(JSON.parse(mergeBatch(d.merge, '')!.toString())).toEqual([{ jsonrpc: '2.0', id: 7, error: { code: -32601, message: 'Method not found' } }]);
    expect(mergeBatch(d.merge, answer(1))).toBeNull();
  });
});

// Issue 45, "split once": a batch split below (pool/batch.ts) gives its answers one by one, each already its call's,
// and the plan puts them in their slots with no scan of a joined answer.
describe('mergeItems', () => {
  const plan = (): BatchMerge => {
    const d = checkEvmBodyGeneral(b('[{"jsonrpc":"2.0","id":"a","method":"eth_chainId"},{"jsonrpc":"2.0","id":"x","method":"eth_mining"},{"jsonrpc":"2.0","id":"b","method":"eth_chainId"}]'), new Set(['eth_chainId']), 10);
    if (d.kind !== 'forward' || d.merge === null) throw new Error('expected a merge plan');
    return d.merge;
  };

  it("puts the forwarded calls' answers (an item, a merged answer's parts) in their slots in order, the refusal in its own, byte for byte; no answer for a count that differs", () => {
    const a = b('{"jsonrpc":"2.0","id":"a","result":"0x1"}');
    const parts = [b('{"jsonrpc":"2.0","id":"b",'), b('"result":[]}')];
    expect(mergeItems(plan(), [a, parts])!.toString()).toBe('[{"jsonrpc":"2.0","id":"a","result":"0x1"},{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"Method not found"}},{"jsonrpc":"2.0","id":"b","result":[]}]');
    expect(mergeItems(plan(), [a])).toBeNull();
    expect(mergeItems(plan(), [a, a, a])).toBeNull();
  });
});

describe('EVM guard depth', () => {
  it('refuses a body nested deeper than 128 before re-serializing it, and forwards one within', () => {
    const allowed = new Set(['eth_chainId']);
    const body = (n: number) => b(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[${deep(n)}],"x":1}`);
    expect(checkEvmBodyGeneral(body(5000), allowed, 10)).toMatchObject({ kind: 'reply', status: 400 });
    expect((checkEvmBodyGeneral(body(5000), allowed, 10) as { body: string }).body).toContain('nested more than 128');
    expect(checkEvmBodyGeneral(body(120), allowed, 10)).toMatchObject({ kind: 'forward', answered: true });
  });
});
