// Entry point of the emitted server: one process, or a primary and its workers.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { GatewaySpec } from './types.ts';
import { Gateway } from './server.ts';
import { keysSource } from './config/env.ts';
import { isWorker, runPrimary, workerCount } from './process/cluster.ts';
import { sha256Of } from './process/cluster-builds.ts';
import { runWorker } from './process/cluster-worker.ts';

/**
 * Entry point of the emitted server. Start-up problems (a missing variable,
 * a bad keys file, a port in use) end the process with one clear line.
 */
export function main(spec: GatewaySpec): void {
  let workers: number;
  try {
    workers = workerCount();
  } catch (err) {
    process.stderr.write(`gateway: ${(err as Error).message}\n`);
    process.exit(1);
  }
  // GATEWAY_WORKERS set runs a primary even for one worker (`auto` on a one-core host): the primary is what SIGHUP
  // rolls onto a new build (issue 47); without it, one process.
  if (process.env.GATEWAY_WORKERS && !isWorker()) return runPrimary(spec, workers);
  if (isWorker()) return runWorker(() => new Gateway(spec), (err) => startProblem(err, spec));
  let gw: Gateway;
  try {
    gw = new Gateway(spec);
  } catch (err) {
    process.stderr.write(`gateway: ${(err as Error).message}\n`);
    process.exit(1);
  }
  // One process cannot take a new build without a restart: SIGHUP says so when the file changed (issue 47).
  const entry = resolve(process.argv[1] ?? '');
  const started = fileSha256(entry);
  gw.start().then(
    () => {
      process.on('SIGHUP', () => {
        void gw.reloadKeys('SIGHUP');
        const now = fileSha256(entry);
        if (started !== null && now !== null && now !== started) {
          gw.log.warn(
            { event: 'restart_needed', file: entry, running: started, sha256: now },
            'the server file changed: this process keeps running the build it started with; restart it, or run it with GATEWAY_WORKERS (SIGHUP then rolls the workers onto a new file)',
          );
        }
      });
      const stop = (signal: string) => void gw.shutdown(signal).then(() => process.exit(0));
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    },
    (err: Error & { code?: string }) => {
      process.stderr.write(`gateway: ${startProblem(err, spec)}\n`);
      process.exit(1);
    },
  );
}

/** The file's SHA-256, or null when it cannot be read (then nothing is said of it). */
function fileSha256(path: string): string | null {
  try {
    return sha256Of(readFileSync(path));
  } catch {
    return null;
  }
}

/** What stopped the start, in words: a keys file that is not there is named by its path. */
function startProblem(err: Error & { code?: string }, spec: GatewaySpec): string {
  return err.code === 'ENOENT' ? `keys file not found: ${resolve(keysSource(spec.keysFile))}` : err.message;
}
