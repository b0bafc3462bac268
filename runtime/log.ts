import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout, through pino and its asynchronous destination
 * (sonic-boom). Nothing logged here may hold a key or an upstream URL:
 * callers log key ids and upstream names only.
 *
 * `write()` is for the access log, one line per request: lines are gathered
 * and handed to the destination every 10 ms (or at 64 KiB), so a busy
 * gateway makes one write for many lines. Handing them over one by one cost
 * ~15 µs a request under load: the destination re-measures its pending buffer
 * on every write, and each write is a round trip through libuv's pool.
 */
export function createLogger(): { log: Logger; flush: () => void; write: (line: string) => void } {
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
  let pending: string[] = [];
  let pendingBytes = 0;
  let timer: NodeJS.Timeout | null = null;
  const drain = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (pending.length === 0) return;
    const batch = pending.join('');
    pending = [];
    pendingBytes = 0;
    dest.write(batch);
  };
  return {
    log,
    write: (line) => {
      pending.push(line);
      pendingBytes += line.length;
      if (pendingBytes >= 65_536) drain();
      else if (timer === null) timer = setTimeout(drain, 10);
    },
    flush: () => {
      drain();
      try {
        dest.flushSync();
      } catch {
        // not ready yet (nothing written): nothing to flush
      }
    },
  };
}
