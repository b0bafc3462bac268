// Which upstream made which filter. A filter (eth_newFilter,
// eth_newBlockFilter, eth_newPendingTransactionFilter) lives on the node that
// made it; any other node answers "filter not found". A pool remembers the
// upstream that answered with each filter id, and sends the calls naming that
// id (eth_getFilterChanges, eth_getFilterLogs, eth_uninstallFilter) to it only.
// Bounded: the least recently used ids are forgotten first (a node drops a
// filter nobody polls for five minutes anyway).
import type { Upstream } from '../../upstreams/upstream.ts';

/** Filter ids remembered per pool, at most. */
export const MAX_FILTERS = 10_000;

export class FilterPins {
  /** Filter id (lower case) to the upstream that made it; in order of last use. */
  private readonly pins = new Map<string, Upstream>();

  constructor(private readonly max = MAX_FILTERS) {}

  /** The upstream that made filter `id` (undefined: not known here, any upstream answers as its node would). */
  get(id: unknown): Upstream | undefined {
    if (typeof id !== 'string') return undefined;
    const key = id.toLowerCase();
    const u = this.pins.get(key);
    if (u !== undefined) {
      this.pins.delete(key);
      this.pins.set(key, u);
    }
    return u;
  }

  set(id: string, u: Upstream): void {
    const key = id.toLowerCase();
    this.pins.delete(key);
    this.pins.set(key, u);
    if (this.pins.size > this.max) this.pins.delete(this.pins.keys().next().value!);
  }

  delete(id: unknown): void {
    if (typeof id === 'string') this.pins.delete(id.toLowerCase());
  }

  get size(): number {
    return this.pins.size;
  }
}
