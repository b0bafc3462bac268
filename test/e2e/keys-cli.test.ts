// Not on fixture.ts: it runs the `gateway keys` binary on keys files of its own and starts no gateway.
// `gateway keys` as ops run it: the real binary (bin/gateway.mjs through tsx),
// a child process per command, exit codes and the split between stdout (the
// key, alone) and stderr (notes, problems). What the commands do is tested
// in-process in test/unit/generator/keys-cli.test.ts; this checks the wiring.
import { describe, expect, it, onTestFinished } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../support/cli.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('gateway keys, the binary', { timeout: 60_000 }, () => {
  it('add prints the key alone on stdout; list shows the fields; check and check-keys exit 1 with every problem on stderr', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keys-cli-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'keys.yaml');
    const add = await runCli(['keys', 'add', '--id', 'acme', '--max-batch-size', '10', '--file', file]);
    expect(add.code).toBe(0);
    const key = add.stdout.trim();
    expect(add.stdout).toBe(`${key}\n`);
    expect(add.stderr).toBe(`key 'acme' added to ${file}; it is shown only this once\n`);
    expect(readFileSync(file, 'utf8')).toContain(`sha256: "${sha256(key)}"\n    maxBatchSize: 10\n`);

    expect(await runCli(['keys', 'list', '--file', file])).toEqual({
      code: 0,
      stdout: `acme\tactive\tchains=*\trate=-\tquota=-\tsha256=${sha256(key).slice(0, 12)}\tpolicy=maxBatchSize=10\n`,
      stderr: '',
    });

    writeFileSync(file, `keys:\n  - id: acme\n    sha256: "${sha256(key)}"\n    maxBatchSize: 0\n    quota: 5/week\n`);
    const problems = [
      `${file}:4:19 keys[0] (acme) maxBatchSize: must be >= 1, not 0 (hint: Most calls in one JSON-RPC batch from this key; a larger batch is refused whole with HTTP 413. The chain's limits.maxBatchSize still applies. Omitted: the chain's.)`,
      `${file}:5:12 keys[0] (acme) quota: '5/week' does not match ^[1-9][0-9]{0,15}/(day|month)$ (hint: Credits per UTC calendar day or month, as N/day or N/month. Omitted: no quota.)`,
      `${file}: 2 problems`,
    ];
    expect(await runCli(['keys', 'check', file])).toEqual({ code: 1, stdout: '', stderr: `${problems.join('\n')}\n` });
    expect(await runCli(['check-keys', file])).toEqual({ code: 1, stdout: '', stderr: `${problems.join('\n')}\n` });
    // An edit of a file the server would refuse writes nothing.
    const before = readFileSync(file, 'utf8');
    const set = await runCli(['keys', 'set', '--id', 'acme', '--max-batch-size', '3', '--file', file]);
    expect(set).toEqual({
      code: 1,
      stdout: '',
      stderr: "gateway keys: quota (as it is): '5/week' does not match ^[1-9][0-9]{0,15}/(day|month)$ (hint: Credits per UTC calendar day or month, as N/day or N/month. Omitted: no quota.)\n",
    });
    expect(readFileSync(file, 'utf8')).toBe(before);
  });
});
