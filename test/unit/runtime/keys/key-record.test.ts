// The keys file through the manifest's pipeline (runtime/keys/key-record.ts): a
// bad file is refused with every problem at FILE:LINE:COL, each with a hint,
// by the server's loader and the CLI alike, and nothing is written; a key
// store's hash is the same record, its fields encoded by kind.
import { describe, expect, it, onTestFinished } from 'vitest';
import { generateKeyPairSync } from 'node:crypto';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readKeyRecords, recordOfStore, recordProblems, storeFields, type KeyRecord } from '../../../../runtime/keys/key-record.ts';
import { entryFromFields, KeyStore } from '../../../../runtime/keys/keys.ts';
import { addKey, checkKeysFile, KeysError, setKey } from '../../../../generator/keys-file.ts';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const rsaPem = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();

/** One of each kind of mistake, a line each (numbered in the comments). */
const BAD = [
  'keys:', //                                                          1
  '  - id: acme', //                                                   2
  `    sha256: "${sha('a')}"`, //                                      3
  '    chains: ethereum', //                                           4  not a list
  '    rateLimit: 10/week', //                                         5  pattern
  '    maxBatchSize: 0', //                                            6  minimum
  '    quota: 99999999999999999/day', //                               7  pattern (too many digits)
  '    alow: { ips: [10.0.0.1] }', //                                  8  unknown field
  '    allow:', //                                                     9
  '      origins: ["https://ok.io", "ok.io"]', //                     10  not an origin
  '      ips: [10.0.0.0/33]', //                                      11  not a CIDR block
  '      contracts: ["0x12"]', //                                     12  pattern
  '    expires: "2030-13-01T00:00:00Z"', //                           13  not a real date
  '    jwt:', //                                                      14
  '      keys:', //                                                   15
  `        - { kid: k1, alg: RS256, pem: ${JSON.stringify(rsaPem)} }`, // 16
  `        - { kid: k1, alg: ES256, pem: ${JSON.stringify(rsaPem)} }`, // 17 duplicate kid, RSA for ES256
  '  - id: acme', //                                                  18  duplicate id
  `    sha256: "${sha('a').toUpperCase()}"`, //                       19  the same hash
  '    maxBatchSize: ten', //                                         20  not an integer
  '  - sha256: "abc"', //                                             21  no id; pattern
  '',
].join('\n');

describe('a bad keys file', () => {
  const expected = (file: string) => [
    `${file}:4:13 keys[0] (acme) chains: must be array, not string (hint: Chain paths the key may use. Omitted: every chain.)`,
    `${file}:5:16 keys[0] (acme) rateLimit: '10/week' does not match ^[1-9][0-9]*/(s|sec|m|min|h|hour)$ (hint: The key's rate limit in credits, as N/s, N/min or N/h. Omitted: the manifest's rateLimit.)`,
    `${file}:6:19 keys[0] (acme) maxBatchSize: must be >= 1, not 0 (hint: Most calls in one JSON-RPC batch from this key; a larger batch is refused whole with HTTP 413. The chain's limits.maxBatchSize still applies. Omitted: the chain's.)`,
    `${file}:7:12 keys[0] (acme) quota: '99999999999999999/day' does not match ^[1-9][0-9]{0,15}/(day|month)$ (hint: Credits per UTC calendar day or month, as N/day or N/month. Omitted: no quota.)`,
    `${file}:8:5 keys[0] (acme): unknown field 'alow' (hint: did you mean 'allow'?)`,
    `${file}:10:34 keys[0] (acme) allow.origins[1]: 'ok.io' is not an origin (hint: scheme://host[:port], or https://*.example.com for its subdomains)`,
    `${file}:11:13 keys[0] (acme) allow.ips[0]: '10.0.0.0/33' is not an IP address or CIDR block (hint: 203.0.113.7, 203.0.113.0/24, 2001:db8::/32)`,
    `${file}:12:19 keys[0] (acme) allow.contracts[0]: '0x12' does not match ^0x[0-9a-fA-F]{40}$ (hint: An address: 0x and 40 hex digits.)`,
    `${file}:13:14 keys[0] (acme) expires: '2030-13-01T00:00:00Z' is not a real date-time (hint: RFC 3339: YYYY-MM-DDThh:mm:ssZ, quoted)`,
    `${file}:17:18 keys[0] (acme) jwt.keys[1].kid: duplicate kid 'k1' (hint: also jwt.keys[0])`,
    `${file}:17:39 keys[0] (acme) jwt.keys[1].pem: an ES256 key must be EC on P-256`,
    `${file}:18:9 keys[1] (acme) id: duplicate id 'acme' (hint: also keys[0])`,
    `${file}:19:13 keys[1] (acme) sha256: the same key hash appears twice (hint: also keys[0] (acme))`,
    `${file}:20:19 keys[1] (acme) maxBatchSize: must be integer, not string (hint: Most calls in one JSON-RPC batch from this key; a larger batch is refused whole with HTTP 413. The chain's limits.maxBatchSize still applies. Omitted: the chain's.)`,
    `${file}:21:5 keys[2]: missing required field 'id' (hint: A name for logs, metrics and usage; never the key itself. Unique in the file.)`,
    `${file}:21:13 keys[2] sha256: 'abc' does not match ^[0-9a-fA-F]{64}$ (hint: The SHA-256 of the key, 64 hex digits; the key itself is never stored. gateway keys add writes it.)`,
  ];

  it('is refused with every problem at FILE:LINE:COL, in file order, each with a hint where one can help', () => {
    let message = '';
    try {
      readKeyRecords(BAD, 'keys.yaml');
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message.split('\n')).toEqual(expected('keys.yaml'));
    // Only the PEM of the wrong type has nothing to add.
    expect(message.split('\n').filter((l) => !l.includes('(hint: '))).toEqual([expected('keys.yaml')[10]]);
  });

  it('stops the server at start with the same problems, and gateway keys writes nothing to it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'key-record-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'keys.yaml');
    writeFileSync(file, BAD);
    expect(() => new KeyStore(file, { info() {}, error() {} }).load()).toThrow(expected(file).join('\n'));
    expect(checkKeysFile(file)).toEqual({ ok: false, problems: expected(file).join('\n') });
    expect(() => addKey(file, 'new-one')).toThrow(KeysError);
    expect(() => setKey(file, 'acme', { maxBatchSize: 5 })).toThrow(KeysError);
    expect(readFileSync(file, 'utf8')).toBe(BAD);
    expect(readdirSync(dir)).toEqual(['keys.yaml']);
  });

  it('a YAML syntax error is reported at its place too, and nothing else is', () => {
    expect(() => readKeyRecords('keys:\n  - id: a\n    id: b\n', 'k.yaml')).toThrow(/^k\.yaml:3:5 duplicate key 'id'/);
    // A near miss is one problem (did you mean), not also a missing field.
    expect(() => readKeyRecords('nokeys: 1\n', 'k.yaml')).toThrow(/^k\.yaml:1:1 \(top level\): unknown field 'nokeys' \(hint: did you mean 'keys'\?\)$/);
    expect(() => readKeyRecords('other: 1\n', 'k.yaml')).toThrow(
      "k.yaml:1:1 (top level): missing required field 'keys' (hint: The keys, one entry each (gateway keys add writes them).)\nk.yaml:1:1 (top level): unknown field 'other' (hint: allowed here: keys)",
    );
  });
});

