// The seam every upstream request of a chain crosses, and its types: the
// call, the request (its calls and its transport), its outcome, the targets
// that take it, and the Dispatch each layer is and takes (undici's
// interceptors are so: a layer takes the dispatch below it and is a dispatch
// itself). chains.ts composes them: admission's admit step and the cache's
// front at the top (their target is a client's exchange), the module's layer,
// the cache's layer, the pool, the forward batches, and the plain dispatch at
// the bottom, one Forward per request (upstreams/forward.ts), which reads the
// request's transport alone. It imports nothing of kinds/: each kind's calls
// implement its Call.
import type { ServerResponse } from 'node:http';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Upstream, UpstreamGroup } from './upstreams/upstream.ts';
import { CLOSE, COMMA, OPEN } from './jsonrpc/scan.ts';

/** throttled: every upstream the request could go to throttled it, or is in a throttle's cooldown (throttle.ts). */
export type FailKind = 'unavailable' | 'timeout' | 'no-upstream' | 'bad-response' | 'throttled';

/**
 * What to do with an answer: stream it straight to the client, buffer it (the
 * caller rewrites it), or treat it as a failed attempt ('bad': a 5xx, or
 * something that is not an answer of this interface) and try another upstream
 * where that is safe.
 */
export type Verdict = 'stream' | 'buffer' | 'bad';

/**
 * A block a call names, as its kind reads it: a height, a tag the kind knows
 * (EVM's `latest`, `safe`...), or a hash alone; null: none, or none the
 * gateway can be sure of.
 */
export type CallBlock = number | string | { readonly hash: string } | null;

/**
 * One call as it crosses the layers, whatever its kind (EVM's
 * kinds/evm/call.ts, a Blockbook or Rosetta document call,
 * kinds/doc-call.ts): the guard makes it of what it read, once, and every
 * layer reads it instead of the bytes. A kind's own layers read the rest of
 * their kind's Call (EVM: the method's traits, a range's ends).
 */
export interface Call {
  /** The JSON-RPC method, or the document endpoint: what admission charges and counts, and a kind's rules are keyed by. */
  readonly method: string;
  /** The call's own bytes, as they go upstream; null where the request's body is not the call alone (a GET's path). */
  readonly body: Buffer | string | null;
  /** Where its id is in `body`, [idFrom, idTo), found once when first asked; -1: it has none (a notification, a document call). */
  readonly idFrom: number;
  readonly idTo: number;
  readonly block: CallBlock;
  /** It sends, signs or changes something on a node: sent once, never again after a 5xx or a timeout. */
  readonly write: boolean;
  /** Its parameters, parsed when first asked (once); undefined where it has none the gateway reads. */
  readonly params: unknown;
}

/**
 * What a request carries: one call, or a client's batch of them in order
 * (each with its own bytes of the body): a batch says so, and nobody asks the
 * body's first byte. `together`: the calls of one client batch share it
 * (the batch, and each of its calls a layer sends alone), so that the forward
 * layer sends them to a node together, with cache.batch 1 too
 * (jsonrpc/forward-batch.ts). A kind's own layers find what they need back on
 * its Calls (EVM: a client batch's merge plan, kinds/evm/call.ts; Blockbook:
 * its tail, kinds/doc-call.ts).
 */
export type Calls<C extends Call = Call> =
  | { readonly one: C; readonly batch?: undefined; readonly together?: object }
  | { readonly batch: readonly C[]; readonly one?: undefined; readonly together?: object };

/**
 * What a request is to Forward: the HTTP exchange with an upstream, and how
 * its answer is judged. Forward reads nothing else; the layers above read the
 * calls.
 */
