// The keys file's fast scan (runtime/keys/keys-fast.ts) against the full parser:
// random keys files in the shapes ops write (block and flow entries, quoted
// and plain scalars, comments, chains, limits, disabled, expiry, and entries
// the scan leaves to the full parser; every field the schema's table lets a
// line hold) must give the same keys through
// KeyStore (fast scan) as through parseKeysFile (full parser), and a file
// with a problem must still be refused with its position.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeyStore, parseKeysFile } from '../../../../runtime/keys/keys.ts';
import { GiveUp, KeyScan, type ScannedEntry } from '../../../../runtime/keys/keys-fast.ts';

const sha = (k: string) => createHash('sha256').update(k).digest('hex');
const quiet = { info() {}, error() {} };
const dir = mkdtempSync(join(tmpdir(), 'keys-fast-'));
let n = 0;

function store(text: string): KeyStore {
  const file = join(dir, `keys-${n++}.yaml`);
  writeFileSync(file, text);
  const s = new KeyStore(file, quiet);
  s.load();
  return s;
}

interface Spec {
  key: string;
  id: string;
  chains?: string[];
  disabled?: boolean;
  rateLimit?: string;
  quota?: string;
  maxBatchSize?: number;
  expires?: string;
  origins?: string[];
  flow: boolean;
  quote: '"' | "'" | '';
  comment: boolean;
  upper: boolean;
}

const spec = (i: number): fc.Arbitrary<Spec> =>
  fc.record({
    key: fc.constant(`fast-scan-key-${i}-0123456789abcdef`),
    id: fc.constantFrom(`k${i}`, `key-${i}.acme`, `Key_${i}`),
    chains: fc.option(fc.subarray(['ethereum', 'polygon', 'bitcoin'], { minLength: 1 }), { nil: undefined }),
    disabled: fc.option(fc.boolean(), { nil: undefined }),
    rateLimit: fc.option(fc.constantFrom('10/s', '600/min', '5/h'), { nil: undefined }),
    quota: fc.option(fc.constantFrom('1000/day', '5/month'), { nil: undefined }),
    maxBatchSize: fc.option(fc.constantFrom(1, 7, 250), { nil: undefined }),
    expires: fc.option(fc.constantFrom('2020-01-01T00:00:00Z', '2099-06-30T12:00:00+02:00'), { nil: undefined }),
    origins: fc.option(fc.constant(['https://app.acme.io']), { nil: undefined }),
    flow: fc.boolean(),
    quote: fc.constantFrom('"', "'", ''),
    comment: fc.boolean(),
    upper: fc.boolean(),
  });

function render(specs: Spec[]): string {
  const lines = ['# keys', 'keys:'];
  for (const s of specs) {
    const h = s.upper ? sha(s.key).toUpperCase() : sha(s.key);
    const fields: [string, string][] = [
      ['id', s.id],
      ['sha256', `${s.quote}${h}${s.quote}`],
    ];
    if (s.chains) fields.push(['chains', `[${s.chains.join(', ')}]`]);
    if (s.disabled !== undefined) fields.push(['disabled', String(s.disabled)]);
    if (s.rateLimit) fields.push(['rateLimit', s.rateLimit]);
    if (s.quota) fields.push(['quota', s.quota]);
    if (s.maxBatchSize !== undefined) fields.push(['maxBatchSize', String(s.maxBatchSize)]);
    if (s.expires) fields.push(['expires', `"${s.expires}"`]);
    if (s.flow) {
      const extra = s.origins ? `, allow: { origins: [${s.origins.map((o) => `"${o}"`).join(', ')}] }` : '';
      lines.push(`  - { ${fields.map(([k, v]) => `${k}: ${v}`).join(', ')}${extra} }${s.comment ? ' # flow' : ''}`);
    } else {
      fields.forEach(([k, v], j) => lines.push(`${j === 0 ? '  - ' : '    '}${k}: ${v}${s.comment && j === 1 ? '  # the hash' : ''}`));
      if (s.origins) lines.push('    allow:', `      origins: [${s.origins.map((o) => `"${o}"`).join(', ')}]`);
    }
    if (s.comment) lines.push('', '  # next');
  }
  return lines.join('\n') + '\n';
}

