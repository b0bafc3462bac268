// `gateway keys add|list|revoke`: the key is printed once, only its hash is
// stored, list never shows it, revoke disables or deletes it, and edits keep
// the file's comments and other entries.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseKeysFile, isKeyShaped } from '../../../runtime/keys.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

const exec = promisify(execFile);
const CLI = join(PROJECT_ROOT, 'bin/gateway.mjs');
async function keys(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [CLI, 'keys', ...args]);
    return { code: 0, ...r };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

function freshDir(name: string): string {
  const dir = join(PROJECT_ROOT, '.tmp', `${name}-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

// Each run starts node + tsx (about half a second), so these take a while.
describe('gateway keys', { timeout: 30_000 }, () => {
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

  it('refuses bad input and leaves the file as it was', async () => {
    const dir = freshDir('keys-bad');
    const file = join(dir, 'keys.yaml');
    const cases: [string[], string][] = [
      [['--id', '-bad'], "gateway keys: id '-bad' must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$\n"],
      [['--id', 'a', '--rate-limit', '100/m'], "gateway keys: rate limit '100/m' must be N/s, N/min or N/h\n"],
      [['--id', 'a', '--chains', 'ethereum,Bad Chain'], "gateway keys: chain 'Bad Chain' is not a chain path\n"],
    ];
    for (const [args, stderr] of cases) expect(await keys('add', ...args, '--file', file)).toEqual({ code: 1, stdout: '', stderr });
    expect(existsSync(file)).toBe(false);

    writeFileSync(file, 'keys:\n  - id: x\n    sha256: nothex\n');
    const broken = await keys('add', '--id', 'y', '--file', file);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toBe('');
    expect(readFileSync(file, 'utf8')).toBe('keys:\n  - id: x\n    sha256: nothex\n');

    expect(await keys('list', '--file', join(dir, 'absent.yaml'))).toEqual({ code: 0, stdout: '', stderr: '' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('set changes a key\'s policy without changing the key; list shows it; an edit that would be invalid is refused with FILE:LINE:COL', async () => {
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
    expect(bad.stderr).toMatch(new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+ keys\\[0\\]\\.allow\\.contracts\\[0\\]: '0x1234' is not an address`));
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
    const lines = r.stderr.trim().split('\n');
    expect(lines).toEqual([
      `${file}:4:11 keys[0].alow: unknown field 'alow' (hint: did you mean 'allow'?)`,
      `${file}:6:34 keys[0].allow.origins[1]: 'ok.io' is not an origin (hint: scheme://host[:port], or https://*.example.com for its subdomains)`,
      `${file}:7:13 keys[0].allow.ips[0]: '10.0.0.0/33' is not an IP address or CIDR block (hint: 203.0.113.7, 203.0.113.0/24, 2001:db8::/32)`,
      `${file}:8:14 keys[0].expires: expected a date-time with a zone (hint: RFC 3339: YYYY-MM-DDThh:mm:ssZ, quoted)`,
      `${file}:9:36 keys[0].jwt.keys[0].alg: expected RS256 or ES256 (hint: did you mean 'RS256'?)`,
      `${file}: 5 problems`,
    ]);
    const both = await exec(process.execPath, [CLI, 'check-keys', file]).catch((e: { code: number; stderr: string }) => e);
    expect((both as { code: number }).code).toBe(1);
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