export interface Transport {
  readonly method: 'GET' | 'POST';
  /** Path and query on the upstream, given the upstream. */
  readonly path: (u: Upstream) => string;
  /** Request headers as a flat [name, value, ...] list (undici takes it as is). */
  readonly headers: string[];
  /**
   * The calls' bytes as they go (the Call's own for one call, a batch's for
   * many); null for a GET, and for a batch a layer split of a client's
   * (its Calls, each with its own bytes): the layers below read its Calls, and
   * its bytes are joined only where it is sent as one body (`sentBody`).
   */
  readonly body: Buffer | string | null;
  /** Safe to send again after a 5xx or timeout: no call of the body is a write. */
  readonly idempotent: boolean;
  readonly retries: number;
  /** Largest answer the gateway will hold in memory when it must rewrite it. */
  readonly maxBuffer: number;
  /**
   * The call's one deadline, on performance.now()'s clock: the route sets it
   * (its timeoutMs from when the call was read), and every layer below keeps
   * it. Every attempt's wait for an answer's head, an answer held whole, a
   * pool's wait and hedges, a range's chunks and the retries all end by it
   * (each gets what is left, timeLeft; none once it is over).
   */
  readonly deadline: number;
  /** A 2xx with no body is a good answer (JSON-RPC notifications); otherwise only a 304 may be empty. */
  readonly emptyOk: boolean;
  readonly classify: (status: number, headers: IncomingHttpHeaders) => Verdict;
  /** Only upstreams this accepts may take the request (a pool's routing: far enough ahead, an archive node); absent: any. */
  readonly accept?: (u: Upstream) => boolean;
  /** Upstreams the request must not go to (already asked, by a hedge or a retry of the pool). */
  readonly skip?: ReadonlySet<Upstream>;
  /** Whether a 2xx answer held whole is an answer of this interface (a pool's JSON-RPC check); absent: any body but an empty one. */
  readonly isAnswer?: (body: Buffer) => boolean;
  /**
   * The call went in a batch whose upstream answered it with a throttle error
   * (jsonrpc/forward-batch.ts): that answer counts with this call's others as one
   * seen in a body (Forward.throttledInBody); `skip` holds the upstream.
   */
  readonly throttledIn?: ThrottleSeen;
  /** The calls the body carries, each a token of an upstream's budget (upstream-budget.ts): a batch's count (jsonrpc/forward-batch.ts); absent: one. */
  readonly cost?: number;
  /** Whether an answer held whole (not a 5xx), or a short streamed one (Judge), says the upstream throttled the call (EVM's JSON-RPC -32005 in a 200, every EVM chain); absent: only a 429 does. */
  readonly throttled?: (body: Buffer) => boolean;
  /**
   * Hold every answer whole, also those `classify` would stream: a layer that
   * judges, keeps or merges the answer before the client sees it (the cache's
   * flights, a pool's legs). Its target is a `HeldTarget`: nothing is streamed
   * into it.
   */
  readonly hold?: boolean;
}

/**
 * A request: the calls it carries, and their bytes' exchange with an upstream.
 * A layer that sends other bytes (a rewritten call, a batch's part) makes a
 * request of its own with the calls those bytes are (forwardAs).
 */
export interface ForwardRequest<C extends Call = Call> {
  readonly calls: Calls<C>;
  readonly transport: Transport;
}

/** `request` with its transport changed by `t` (a held copy, a pool's routing, a larger maxBuffer), the same calls. */
export function withTransport<C extends Call>(request: ForwardRequest<C>, t: Partial<Transport>): ForwardRequest<C> {
  return { calls: request.calls, transport: { ...request.transport, ...t } };
}

/** `request` held whole (`hold`), its transport otherwise changed by `t`: for a layer that judges, keeps or merges its answer. */
export function held<C extends Call>(request: ForwardRequest<C>, t?: Partial<Transport>): HeldRequest<C> {
  return { calls: request.calls, transport: { ...request.transport, ...t, hold: true } };
}

/**
 * A request for `calls` whose bytes are `body` (their own, or those of
 * another made of them), otherwise as `request` goes; null: a batch of Calls
 * whose bytes are joined only if it is sent whole (`sentBody`).
 */
export function forwardAs<C extends Call>(request: ForwardRequest, calls: Calls<C>, body: Buffer | string | null, t?: Partial<Transport>): ForwardRequest<C> {
  return { calls, transport: { ...request.transport, ...t, body } };
}

/**
 * The bytes `request` sends upstream: its transport's, or, for a batch of
 * Calls a layer left unjoined, their own bytes joined as one JSON-RPC batch,
 * in order. Asked only where a body is sent (the plain dispatch), so a batch
 * the layers below split again into its calls is never joined.
 */
