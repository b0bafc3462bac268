// loadManifest: the plain value plus 1-based positions of keys and values at
// YAML paths, through flow and block style, aliases and merge keys.
import { describe, expect, it } from 'vitest';
import { loadManifest } from '../../../generator/load.ts';

const TEXT = [
  'version: 1', //                                   1
  'listeners:', //                                   2
  '  rpc: { port: "8545", host: h }', //             3
  'defaults: &d', //                                 4
  '  retries: 2', //                                 5
  '  maxLag: 3', //                                  6
  'chains:', //                                      7
  '  - path: a', //                                  8
  '    <<: *d', //                                   9
  '    maxLag: 9', //                               10
  '    upstreams:', //                              11
  '      - "http://a"', //                          12
  '      - { url: "http://b" }', //                 13
  '  - *d', //                                      14
  '',
].join('\n');

describe('loadManifest', () => {
  const m = loadManifest('m.yaml', TEXT);

  it('returns the plain value, with merge keys applied and own keys winning', () => {
    expect(m.syntax).toEqual([]);
    expect((m.value as { chains: unknown[] }).chains[0]).toEqual({ path: 'a', retries: 2, maxLag: 9, upstreams: ['http://a', { url: 'http://b' }] });
  });

  it('finds keys and values, block and flow', () => {
    expect(m.keyAt(['listeners', 'rpc', 'port'])).toEqual({ line: 3, col: 10 });
    expect(m.valueAt(['listeners', 'rpc', 'port'])).toEqual({ line: 3, col: 16 });
    expect(m.valueAt(['listeners', 'rpc'])).toEqual({ line: 3, col: 8 });
    expect(m.keyAt(['chains', 0, 'path'])).toEqual({ line: 8, col: 5 });
    expect(m.valueAt(['chains', 0, 'upstreams', 0])).toEqual({ line: 12, col: 9 });
    expect(m.valueAt(['chains', 0, 'upstreams', 1, 'url'])).toEqual({ line: 13, col: 16 });
    // A list item has no key: keyAt falls back to the item itself.
    expect(m.keyAt(['chains', 0, 'upstreams', 1])).toEqual({ line: 13, col: 9 });
  });

  it('finds merged keys where they are written, and own keys before merged ones', () => {
    expect(m.keyAt(['chains', 0, 'retries'])).toEqual({ line: 5, col: 3 });
    expect(m.valueAt(['chains', 0, 'maxLag'])).toEqual({ line: 10, col: 13 });
  });

  it('points at an alias where it is used, and through it at the anchored text', () => {
    expect(m.valueAt(['chains', 1])).toEqual({ line: 14, col: 5 });
    expect(m.valueAt(['chains', 1, 'retries'])).toEqual({ line: 5, col: 12 });
  });

  it('falls back to the nearest ancestor for a path that is not there', () => {
    expect(m.keyAt(['chains', 0, 'nope'])).toEqual({ line: 8, col: 5 });
    expect(m.valueAt(['listeners', 'rpc', 'host', 'deeper'])).toEqual({ line: 3, col: 30 });
    expect(m.keyAt(['chains', 7])).toEqual({ line: 8, col: 3 }); // the list itself
  });

  it('reports syntax errors and duplicate keys with positions, and no value', () => {
    const bad = loadManifest('b.yaml', 'a: 1\nb: [1, 2\nc: 3\n');
    expect(bad.value).toBeNull();
    expect(bad.syntax).toEqual([
      { file: 'b.yaml', line: 3, col: 1, message: 'Flow sequence in block collection must be sufficiently indented and end with a ]' },
    ]);
    const dup = loadManifest('d.yaml', 'a: 1\nb:\n  x: 1\n  x: 2\n');
    expect(dup.syntax).toEqual([{ file: 'd.yaml', line: 4, col: 3, message: "duplicate key 'x' (keys in one mapping must be unique)" }]);
  });

  it('turns a merge of a non-mapping into a problem instead of a crash', () => {
    const bad = loadManifest('m.yaml', 'a: &a [1]\nb:\n  <<: *a\n');
    expect(bad.value).toBeNull();
    expect(bad.syntax).toHaveLength(1);
  });
});
