// A JSON-RPC batch through a pool (a client's, or the part of it the cache
// does not take): split at the pool's entry into its calls, each of which goes
// through the pool's single-call path as if it had come alone (served tip, tag
// rewriting, block routing, tries again, quorum, broadcast, hedge), one
// upstream request (or more) per call; on a cached chain the forward layer
// below puts the calls bound for the same upstreams back into one upstream
// batch (jsonrpc/forward-batch.ts). The answers are merged in the batch's order, each with
// the id bytes its call came with (docs/upstreams.md, "What a pool does"), or,
// where the target keeps the client batch's merge plan (the front's for the
// rest it did not take, a route's whose guard refused calls), handed to that
// plan each in its slot (dispatch.ts ItemsTaker): the answer is joined once:
//  - a call that fails (no usable upstream, timeout, an answer that is not
//    JSON-RPC) gets the gateway's error for that failure in its slot, as a
//    lone call's failure is answered (its interface's envelope, with the
//    call's id: EVM's -32052, -32051, -32050, -32053), and the others are
//    answered;
//  - when every call fails, the batch fails as one call does (the route's
//    error envelope, the cache's failed flights), as it did when sent whole;
//  - a notification (no id) goes through the pool alone too; it has no slot
//    (nodes answer nothing for it), and the batch is answered once it is done.
//    A batch of notifications only is sent whole, and gets what a node gives;
//  - the calls' answers are held counted under forward.ts's MAX_HELD_BYTES until
//    the client has the batch's answer (one that would pass it fails as an
//    answer too large to hold, -32053), and an answer the client takes as a
//    stream is written from them as they are (a merged eth_getLogs range's
//    from its chunks: PartsTaker), not copied into one.
import { forwardAs, JSON_HEADERS, streamParts, streams, takesItems, type Call, type Cancelable, type Dispatch, type FailKind, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget } from '../dispatch.ts';
import { holdBytes, releaseHeld } from '../upstreams/forward.ts';
import { rpcErrorWithId } from '../jsonrpc/batch-merge.ts';
import type { Envelope } from '../envelope.ts';
import { CLOSE, COMMA, OPEN } from '../jsonrpc/scan.ts';
import { answerOf } from '../jsonrpc/answer.ts';
import type { Logger } from '../observe/log.ts';
import type { Upstream, UpstreamGroup } from '../upstreams/upstream.ts';

/**
 * A client batch sent through `single` call by call; null when `request` is
 * not a batch with a call to answer (a single call, a batch of notifications
 * only): the caller sends it as it is. Each call goes to the chain's
 * upstreams, whatever group the batch was bound for.
 */
export function splitBatch(single: Dispatch, envelope: Envelope, log: Logger, chain: string, target: HeldTarget, request: ForwardRequest): Cancelable | null {
  const batch = request.calls.batch;
  if (batch === undefined) return null;
  // The guard's calls, each its own bytes and id: nothing is read of the body again. (A call with no bytes of its own
  // is none of a JSON-RPC batch's: sent as it is.)
  let answered = false;
  const calls: ItsBytes[] = [];
  for (const c of batch) {
    if (!hasBytes(c)) return null;
    if (c.idFrom >= 0) answered = true;
    calls.push(c);
  }
  if (!answered) return null;
  const split = new PoolBatch(target, request, calls, envelope, log, chain);
  split.start(single);
  return split;
}

/**
 * A layer that sends each client batch through `single` call by call (as
 * splitBatch does), and anything else as it is: for a chain of one upstream
 * with a `rateLimit`, whose forward layer then sends the calls together only
 * as far as the budget has room (a batch costs its calls: jsonrpc/forward-batch.ts).
 */
export function splitBatches(single: Dispatch, envelope: Envelope, log: Logger, chain: string): Dispatch {
  const dispatch: Dispatch = (target: HeldTarget, request: ForwardRequest, group?: UpstreamGroup) =>
    splitBatch(dispatch, envelope, log, chain, target, request) ?? single(target, request as HeldRequest, group);
  return dispatch;
}

/** A call of a JSON-RPC batch: its own bytes of the batch's body. */
type ItsBytes = Call & { readonly body: Buffer | string };

function hasBytes(c: Call): c is ItsBytes {
  return c.body !== null;
}

