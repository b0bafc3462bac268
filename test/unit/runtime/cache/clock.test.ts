// The clock (runtime/cache/clock.ts): least-recently-used eviction without moving
// entries in their Map.
import { describe, expect, it } from 'vitest';
import { Clock } from '../../../../runtime/cache/clock.ts';

const entries = (...keys: string[]) => new Map<string, { used: boolean }>(keys.map((k) => [k, { used: false }]));

describe('Clock', () => {
  it('names entries in the order they came while none is read', () => {
    const m = entries('a', 'b', 'c');
    const clock = new Clock(m);
    const out: string[] = [];
    for (let i = 0; i < 3; i++) {
      const [k] = clock.victim();
      m.delete(k);
      out.push(k);
    }
    expect(out).toEqual(['a', 'b', 'c']);
  });

  it('passes over a read entry once, unmarking it, and goes on from where it stopped', () => {
    const m = entries('a', 'b', 'c', 'd');
    const clock = new Clock(m);
    m.get('a')!.used = true;
    m.get('c')!.used = true;
    expect(clock.victim()[0]).toBe('b');
    m.delete('b');
    expect(m.get('a')!.used).toBe(false);
    expect(clock.victim()[0]).toBe('d'); // from after b: c is passed over
    m.delete('d');
    expect(clock.victim()[0]).toBe('a'); // round again: a and c were unmarked
  });

  it('sees entries added after the hand started, and ends when every entry was read', () => {
    const m = entries('a', 'b');
    const clock = new Clock(m);
    m.get('a')!.used = true;
    expect(clock.victim()[0]).toBe('b');
    m.delete('b');
    m.set('c', { used: true });
    expect(clock.victim()[0]).toBe('a'); // c passed over and unmarked, then a (unmarked on the first round)
    m.delete('a');
    expect(clock.victim()[0]).toBe('c');
  });

  it('refuses an empty Map instead of looping', () => {
    expect(() => new Clock(new Map<string, { used: boolean }>()).victim()).toThrow(/nothing to evict/);
  });
});
