// `gateway keys add|set|list|revoke|check`: the key is printed once, only its
// hash is stored, list never shows it, revoke disables or deletes it, and edits
// keep the file's comments and other entries. The commands run in-process
// (generator/keys-cli.ts, as bin/gateway.mjs wires them), so these take
// milliseconds; test/e2e/keys-cli.test.ts runs the real binary.
import { describe, expect, it, onTestFinished } from 'vitest';
import { Command, CommanderError } from 'commander';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseKeysFile, isKeyShaped } from '../../../runtime/keys/keys.ts';
import { addKeysCommands } from '../../../generator/keys-cli.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `gateway ARGS` with the keys commands, in this process: output and exit code as the process would give them. */
async function gateway(...args: string[]): Promise<Run> {
  const r: Run = { code: 0, stdout: '', stderr: '' };
  const program = new Command()
    .name('gateway')
    .exitOverride()
    .configureOutput({ writeOut: (t) => void (r.stdout += t), writeErr: (t) => void (r.stderr += t) });
  addKeysCommands(program, { out: (t) => void (r.stdout += t), err: (t) => void (r.stderr += t), exit: (code) => void (r.code = code) });
  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    r.code = err.exitCode;
  }
  return r;
}
const keys = (...args: string[]): Promise<Run> => gateway('keys', ...args);
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** A new folder for one test, removed when it ends. */
function freshDir(name: string): string {
  const dir = join(PROJECT_ROOT, '.tmp', `${name}-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('gateway keys', () => {
  it('adds, lists and revokes keys, storing only SHA-256 hashes', async () => {
    const dir = freshDir('keys');
    const file = join(dir, 'keys.yaml');

    const a = await keys('add', '--id', 'acme-wallet', '--chains', 'ethereum,bitcoin', '--file', file);
    expect(a.code).toBe(0);
    const key = a.stdout.trim();
    // Printed once, alone on stdout; the note on stderr does not repeat it.
    expect(a.stdout).toBe(`${key}\n`);
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(isKeyShaped(key)).toBe(true);
    expect(a.stderr).not.toContain(key);

    const b = await keys('add', '--id', 'explorer-app', '--rate-limit', '100/s', '--file', file);
    const key2 = b.stdout.trim();
    expect(key2).not.toBe(key);

    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(key);
    expect(text).not.toContain(key2);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const entries = parseKeysFile(text, file);
    expect(entries.map((e) => e.id)).toEqual(['acme-wallet', 'explorer-app']);
    // What got stored is the SHA-256 of exactly the printed key.
    expect(entries[0]!.sha256).toBe(sha256(key));
    expect(entries[1]!.sha256).toBe(sha256(key2));
    expect([...entries[0]!.chains!]).toEqual(['ethereum', 'bitcoin']);
    expect(entries[0]!.disabled).toBe(false);
    expect(entries[1]!.rateLimit).toEqual({ limit: 100, windowMs: 1000 });

    const dup = await keys('add', '--id', 'acme-wallet', '--file', file);
    expect(dup.code).toBe(1);
    expect(dup.stdout).toBe('');
    expect(dup.stderr).toBe("gateway keys: a key with id 'acme-wallet' already exists\n");

    const list = await keys('list', '--file', file);
    expect(list.stdout).toBe(
      `acme-wallet\tactive\tchains=ethereum,bitcoin\trate=-\tquota=-\tsha256=${sha256(key).slice(0, 12)}\tpolicy=-\n` +
        `explorer-app\tactive\tchains=*\trate=100/s\tquota=-\tsha256=${sha256(key2).slice(0, 12)}\tpolicy=-\n`,
    );
    expect(list.stdout).not.toContain(key);
    expect(list.stdout).not.toContain(sha256(key));

    expect((await keys('revoke', '--id', 'acme-wallet', '--file', file)).code).toBe(0);
    expect(parseKeysFile(readFileSync(file, 'utf8'), file).find((e) => e.id === 'acme-wallet')!.disabled).toBe(true);
    expect((await keys('list', '--file', file)).stdout).toContain('acme-wallet\tdisabled\t');
    expect((await keys('revoke', '--id', 'explorer-app', '--delete', '--file', file)).code).toBe(0);
    expect(parseKeysFile(readFileSync(file, 'utf8'), file).map((e) => e.id)).toEqual(['acme-wallet']);
    expect(await keys('revoke', '--id', 'nobody', '--file', file)).toEqual({ code: 1, stdout: '', stderr: "gateway keys: no key with id 'nobody'\n" });

    // Written atomically: no temporary file is left behind.
    expect(readdirSync(dir)).toEqual(['keys.yaml']);
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps comments and other entries when editing, and tightens the mode to 0600', async () => {
    const dir = freshDir('keys-edit');
    const file = join(dir, 'keys.yaml');
    const other = sha256('x'.repeat(32));
    writeFileSync(file, `# production keys\nkeys:\n  # the wallet team\n  - id: wallet\n    sha256: "${other}"\n    chains: [ethereum]\n`);
    chmodSync(file, 0o644);
    const r = await keys('add', '--id', 'ops', '--file', file);
    expect(r.code).toBe(0);
    const text = readFileSync(file, 'utf8');
    expect(text.startsWith('# production keys\nkeys:\n  # the wallet team\n  - id: wallet\n')).toBe(true);
    expect(text).toContain(other);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(parseKeysFile(text, file).map((e) => [e.id, e.sha256])).toEqual([['wallet', other], ['ops', sha256(r.stdout.trim())]]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses bad input, every problem named by its flag with a hint, and leaves the file as it was', async () => {
    const dir = freshDir('keys-bad');
    const file = join(dir, 'keys.yaml');
    const ID = "--id: '-bad' does not match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ (hint: A name for logs, metrics and usage; never the key itself. Unique in the file.)";
    const RATE = "--rate-limit: '100/d' does not match ^[1-9][0-9]*/(s|sec|m|min|h|hour)$ (hint: The key's rate limit in credits, as N/s, N/min or N/h. Omitted: the manifest's rateLimit.)";
    const CHAIN = "--chains[1]: 'Bad Chain' does not match ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ (hint: A chain's path, as in the manifest.)";
    const BATCH = "Most calls in one JSON-RPC batch from this key; a larger batch is refused whole with HTTP 413. The chain's limits.maxBatchSize still applies. Omitted: the chain's.";
    const cases: [string[], string[]][] = [
      [['--id', '-bad'], [ID]],
      [['--id', 'a', '--rate-limit', '100/d'], [RATE]],
      [['--id', 'a', '--chains', 'ethereum,Bad Chain'], [CHAIN]],
      [['--id', 'a', '--max-batch-size', '0'], [`--max-batch-size: must be >= 1, not 0 (hint: ${BATCH})`]],
      [['--id', 'a', '--max-batch-size', 'ten'], [`--max-batch-size: must be integer, not string (hint: ${BATCH})`]],
      // Every problem at once, in the schema's order of fields.
      [['--id', '-bad', '--chains', 'ethereum,Bad Chain', '--rate-limit', '100/d'], [ID, CHAIN, RATE]],
    ];
    for (const [args, problems] of cases) {
      expect(await keys('add', ...args, '--file', file)).toEqual({ code: 1, stdout: '', stderr: problems.map((p) => `gateway keys: ${p}\n`).join('') });
    }
    expect(existsSync(file)).toBe(false);

    writeFileSync(file, 'keys:\n  - id: x\n    sha256: nothex\n');
    const broken = await keys('add', '--id', 'y', '--file', file);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toBe('');
    expect(broken.stderr).toContain(`${file}:3:13 keys[0] (x) sha256: 'nothex' does not match`);
    expect(readFileSync(file, 'utf8')).toBe('keys:\n  - id: x\n    sha256: nothex\n');
    expect(readdirSync(dir)).toEqual(['keys.yaml']);

    expect(await keys('list', '--file', join(dir, 'absent.yaml'))).toEqual({ code: 0, stdout: '', stderr: '' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('maxBatchSize, a field of the schema and nothing more: add, set, list and none, as text and through the YAML document', async () => {
    const dir = freshDir('keys-batch');
    const file = join(dir, 'keys.yaml');
    // A new file goes through the YAML document; the second add appends as text.
    const k1 = (await keys('add', '--id', 'small', '--max-batch-size', '5', '--file', file)).stdout.trim();
    const k2 = (await keys('add', '--id', 'plain', '--file', file)).stdout.trim();
    expect(readFileSync(file, 'utf8')).toContain(`  - id: small\n    sha256: "${sha256(k1)}"\n    maxBatchSize: 5\n    disabled: false\n`);
    expect(parseKeysFile(readFileSync(file, 'utf8'), file).map((e) => [e.id, e.maxBatchSize])).toEqual([['small', 5], ['plain', null]]);
    // Edited as text (the fast scan reads maxBatchSize).
    expect((await keys('set', '--id', 'plain', '--max-batch-size', '20', '--file', file)).code).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain(`  - id: plain\n    sha256: "${sha256(k2)}"\n    maxBatchSize: 20\n    disabled: false\n`);
    expect((await keys('list', '--file', file)).stdout).toBe(
      `small\tactive\tchains=*\trate=-\tquota=-\tsha256=${sha256(k1).slice(0, 12)}\tpolicy=maxBatchSize=5\n` +
        `plain\tactive\tchains=*\trate=-\tquota=-\tsha256=${sha256(k2).slice(0, 12)}\tpolicy=maxBatchSize=20\n`,
    );
    // With an allow list the entry goes through the YAML document; none removes the field.
    expect((await keys('set', '--id', 'small', '--origins', 'https://app.acme.io', '--max-batch-size', 'none', '--file', file)).code).toBe(0);
    const [small, plain] = parseKeysFile(readFileSync(file, 'utf8'), file);
    expect(small!.maxBatchSize).toBeNull();
    expect(small!.policy!.origins!.matches('https://app.acme.io')).toBe(true);
    expect(plain!.maxBatchSize).toBe(20);
    rmSync(dir, { recursive: true, force: true });
  });

  it('set changes a key\'s policy without changing the key; list shows it; an edit that would be invalid is refused, naming the flag', async () => {
    const dir = freshDir('keys-set');
    const file = join(dir, 'keys.yaml');
    const key = (await keys('add', '--id', 'dapp', '--origins', 'https://app.acme.io,https://*.acme.io', '--methods', 'eth_call,eth_chainId', '--file', file)).stdout.trim();
    const hash = parseKeysFile(readFileSync(file, 'utf8'), file)[0]!.sha256;
    expect(hash).toBe(sha256(key));
    const set = await keys('set', '--id', 'dapp', '--ips', '10.0.0.0/8,2001:db8::/32', '--methods', '', '--expires', '2031-01-01T00:00:00Z', '--quota', '5000/month', '--file', file);
    expect(set.code).toBe(0);
    const [e] = parseKeysFile(readFileSync(file, 'utf8'), file);
    expect(e!.sha256).toBe(hash);
    expect(e!.policy!.methods).toBeNull();
    expect(e!.policy!.origins!.matches('https://eu.acme.io')).toBe(true);
    expect(e!.policy!.expires).toBe(Date.parse('2031-01-01T00:00:00Z'));
    expect(e!.quota).toEqual({ limit: 5000, per: 'month' });
    const l = await keys('list', '--file', file);
    expect(l.stdout).toContain('quota=5000/month');
    expect(l.stdout).toContain('policy=origins=https://app.acme.io,https://*.acme.io ips=10.0.0.0/8,2001:db8::/32 expires=2031-01-01T00:00:00Z');
    expect(l.stdout).not.toContain(key);
    const before = readFileSync(file, 'utf8');
    const bad = await keys('set', '--id', 'dapp', '--contracts', '0x1234', '--file', file);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe("gateway keys: --contracts[0]: '0x1234' does not match ^0x[0-9a-fA-F]{40}$ (hint: An address: 0x and 40 hex digits.)\n");
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect((await keys('set', '--id', 'nobody', '--ips', '10.0.0.1', '--file', file)).code).toBe(1);
  });

  it('check (and check-keys) reports every problem of a keys file at FILE:LINE:COL with hints', async () => {
    const dir = freshDir('keys-check');
    const file = join(dir, 'keys.yaml');
    writeFileSync(
      file,
      [
        'keys:',
        '  - id: a',
        `    sha256: "${sha256('a'.repeat(20))}"`,
        '    alow: { ips: [10.0.0.1] }',
        '    allow:',
        '      origins: ["https://ok.io", "ok.io"]',
        '      ips: [10.0.0.0/33]',
        '    expires: tomorrow',
        '    jwt: { keys: [ { kid: k1, alg: HS256, pem: x } ] }',
        '',
      ].join('\n'),
    );
    const r = await keys('check', file);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toEqual([
      `${file}:4:5 keys[0] (a): unknown field 'alow' (hint: did you mean 'allow'?)`,
      `${file}:6:34 keys[0] (a) allow.origins[1]: 'ok.io' is not an origin (hint: scheme://host[:port], or https://*.example.com for its subdomains)`,
      `${file}:7:13 keys[0] (a) allow.ips[0]: '10.0.0.0/33' is not an IP address or CIDR block (hint: 203.0.113.7, 203.0.113.0/24, 2001:db8::/32)`,
      `${file}:8:14 keys[0] (a) expires: 'tomorrow' does not match ^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$ (hint: RFC 3339 date-time with a zone after which the key is refused (reason expired). Quote it.)`,
      `${file}:9:36 keys[0] (a) jwt.keys[0]: unknown JWT algorithm 'HS256' (hint: did you mean 'RS256'? use RS256 or ES256)`,
      `${file}: 5 problems`,
    ]);
    expect(await gateway('check-keys', file)).toEqual(r);
    writeFileSync(file, `keys:\n  - { id: a, sha256: "${sha256('a'.repeat(20))}", allow: { ips: ["::ffff:10.0.0.1"] } }\n`);
    expect((await keys('check', file)).stdout).toBe(`${file}: ok (1 keys)\n`);
  });

  it('edits a large file in place as text: add appends, set and revoke rewrite only their entry, comments stay', async () => {
    const dir = freshDir('keys-large');
    const file = join(dir, 'keys.yaml');
    const lines = ['# ops: do not edit by hand', 'keys:'];
    for (let i = 0; i < 5000; i++) lines.push(`  - id: k${i}`, `    sha256: "${sha256(`large-file-key-${i}-0123456789`)}"`, ...(i === 2500 ? ['  # the middle one'] : []));
    const before = lines.join('\n') + '\n';
    writeFileSync(file, before);
    const key = (await keys('add', '--id', 'new-one', '--chains', 'ethereum', '--rate-limit', '5/s', '--file', file)).stdout.trim();
    const afterAdd = readFileSync(file, 'utf8');
    expect(afterAdd.startsWith(before)).toBe(true);
    expect(afterAdd.slice(before.length)).toBe(`  - id: new-one\n    sha256: "${sha256(key)}"\n    chains: [ethereum]\n    rateLimit: 5/s\n    disabled: false\n`);
    expect((await keys('set', '--id', 'k2500', '--quota', '100/day', '--file', file)).code).toBe(0);
    expect((await keys('revoke', '--id', 'k10', '--file', file)).code).toBe(0);
    expect((await keys('revoke', '--id', 'k11', '--delete', '--file', file)).code).toBe(0);
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('# ops: do not edit by hand');
    expect(text).toContain(`  - id: k2500\n    sha256: "${sha256('large-file-key-2500-0123456789')}"\n    quota: 100/day\n    disabled: false\n  # the middle one\n  - id: k2501`);
    const entries = parseKeysFile(text, file);
    expect(entries).toHaveLength(5000);
    const by = new Map(entries.map((e) => [e.id, e]));
    expect(by.get('k10')!.disabled).toBe(true);
    expect(by.has('k11')).toBe(false);
    expect(by.get('k2500')!.quota).toEqual({ limit: 100, per: 'day' });
    expect(by.get('new-one')).toMatchObject({ sha256: sha256(key), rateLimit: { limit: 5, windowMs: 1000 } });
    // Everything else is byte for byte what it was: without the entries edited, the two files are the same lines.
    const without = (t: string, ids: readonly string[]) => {
      const out: string[] = [];
      let skipping = false;
      for (const l of t.split('\n')) {
        const m = /^ {2}- id: (\S+)$/.exec(l);
        if (m) skipping = ids.includes(m[1]!);
        else if (!l.startsWith('    ')) skipping = false;
        if (!skipping) out.push(l);
      }
      return out;
    };
    const edited = ['k10', 'k11', 'k2500', 'new-one'];
    expect(without(text, edited)).toEqual(without(before, edited));
    expect(without(text, edited).length).toBeGreaterThan(9000);
    expect((await keys('add', '--id', 'k5', '--file', file)).stderr).toContain("a key with id 'k5' already exists");
  });
});
