// One client eth_getLogs call of the ranges layer (kinds/evm/log-ranges.ts):
// its range in chunks (kinds/evm/log-chunk.ts), sent at most CHUNKS_AT_ONCE at
// once and paced (kinds/evm/log-placement.ts), split further where a node refuses
// one, and merged (kinds/evm/log-codec.ts) once all are in.
import { streamParts, streams, timeLeft, type Cancelable, type FailKind, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget, type Transport } from '../../dispatch.ts';
import { holdBytes, MAX_HELD, releaseHeld } from '../../upstreams/forward.ts';
import { rpcErrorJson } from './errors.ts';
import { MAX_ANSWER_DEPTH, quantity } from '../../jsonrpc/scan.ts';
import { answerOf } from '../../jsonrpc/answer.ts';
import { rangeComplaint, type RangeComplaint } from './log-range-errors.ts';
import type { PartsTaker } from '../../pool/batch.ts';
import { Call, ID_AT } from './call.ts';
import type { Upstream, UpstreamGroup } from '../../upstreams/upstream.ts';
import { cacheSays, errorOf, mergedParts, mergeLogs, resultText, splitRange, trimLogs, widen } from './log-codec.ts';
import { ChunkTarget, JudgedStream, sendOwn, type Chunk, type ChunkOwner } from './log-chunk.ts';
import { budgetFits, open, waitFor, type Placement, type RangeHost } from './log-placement.ts';

/** Chunks out at once, per client call. */
export const CHUNKS_AT_ONCE = 4;
/** Most chunk requests one client call may cost, re-splits and tries elsewhere included (see RangeCall for what happens past it). */
export const MAX_CHUNK_SENDS = 1000;
/** Largest merged answer (a chunk's answer: forward.ts's MAX_HELD; all calls' together: its MAX_HELD_BYTES). */
export const MAX_MERGED_BYTES = 128 * 1024 * 1024;
/** JSON-RPC errors that are the call's own fault: every node answers them alike, so no other is asked. */
const CALLERS_FAULT = new Set([-32600, -32601, -32602]);

/** One client eth_getLogs call: its chunks, at most CHUNKS_AT_ONCE out, merged once all are in. */
export class RangeCall implements Cancelable, ChunkOwner {
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
  /** The transport each chunk goes with: held whole, safe to send again. */
  private readonly chunkTransport: Transport & { readonly hold: true };
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
    private readonly host: RangeHost,
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
    // Each chunk held whole, safe to send again; its body is its own, and so is its Call (chunkRequest).
    this.chunkTransport = { ...request.transport, hold: true, idempotent: true, emptyOk: false, maxBuffer: MAX_HELD };
    this.filter = call.params[0] as Record<string, unknown>;
    this.asItCame = !(host.cached && (typeof call.from !== 'number' || typeof call.block !== 'number') && host.view.isFinal(to));
  }

  start(): void {
    this.placed = this.host.place(this.group);
    // A range within a cap goes whole: on a chain of one upstream without a cache, streamed as any call there.
    const whole = this.to - this.from + 1 <= this.placed.width;
    if (whole && this.streamsWhole()) return this.sendJudged();
    this.deadline = setTimeout(this.expire, timeLeft(this.request.transport.deadline));
    this.deadline.unref();
    if (whole) return this.split();
    this.atHead(() => {
      if (this.clamp()) this.split();
    });
  }

  /** A chunk's request (or the head's): its Call and its bytes, with the chunks' transport, still of the client's batch where it came in one. */
  private chunkRequest(call: Call, maxBuffer = MAX_HELD): HeldRequest {
    return { calls: { one: call, together: this.request.calls.together }, transport: { ...this.chunkTransport, body: call.body, maxBuffer } };
  }

  /** The range (clamped, where it is split) in chunks of the placed width, queued and sent. */
  private split(): void {
    const width = this.placed.width;
    // A wider one on a cached chain is split on multiples of the width.
    const aligned = this.host.cached && this.to - this.from + 1 > width;
    const chunks = splitRange(this.from, this.to, width, aligned);
    if (aligned) widen(chunks, width, (b) => this.host.view.isFinal(b));
    // More requests than one call may cost: refused as a range over limits.maxLogRange is, naming the widest that fits.
    if (chunks.length > MAX_CHUNK_SENDS) return this.refuse(width * MAX_CHUNK_SENDS, `more than ${MAX_CHUNK_SENDS} requests to the upstreams can ask`);
    if (chunks.length > 1 && this.placed.paced) {
      const fits = budgetFits(this.placed.takers, this.request.transport.deadline);
      if (chunks.length > fits) return this.refuse(Math.max(1, fits) * width, "more than the upstreams' rateLimit lets be asked within timeoutMs");
    }
    // A clamped range is no longer the client's call: even as one chunk it goes by number.
    const whole = chunks.length === 1 && !this.clamped;
    for (const c of chunks) this.queue.push({ ...c, whole, tried: new Set() });
    this.pump();
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
    t.running = this.host.inner(t, this.chunkRequest(new Call(body, 'eth_blockNumber', ID_AT, ID_AT + 1), 4096), this.group);
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
  private streamsWhole(): boolean {
    return !this.host.pooled && !this.host.cached && streams(this.request);
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
    this.deadline = setTimeout(this.expire, timeLeft(this.request.transport.deadline));
    this.deadline.unref();
    this.complain(t.chunk, u, error, complaint);
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
      const wait = waitFor(this.placed, group);
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
      t.running = this.host.inner(t, this.chunkRequest(call), group);
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
   * A chunk's call: the client's own where the chunk is its whole range as it
   * came; else one the gateway writes, whose Call is made of the document it
   * wrote (its id where it wrote it), so no layer below parses or scans it.
   */
  private chunkCall(c: Chunk): Call {
    if (c.whole === true && this.asItCame) return this.call;
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
    const cache = cacheSays(this.cache);
    if (streams(this.request)) {
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
      sendOwn(this.target, this.request, u, Buffer.concat(parts), cache);
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

  /** A node's error, which every upstream asked gave (or that is the call's own fault), under the client's id. */
  private answerError(u: Upstream, error: Record<string, unknown>): void {
    this.over = true;
    this.end();
    this.drop();
    sendOwn(this.target, this.request, u, Buffer.from(`{"jsonrpc":"2.0","id":${this.call.idJson},"error":${JSON.stringify(error)}}`), cacheSays(this.cache) === undefined ? undefined : 'miss');
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
