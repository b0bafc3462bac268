// The `gateway` CLI as ops run it: bin/gateway.mjs in a child process of its
// own, with its exit code, stdout and stderr as they came.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from './paths.ts';

const exec = promisify(execFile);

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `gateway <args>` in `cwd` (default the project root) with PATH and `env` as its whole environment, as the
 * gateway itself is started (harness.ts): what the command reads from the environment is what the test gives it.
 * Never throws on a non-zero exit.
 */
export async function runCli(args: readonly string[], opts: { readonly cwd?: string; readonly env?: Readonly<Record<string, string>> } = {}): Promise<CliRun> {
  try {
    const r = await exec(process.execPath, [join(PROJECT_ROOT, 'bin/gateway.mjs'), ...args], { cwd: opts.cwd ?? PROJECT_ROOT, env: { PATH: process.env.PATH ?? '', ...opts.env } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}
