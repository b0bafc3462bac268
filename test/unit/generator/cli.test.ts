// `gateway check|build|schema-doc` as ops run them: a child process, exit
// codes, one problem per stderr line.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { renderManifestReference } from '../../../generator/schema-doc.ts';
import { runCli } from '../../support/cli.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';
import { EXPECTED } from './expected-problems.ts';

const exec = promisify(execFile);
// runCli gives the CLI no environment but PATH: check must need none (not the variables the manifests name).

describe('gateway check', { timeout: 30_000 }, () => {
  it('exits 0 and says ok for the shipped manifest, by default gateway.yaml', async () => {
    expect(await runCli(['check', 'gateway.yaml'])).toEqual({ code: 0, stdout: 'gateway.yaml: ok (12 chains)\n', stderr: '' });
    expect(await runCli(['check'])).toEqual({ code: 0, stdout: 'gateway.yaml: ok (12 chains)\n', stderr: '' });
  });

  it('exits 1 and prints every problem, schema and semantic, one per line on stderr', async () => {
    const file = 'test/fixtures/invalid/schema-and-semantic.yaml';
    const r = await runCli(['check', file]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = EXPECTED['schema-and-semantic']!;
    expect(r.stderr).toBe(`${lines.join('\n')}\n${file}: ${lines.length} problems\n`);
  });

  it('reports YAML syntax errors the same way', async () => {
    const r = await runCli(['check', 'test/fixtures/invalid/yaml-syntax.yaml']);
    expect(r.code).toBe(1);
    expect(r.stderr.split('\n').slice(0, 2)).toEqual(EXPECTED['yaml-syntax']);
  });

  it('reports a missing manifest as a problem, not a stack trace', async () => {
    const r = await runCli(['check', 'no/such/gateway.yaml']);
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'no/such/gateway.yaml:1:1 manifest not found\nno/such/gateway.yaml: 1 problem\n' });
  });

  it('works as `npx gateway` from the project, without a build step', async () => {
    const r = await exec('npx', ['--no', 'gateway', 'check', 'gateway.yaml'], { cwd: PROJECT_ROOT });
    expect(r.stdout).toBe('gateway.yaml: ok (12 chains)\n');
  });
});

describe('gateway build', { timeout: 30_000 }, () => {
  it('writes nothing when the check fails', async () => {
    const dir = join(PROJECT_ROOT, '.tmp', `unit-build-${process.pid}`);
    rmSync(dir, { recursive: true, force: true });
    const r = await runCli(['build', 'test/fixtures/invalid/unknown-listener.yaml', '--out', `${dir}/out/gateway.mjs`, '--emit-ts', `${dir}/ts/gateway.ts`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`${EXPECTED['unknown-listener']!.join('\n')}\ntest/fixtures/invalid/unknown-listener.yaml: 1 problem\n`);
    expect(existsSync(dir)).toBe(false);
  });

  it('builds a valid manifest into the --out file and the --emit-ts file', async () => {
    const dir = join(PROJECT_ROOT, '.tmp', `unit-build-ok-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const r = await runCli(['build', 'test/fixtures/valid/minimal.yaml', '--out', `${dir}/gateway.mjs`, '--emit-ts', `${dir}/gateway.gen.ts`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/gateway\.mjs: \d+ KiB, 1 chains, from test\/fixtures\/valid\/minimal\.yaml\n$/);
    expect(readFileSync(`${dir}/gateway.gen.ts`, 'utf8')).toContain('test/fixtures/valid/minimal.yaml');
    expect(readFileSync(`${dir}/gateway.mjs`, 'utf8')).not.toContain(PROJECT_ROOT);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('gateway schema-doc', { timeout: 30_000 }, () => {
  it('prints the manifest reference rendered from the schema', async () => {
    const schema = JSON.parse(readFileSync(join(PROJECT_ROOT, 'schema/gateway.schema.json'), 'utf8'));
    const r = await runCli(['schema-doc']);
    expect(r).toEqual({ code: 0, stdout: `${renderManifestReference(schema)}\n`, stderr: '' });
  });
});

describe('gateway --version', { timeout: 30_000 }, () => {
  it("prints package.json's version and exits 0 (also as -V)", async () => {
    const { version } = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await runCli(['--version'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    expect(await runCli(['-V'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});
