// eth_getLogs ranges (issues 39 and 43; docs/upstreams.md, "eth_getLogs
// ranges"): a layer above the chain's dispatch (the cache's layer, the pool's,
// or the plain one of a chain of one upstream), on every chain that allows
// eth_getLogs. Each chunk of a range is a call of its own that goes through
// that dispatch like any other call (block routing, retries, hedges).
//  - fromBlock and toBlock are resolved to the blocks served (latest: the
//    served tip, or a lone upstream's head; safe, finalized; earliest 0); a
//    range whose ends are not known (pending, a tag with no head known, a
//    blockHash) goes on as it came;
//  - the chain's limits.maxLogRange refuses a wider range with -32602, before
//    any node sees it;
//  - a range is sized per upstream: it goes whole to an upstream whose cap
//    takes it; else it is split into chunks of the widest cap of the upstreams
//    that may take it (the usable primaries, else the fallbacks: their
//    maxLogRange, lowered for a while by what their errors taught), sent only
//    to those whose cap takes them, at most 4 out at once, at most 1000 per
//    call, paced to the budget (rateLimit) where every one of them has one;
//  - a range that is split is first clamped to the head the call started
//    with (a pool's served tip; a lone upstream's own head, asked of it when
//    the range reaches past the polled one): one snapshot, as one node at that
//    head answers;
//  - an answer that names a range limit (kinds/evm/log-range-errors.ts) splits that chunk
//    further (and a block-range cap is kept in that upstream's view for
//    LEARNED_CAP_MS); a chunk that fails on one upstream is asked of another,
//    and the call fails only when none is left;
//  - the chunks' logs are held under forward.ts's MAX_HELD_BYTES and written to
//    the client in block order, under the client's id, from their own buffers.
// A range within every cap goes as the client's own call (one chunk), only
// watched for an error that names a cap: on a chain of one upstream it streams
// as any call there does (only a short error is held, to be judged).
// On a cached chain the layer below is the cache's (kinds/evm/cache-logs.ts), which
// keeps chunks in final blocks: there a wider range is split at multiples of
// the width, an edge chunk inside a final aligned chunk asks for the whole of
// it and keeps only the logs within the range (overlapping ranges share every
// chunk), a final range given by tags goes by number, and the merged answer
// says how the cache took part.
// A batch with an eth_getLogs call is split into its calls (pool/batch.ts),
// each of which comes back here alone: an eth_getLogs call may answer as much
// as a merged range, and a merged one goes into the batch's answer as its
// chunks, still counted. Which requests are eth_getLogs is what the guard
// read (a call's method, a batch's methods); only a body a layer made is
// searched for the name.
// This file is the layer; one client call of it is kinds/evm/log-range-call.ts
// (its chunks: kinds/evm/log-chunk.ts), where chunks may go and when is
// kinds/evm/log-placement.ts, and the logs-array codec kinds/evm/log-codec.ts.
import type { ChainView } from '../../upstreams/chain-view.ts';
import { NOTHING, withTransport, type Cancelable, type Dispatch, type ForwardRequest, type HeldRequest, type HeldTarget } from '../../dispatch.ts';
import { rpcErrorJson } from './errors.ts';
import type { Logger } from '../../observe/log.ts';
import { splitBatch } from '../../pool/batch.ts';
import { EVM_ENVELOPE } from './envelope.ts';
import { callOf, carries } from './pool-call.ts';
import type { Call, BlockRef } from './call.ts';
import type { EvmRouteSpec } from '../../types.ts';
import { UpstreamGroup, type Upstream } from '../../upstreams/upstream.ts';
import { sendOwn } from './log-chunk.ts';
import { open, type Placement, type RangeHost } from './log-placement.ts';
import { MAX_MERGED_BYTES, RangeCall } from './log-range-call.ts';

/** How long a cap learned from an upstream's error holds: then one range as wide as the rest allow tries it again. */
export const LEARNED_CAP_MS = 10 * 60 * 1000;

/** Whether a chain gets the layer: it allows eth_getLogs (any upstream may refuse a range, a lone one too). */
export function wantsLogRanges(route: EvmRouteSpec): boolean {
  return route.methods.has('eth_getLogs');
}

export class LogRanges implements RangeHost {
  /** The chain's limits.maxLogRange (0: none). */
  readonly clientLimit: number;
  readonly pooled: boolean;
  /** Each upstream's cap as the manifest gives it (kept forever), and when a cap was learned from its errors. */
  private readonly given = new Map<Upstream, number>();
  private readonly learnedAt = new Map<Upstream, number>();

  constructor(
    readonly route: EvmRouteSpec,
    private readonly group: UpstreamGroup,
    readonly view: ChainView,
    readonly inner: Dispatch,
    readonly log: Logger,
    /** The chain has a cache, whose layer is `inner`: chunks fall on multiples of the width, and final ranges go by number. */
    readonly cached = false,
  ) {
    this.clientLimit = route.limits.maxLogRange ?? 0;
    this.pooled = group.all.length > 1;
    // Each upstream's cap starts as the manifest's (the group is made from route.upstreams, in order).
    route.upstreams.forEach((s, i) => {
      const u = group.all[i];
      if (u !== undefined && s.maxLogRange !== undefined) {
        u.view.maxLogRange = s.maxLogRange;
        this.given.set(u, s.maxLogRange);
      }
    });
  }