describe("a key store's hash", () => {
  const record: KeyRecord = {
    id: 'acme',
    sha256: sha('k'),
    chains: ['ethereum'],
    rateLimit: '10/s',
    maxBatchSize: 7,
    allow: { origins: ['https://app.acme.io'] },
    expires: '2031-01-01T00:00:00Z',
    disabled: false,
  };

  it('holds the record field by field (lists and mappings as JSON, numbers and booleans as text) and reads back the same', () => {
    const f = storeFields(record);
    expect(f).toEqual({
      id: 'acme',
      chains: '["ethereum"]',
      rateLimit: '10/s',
      maxBatchSize: '7',
      allow: '{"origins":["https://app.acme.io"]}',
      expires: '2031-01-01T00:00:00Z',
      disabled: 'false',
    });
    expect(recordOfStore(record.sha256, f)).toEqual(record);
    const e = entryFromFields(record.sha256, f);
    expect(e).toMatchObject({ id: 'acme', maxBatchSize: 7, rateLimit: { limit: 10, windowMs: 1000 }, disabled: false });
    expect([...e.chains!]).toEqual(['ethereum']);
  });

  it('reads what the CLI wrote before the schema (a hash written field by field), and an empty field is no field', () => {
    const legacy = { id: 'old', disabled: 'true', chains: '["a","b"]', quota: '5/day', allow: '{"ips":["10.0.0.0/8"]}', jwt: '', rateLimit: '' };
    expect(recordOfStore(sha('o'), legacy)).toEqual({ id: 'old', disabled: true, chains: ['a', 'b'], quota: '5/day', allow: { ips: ['10.0.0.0/8'] }, sha256: sha('o') });
  });

  it('an entry that is not a valid record is refused with its problems, named by field', () => {
    const problems = recordProblems(recordOfStore(sha('x'), { id: 'x', maxBatchSize: 'lots', chains: 'not json', extra: '1' }));
    expect(problems).toEqual([
      "(entry): unknown field 'extra' (hint: allowed here: id, sha256, chains, rateLimit, quota, maxBatchSize, allow, expires, jwt, disabled)",
      'chains: must be array, not string (hint: Chain paths the key may use. Omitted: every chain.)',
      "maxBatchSize: must be integer, not string (hint: Most calls in one JSON-RPC batch from this key; a larger batch is refused whole with HTTP 413. The chain's limits.maxBatchSize still applies. Omitted: the chain's.)",
    ]);
    expect(() => entryFromFields(sha('x'), { id: 'x', maxBatchSize: '0' })).toThrow('maxBatchSize: must be >= 1, not 0');
  });
});
