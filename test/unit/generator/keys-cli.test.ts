// `gateway keys add|list|revoke`: the key is printed once, only its hash is
// stored, list never shows it, revoke disables it.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseKeysFile } from '../../../runtime/keys.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

const run = promisify(execFile);
const CLI = join(PROJECT_ROOT, 'bin/gateway.mjs');

describe('gateway keys', () => {
  it('adds, lists and revokes keys, storing only SHA-256 hashes', async () => {
    const dir = join(PROJECT_ROOT, '.tmp', `keys-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'keys.yaml');
    const a = await run(process.execPath, [CLI, 'keys', 'add', '--id', 'acme-wallet', '--chains', 'ethereum,bitcoin', '--file', file]);
    const key = a.stdout.trim();
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const b = await run(process.execPath, [CLI, 'keys', 'add', '--id', 'explorer-app', '--rate-limit', '100/s', '--file', file]);
    const key2 = b.stdout.trim();
    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(key);
    expect(text).not.toContain(key2);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const entries = parseKeysFile(text, file);
    expect(entries.map((e) => e.id)).toEqual(['acme-wallet', 'explorer-app']);
    expect(entries[0]!.sha256).toBe(createHash('sha256').update(key).digest('hex'));
    expect([...entries[0]!.chains!]).toEqual(['ethereum', 'bitcoin']);
    expect(entries[1]!.rateLimit).toEqual({ limit: 100, windowMs: 1000 });

    const dup = await run(process.execPath, [CLI, 'keys', 'add', '--id', 'acme-wallet', '--file', file]).then(() => null, (e: { code: number; stderr: string }) => e);
    expect(dup?.code).toBe(1);
    expect(dup!.stderr).toContain("already exists");

    const list = await run(process.execPath, [CLI, 'keys', 'list', '--file', file]);
    expect(list.stdout).toContain('acme-wallet\tactive\tchains=ethereum,bitcoin');
    expect(list.stdout).not.toContain(key);
    expect(list.stdout).not.toContain(entries[0]!.sha256);

    await run(process.execPath, [CLI, 'keys', 'revoke', '--id', 'acme-wallet', '--file', file]);
    expect(parseKeysFile(readFileSync(file, 'utf8'), file).find((e) => e.id === 'acme-wallet')!.disabled).toBe(true);
    await run(process.execPath, [CLI, 'keys', 'revoke', '--id', 'explorer-app', '--delete', '--file', file]);
    expect(parseKeysFile(readFileSync(file, 'utf8'), file).map((e) => e.id)).toEqual(['acme-wallet']);
  });
});