  // The target and request are passed on as given: the Dispatch overloads pair a target nothing streams into with a held request.
  readonly dispatch: Dispatch = (target: HeldTarget, request: ForwardRequest, group = this.group) => {
    if (!carries(request, 'eth_getLogs')) return this.inner(target, request as HeldRequest, group);
    if (request.calls.batch !== undefined) return splitBatch(this.batchCall, EVM_ENVELOPE, this.log, this.route.path, target, request) ?? this.inner(target, request as HeldRequest, group);
    const call = callOf(request);
    // A blockHash (no fromBlock), or not the method: as it came.
    if (call === null || call.method !== 'eth_getLogs' || call.from === undefined) return this.inner(target, request as HeldRequest, group);
    const from = this.numberOf(call.from);
    const to = this.numberOf(call.block);
    if (from < 0 || to < 0 || from > to) return this.inner(target, request as HeldRequest, group);
    const width = to - from + 1;
    if (this.clientLimit > 0 && width > this.clientLimit) return this.refuse(target, request, call, width);
    const job = new RangeCall(this, target, request, group, call, from, to, this.numberOf('latest'));
    job.start();
    return job;
  };

  /**
   * A call of a split batch: held with the batch request's maxBuffer (a
   * rewrite's), except eth_getLogs, which may answer as much as a merged
   * range (MAX_MERGED_BYTES), as the call alone does; every answer held is
   * counted under MAX_HELD_BYTES all the same.
   */
  private readonly batchCall: Dispatch = (target: HeldTarget, request: ForwardRequest, group?: UpstreamGroup) =>
    this.dispatch(target, (request.calls.one?.method === 'eth_getLogs' && request.transport.maxBuffer < MAX_MERGED_BYTES ? withTransport(request, { maxBuffer: MAX_MERGED_BYTES }) : request) as HeldRequest, group);

  /** The block a range's end names, as the chain serves it (-1: not known). */
  private numberOf(b: BlockRef): number {
    if (typeof b === 'number') return b;
    const v = this.view;
    if (b === 'latest') return this.pooled ? v.tip : v.number;
    if (b === 'safe') return v.safe;
    if (b === 'finalized') return v.finalized;
    return -1;
  }

  /** The most blocks `u` takes (null: no cap known); a learned cap past LEARNED_CAP_MS is forgotten, back to the manifest's. */
  capOf(u: Upstream, now = Date.now()): number | null {
    const at = this.learnedAt.get(u);
    if (at !== undefined && now - at >= LEARNED_CAP_MS) {
      this.learnedAt.delete(u);
      u.view.maxLogRange = this.given.get(u) ?? null;
    }
    return u.view.maxLogRange;
  }

  /**
   * Where a call's chunks go, among `group`'s upstreams but those in `skip`:
   * the open primaries (else the open fallbacks; open: usable, or waiting only
   * for room in its budget); each chunk as wide as the widest cap among them
   * (Infinity: one has none), sent only to those whose cap takes it.
   */
  place(group: UpstreamGroup, skip?: ReadonlySet<Upstream>): Placement {
    const free = (u: Upstream): boolean => open(u) && skip?.has(u) !== true;
    const primaries = group.primaries.filter(free);
    const list = primaries.length > 0 ? primaries : group.fallbacks.filter(free);
    if (list.length === 0) return { width: Infinity, takers: [], group: skip === undefined ? group : new UpstreamGroup(group.all.filter((u) => !skip.has(u))), paced: false };
    let width = 0;
    for (const u of list) width = Math.max(width, this.capOf(u) ?? Infinity);
    const takers = list.filter((u) => (this.capOf(u) ?? Infinity) >= width);
    // Where every open one takes it, the chain's own group (its selection by score); else a group of those that do.
    const same = skip === undefined && takers.length === list.length;
    return { width, takers, group: same ? group : new UpstreamGroup(takers), paced: takers.every((u) => u.budget !== null) };
  }

  /** An upstream's error named its cap: kept in its view (only ever lowered) for LEARNED_CAP_MS. */
  learn(u: Upstream, blocks: number): void {
    const v = u.view;
    if (v.maxLogRange !== null && v.maxLogRange <= blocks) return;
    v.maxLogRange = blocks;
    this.learnedAt.set(u, Date.now());
    this.log.warn({ event: 'upstream_log_range', chain: this.route.path, upstream: u.name, maxLogRange: blocks }, 'upstream caps eth_getLogs ranges: wider ranges are split for it');
  }

  /** limits.maxLogRange: -32602 with the limit in data, before any node sees the call. */
  private refuse(target: HeldTarget, request: ForwardRequest, call: Call, width: number): Cancelable {
    const data = JSON.stringify({ path: '/0', message: `the range spans ${width} blocks, more than limits.maxLogRange`, maxLogRange: this.clientLimit });
    const body = Buffer.from(rpcErrorJson('GW_RPC_INVALID_PARAMS', call.idJson, data));
    queueMicrotask(() => sendOwn(target, request, this.group.all[0]!, body));
    return NOTHING;
  }
}