/** A call's id as it came (a long number keeps its digits); null: a notification. */
function idOf(c: ItsBytes): string | null {
  const from = c.idFrom;
  const b = c.body;
  if (from < 0) return null;
  return typeof b === 'string' ? Buffer.from(b).toString('utf8', from, c.idTo) : b.toString('utf8', from, c.idTo);
}

/**
 * A held call's target that takes an answer a layer made of parts (the
 * ranges layer's merged logs: kinds/evm/log-ranges.ts) as they are, with the bytes
 * they hold counted under forward.ts's MAX_HELD_BYTES (`held`): from then on
 * the taker lets go of them. The parts carry the call's own id.
 */
export interface PartsTaker {
  takeParts(u: Upstream, parts: readonly Buffer[], held: number): void;
}

/** A call that got no answer: why, and from which upstream. */
interface Failed {
  readonly fail: FailKind;
  readonly upstream: Upstream | null;
}

class PoolBatch implements Cancelable {
  /** Per call: its answer item (or its parts), or why it failed; undefined while it runs (and for notifications). */
  private readonly got: (Buffer | readonly Buffer[] | Failed | undefined)[];
  private readonly running: Cancelable[] = [];
  /** Calls still out, plus one until every call is sent. */
  private pending = 1;
  private over = false;
  /** The first upstream that answered a call: the merged answer's. */
  private upstream: Upstream | null = null;
  /** Bytes of the answers held, counted under forward.ts's MAX_HELD_BYTES until the client has the batch's answer (or it fails). */
  private held = 0;
  /** Each call's id as it came; null: a notification. */
  private readonly ids: readonly (string | null)[];

  constructor(
    private readonly target: HeldTarget,
    private readonly request: ForwardRequest,
    private readonly calls: readonly ItsBytes[],
    /** The chain's interface's failures, each a call's answer with its id. */
    private readonly envelope: Envelope,
    private readonly log: Logger,
    private readonly chain: string,
  ) {
    this.got = new Array<Buffer | readonly Buffer[] | Failed | undefined>(calls.length);
    this.ids = calls.map(idOf);
  }

  start(single: Dispatch): void {
    // Each call's answer is held: it is one item of the batch's answer. The calls are one client batch: those the
    // pool sends to the same upstreams may go there together (jsonrpc/forward-batch.ts).
    // Each is sent again after a 5xx or a timeout only if it is no write itself.
    const together = this.request.calls.together ?? this;
    for (let i = 0; i < this.calls.length && !this.over; i++) {
      const c = this.calls[i]!;
      this.pending++;
      const one = forwardAs(this.request, { one: c, together }, c.body, { hold: true, emptyOk: this.ids[i] === null, idempotent: !c.write });
      this.running.push(single(new CallTarget(this, i), one as HeldRequest));
    }
    this.settle();
  }

  cancel(): void {
    this.over = true;
    for (const c of this.running) c.cancel();
    this.drop();
  }

  /** The answers held are let go: counted no more under MAX_HELD_BYTES. */
  private drop(): void {
    releaseHeld(this.held);
    this.held = 0;
    this.got.fill(undefined);
  }

  /** Call `i`'s outcome. */
  done(i: number, r: ForwardResult): void {
    if (this.over) return;
    const idJson = this.ids[i]!;
    if (idJson !== null) this.got[i] = this.item(r, idJson);
    this.settle();
  }

  /** Call `i`'s answer, as parts a layer made of it (PartsTaker): held as they are, counted already. */
  taken(i: number, u: Upstream, parts: readonly Buffer[], held: number): void {
    if (this.over) return releaseHeld(held);
    this.held += held;
    this.upstream ??= u;
    if (this.ids[i] !== null) this.got[i] = parts;
    this.settle();
  }