describe('keys file: the fast scan agrees with the full parser', () => {
  it('random files: every key answers the same through the store as through parseKeysFile', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 12 }).chain((count) => fc.tuple(...Array.from({ length: count }, (_, i) => spec(i)))), (specs) => {
        const text = render(specs);
        let full: ReturnType<typeof parseKeysFile>;
        try {
          full = parseKeysFile(text, 'keys.yaml');
        } catch {
          // The full parser refuses it (an empty `keys:`): so must the store.
          expect(() => store(text)).toThrow();
          return;
        }
        const s = store(text);
        expect(s.size).toBe(full.length);
        for (const [i, sp] of specs.entries()) {
          const want = full[i]!;
          const got = s.check(sp.key, 'ethereum');
          if (want.disabled) {
            expect(got).toEqual({ ok: false, reason: 'invalid' });
            continue;
          }
          if (want.chains !== null && !want.chains.has('ethereum')) {
            expect(got).toEqual({ ok: false, reason: 'forbidden' });
            continue;
          }
          expect(got.ok, text).toBe(true);
          const e = (got as { entry: (typeof full)[number] }).entry;
          expect(e.id).toBe(want.id);
          expect(e.sha256).toBe(want.sha256);
          expect(e.chains === null ? null : [...e.chains].sort()).toEqual(want.chains === null ? null : [...want.chains].sort());
          expect(e.rateLimit).toEqual(want.rateLimit);
          expect(e.quota).toEqual(want.quota);
          expect(e.maxBatchSize).toBe(want.maxBatchSize);
          expect(e.maxBatchSize).toBe(sp.maxBatchSize ?? null);
          expect(e.policy?.expires ?? null).toEqual(want.policy?.expires ?? null);
          expect(e.policy?.origins === undefined || e.policy?.origins === null).toBe(want.policy?.origins === undefined || want.policy?.origins === null);
        }
        expect(s.check('not-a-key-of-this-file-0123', 'ethereum')).toEqual({ ok: false, reason: 'invalid' });
      }),
      { numRuns: 200 },
    );
  });

  it('the scan takes the plain shapes itself, and leaves the rest to the full parser', () => {
    const take = (text: string): ScannedEntry[] | 'gave up' => {
      const out: ScannedEntry[] = [];
      try {
        // Fed in small chunks, so lines are cut between them.
        const scan = new KeyScan((e) => out.push(e));
        for (let i = 0; i < text.length; i += 7) scan.feed(text.slice(i, i + 7));
        scan.end();
        return out;
      } catch (err) {
        if (err instanceof GiveUp) return 'gave up';
        throw err;
      }
    };
    const h = sha('x');
    expect(take(`keys:\n  - id: a\n    sha256: "${h}"\n`)).toEqual([{ id: 'a', sha256: h }]);
    expect(take(`keys:\n- { id: a, sha256: ${h}, chains: [x, "y"] }\n`)).toEqual([{ id: 'a', sha256: h, chains: ['x', 'y'] }]);
    expect(take('keys: []\n')).toEqual([]);
    expect(take(`keys:\n- { id: a, sha256: "${h}", maxBatchSize: 5 }\n`)).toEqual([{ id: 'a', sha256: h, maxBatchSize: 5 }]);
    for (const other of [
      `keys:\n  - id: a\n    sha256: "${h}"\n    allow: { ips: [10.0.0.1] }\n`, // a policy
      `keys:\n  - id: "a\\u0041"\n    sha256: "${h}"\n`, // an escape
      `keys:\n  - &a { id: a, sha256: "${h}" }\n`, // an anchor
      `keys:\n  - id: a\n    sha256: "${h}"\nother: 1\n`, // another top-level key
      `keys:\n  - id: a\n     sha256: "${h}"\n`, // odd indentation
      `keys:\n  - id: ä\n    sha256: "${h}"\n`, // UTF-8
      `keys:\n  - id: 123\n    sha256: "${h}"\n`, // a number to YAML, where the schema wants a string
      `keys:\n  - id: a\n    sha256: "${h}"\n    maxBatchSize: "5"\n`, // a string, where the schema wants an integer
      `keys:\n  - id: a\n    sha256: "${h}"\n    maxBatchSize: 0x10\n`, // a number the scan does not read
      '',
    ]) {
      expect(take(other), other).toBe('gave up');
    }
  });

  it('a file with a problem is still refused with its position, however the scan reads it', () => {
    const h = sha('y');
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, `keys:\n  - id: a\n    sha256: "${h}"\n  - id: a\n    sha256: "${sha('z')}"\n  - id: b\n    sha256: "${h}"\n`);
    const s = new KeyStore(file, quiet);
    expect(() => s.load()).toThrow(/bad\.yaml:4:9 keys\[1\] \(a\) id: duplicate id 'a'[\s\S]*bad\.yaml:7:13 keys\[2\] \(b\) sha256: the same key hash appears twice/);
  });
});
