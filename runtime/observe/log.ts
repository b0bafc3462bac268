import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout, through pino and its destination (sonic-boom).
 * Nothing logged here may hold a key or an upstream URL: callers log key ids
 * and upstream names only.
 *
 * Writes are synchronous, pino's default: a line written is a line the
 * kernel has, even if the process dies next, and a slow reader of stdout
 * slows the gateway down instead of growing its memory without bound (as
 * nginx does with its access log). The access log hands over ~60 KB at a time
 * (access-log.ts), so this is about a hundred write calls a second under
 * load. Measured on the small call against the asynchronous destination,
 * which sends every write through libuv's thread pool (on the same pinned
 * core): the same req/s, p99 6.5-7.5 ms instead of 8.0-8.4 ms.
 *
 * `write()` hands text straight to the destination: the access log writes
 * many lines at once through it. Handing lines over one by one cost ~15 µs a
 * request under load: the destination re-measures its pending buffer on
 * every write.
 */
export function createLogger(): { log: Logger; flush: () => void; write: (text: string) => void } {
  const dest = pino.destination({ dest: 1, sync: true });
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
