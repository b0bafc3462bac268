// The EVM cache as a Dispatch layer (issue 37: each layer takes the dispatch
// below it and is one), composed by chains.ts below the eth_getLogs ranges
// layer and above the pool (or the plain dispatch): ranges -> cache -> pool ->
// forward. It takes part in one kind of call, eth_getLogs in final blocks
// (issue 39: chunks in final blocks are cacheable like any final answer); a
// client's own calls meet the cache above the ranges layer (evm.ts), where a
// hit answers the exchange before any request exists.
//
// The rules (docs/cache.md, "What is kept, and until when"):
//  - only a held call (a chunk of the ranges layer, or the client's call the
//    cache's front sends held) of eth_getLogs by number, fromBlock..toBlock,
//    whose toBlock is at or below the chain's finalized block when it is sent
//    and still when its answer comes; a blockHash filter, a tag, and any range
//    that reaches above the finalized block go on as they came, never kept nor
//    coalesced;
//  - kept forever (in the chain's namespace: a reset drops it) only a 200 with
//    a result array and no log marked `removed`, from an upstream that passed
//    the identity check before the call was sent and was at the chain's head
//    (so it has every block of the range: a node behind, whose answer for
//    blocks beyond its head may be an empty list, never is) since before then,
//    within one epoch;
//  - identical calls in flight share one request; a chunk tried again on
//    other upstreams (its group narrowed) goes on alone.
import { callOf } from './pool-call.ts';
import { held, JSON_HEADERS, type CacheSays, type Cancelable, type Dispatch, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget, type Sink } from '../../dispatch.ts';
import { MAX_ANSWER_DEPTH } from '../../jsonrpc/scan.ts';
import { answerOf } from '../../jsonrpc/answer.ts';
import type { IncomingHttpHeaders } from 'node:http';
import type { ClientTarget } from '../../exchange.ts';
import type { EvmRouteSpec } from '../../types.ts';
import type { Upstream, UpstreamGroup } from '../../upstreams/upstream.ts';
import { X_CACHE, X_CACHE_LOG } from '../../cache/common.ts';
import type { CacheCore, Flight, FlightLanding } from '../../cache/core.ts';
import { MAX_HELD } from '../../upstreams/forward.ts';

/** A log's `removed: true`, as nodes write it (compact; with a space after the colon). */
const REMOVED = [Buffer.from('"removed":true'), Buffer.from('"removed": true')];

/** One caller waiting on a flight: where its answer goes, and its id. */
interface Waiter {
  readonly target: HeldTarget;
  readonly idJson: string;
  gone: boolean;
}

interface LogsFlight {
  /** The range's last block: still final when the answer comes, or the answer is not kept. */
  readonly to: number;
  readonly waiters: Waiter[];
}

export class LogsLayer implements FlightLanding<LogsFlight> {
  /** What every key of this layer starts with: the chain's, and not a key of the front's (evm.ts). */
  private readonly keyPrefix: string;

  constructor(
    route: EvmRouteSpec,
    readonly core: CacheCore,
    /** The dispatch below the cache: the pool's, or the plain one. */
    private readonly next: Dispatch,
  ) {
    this.keyPrefix = `${route.listener}/${route.path} logs `;
  }

  // The target and request are passed on as given: the Dispatch overloads pair a target nothing streams into with a held request.
  readonly dispatch: Dispatch = (target: HeldTarget, request: ForwardRequest, group?: UpstreamGroup): Cancelable => {
    // One eth_getLogs call (the ranges layer above splits a batch), by its Call.
    const call = callOf(request);
    if (request.transport.hold !== true || call === null || call.method !== 'eth_getLogs') return this.next(target, request as HeldRequest, group);
    const core = this.core;
    const from = call.from;
    const to = call.block;
    if (typeof from !== 'number' || typeof to !== 'number' || from > to || !core.view.isFinal(to)) return this.next(target, request as HeldRequest, group);
    // Its id where its Call has it (the ranges layer writes each chunk's; the client's, the guard found).
    const idStart = call.idFrom;
    if (idStart === -1) return this.next(target, request as HeldRequest, group);
    const idEnd = call.idTo;
    const body = call.body;
    const b = typeof body === 'string' ? Buffer.from(body) : body;
    const key = this.keyPrefix + b.toString('latin1', 0, idStart) + '\u0000' + b.toString('latin1', idEnd);
    const idJson = b.toString('utf8', idStart, idEnd);
    const e = core.hit(key);
    if (e !== undefined) {
      core.stats.hits++;
      // Answered after this returns, as any dispatch answers: the caller has its handle first (one of its own: a
      // caller may keep its handles in a Set).
      const w: Waiter = { target, idJson, gone: false };
      const answer = withId(e.prefix, idJson, e.suffix);
      const u = core.group.all[0]!;
      queueMicrotask(() => {
        if (w.gone) return;
        target.cacheSaid?.('hit');
        target.forwarded({ kind: 'buffered', upstream: u, status: 200, headers: JSON_HEADERS, body: answer });
      });
      return waiting(w);
    }
    // A chunk tried again away from the upstreams it failed on: on its own, with the group it was given.
    if (group !== undefined && group !== core.group) return this.next(target, request as HeldRequest, group);
    const w: Waiter = { target, idJson, gone: false };
    const joined = core.joinable(key) as Flight<LogsFlight> | undefined;
    if (joined !== undefined) {
      joined.data.waiters.push(w);
      return waiting(w);
    }
    // The Call goes down with the request: the pool reads it instead of the body again.
    const f = core.open<LogsFlight>(key, { to, waiters: [w] }, this, request);
    // A final answer may be in Redis already: asked first, then the node.
    const shared = core.sharedGet(key);
    if (shared === null) this.send(f);
    else void shared.then((parts) => (parts === null ? this.send(f) : this.fromShared(f, parts[0], parts[1])), () => this.send(f));
    return waiting(w);
  };

