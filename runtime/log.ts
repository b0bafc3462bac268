import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout, through pino and its asynchronous destination
 * (sonic-boom). Nothing logged here may hold a key or an upstream URL:
 * callers log key ids and upstream names only.
 *
 * `write()` hands text straight to the destination: the access log
 * (access-log.ts) writes many lines at once through it. Handing lines over
 * one by one cost ~15 µs a request under load: the destination re-measures
 * its pending buffer on every write, and each write is a round trip through
 * libuv's pool.
 */
export function createLogger(): { log: Logger; flush: () => void; write: (text: string) => void } {
  const dest = pino.destination({ dest: 1, sync: false });
  const log = pino(
    {
      level: process.env.LOG_LEVEL ?? 'info',
      base: null,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    dest,
  );
  return {
    log,
    write: (text) => void dest.write(text),
    flush: () => {
      try {
        dest.flushSync();
      } catch {
        // not ready yet (nothing written): nothing to flush
      }
    },
  };
}