export function sentBody(request: ForwardRequest): Buffer | string | null {
  const body = request.transport.body;
  const batch = request.calls.batch;
  if (body !== null || batch === undefined) return body;
  const parts: Buffer[] = [OPEN];
  for (const c of batch) {
    if (c.body === null) return null;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(typeof c.body === 'string' ? Buffer.from(c.body) : c.body);
  }
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

/** An upstream's throttle error in a body, not yet marked: the upstream, its answer's headers and body, and when the call was sent (epoch ms). */
export interface ThrottleSeen {
  readonly u: Upstream;
  readonly headers: IncomingHttpHeaders;
  readonly sentAt: number;
  readonly body: Buffer;
}

/**
 * What is left of a request's `deadline` at `now`, in whole ms for a timer
 * or a wait: at least 1 while any is left, 0 once it is over. The one place
 * the time left of a call is worked out.
 */
export function timeLeft(deadline: number, now = performance.now()): number {
  const left = deadline - now;
  return left < 1 ? 0 : Math.round(left);
}

/**
 * A split batch's target that keeps the merge plan of the batch it is part of,
 * or is (the cache's front for the rest of a client batch,
 * kinds/evm/cache-batch.ts; a route whose guard answered some calls itself,
 * kinds/evm/module.ts): it takes each call's answer in its slot as it is, with
 * the bytes they hold counted under forward.ts's MAX_HELD_BYTES (`held`: from
 * then on the taker lets go of them), so the client's answer is joined once,
 * by that plan, and never joined by the splitter only to be split again
 * (pool/batch.ts).
 */
export interface ItemsTaker {
  /** Whether it keeps such a plan for this request; false: the batch's answer comes to it joined, as any answer. */
  readonly takesItems: boolean;
  /** Per call with an id, in the batch's order: its answer item (or a merged one's parts), or the gateway's error for it. */
  takeItems(u: Upstream, items: readonly (Buffer | readonly Buffer[])[], held: number): void;
}

/** Whether `t` takes a split batch's answers in their slots (ItemsTaker). */
export function takesItems(t: HeldTarget): t is HeldTarget & ItemsTaker {
  return (t as Partial<ItemsTaker>).takesItems === true;
}

/** A request whose answers are held whole (`hold`), for a target nothing streams into. */
export type HeldRequest<C extends Call = Call> = ForwardRequest<C> & { readonly transport: { readonly hold: true } };

/** What Forward writes a streamed answer into: a client's response. */
export type Sink = Pick<ServerResponse, 'destroyed' | 'headersSent' | 'write' | 'end' | 'once' | 'destroy'>;

/** Where the outcome of a held request goes (`hold`): only the outcome, never a streamed byte. */
export interface HeldTarget {
  /** Called once, with the outcome. */
  forwarded(r: ForwardResult): void;
  /**
   * Told, before the outcome comes (before a streamed answer's head), how
   * the cache's layer took part in it (kinds/evm/cache-logs.ts): the answer came
   * from memory, joined a call in flight, or was sent for it; for an answer
   * the ranges layer made of chunks, what its chunks say together. A target
   * that reports it (X-Cache) or counts it listens.
   */
  cacheSaid?(c: CacheSays): void;
}

/** How the cache's layer took part in an answer. */
export type CacheSays = 'hit' | 'coalesced' | 'miss';

/** The request's side of forwarding that can be streamed to: a client's exchange. */
export interface ForwardTarget extends HeldTarget {
  readonly res: Sink;
  /** Writes status and headers on the client response; the body follows. */
  streamHead(status: number, headers: IncomingHttpHeaders, u: Upstream): void;
}

export type ForwardResult =
  | { readonly kind: 'streamed'; readonly upstream: Upstream; readonly status: number }
  | {
      readonly kind: 'buffered';
      readonly upstream: Upstream;
      readonly status: number;
      readonly headers: IncomingHttpHeaders;
      readonly body: Buffer;
    }
  /** retryAfter: seconds until the soonest throttled upstream is free again (fail 'throttled'). */
  /** logged: the layer that failed it logged it (once for a batch of calls): its receivers do not. */
  | { readonly kind: 'failed'; readonly fail: FailKind; readonly upstream: Upstream | null; readonly retryAfter?: number; readonly logged?: boolean }
  /** The client went away, or the answer broke after it had started. */
  | { readonly kind: 'aborted'; readonly upstream: Upstream | null };

/** The headers of a JSON answer a layer made itself (a merged batch or range, an answer from memory, the served tip). */
export const JSON_HEADERS = { 'content-type': 'application/json' } as const;

/** What a request under way can be told: the client went away. */
export interface Cancelable {
  cancel(): void;
}

/** Nothing to cancel: an answer already made, or a request nobody calls back. */
export const NOTHING: Cancelable = { cancel: () => undefined };

/** One attempt under way: what it can be told, and the upstream it went to (null: none could take it). */
export interface Attempt extends Cancelable {
  readonly upstream: Upstream | null;
}

/**
 * A layer, and what each layer takes (the one below it): sends `request` on
 * (to `group`'s upstreams, the chain's by default), and `target` gets the
 * outcome once. It returns what the client's going away cancels: NOTHING
 * where there is nothing now (the layer answered the call itself, joined it
 * to a flight, or sends it on later and says so in the client's `forward`).
 *  - `T`: what a request that is not held may be streamed into, and `H`:
 *    what a held one's outcome goes to. Below the top a held request needs
 *    only a HeldTarget; the top layers (admission's admit step, the cache's
 *    front) take the client itself for both (`Dispatch<ClientTarget>`, from
 *    exchange.ts), which they may answer.
 *  - `A`: what one attempt is, where the layer above reads its upstream (the
 *    plain dispatch's: an Attempt, Forward's own retries in it:
 *    `Dispatch<ForwardTarget, Attempt>`).
 */
export interface Dispatch<in T extends ForwardTarget = ForwardTarget, out A extends Cancelable = Cancelable, in H extends HeldTarget = ForwardTarget extends T ? HeldTarget : T> {
  (target: T, request: ForwardRequest, group?: UpstreamGroup): A;
  (target: H, request: HeldRequest, group?: UpstreamGroup): A;
}

/**
 * Whether `request`'s sender would have an answer of `status` and `headers`
 * streamed to it (it did not ask for it held, and its classify streams it):
 * by default, a JSON 200 a layer made itself.
 */
export function streams(request: ForwardRequest, status = 200, headers: IncomingHttpHeaders = JSON_HEADERS): boolean {
  const t = request.transport;
  return t.hold !== true && t.classify(status, headers) === 'stream';
}

/**
 * An answer a layer held to judge it (a pool's legs, a batch's calls), handed
 * to the sender of `request` as it asked: one it would have had streamed is
 * written to its client as it came; the rest goes to it whole (to its rewrite,
 * the cache, a batch).
 */
export function deliver(target: HeldTarget, request: ForwardRequest, r: ForwardResult): void {
  if (r.kind === 'buffered' && streams(request, r.status, r.headers)) {
    const t = target as ForwardTarget;
    t.streamHead(r.status, { ...r.headers, 'content-length': String(r.body.length) }, r.upstream);
    t.res.end(r.body);
    return t.forwarded({ kind: 'streamed', upstream: r.upstream, status: r.status });
  }
  target.forwarded(r);
}

/**
 * A JSON answer a layer made of parts it holds (a merged range's chunks, a
 * split batch's answers), written to a client that takes a stream as they
 * are, not copied into one; `done` runs once the response is over (the parts
 * may be let go), also when the client is gone already.
 */
export function streamParts(t: ForwardTarget, u: Upstream, parts: readonly Buffer[], done: () => void): void {
  const res = t.res;
  if (res.destroyed) {
    done();
    return t.forwarded({ kind: 'aborted', upstream: u });
  }
  let length = 0;
  for (const p of parts) length += p.length;
  t.streamHead(200, { ...JSON_HEADERS, 'content-length': String(length) }, u);
  res.once('close', done);
  for (const p of parts) res.write(p);
  res.end();
  t.forwarded({ kind: 'streamed', upstream: u, status: 200 });
}