  private send(f: Flight<LogsFlight>): void {
    this.next(f, held(f.request, { maxBuffer: Math.min(f.request.transport.maxBuffer, MAX_HELD) }), this.core.group);
  }

  /** Answered from Redis (only final answers are ever put there): kept in memory for good, a hit for every caller waiting. */
  private fromShared(f: Flight<LogsFlight>, prefix: Buffer, suffix: Buffer): void {
    const core = this.core;
    core.close(f as Flight<unknown>);
    core.keepForever(f.key, prefix, suffix, -1, null);
    core.stats.sharedHits++;
    const u = core.group.all[0]!;
    for (const w of f.data.waiters) {
      core.stats.hits++;
      if (w.gone) continue;
      w.target.cacheSaid?.('hit');
      w.target.forwarded({ kind: 'buffered', upstream: u, status: 200, headers: JSON_HEADERS, body: withId(prefix, w.idJson, suffix) });
    }
  }

  /** A flight's outcome: every caller gets it (the first as a miss, the others as joined), with its own id; kept if the rules allow. */
  landed(f: Flight<LogsFlight>, r: ForwardResult): void {
    const core = this.core;
    core.close(f as Flight<unknown>);
    const waiters = f.data.waiters;
    const spans = r.kind === 'buffered' ? answerOf(r.body).spansWithin(MAX_ANSWER_DEPTH) : null;
    if (r.kind !== 'buffered' || spans === null || spans.idStart === -1) {
      // No answer, or not one to cut: each caller judges it (the ranges layer asks another upstream).
      for (const w of waiters) if (!w.gone) w.target.forwarded(r);
      return;
    }
    const prefix = r.body.subarray(0, spans.idStart);
    const suffix = r.body.subarray(spans.idEnd);
    core.stats.misses++;
    core.stats.coalesced += waiters.length - 1;
    waiters.forEach((w, i) => {
      if (w.gone) return;
      w.target.cacheSaid?.(i === 0 ? 'miss' : 'coalesced');
      w.target.forwarded({ ...r, body: withId(prefix, w.idJson, suffix) });
    });
    const result = spans.resultStart === -1 ? null : r.body.subarray(spans.resultStart, spans.resultEnd);
    if (r.status !== 200 || spans.hasError || result === null || result[0] !== 0x5b) return;
    if (this.keeps(f, r.upstream, result)) core.keepForever(f.key, prefix, suffix, -1, r.upstream);
  }

  /** Whether `u`'s logs for a flight's range may be kept forever. */
  private keeps(f: Flight<LogsFlight>, u: Upstream, result: Buffer): boolean {
    const core = this.core;
    // A log a reorg took back says so: never kept (in final blocks there should be none).
    if (REMOVED.some((r) => result.includes(r))) return false;
    // Identity unchanged since it was sent, one epoch (no reset between: finality going back ends it), an upstream at
    // the head since before it was sent (it has the whole range), and the range still final.
    return core.trusted(f as Flight<unknown>, u) && core.current(f as Flight<unknown>, u) && core.view.isFinal(f.data.to);
  }
}

/** A caller's handle: going away only stops its answer (the flight goes on for the others, and may be kept). */
function waiting(w: Waiter): Cancelable {
  return { cancel: () => void (w.gone = true) };
}

function withId(prefix: Buffer, idJson: string, suffix: Buffer): Buffer {
  return Buffer.concat([prefix, Buffer.from(idJson), suffix]);
}

/**
 * A client's eth_getLogs, as the chain's dispatch takes it (streamed where the
 * client takes a stream): the ranges layer writes a merged answer from its
 * chunks' buffers, counted under MAX_HELD_BYTES until the response is done,
 * and tells the answer how the cache took part before its head is written.
 * The merged answer is never kept here (the chunks are, below): nothing
 * needs it whole.
 */
export function sendLogs(x: ClientTarget, dispatch: Dispatch, request: ForwardRequest): Cancelable {
  return dispatch(new LogsAnswer(x), request);
}

/**
 * Where a client's eth_getLogs answer comes: X-Cache HIT (every chunk from
 * memory: no upstream is named), COALESCED (none sent for it, some joined
 * calls in flight), MISS (some went to a node), BYPASS (no chunk took part).
 */
class LogsAnswer implements ForwardTarget {
  private said: CacheSays | null = null;

  constructor(private readonly x: ClientTarget) {}

  get res(): Sink {
    return this.x.res;
  }

  cacheSaid(c: CacheSays): void {
    this.said = c;
    this.x.cacheTag = X_CACHE[c];
    this.x.cacheLog = X_CACHE_LOG[c];
  }

  streamHead(status: number, headers: IncomingHttpHeaders, u: Upstream): void {
    this.x.streamHead(status, headers, u);
  }

  forwarded(r: ForwardResult): void {
    const x = this.x;
    const said = this.said;
    if (r.kind === 'buffered' && said !== null) {
      // The ranges layer's answer (the merged logs, or a node's error under the client's id): JSON-RPC the gateway wrote.
      if (said !== 'hit') x.upstream = r.upstream;
      return x.later(() => x.send(r.status, r.body));
    }
    x.forwarded(r);
    // An answer from memory names no upstream of its own.
    if (said === 'hit') x.upstream = null;
  }
}
