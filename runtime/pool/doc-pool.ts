// A pool of Blockbook or Rosetta upstreams: a read that names block N (a
// Blockbook height, a Rosetta block_identifier.index) goes only to an upstream
// whose head is at least N, and with `hedge`, a read with no answer after that
// long is asked of a second upstream too (flow.ts). Nothing else changes: the
// answers are the upstreams' own.
import type { ChainView } from '../chain-view.ts';
import type { Dispatch } from '../dispatch.ts';
import { Forward, type ForwardRequest } from '../proxy.ts';
import type { BlockbookRouteSpec, RosettaRouteSpec } from '../types.ts';
import type { Upstream, UpstreamGroup } from '../upstream.ts';
import { Flow, type FlowHost } from './flow.ts';
import { HedgeBudget, LatencyWindow, PoolStats, timed } from './stats.ts';

/** Blockbook's endpoints that name a block by height: /v2/block/<height>, /v2/block-index/<height>, /v2/rawblock/<height>. */
const BLOCKBOOK_HEIGHT = /\/v2\/(?:block|block-index|rawblock)\/(\d{1,12})(?:[/?]|$)/;

export function docPool(route: BlockbookRouteSpec | RosettaRouteSpec, group: UpstreamGroup, view: ChainView, circuitOpen: (u: Upstream) => void): { dispatch: Dispatch; stats: PoolStats } {
  const stats = new PoolStats(route.path, () => view.tip);
  const budget = new HedgeBudget();
  const host: FlowHost = {
    stats,
    circuitOpen,
    isFinal: (n) => view.isFinal(n),
    archiveFor: () => null,
    takeHedge: () => budget.take(),
  };
  const hedge = route.hedge;
  const times = new LatencyWindow();
  const dispatch: Dispatch = (target, request, g = group) => {
    budget.call();
    const n = route.interface === 'blockbook' ? blockbookHeight(request, g) : rosettaIndex(request);
    let accept: ((u: Upstream) => boolean) | undefined = n >= 0 ? (u) => (u.view.head ?? -1) >= n : undefined;
    // Nobody is known to have it yet: any upstream answers as its node would.
    if (accept !== undefined && !g.all.some((u) => u.usable && accept!(u))) accept = undefined;
    if (hedge !== null && request.idempotent) {
      const after = hedge.afterMs === 'p95' ? times.p95() : hedge.afterMs;
      const flow = new Flow(host, timed(target, times), request, g, null, { accept, block: n, hedgeAfterMs: after });
      flow.start();
      return flow;
    }
    const f = new Forward(g, accept === undefined ? request : { ...request, accept }, target, circuitOpen);
    f.start();
    return f;
  };
  return { dispatch, stats };
}

/** The height a Blockbook read names in its path (-1: none). */
function blockbookHeight(request: ForwardRequest, group: UpstreamGroup): number {
  const u = group.all[0];
  if (u === undefined || request.method !== 'GET') return -1;
  const m = BLOCKBOOK_HEIGHT.exec(request.path(u).slice(u.basePath.length));
  return m === null ? -1 : Number(m[1]);
}

/** The block_identifier.index a Rosetta read names (-1: none). */
function rosettaIndex(request: ForwardRequest): number {
  const body = request.body;
  if (typeof body !== 'string' || body.indexOf('"index"') === -1) return -1;
  try {
    const index: unknown = (JSON.parse(body) as { block_identifier?: { index?: unknown } }).block_identifier?.index;
    return typeof index === 'number' && Number.isSafeInteger(index) && index >= 0 ? index : -1;
  } catch {
    return -1;
  }
}
