import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout. The destination writes asynchronously, off the
 * request path; `flush()` before exit. Nothing logged here may hold a key or
 * an upstream URL: callers log key ids and upstream names only.
 */
export function createLogger(): { log: Logger; flush: () => void } {
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
    flush: () => {
      try {
        dest.flushSync();
      } catch {
        // not ready yet (nothing written): nothing to flush
      }
    },
  };
}
