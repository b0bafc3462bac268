// The shard assignment of a Blockbook chain's address union (socket-shards.ts):
// each address in exactly one shard, no shard over its size, the union in as
// few shards as it needs after any change, and an address moved only when a
// shard goes (so one client's change resends one shard).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Shards } from '../../../../runtime/kinds/blockbook/socket-shards.ts';

const PER = 4;

/** Every shard's addresses, and the checks that hold after any change. */
function checked(s: Shards, union: ReadonlySet<string>): string[][] {
  const lists = Array.from({ length: s.count }, (_, i) => s.list(i));
  expect(s.size).toBe(union.size);
  expect(s.count).toBe(Math.ceil(union.size / PER));
  for (const l of lists) expect(l.length).toBeLessThanOrEqual(PER);
  expect(lists.flat().sort()).toEqual([...union].sort());
  lists.forEach((l, i) => l.forEach((a) => expect(s.of(a)).toBe(i)));
  return lists;
}

describe('Shards', () => {
  it('fills the first shard, opens a second past it, and gives it up when the union shrinks back', () => {
    const s = new Shards(PER);
    const union = new Set<string>();
    for (let i = 0; i < PER + 1; i++) {
      s.add(`a${i}`);
      union.add(`a${i}`);
    }
    expect(checked(s, union)).toEqual([['a0', 'a1', 'a2', 'a3'], ['a4']]);
    s.remove('a1');
    union.delete('a1');
    // a4 moves to shard 0: the second socket closes.
    expect(checked(s, union)).toEqual([['a0', 'a2', 'a3', 'a4']]);
    for (const a of [...union]) s.remove(a);
    expect(checked(s, new Set())).toEqual([]);
  });

  it('keeps the union in ceil(n / size) shards and moves an address only when a shard goes, whatever the changes', () => {
    const op = fc.record({ add: fc.boolean(), a: fc.integer({ min: 0, max: 19 }) });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const s = new Shards(PER);
        const union = new Set<string>();
        for (const { add, a } of ops) {
          const before = new Map([...union].map((x) => [x, s.of(x)!]));
          const count = s.count;
          const name = `addr${a}`;
          if (add) {
            s.add(name);
            union.add(name);
          } else {
            s.remove(name);
            union.delete(name);
          }
          checked(s, union);
          // No address changes shard unless the number of shards fell (the last one's moved to the others).
          if (s.count === count) for (const [x, i] of before) if (union.has(x)) expect(s.of(x), x).toBe(i);
        }
      }),
    );
  });
});
