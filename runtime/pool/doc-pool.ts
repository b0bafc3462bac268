// A pool of Blockbook or Rosetta upstreams: a read that names block N (a
// Blockbook height, a Rosetta block_identifier.index) goes only to an upstream
// whose head is at least N, and with `hedge`, a read with no answer after that
// long is asked of a second upstream too (flow.ts). A lookup by block hash
// that a node answers "Block not found" is asked again of another upstream at
// or above the served tip, and Rosetta's /network/status names the served tip,
// never going back (doc-held.ts). Nothing else changes: the answers are the
// upstreams' own. The block a request names, and whether it is a read, are
// its guard's (the request's Call, kinds/doc-call.ts): the pool never reads
// the path or the body for them. The interface module picks how a node says it
// has no such block, and which read names the head (ROSETTA_BLOCKS,
// BLOCKBOOK_BLOCKS).
import type { ChainView } from '../upstreams/chain-view.ts';
import { withTransport, type Attempt, type Dispatch, type ForwardTarget, type HeldRequest, type HeldTarget } from '../dispatch.ts';
import type { RouteSpec } from '../types.ts';
import type { Upstream, UpstreamGroup } from '../upstreams/upstream.ts';
import { HeldDoc, type Buffered, type HeldRules } from './doc-held.ts';
import { Flow, type FlowHost } from './flow.ts';
import { HedgeBudget, LatencyWindow, PoolStats } from './stats.ts';

/** Rosetta's error for a block the node does not have (../shared/specs/cardano-rosetta-errors.json). */
const ROSETTA_BLOCK_NOT_FOUND = 4001;
/** Error answers judged at most this long (a "Block not found" is a few dozen bytes). */
const MAX_JUDGED = 4096;

/** How a pool reads a node's "Block not found", and which read names the head: the interface module picks its own. */
export interface DocBlocks {
  /** The answer is the node's "Block not found". */
  notFound(r: Buffered): boolean;
  /** The read (its endpoint, as the guard's call names it) whose answer names the head, and how it is served from the served tip; null: none is. */
  readonly head: { readonly endpoint: string; rules(view: ChainView, group: UpstreamGroup): HeadRules } | null;
}

/** The rules of a held head read, and the upstreams it may be asked of. */
interface HeadRules extends HeldRules {
  accept(): ((u: Upstream) => boolean) | undefined;
}

export const ROSETTA_BLOCKS: DocBlocks = {
  notFound: (r) => notFound(r, true),
  head: { endpoint: 'network/status', rules: (view, group) => new RosettaHead(view, group) },
};

export const BLOCKBOOK_BLOCKS: DocBlocks = {
  notFound: (r) => notFound(r, false),
  head: null,
};

export function docPool(route: RouteSpec, group: UpstreamGroup, view: ChainView, next: Dispatch<ForwardTarget, Attempt>, blocks: DocBlocks): { dispatch: Dispatch; stats: PoolStats } {
  const stats = new PoolStats(route.path, () => view.tip);
  const budget = new HedgeBudget();
  const times = new LatencyWindow();
  const host: FlowHost = {
    stats,
    // A Blockbook or Rosetta answer is taken as it comes: a read is one as its request says.
    rules: null,
    next,
    isFinal: (n) => view.isFinal(n),
    archiveFor: () => null,
    takeHedge: () => budget.take(),
    record: (ms) => times.record(ms),
  };
  const hedge = route.hedge;
  const head = blocks.head === null ? null : { endpoint: blocks.head.endpoint, rules: blocks.head.rules(view, group) };
  /** Any other upstream at or above the served tip. */
  const atTip = (u: Upstream) => (u.view.head ?? -1) >= view.tip;
  const byHash: HeldRules = {
    again: (r) => (blocks.notFound(r) ? atTip : null),
    rewrite: () => null,
  };
  const dispatch: Dispatch = (target, request, g = group) => {
    budget.call();
    // What the guard found (kinds/doc-call.ts): its endpoint, the block it names, whether it is a write.
    const call = request.calls.one;
    if (head !== null && call?.method === head.endpoint && view.tip >= 0) {
      const held = new HeldDoc(next, target, request, g, head.rules.accept(), head.rules, stats);
      held.start();
      return held;
    }
    const block = call?.block ?? null;
    if (block !== null && typeof block === 'object') {
      const held = new HeldDoc(next, target, request, g, undefined, byHash, stats);
      held.start();
      return held;
    }
    const n = typeof block === 'number' ? block : -1;
    let accept: ((u: Upstream) => boolean) | undefined = n >= 0 ? (u) => (u.view.head ?? -1) >= n : undefined;
    // Nobody is known to have it yet: any upstream answers as its node would.
    if (accept !== undefined && !g.all.some((u) => u.usable && accept!(u))) accept = undefined;
    if (hedge !== null && (call === undefined ? request.transport.idempotent : !call.write)) {
      const after = hedge.afterMs === 'p95' ? times.p95() : hedge.afterMs;
      const flow = new Flow(host, target, request, g, null, { accept, block: n, hedgeAfterMs: after });
      flow.start();
      return flow;
    }
    // Passed on as the pool was given it: streamed to the client unless the request says hold (Dispatch's overloads).
    return next(target as HeldTarget, (accept === undefined ? request : withTransport(request, { accept })) as HeldRequest, g);
  };
  return { dispatch, stats };
}