  /** The answer item of a call, with the id it came with; or why there is none. */
  private item(r: ForwardResult, idJson: string): Buffer | Failed {
    if (r.kind === 'buffered') {
      const s = answerOf(r.body).spans;
      if (s !== null && s.idStart !== -1 && (s.resultStart !== -1 || s.hasError)) {
        // Held until the client has the batch's answer, counted with every answer held: past the bound, the call fails as an answer too large to hold does.
        if (!holdBytes(r.body.length)) return { fail: 'bad-response', upstream: r.upstream };
        this.held += r.body.length;
        if (this.upstream === null) this.upstream = r.upstream;
        const id = r.body.toString('utf8', s.idStart, s.idEnd);
        return id === idJson ? r.body : Buffer.concat([r.body.subarray(0, s.idStart), Buffer.from(idJson), r.body.subarray(s.idEnd)]);
      }
      this.log.warn({ event: 'upstream_bad_response', chain: this.chain, upstream: r.upstream.name, status: r.status }, 'upstream answer is not JSON-RPC (a call of a batch)');
    } else if (r.kind === 'failed' && r.upstream !== null && r.logged !== true) {
      this.log.warn({ event: 'upstream_failed', chain: this.chain, upstream: r.upstream.name, fail: r.fail }, 'upstream failed (a call of a batch)');
    }
    // 'aborted' here is an answer that broke off: as a lost connection.
    return { fail: r.kind === 'failed' ? r.fail : r.kind === 'buffered' ? 'bad-response' : 'unavailable', upstream: r.upstream };
  }

  private settle(): void {
    if (--this.pending !== 0 || this.over) return;
    this.over = true;
    const items: (Buffer | readonly Buffer[])[] = [];
    let first: Failed | null = null;
    let ok = 0;
    for (let i = 0; i < this.calls.length; i++) {
      const idJson = this.ids[i]!;
      if (idJson === null) continue;
      const g = this.got[i]!;
      if (Buffer.isBuffer(g) || Array.isArray(g)) {
        ok++;
        items.push(g as Buffer | readonly Buffer[]);
      } else {
        first ??= g as Failed;
        items.push(Buffer.from(rpcErrorWithId(this.envelope[(g as Failed).fail].body, idJson)));
      }
    }
    const t = this.target;
    const u = this.upstream;
    // No call answered: the batch fails as one call does, with its first call's failure.
    if (ok === 0 || u === null) {
      this.drop();
      return t.forwarded({ kind: 'failed', fail: first?.fail ?? 'unavailable', upstream: first?.upstream ?? null });
    }
    // A plan of the client's batch (ItemsTaker: the front's for its rest, the route's with refused calls) takes the
    // answers in their slots, and the bytes held with them: as much as the joined answer would be (brackets and
    // commas), within its maxBuffer as that answer is.
    if (takesItems(t)) {
      let length = items.length + 1;
      for (const it of items) length += Buffer.isBuffer(it) ? it.length : (it as readonly Buffer[]).reduce((n, p) => n + p.length, 0);
      if (length > this.request.transport.maxBuffer) {
        this.drop();
        return t.forwarded({ kind: 'failed', fail: 'bad-response', upstream: u });
      }
      const held = this.held;
      this.held = 0;
      this.got.fill(undefined);
      return t.takeItems(u, items, held);
    }
    const parts: Buffer[] = [OPEN];
    for (const it of items) {
      if (parts.length > 1) parts.push(COMMA);
      if (Buffer.isBuffer(it)) parts.push(it);
      else parts.push(...it);
    }
    parts.push(CLOSE);
    // As the route asked: an answer it would stream is written from the calls' answers as they are, held until the response is done.
    if (streams(this.request)) return streamParts(t as ForwardTarget, u, parts, () => this.drop());
    // The rest goes to its rewrite (or the cache) as one buffer, within its maxBuffer.
    try {
      const body = Buffer.concat(parts);
      if (body.length > this.request.transport.maxBuffer) return t.forwarded({ kind: 'failed', fail: 'bad-response', upstream: u });
      t.forwarded({ kind: 'buffered', upstream: u, status: 200, headers: JSON_HEADERS, body });
    } finally {
      this.drop();
    }
  }
}

/** Where one call's outcome goes: its slot in the batch. */
class CallTarget implements HeldTarget, PartsTaker {
  constructor(
    private readonly batch: PoolBatch,
    private readonly i: number,
  ) {}

  forwarded(r: ForwardResult): void {
    this.batch.done(this.i, r);
  }

  takeParts(u: Upstream, parts: readonly Buffer[], held: number): void {
    this.batch.taken(this.i, u, parts, held);
  }
}
