import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { checkTargets, formatPeerRatios, formatRss, formatTargets, median, pairedRatios, parseResults, peerRatios, rssVerdict } from '../../../bench/targets.mjs';

const HEAD = 'scenario\tround\ttarget\trps\tp50_us\tp99_us\tnon2xx\tsockerr';
const row = (scenario: string, round: number, target: string, rps: number, p99: number): string =>
  [scenario, round, target, rps, 1000, p99, 0, 0].join('\t');

// Three rounds of the small call: the gateway at 0.8x, 1.0x and 1.2x node-stream,
// 2x fastify throughout; p99 1.6x node-stream in one round, 1.0x in the others.
const SMALL = [
  HEAD,
  row('small', 1, 'node-stream', 10000, 5000),
  row('small', 1, 'gateway', 8000, 8000),
  row('small', 1, 'fastify', 4000, 9000),
  row('small', 2, 'gateway', 10000, 5000),
  row('small', 2, 'node-stream', 10000, 5000),
  row('small', 2, 'fastify', 5000, 9000),
  row('small', 3, 'fastify', 6000, 9000),
  row('small', 3, 'node-stream', 10000, 5000),
  row('small', 3, 'gateway', 12000, 5000),
].join('\n');

describe('bench/targets.mjs', () => {
  it('pairs the gateway with the peer round by round and takes the median ratio', () => {
    const runs = [parseResults(SMALL)];
    expect(pairedRatios(runs, 'gateway', 'node-stream', 'small', 'rps')).toEqual([0.8, 1, 1.2]);
    expect(pairedRatios(runs, 'gateway', 'node-stream', 'small', 'p99')).toEqual([1.6, 1, 1]);
    const byGoal = Object.fromEntries(checkTargets(runs).map((r) => [`${r.scenario} ${r.figure} ${r.peer}`, r]));
    expect(byGoal['small rps node-stream']).toMatchObject({ median: 1, min: 0.8, max: 1.2, rounds: 3, met: true });
    expect(byGoal['small rps fastify']).toMatchObject({ median: 2, rounds: 3, met: true });
    expect(byGoal['small p99 node-stream']).toMatchObject({ median: 1, met: true });
    // no big or batch rows: not measured, neither met nor missed, and said so under the table
    expect(byGoal['big rps node-stream']).toMatchObject({ rounds: 0, median: null, met: null });
    const table = formatTargets(checkTargets(runs));
    expect(table.split('\n').filter((l) => l.startsWith('| small:'))).toHaveLength(3);
    expect(table).toContain('Not measured in this run: big: req/s ÷ node-stream; batch: req/s ÷ fastify; big: p99 ÷ node-stream; batch: p99 ÷ node-stream.');
  });

  it('misses a target whose median ratio falls short, even when some rounds clear it', () => {
    const slow = SMALL.replace('small\t2\tgateway\t10000', 'small\t2\tgateway\t8500');
    const r = checkTargets([parseResults(slow)]).find((t) => t.peer === 'node-stream' && t.figure === 'rps' && t.scenario === 'small');
    expect(r).toMatchObject({ median: 0.85, met: false });
    expect(formatTargets([r!])).toContain('| small: req/s ÷ node-stream | ≥ 0.9 | 0.850 (0.80–1.20) | 3 | **no** |');
  });

  it('pairs rounds only within one run, and leaves out a stalled slice', () => {
    const other = [HEAD, row('small', 1, 'gateway', 9000, 5000), row('small', 1, 'node-stream', 10000, 5000), row('small', 2, 'gateway', 9000, 5000), row('small', 2, 'node-stream', 0, 0)].join('\n');
    const ratios = pairedRatios([parseResults(SMALL), parseResults(other)], 'gateway', 'node-stream', 'small', 'rps');
    expect(ratios).toEqual([0.8, 1, 1.2, 0.9]);
  });

  it('names the gateway row it was asked about (gateway-x2 in cluster mode)', () => {
    const runs = [parseResults(SMALL.replaceAll('\tgateway\t', '\tgateway-x2\t'))];
    expect(checkTargets(runs, 'gateway').every((r) => r.rounds === 0)).toBe(true);
    expect(checkTargets(runs, 'gateway-x2').find((r) => r.peer === 'fastify')).toMatchObject({ median: 2 });
  });

  it('refuses a results file without the columns it reads', () => {
    expect(() => parseResults('scenario\tround\ttarget\trps\nsmall\t1\tgateway\t1')).toThrow(/no "p99_us" column/);
    expect(parseResults('')).toEqual([]);
  });

  it('compares the gateway with every peer pair by pair, leaving out direct and other gateway rows', () => {
    const withOthers = [
      SMALL,
      row('small', 1, 'direct', 40000, 1000),
      row('small', 1, 'gateway-x2', 16000, 4000),
      row('small', 1, 'nginx', 16000, 2000),
      row('small', 2, 'nginx', 20000, 2500),
      row('big', 1, 'gateway', 3000, 30000),
      row('big', 1, 'node-stream', 2000, 60000),
    ].join('\n');
    const table = peerRatios([parseResults(withOthers)]);
    expect(table.map((p) => p.peer)).toEqual(['node-stream', 'fastify', 'nginx']);
    const [ns, , nginx] = table.map((p) => p.scenarios);
    expect(ns!.map((s) => s.scenario)).toEqual(['small', 'big']);
    expect(ns![0]!.rps).toEqual({ median: 1, min: 0.8, max: 1.2, rounds: 3 });
    expect(ns![0]!.p99).toEqual({ median: 1, min: 1, max: 1.6, rounds: 3 });
    expect(ns![1]!.rps).toEqual({ median: 1.5, min: 1.5, max: 1.5, rounds: 1 });
    // nginx ran in two rounds of small and none of big
    expect(nginx![0]!.rps).toEqual({ median: 0.5, min: 0.5, max: 0.5, rounds: 2 });
    expect(nginx![1]).toEqual({ scenario: 'big', rps: null, p99: null });
    const text = formatPeerRatios(table);
    expect(text.split('\n')[0]).toBe('| gateway ÷ peer | small: req/s | small: p99 | big: req/s | big: p99 |');
    expect(text).toContain('| node-stream | 1.00 (0.80–1.20) | 1.00 (1.00–1.60) | 1.50 (1.50–1.50) | 0.50 (0.50–0.50) |');
    expect(text).toContain('| nginx | 0.50 (0.50–0.50) | 3.00 (2.00–4.00) | – | – |');
    expect(formatPeerRatios([])).toBe('No peers to compare gateway with.');
    // a gateway row under another name is not its own peer
    expect(peerRatios([parseResults(SMALL.replaceAll('gateway', 'gw'))], 'gw').map((p) => p.peer)).toEqual(['node-stream', 'fastify']);
  });

  it('takes the median of odd and even counts, whatever the order', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    // fast-check once found this: -0 and 0 sort as equals, so the order decided the sign.
    expect(median([0, -0, -5e-324])).toBe(median([-5e-324, -0, 0]));
    fc.assert(
      fc.property(fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 40 }), (xs) => {
        const m = median(xs);
        expect(m).toBeGreaterThanOrEqual(Math.min(...xs));
        expect(m).toBeLessThanOrEqual(Math.max(...xs));
        expect(median([...xs].reverse())).toBe(m);
      }),
    );
  });

  it('calls memory flat when the last third of a run stays within 10% of the middle third', () => {
    const flat = [75, 90, 140, 150, 152, 149, 151, 150, 153];
    expect(rssVerdict(flat)).toMatchObject({ middle: 152, last: 153, max: 153, flat: true });
    const growing = [75, 90, 140, 150, 160, 170, 185, 200, 215];
    expect(rssVerdict(growing)).toMatchObject({ middle: 170, last: 215, flat: false });
    expect(rssVerdict([80, 81, 82])).toMatchObject({ samples: 3, flat: null });
    const table = formatRss([['big', rssVerdict(growing)], ['batch', rssVerdict([80])]]);
    expect(table).toContain('| big | 170.0 MiB | 215.0 MiB | 215.0 MiB | 9 | **no** |');
    expect(table).toContain('| batch | – | – | – | 1 | too few samples |');
  });
});
