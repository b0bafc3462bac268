// Where an eth_getLogs range's chunks may go, and when (kinds/evm/log-ranges.ts
// places them, kinds/evm/log-range-call.ts sends them): which upstreams are open
// to them, and what their budgets (rateLimit) let be sent, now and within a
// call's timeoutMs; and what a call reads of its layer (RangeHost).
import type { ChainView } from '../../upstreams/chain-view.ts';
import { timeLeft, type Dispatch } from '../../dispatch.ts';
import type { Logger } from '../../observe/log.ts';
import type { EvmRouteSpec } from '../../types.ts';
import { POLL_SHARE } from '../../upstreams/upstream-budget.ts';
import type { Upstream, UpstreamGroup } from '../../upstreams/upstream.ts';

/** May take traffic, or will once its budget has room: what a paced range waits for. */
export function open(u: Upstream): boolean {
  return u.usable || (u.budget !== null && u.serving && !u.view.throttled);
}

/** Where a range's chunks go: how wide each is, the upstreams that take that width (and a group of them), and whether every one of them has a budget. */
export interface Placement {
  readonly width: number;
  readonly takers: readonly Upstream[];
  readonly group: UpstreamGroup;
  readonly paced: boolean;
}

/** Requests the placed upstreams' (`takers`) budgets let be sent within the call's timeoutMs (their share past the poller's, less the request each leaves to other calls: waitFor). */
export function budgetFits(takers: readonly Upstream[], deadline: number): number {
  const seconds = timeLeft(deadline) / 1000;
  let n = 0;
  for (const u of takers) {
    const b = u.budget!;
    n += Math.max(0, b.available() - (b.burst > 1 ? 1 : 0)) + Math.floor(b.perSecond * (1 - POLL_SHARE) * seconds);
  }
  return n;
}

/**
 * Milliseconds until one of `group`'s upstreams has room in its budget for
 * a chunk (0: one has now, or none waits on a budget). A chunk leaves the
 * last request a bucket holds to other calls where it holds more than one:
 * a range yields to them, and never takes all of an upstream's budget.
 */
export function waitFor(placed: Placement, group: UpstreamGroup): number {
  if (!placed.paced) return 0;
  const now = Date.now();
  let at = Infinity;
  for (const u of group.all) {
    const b = u.budget;
    if (b === null) {
      if (u.usable) return 0;
      continue;
    }
    if (!open(u)) continue;
    const need = Math.min(2, b.burst);
    if (u.usable && b.available(now) >= need) return 0;
    at = Math.min(at, b.availableAt(need, now));
  }
  return Number.isFinite(at) ? Math.max(1, at - now) : 0;
}

/** What a range's call reads of its layer (LogRanges). */
export interface RangeHost {
  readonly route: EvmRouteSpec;
  readonly view: ChainView;
  readonly inner: Dispatch;
  readonly log: Logger;
  readonly pooled: boolean;
  readonly cached: boolean;
  place(group: UpstreamGroup, skip?: ReadonlySet<Upstream>): Placement;
  learn(u: Upstream, blocks: number): void;
}
