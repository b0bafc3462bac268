// A pool's memory of which upstream made which filter (runtime/kinds/evm/filters.ts): bounded, least recently used first out.
import { describe, expect, it } from 'vitest';
import { FilterPins, MAX_FILTERS } from '../../../../../runtime/kinds/evm/filters.ts';
import type { Upstream } from '../../../../../runtime/upstreams/upstream.ts';

const a = { name: 'a' } as Upstream;
const b = { name: 'b' } as Upstream;

describe('FilterPins', () => {
  it('gives the upstream that made a filter, by id in any case; nothing for an id it does not know or for a non-string', () => {
    const pins = new FilterPins();
    pins.set('0xAbC', a);
    pins.set('0x1', b);
    expect(pins.get('0xabc')).toBe(a);
    expect(pins.get('0x1')).toBe(b);
    expect(pins.get('0x2')).toBeUndefined();
    expect(pins.get(1)).toBeUndefined();
    pins.delete('0xABC');
    expect(pins.get('0xabc')).toBeUndefined();
  });

  it('keeps at most its bound, forgetting the least recently used first', () => {
    const pins = new FilterPins(3);
    pins.set('0x1', a);
    pins.set('0x2', a);
    pins.set('0x3', a);
    expect(pins.get('0x1')).toBe(a); // used: now the newest
    pins.set('0x4', b);
    expect(pins.size).toBe(3);
    expect(pins.get('0x2')).toBeUndefined();
    expect(pins.get('0x1')).toBe(a);
    expect(pins.get('0x4')).toBe(b);
  });

  it('the default bound holds many filters but not without end', () => {
    const pins = new FilterPins();
    for (let i = 0; i < MAX_FILTERS + 100; i++) pins.set(`0x${i.toString(16)}`, a);
    expect(pins.size).toBe(MAX_FILTERS);
  });
});
