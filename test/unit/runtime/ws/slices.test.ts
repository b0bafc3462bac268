// The ping round in slices (runtime/ws/slices.ts): each tick pings and admits
// again one slice of the sockets, never all of them, and every socket once
// per interval (SLICES ticks), as sockets come and go.
import { describe, expect, it } from 'vitest';
import { SLICES, Slices } from '../../../../runtime/ws/slices.ts';

/** One interval's ticks: how often each member was visited, and the largest tick. */
function interval(s: Slices<number>): { visits: Map<number, number>; largest: number } {
  const visits = new Map<number, number>();
  let largest = 0;
  for (let t = 0; t < SLICES; t++) {
    const slice = s.turn();
    largest = Math.max(largest, slice.size);
    for (const m of slice) visits.set(m, (visits.get(m) ?? 0) + 1);
  }
  return { visits, largest };
}

describe('Slices: the ping round', () => {
  it('visits each of 2,000 members exactly once per interval, a tick taking at most 1/SLICES of them, also after closes emptied half the slices and new members came', () => {
    const s = new Slices<number>();
    for (let i = 0; i < 2000; i++) s.add(i);
    let { visits, largest } = interval(s);
    expect(visits.size).toBe(2000);
    expect([...visits.values()].every((n) => n === 1)).toBe(true);
    expect(largest).toBe(2000 / SLICES);
    // Closes that empty half the slices (members are dealt out in turn), then 1,000 new sockets: they fill the emptied
    // slices, where dealing them out in turn would put 150 in each of the others.
    for (let i = 0; i < 2000; i++) if (i % SLICES < SLICES / 2) s.delete(i);
    for (let i = 2000; i < 3000; i++) s.add(i);
    ({ visits, largest } = interval(s));
    expect(visits.size).toBe(2000);
    expect([...visits.values()].every((n) => n === 1)).toBe(true);
    expect([...visits.keys()].filter((m) => m < 2000).every((m) => m % SLICES >= SLICES / 2)).toBe(true);
    expect(largest).toBe(2000 / SLICES);
  });
});
