// A logs subscription's filter (runtime/kinds/evm/socket-logs.ts), read and matched as geth
// does: addresses any-of, topics by position (null or [] for any, a list for
// any of several), a log with fewer topics than the filter's positions never
// matches, case ignored; malformed filters named by their JSON pointer.
import { describe, expect, it } from 'vitest';
import { isFilter, matches, parseLogFilter, type LogFilter } from '../../../../../runtime/kinds/evm/socket-logs.ts';

const A = `0x${'aa'.repeat(20)}`;
const B = `0x${'bb'.repeat(20)}`;
const T1 = `0x${'11'.repeat(32)}`;
const T2 = `0x${'22'.repeat(32)}`;
const T3 = `0x${'33'.repeat(32)}`;

function filter(v: unknown): LogFilter {
  const f = parseLogFilter(v);
  if (!isFilter(f)) throw new Error(JSON.stringify(f));
  return f;
}

describe('logs filter', () => {
  it('matches every log without a filter, or with an empty one', () => {
    for (const f of [filter(undefined), filter({}), filter({ address: [], topics: [] })]) expect(matches(f, A, [])).toBe(true);
  });

  it('matches addresses any-of, ignoring case', () => {
    const f = filter({ address: [A.toUpperCase().replace('0X', '0x'), B] });
    expect([matches(f, A, []), matches(f, B, [T1]), matches(f, `0x${'cc'.repeat(20)}`, [])]).toEqual([true, true, false]);
    expect(matches(filter({ address: A }), A, [])).toBe(true);
  });

  it('matches topics by position: null and [] for any, a list for any of several, and never a log with fewer topics', () => {
    const f = filter({ topics: [T1, null, [T2, T3]] });
    expect(matches(f, A, [T1, T2, T3])).toBe(true);
    expect(matches(f, A, [T1, T1, T2])).toBe(true);
    expect(matches(f, A, [T2, T1, T2])).toBe(false);
    expect(matches(f, A, [T1, T2])).toBe(false);
    expect(matches(filter({ topics: [[], T2] }), A, [T3, T2])).toBe(true);
    expect(matches(filter({ topics: [T1.toUpperCase().replace('0X', '0x')] }), A, [T1])).toBe(true);
  });

  it('names what is wrong with a malformed filter', () => {
    expect(parseLogFilter('x')).toEqual({ path: '/1', message: 'must be an object with address and topics' });
    expect(parseLogFilter({ fromBlock: '0x1' })).toMatchObject({ path: '/1/fromBlock' });
    expect(parseLogFilter({ address: '0x12' })).toMatchObject({ path: '/1/address' });
    expect(parseLogFilter({ address: [A, 7] })).toMatchObject({ path: '/1/address/1' });
    expect(parseLogFilter({ topics: T1 })).toMatchObject({ path: '/1/topics' });
    expect(parseLogFilter({ topics: [null, [T1, '0x1']] })).toMatchObject({ path: '/1/topics/1/1' });
    expect(parseLogFilter({ topics: [T1, T1, T1, T1, T1] })).toMatchObject({ path: '/1/topics', message: 'at most 4 topic positions' });
  });
});
