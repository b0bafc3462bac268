// Entry point of the emitted server: one process, or a primary and its workers.
import { resolve } from 'node:path';
import type { GatewaySpec } from './types.ts';
import { Gateway, keysSource } from './server.ts';
import { isWorker, runPrimary, workerCount } from './cluster.ts';

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
  if (workers > 1 && !isWorker()) return runPrimary(spec, workers);
  let gw: Gateway;
  try {
    gw = new Gateway(spec);
  } catch (err) {
    process.stderr.write(`gateway: ${(err as Error).message}\n`);
    process.exit(1);
  }
  gw.start().then(
    () => {
      process.on('SIGHUP', () => void gw.reloadKeys('SIGHUP'));
      const stop = (signal: string) => void gw.shutdown(signal).then(() => process.exit(0));
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    },
    (err: Error & { code?: string }) => {
      const msg = err.code === 'ENOENT' ? `keys file not found: ${resolve(keysSource(spec.keysFile))}` : err.message;
      process.stderr.write(`gateway: ${msg}\n`);
      process.exit(1);
    },
  );
}