/**
 * Rosetta's /network/status as the pool serves it: its current block is the
 * served tip (or the highest one a client was given, if the tip is lower:
 * never backwards, but with a reset of the chain). It is asked of an upstream
 * whose head the polls saw at that block, and its answer names that block;
 * one that has moved on since its poll gets that block's index and hash (from
 * the polls) in its current_block_identifier and sync_status.current_index.
 */
class RosettaHead implements HeadRules {
  private floor = -1;
  private floorHash = '';
  private resets: number;

  constructor(
    private readonly view: ChainView,
    private readonly group: UpstreamGroup,
  ) {
    this.resets = view.resets;
  }

  /** The block the answer names: the served tip, never below what was given, with its hash ('' not known). */
  private served(): { index: number; hash: string } {
    const v = this.view;
    if (v.resets !== this.resets) {
      this.resets = v.resets;
      this.floor = -1;
    }
    // The tip no longer goes back with one upstream (chain-view.ts), so it may stay at the floor with no upstream
    // at that block any more: the floor's hash, given before, still names it.
    if (v.tip < this.floor || (v.tip === this.floor && this.floorHash !== '')) return { index: this.floor, hash: this.floorHash };
    const at = this.group.all.find((u) => u.usable && u.view.head === v.tip && u.view.hash !== '');
    // No upstream is at the tip any more (one dipped below it, the others moved on): its hash as the polls saw it.
    return { index: v.tip, hash: at?.view.hash ?? v.hashAt(v.tip) };
  }

  /** Upstreams whose polled head is the block served, where one is usable; else those above it; else any (the answer is rewritten). */
  accept(): ((u: Upstream) => boolean) | undefined {
    const n = this.served().index;
    const exact = (u: Upstream) => u.view.head === n;
    const above = (u: Upstream) => (u.view.head ?? -1) >= n;
    for (const ok of [exact, above]) if (this.group.all.some((u) => u.usable && ok(u))) return ok;
    return undefined;
  }

  again(): null {
    return null;
  }

  rewrite(r: Buffered): Buffer | null {
    if (r.headers['content-encoding'] !== undefined) return null;
    let doc: { current_block_identifier?: { index?: unknown; hash?: unknown }; sync_status?: { current_index?: unknown } };
    try {
      doc = JSON.parse(r.body.toString('utf8')) as typeof doc;
    } catch {
      return null;
    }
    const cur = doc?.current_block_identifier;
    if (cur === undefined || typeof cur.index !== 'number') return null;
    const s = this.served();
    if (cur.index === s.index) {
      this.raise(cur.index, typeof cur.hash === 'string' ? cur.hash : '');
      return null;
    }
    if (s.hash === '') return null;
    this.raise(s.index, s.hash);
    doc.current_block_identifier = { index: s.index, hash: s.hash };
    if (doc.sync_status !== undefined && typeof doc.sync_status.current_index === 'number') doc.sync_status.current_index = s.index;
    return Buffer.from(JSON.stringify(doc));
  }

  private raise(index: number, hash: string): void {
    if (index > this.floor) {
      this.floor = index;
      this.floorHash = hash;
    }
  }
}

/** The answer is the node's "Block not found": Rosetta's error 4001, Blockbook's {"error":"Block not found"}. */
function notFound(r: Buffered, rosetta: boolean): boolean {
  if (r.status === 200 || r.body.length > MAX_JUDGED || r.headers['content-encoding'] !== undefined) return false;
  try {
    const doc = JSON.parse(r.body.toString('utf8')) as { code?: unknown; error?: unknown };
    return rosetta ? doc?.code === ROSETTA_BLOCK_NOT_FOUND : doc?.error === 'Block not found';
  } catch {
    return false;
  }
}
