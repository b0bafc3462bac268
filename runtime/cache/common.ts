// What the EVM cache and the Rosetta/Blockbook cache share: the X-Cache
// header and log field, and the sink of a flight (which never streams).
import type { Sink } from '../proxy.ts';

export const X_CACHE = {
  hit: ['x-cache', 'HIT'],
  miss: ['x-cache', 'MISS'],
  coalesced: ['x-cache', 'COALESCED'],
  bypass: ['x-cache', 'BYPASS'],
} as const;

/** The access log's field, per X-Cache value. */
export const X_CACHE_LOG = { hit: ',"cache":"HIT"', miss: ',"cache":"MISS"', coalesced: ',"cache":"COALESCED"', bypass: ',"cache":"BYPASS"' } as const;

/** Largest answer a flight holds (proxy.ts's MAX_HELD_BYTES caps all of them together). */
export const MAX_HELD = 32 * 1024 * 1024;

/** A flight holds its answer whole: nothing ever streams into it. */
export const NO_SINK: Sink = {
  destroyed: false,
  headersSent: false,
  write: () => {
    throw new Error('a flight never streams');
  },
  end: () => {
    throw new Error('a flight never streams');
  },
  once: () => NO_SINK as never,
  destroy: () => NO_SINK as never,
} as unknown as Sink;
