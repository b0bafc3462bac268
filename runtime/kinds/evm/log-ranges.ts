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
import type { IncomingHttpHeaders } from 'node:http';
import type { ChainView } from '../../upstreams/chain-view.ts';
import { deliver, JSON_HEADERS, NOTHING, streams, streamParts, timeLeft, type CacheSays, type Cancelable, type Dispatch, type FailKind, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget, type Sink } from '../../dispatch.ts';
import { holdBytes, MAX_HELD, releaseHeld } from '../../upstreams/forward.ts';
import { rpcErrorJson } from './errors.ts';
import { CLOSE, COMMA, firstByte, isWs, MAX_ANSWER_DEPTH, OPEN, quantity } from '../../jsonrpc/scan.ts';
import { answerOf, answerSpans, splitBatchAnswer } from '../../jsonrpc/answer.ts';
import type { Logger } from '../../observe/log.ts';
import { rangeComplaint, type RangeComplaint } from './log-range-errors.ts';
import { splitBatch, type PartsTaker } from '../../pool/batch.ts';
import { callOf, carries } from './pool-call.ts';
import { Call, ID_AT, type BlockRef } from './call.ts';
import type { EvmRouteSpec } from '../../types.ts';
import { mayBeError } from '../../upstreams/throttle.ts';
import { POLL_SHARE } from '../../upstreams/upstream-budget.ts';
import { UpstreamGroup, type Upstream } from '../../upstreams/upstream.ts';

/** Chunks out at once, per client call. */
export const CHUNKS_AT_ONCE = 4;
/** Most chunk requests one client call may cost, re-splits and tries elsewhere included (see RangeCall for what happens past it). */
export const MAX_CHUNK_SENDS = 1000;
/** How long a cap learned from an upstream's error holds: then one range as wide as the rest allow tries it again. */
export const LEARNED_CAP_MS = 10 * 60 * 1000;
/** Largest merged answer (a chunk's answer: forward.ts's MAX_HELD; all calls' together: its MAX_HELD_BYTES). */
const MAX_MERGED_BYTES = 128 * 1024 * 1024;
/** A streamed whole range's answer is held to be judged while it is this short: every refusal in kinds/evm/log-range-errors.ts's table is under 600 bytes. */
const MAX_JUDGED = 1024;
/** JSON-RPC errors that are the call's own fault: every node answers them alike, so no other is asked. */
const CALLERS_FAULT = new Set([-32600, -32601, -32602]);
const TAIL = Buffer.from(']}');

/** Whether a chain gets the layer: it allows eth_getLogs (any upstream may refuse a range, a lone one too). */
export function wantsLogRanges(route: EvmRouteSpec): boolean {
  return route.methods.has('eth_getLogs');
}

/** May take traffic, or will once its budget has room: what a paced range waits for. */
function open(u: Upstream): boolean {
  return u.usable || (u.budget !== null && u.serving && !u.view.throttled);
}

/** Where a range's chunks go: how wide each is, the upstreams that take that width (and a group of them), and whether every one of them has a budget. */
export interface Placement {
  readonly width: number;
  readonly takers: readonly Upstream[];
  readonly group: UpstreamGroup;
  readonly paced: boolean;
}

export class LogRanges {
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
    const body = request.body;
    if (body === null || !carries(request, 'eth_getLogs')) return this.inner(target, request as HeldRequest, group);
    if (firstByte(body) === 0x5b) return splitBatch(this.batchCall, this.log, this.route.path, target, request) ?? this.inner(target, request as HeldRequest, group);
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
    this.dispatch(target, (request.call?.method === 'eth_getLogs' && request.maxBuffer < MAX_MERGED_BYTES ? { ...request, maxBuffer: MAX_MERGED_BYTES } : request) as HeldRequest, group);

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

/**
 * An answer this layer made (a merged range, its own error), handed on as the
 * sender asked (dispatch.ts `deliver`), the cache's part told first; one held
 * past the sender's maxBuffer fails as too large.
 */
function sendOwn(target: HeldTarget, request: ForwardRequest, u: Upstream, body: Buffer, cache?: CacheSays): void {
  const r: Extract<ForwardResult, { kind: 'buffered' }> = { kind: 'buffered', upstream: u, status: 200, headers: JSON_HEADERS, body };
  if (!streams(request, r) && body.length > request.maxBuffer) return target.forwarded({ kind: 'failed', fail: 'bad-response', upstream: u });
  if (cache !== undefined) target.cacheSaid?.(cache);
  deliver(target, request, r);
}


interface Chunk {
  readonly from: number;
  readonly to: number;
  /** The whole range, within every cap: the client's call goes as it came (its tags as the pool's rewriteTags says). */
  readonly whole?: boolean;
  /** Upstreams that failed it. */
  readonly tried: Set<Upstream>;
}

/**
 * Splits [from, to] into chunks of at most `width` blocks; `aligned`: each
 * chunk but the first starts at a multiple of the width, so that overlapping
 * ranges share their inner chunks (a cached chain's: the cache keeps each).
 */
export function splitRange(from: number, to: number, width: number, aligned = false): { from: number; to: number }[] {
  const out: { from: number; to: number }[] = [];
  const w = Number.isFinite(width) && width >= 1 ? Math.floor(width) : to - from + 1;
  for (let a = from; a <= to; ) {
    const end = Math.min(to, aligned ? a - (a % w) + w - 1 : a + w - 1);
    out.push({ from: a, to: end });
    a = end + 1;
  }
  return out;
}

/**
 * The merged answer's parts, in the chunks' order (each node answers its
 * chunk by block, then log index): the answer of one node asked for the whole
 * range, under the client's id. The chunks' logs are views of their own
 * buffers: written as they are, nothing is copied.
 */
export function mergedParts(idJson: string, results: readonly Buffer[]): Buffer[] {
  const parts: Buffer[] = [Buffer.from(`{"jsonrpc":"2.0","id":${idJson},"result":[`)];
  let any = false;
  for (const r of results) {
    const inner = arrayInner(r);
    if (inner.length === 0) continue;
    if (any) parts.push(COMMA);
    parts.push(inner);
    any = true;
  }
  parts.push(TAIL);
  return parts;
}

/** mergedParts as one buffer (a short answer: a range wholly above the head). */
export function mergeLogs(idJson: string, results: readonly Buffer[]): Buffer {
  return Buffer.concat(mergedParts(idJson, results));
}

/**
 * The logs of an answer's result (a JSON array's text) whose blockNumber is
 * within [from, to], each with its bytes as it came; null when one cannot be
 * read.
 */
export function trimLogs(result: Buffer, from: number, to: number): Buffer | null {
  const items = splitBatchAnswer(result, MAX_ANSWER_DEPTH);
  if (items === null) return null;
  const parts: Buffer[] = [OPEN];
  for (const it of items) {
    const log = result.subarray(it.start, it.end);
    let n: number;
    try {
      n = quantity((JSON.parse(log.toString('utf8')) as { blockNumber?: unknown }).blockNumber);
    } catch {
      return null;
    }
    if (n < 0) return null;
    if (n < from || n > to) continue;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(log);
  }
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

/** A JSON array's text without its brackets and the blanks inside them. */
function arrayInner(a: Buffer): Buffer {
  let s = 0;
  let e = a.length;
  while (s < e && a[s] !== 0x5b) s++;
  while (e > s && a[e - 1] !== 0x5d) e--;
  s++;
  e--;
  while (s < e && isWs(a[s]!)) s++;
  while (e > s && isWs(a[e - 1]!)) e--;
  return a.subarray(s, Math.max(s, e));
}

/** One client eth_getLogs call: its chunks, at most CHUNKS_AT_ONCE out, merged once all are in. */
class RangeCall implements Cancelable {
  private readonly queue: Chunk[] = [];
  /** Per chunk's first block: its logs (the result array's text). */
  private readonly logs = new Map<number, Buffer>();
  private readonly running = new Set<Cancelable>();
  private sends = 0;
  /** Bytes of logs held, counted under forward.ts's MAX_HELD_BYTES until the client has them (or the call fails). */
  private held = 0;
  private over = false;
  private deadline: NodeJS.Timeout | null = null;
  /** A paced call waits for room in its upstreams' budgets. */
  private pacer: NodeJS.Timeout | null = null;
  /** The first upstream that answered a chunk: the merged answer's. */
  private upstream: Upstream | null = null;
  /** The request each chunk goes as: held whole, safe to send again. */
  private readonly chunkRequest: HeldRequest;
  private readonly filter: Record<string, unknown>;
  /** A whole range goes as the client's own call; not on a cached chain when its ends are tags and it is final (by number, it is kept). */
  private readonly asItCame: boolean;
  /** What the cache's layer said of the chunks (kinds/evm/cache-logs.ts): from memory, joined, sent for it; and chunks it took no part in. */
  private readonly cache = { hit: 0, coalesced: 0, miss: 0, none: 0 };
  /** Where first-time chunks go (LogRanges.place). */
  private placed!: Placement;
  /** The range's end, clamped to `head` once it is split (`clamped`: lowered so). */
  private to: number;
  private clamped = false;
  /** A lone upstream was asked its head (atHead). */
  private asked = false;

  constructor(
    private readonly host: LogRanges,
    private readonly target: HeldTarget,
    private readonly request: ForwardRequest,
    private readonly group: UpstreamGroup,
    private readonly call: Call,
    private readonly from: number,
    to: number,
    /** The head when the call came (the served tip, or the lone upstream's as the last poll said; -1: not known): a split range's one snapshot. */
    private head: number,
  ) {
    this.to = to;
    // Each chunk held whole, safe to send again; its body is its own (the client's Call is not its).
    this.chunkRequest = { ...request, hold: true, call: undefined, decision: undefined, idempotent: true, emptyOk: false, maxBuffer: MAX_HELD };
    this.filter = call.params[0] as Record<string, unknown>;
    this.asItCame = !(host.cached && (typeof call.from !== 'number' || typeof call.block !== 'number') && host.view.isFinal(to));
  }

  start(): void {
    this.placed = this.host.place(this.group);
    // A range within a cap goes whole: on a chain of one upstream without a cache, streamed as any call there.
    const whole = this.to - this.from + 1 <= this.placed.width;
    if (whole && this.streams()) return this.sendJudged();
    this.deadline = setTimeout(this.expire, timeLeft(this.request.deadline));
    this.deadline.unref();
    if (whole) return this.split();
    this.atHead(() => {
      if (this.clamp()) this.split();
    });
  }

  /** The range (clamped, where it is split) in chunks of the placed width, queued and sent. */
  private split(): void {
    const width = this.placed.width;
    // A wider one on a cached chain is split on multiples of the width.
    const aligned = this.host.cached && this.to - this.from + 1 > width;
    const chunks = splitRange(this.from, this.to, width, aligned);
    if (aligned) this.widen(chunks, width);
    // More requests than one call may cost: refused as a range over limits.maxLogRange is, naming the widest that fits.
    if (chunks.length > MAX_CHUNK_SENDS) return this.refuse(width * MAX_CHUNK_SENDS, `more than ${MAX_CHUNK_SENDS} requests to the upstreams can ask`);
    if (chunks.length > 1 && this.placed.paced) {
      const fits = this.budgetFits();
      if (chunks.length > fits) return this.refuse(Math.max(1, fits) * width, "more than the upstreams' rateLimit lets be asked within timeoutMs");
    }
    // A clamped range is no longer the client's call: even as one chunk it goes by number.
    const whole = chunks.length === 1 && !this.clamped;
    for (const c of chunks) this.queue.push({ ...c, whole, tried: new Set() });
    this.pump();
  }

  /** Requests the placed upstreams' budgets let be sent within the call's timeoutMs (their share past the poller's, less the request each leaves to other calls: waitFor). */
  private budgetFits(): number {
    const seconds = timeLeft(this.request.deadline) / 1000;
    let n = 0;
    for (const u of this.placed.takers) {
      const b = u.budget!;
      n += Math.max(0, b.available() - (b.burst > 1 ? 1 : 0)) + Math.floor(b.perSecond * (1 - POLL_SHARE) * seconds);
    }
    return n;
  }

  /**
   * Runs `then` once the call's head is known. A pool's is its served tip when
   * the call came, which is also what its clients are told eth_blockNumber is.
   * A lone upstream's clients ask the node itself: its head may be past what
   * the last poll said, so a range that reaches past that asks the node for
   * its head first (once), lest blocks a client knows of be answered absent.
   */
  private atHead(then: () => void): void {
    if (this.host.pooled || this.asked || this.head < 0 || this.to <= this.head) return then();
    this.asked = true;
    const body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
    const t = {
      running: null as Cancelable | null,
      finished: false,
      forwarded: (r: ForwardResult): void => {
        t.finished = true;
        if (t.running !== null) this.running.delete(t.running);
        if (this.over) return;
        // No usable answer: the head the last poll said.
        const text = r.kind === 'buffered' && r.status === 200 ? resultText(r.body) : null;
        if (text !== null) this.head = Math.max(this.head, quantity(text.length > 2 && text.startsWith('"') && text.endsWith('"') ? text.slice(1, -1) : text));
        then();
      },
    };
    t.running = this.host.inner(t, { ...this.chunkRequest, body, call: new Call(body, 'eth_blockNumber'), maxBuffer: 4096 }, this.group);
    if (!t.finished) this.running.add(t.running);
  }

  /**
   * One snapshot: a range about to be split ends at the head the call came
   * with, so that blocks mined while its chunks are out are not half in it,
   * and no chunk asks past every node's head. Blocks above are answered as
   * absent, as one node at that head answers; a range wholly above it is
   * answered empty at once (false).
   */
  private clamp(): boolean {
    const head = this.head;
    if (head < 0 || this.to <= head) return true;
    this.to = head;
    this.clamped = true;
    if (this.from <= head) return true;
    this.over = true;
    this.end();
    const body = mergeLogs(this.call.idJson, []);
    queueMicrotask(() => sendOwn(this.target, this.request, this.group.all[0]!, body));
    return false;
  }

  /** A whole range's answer streams to the client as any call's: a chain of one upstream, no cache, a client that takes a stream. */
  private streams(): boolean {
    return !this.host.pooled && !this.host.cached && this.request.hold !== true && this.request.classify(200, JSON_HEADERS) === 'stream';
  }

  /** The client's call as it came, streamed to it; only a refusal of the range (JudgedStream) comes back here to be split. */
  private sendJudged(): void {
    const t = new JudgedStream(this, { from: this.from, to: this.to, whole: true, tried: new Set() }, this.target as ForwardTarget);
    this.sends++;
    t.running = this.host.inner(t, this.request, this.group);
    if (!t.finished) this.running.add(t.running);
  }

  /** The judged whole range was answered (or failed) as any call is: passed on as it came. */
  passed(t: JudgedStream, r: ForwardResult): void {
    if (t.running !== null) this.running.delete(t.running);
    if (this.over) return;
    this.over = true;
    this.target.forwarded(r);
  }

  /** The judged whole range was refused: split from here as a held chunk refused is, within what is left of the call's time. */
  refused(t: JudgedStream, u: Upstream, error: Record<string, unknown>, complaint: RangeComplaint): void {
    if (t.running !== null) this.running.delete(t.running);
    if (this.over) return;
    this.deadline = setTimeout(this.expire, timeLeft(this.request.deadline));
    this.deadline.unref();
    this.complain(t.chunk, u, error, complaint);
  }

  /**
   * A cached chain's split: an edge chunk that is part of a final aligned
   * chunk asks for the whole of it (kept, and shared with every range that
   * overlaps it); the logs outside the client's range are dropped (trimLogs).
   */
  private widen(chunks: { from: number; to: number }[], w: number): void {
    const first = chunks[0]!;
    const a = first.from - (first.from % w);
    if (a !== first.from && this.host.view.isFinal(a + w - 1)) chunks[0] = { from: a, to: first.to };
    const last = chunks[chunks.length - 1]!;
    const b = last.to - (last.to % w) + w - 1;
    if (b !== last.to && this.host.view.isFinal(b)) chunks[chunks.length - 1] = { from: last.from, to: b };
  }

  cancel(): void {
    this.over = true;
    this.end();
    this.drop();
  }

  private readonly expire = (): void => {
    this.deadline = null;
    this.fail('timeout', null);
  };

  private pump(): void {
    if (this.pacer !== null) clearTimeout(this.pacer);
    this.pacer = null;
    while (!this.over && this.running.size < CHUNKS_AT_ONCE && this.queue.length > 0) {
      const c = this.queue[0]!;
      const group = this.groupFor(c);
      if (group === null) continue;
      // Paced: no upstream for it has room in its budget now; it waits until the first has (within the call's deadline).
      const wait = this.waitFor(group);
      if (wait > 0) {
        this.pacer = setTimeout(() => this.pump(), wait);
        this.pacer.unref();
        return;
      }
      this.queue.shift();
      if (++this.sends > MAX_CHUNK_SENDS) return this.fail('bad-response', null, 'more chunk requests than one call may cost');
      const t = new ChunkTarget(this, c);
      // Each chunk carries its Call, so that the layers below (the cache's, the pool) read it, not its bytes.
      const call = this.chunkCall(c);
      t.running = this.host.inner(t, { ...this.chunkRequest, body: call.body, call }, group);
      if (!t.finished) this.running.add(t.running);
    }
    if (!this.over && this.pacer === null && this.running.size === 0 && this.queue.length === 0) this.finish();
  }

  /**
   * The upstreams a chunk goes to: the placed ones (a chunk tried again: those
   * it has not failed on), whose cap takes it. Where none of those takes it
   * whole (caps learned on the way), it is split to the widest of their caps
   * in its place, and null is returned (the pieces are next in the queue).
   */
  private groupFor(c: Chunk): UpstreamGroup | null {
    const p = c.tried.size === 0 ? this.placed : this.host.place(this.group, c.tried);
    if (c.to - c.from + 1 <= p.width) return p.group;
    this.queue.splice(0, 1, ...splitRange(c.from, c.to, p.width).map((x) => ({ ...x, tried: new Set(c.tried) })));
    return null;
  }

  /**
   * Milliseconds until one of `group`'s upstreams has room in its budget for
   * a chunk (0: one has now, or none waits on a budget). A chunk leaves the
   * last request a bucket holds to other calls where it holds more than one:
   * a range yields to them, and never takes all of an upstream's budget.
   */
  private waitFor(group: UpstreamGroup): number {
    if (!this.placed.paced) return 0;
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

  /**
   * A chunk's call: the client's own where the chunk is its whole range as it
   * came; else one the gateway writes, whose Call is made of the document it
   * wrote (its id where it wrote it), so no layer below parses or scans it.
   */
  private chunkCall(c: Chunk): Call {
    const body = this.request.body;
    if (c.whole === true && this.asItCame && body !== null) return body === this.call.body ? this.call : new Call(body, 'eth_getLogs');
    const params = this.call.params.slice();
    params[0] = { ...this.filter, fromBlock: `0x${c.from.toString(16)}`, toBlock: `0x${c.to.toString(16)}` };
    // An id of its own: a node need not take the client's (anvil refuses a 30-digit number); the answer gets the client's back.
    const doc = { jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params };
    return Call.parsedAs(JSON.stringify(doc), 'eth_getLogs', doc, ID_AT, ID_AT + 1);
  }

  /** A chunk's outcome: its logs, a split further, a try elsewhere, or the call's end. */
  done(t: ChunkTarget, r: ForwardResult): void {
    if (t.running !== null) this.running.delete(t.running);
    if (this.over) return;
    const c = t.chunk;
    if (r.kind !== 'buffered') return this.again(c, r.upstream, () => this.fail(r.kind === 'failed' ? r.fail : 'unavailable', r.upstream));
    const u = r.upstream;
    const spans = r.status === 200 ? answerOf(r.body).spansWithin(MAX_ANSWER_DEPTH) : null;
    if (spans !== null && !spans.hasError && spans.resultStart !== -1 && r.body[spans.resultStart] === 0x5b) {
      // An answer from memory names no upstream of its own: the merged answer's is one that was asked.
      if (t.said !== 'hit') this.upstream ??= u;
      this.cache[t.said ?? 'none']++;
      let result: Buffer | null = r.body.subarray(spans.resultStart, spans.resultEnd);
      // A chunk widened past the client's range (widen): only the logs within it.
      if (c.from < this.from || c.to > this.to) result = trimLogs(result, this.from, this.to);
      if (result === null) return this.fail('bad-response', u, 'eth_getLogs answer whose logs name no block number');
      if (this.held + result.length > MAX_MERGED_BYTES) return this.fail('bad-response', u, 'merged eth_getLogs answer too large');
      // Counted with every request's held answers: past the bound, the call fails as an answer too large to hold does.
      if (!holdBytes(result.length)) return this.fail('bad-response', u, 'eth_getLogs answers held by all calls at the bound (MAX_HELD_BYTES)');
      this.held += result.length;
      this.logs.set(c.from, result);
      return this.pump();
    }
    const error = spans !== null && spans.hasError ? errorOf(r.body) : null;
    if (error === null) {
      this.host.log.warn({ event: 'upstream_bad_response', chain: this.host.route.path, upstream: u.name, status: r.status }, 'upstream answer is not JSON-RPC (a chunk of eth_getLogs)');
      return this.again(c, u, () => this.fail('bad-response', u));
    }
    const complaint = rangeComplaint(error);
    if (complaint !== null && c.to > c.from) return this.complain(c, u, error, complaint);
    const answer = (): void => this.answerError(u, error);
    if (typeof error.code === 'number' && CALLERS_FAULT.has(error.code)) return answer();
    this.again(c, u, answer);
  }

  /** An upstream refused chunk `c`'s range: split it further (clamped to the call's head first, if it was the whole range) ahead of the rest. */
  private complain(c: Chunk, u: Upstream, error: Record<string, unknown>, complaint: RangeComplaint): void {
    if (complaint.kind === 'limit') {
      this.host.learn(u, complaint.blocks ?? Math.ceil((c.to - c.from + 1) / 2));
      // The chunks from here go to every upstream whose cap takes them, this one too.
      this.placed = this.host.place(this.group);
    }
    const resplit = (to: number): void => {
      const width = to - c.from + 1;
      let w = complaint.kind === 'limit' && complaint.blocks !== null && complaint.blocks < width ? complaint.blocks : (complaint.suggested ?? 0);
      if (w <= 0 || w >= width) w = Math.ceil(width / 2);
      const pieces = splitRange(c.from, to, w);
      // Past what one call may cost: the node's refusal is the answer.
      if (this.sends + this.queue.length + pieces.length > MAX_CHUNK_SENDS) return this.answerError(u, error);
      // Split further, ahead of the chunks not yet sent (they may go anywhere: each is at most this upstream's cap).
      this.queue.unshift(...pieces.map((p) => ({ ...p, tried: new Set<Upstream>() })));
      this.pump();
    };
    // The whole range is split from here: clamped first.
    if (c.whole !== true) return resplit(c.to);
    this.atHead(() => {
      if (this.clamp()) resplit(this.to);
    });
  }

  /** The chunk asked of another upstream it has not failed on, if one is open; else `none`. */
  private again(c: Chunk, u: Upstream | null, none: () => void): void {
    // No upstream took it at all (none usable): none will.
    if (u === null) return none();
    c.tried.add(u);
    if (!this.group.all.some((o) => open(o) && !c.tried.has(o))) return none();
    this.queue.unshift(c);
    this.pump();
  }

  /**
   * Every chunk is in: the merged answer. One the client takes as a stream is
   * written from the chunks' own buffers, still counted as held until the
   * response is done; a client batch takes the parts, with their count
   * (PartsTaker); any other holder gets it as one buffer.
   */
  private finish(): void {
    this.over = true;
    this.end();
    const chunks = [...this.logs.keys()].sort((a, b) => a - b).map((k) => this.logs.get(k)!);
    const parts = mergedParts(this.call.idJson, chunks);
    const u = this.upstream ?? this.group.all[0]!;
    const cache = this.cacheSays();
    const request = this.request;
    if (request.hold !== true && request.classify(200, JSON_HEADERS) === 'stream') {
      if (cache !== undefined) this.target.cacheSaid?.(cache);
      return streamParts(this.target as ForwardTarget, u, parts, () => this.drop());
    }
    // A client batch's call: its parts go to the batch's answer as they are, still counted (the batch lets go of them).
    const taker = this.target as Partial<PartsTaker>;
    if (taker.takeParts !== undefined) {
      const held = this.held;
      this.held = 0;
      this.logs.clear();
      return taker.takeParts(u, parts, held);
    }
    try {
      sendOwn(this.target, request, u, Buffer.concat(parts), cache);
    } finally {
      this.drop();
    }
  }

  /** The logs held are let go: counted no more under MAX_HELD_BYTES. */
  private drop(): void {
    releaseHeld(this.held);
    this.held = 0;
    this.logs.clear();
  }

  /**
   * What X-Cache says of the merged answer, as of a client's batch
   * (docs/cache.md): hit (every chunk from memory), coalesced (none sent for
   * it, some joined calls in flight), miss (some went to a node); undefined
   * when the cache took part in no chunk.
   */
  private cacheSays(): CacheSays | undefined {
    const c = this.cache;
    if (c.hit + c.coalesced + c.miss === 0) return undefined;
    return c.miss + c.none > 0 ? 'miss' : c.coalesced > 0 ? 'coalesced' : 'hit';
  }

  /** A node's error, which every upstream asked gave (or that is the call's own fault), under the client's id. */
  private answerError(u: Upstream, error: Record<string, unknown>): void {
    this.over = true;
    this.end();
    this.drop();
    sendOwn(this.target, this.request, u, Buffer.from(`{"jsonrpc":"2.0","id":${this.call.idJson},"error":${JSON.stringify(error)}}`), this.cacheSays() === undefined ? undefined : 'miss');
  }

  /** A range that would take more chunk requests than one call may cost, or than its budget lets be sent in time: -32602, naming the widest range that fits. */
  private refuse(widest: number, why: string): void {
    this.over = true;
    this.end();
    const data = JSON.stringify({ path: '/0', message: `the range spans ${this.to - this.from + 1} blocks, ${why}`, maxLogRange: widest });
    const body = Buffer.from(rpcErrorJson('GW_RPC_INVALID_PARAMS', this.call.idJson, data));
    queueMicrotask(() => sendOwn(this.target, this.request, this.group.all[0]!, body));
  }

  private fail(fail: FailKind, u: Upstream | null, why?: string): void {
    if (this.over) return;
    this.over = true;
    this.end();
    this.drop();
    if (why !== undefined) this.host.log.warn({ event: 'log_range_failed', chain: this.host.route.path, why }, 'eth_getLogs range failed');
    this.target.forwarded({ kind: 'failed', fail, upstream: u });
  }

  private end(): void {
    if (this.deadline !== null) clearTimeout(this.deadline);
    this.deadline = null;
    if (this.pacer !== null) clearTimeout(this.pacer);
    this.pacer = null;
    for (const r of this.running) r.cancel();
    this.running.clear();
  }
}

/** A JSON-RPC answer's result, as its text (null: an error, or not JSON-RPC). */
function resultText(body: Buffer): string | null {
  const spans = answerSpans(body, MAX_ANSWER_DEPTH);
  return spans === null || spans.hasError || spans.resultStart === -1 ? null : body.toString('utf8', spans.resultStart, spans.resultEnd);
}

/** A JSON-RPC answer's error object (null: none, or not JSON). */
function errorOf(body: Buffer): Record<string, unknown> | null {
  try {
    const e = (JSON.parse(body.toString('utf8')) as { error?: unknown }).error;
    return e !== null && typeof e === 'object' && !Array.isArray(e) ? (e as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Where one chunk's outcome goes. */
class ChunkTarget implements HeldTarget {
  running: Cancelable | null = null;
  finished = false;
  /** How the cache's layer took part in the chunk's answer (none: it did not). */
  said: CacheSays | null = null;

  constructor(
    private readonly call: RangeCall,
    readonly chunk: Chunk,
  ) {}

  cacheSaid(c: CacheSays): void {
    this.said = c;
  }

  forwarded(r: ForwardResult): void {
    this.finished = true;
    this.call.done(this, r);
  }
}

/**
 * A whole range on a chain of one upstream, streamed to its client as any
 * call there is. Only an answer short enough to be an error is held (nothing
 * written yet) until it is whole: a refusal of the range (kinds/evm/log-range-errors.ts)
 * never reaches the client, and the range is split instead; anything else goes
 * on as it came, head first.
 */
class JudgedStream implements ForwardTarget {
  running: Cancelable | null = null;
  finished = false;
  readonly res: Sink;
  private head: { status: number; headers: IncomingHttpHeaders; u: Upstream } | null = null;
  /** What came while it may still be a refusal; null once it is passed on. */
  private held: Buffer[] | null = [];
  private size = 0;
  private refusal: { u: Upstream; error: Record<string, unknown>; complaint: RangeComplaint } | null = null;

  constructor(
    private readonly call: RangeCall,
    readonly chunk: Chunk,
    private readonly out: ForwardTarget,
  ) {
    const res = out.res;
    // Forward writes here what it would write to the client's response.
    this.res = {
      get destroyed() {
        return res.destroyed;
      },
      get headersSent() {
        return res.headersSent;
      },
      write: (b: Buffer) => this.write(b),
      end: () => this.end(),
      once: (event: string, f: () => void) => res.once(event, f),
      destroy: (e?: Error) => res.destroy(e),
    } as unknown as Sink;
  }

  streamHead(status: number, headers: IncomingHttpHeaders, u: Upstream): void {
    this.head = { status, headers, u };
  }

  private write(b: Buffer): boolean {
    const held = this.held;
    if (held !== null) {
      if (this.head?.status === 200 && this.size + b.length <= MAX_JUDGED && (this.size > 0 || mayBeError(b))) {
        held.push(b);
        this.size += b.length;
        return true;
      }
      this.pass();
    }
    return this.out.res.write(b);
  }

  /** Not a refusal: the head and what was held go to the client. */
  private pass(): void {
    const held = this.held!;
    this.held = null;
    const h = this.head!;
    this.out.streamHead(h.status, h.headers, h.u);
    for (const b of held) this.out.res.write(b);
  }

  private end(): void {
    if (this.held !== null && this.size > 0) {
      const error = errorOf(Buffer.concat(this.held, this.size));
      const complaint = error === null ? null : rangeComplaint(error);
      if (error !== null && complaint !== null && this.chunk.to > this.chunk.from) {
        this.held = null;
        this.refusal = { u: this.head!.u, error, complaint };
        return;
      }
    }
    if (this.held !== null) this.pass();
    this.out.res.end();
  }

  forwarded(r: ForwardResult): void {
    this.finished = true;
    const f = this.refusal;
    if (f !== null && r.kind === 'streamed') return this.call.refused(this, f.u, f.error, f.complaint);
    this.call.passed(this, r);
  }
}
