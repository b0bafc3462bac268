// One request and its answer: what it did (for the access log and metrics),
// and the one place that answers it, whether with the gateway's own answer in
// the interface's envelope, an upstream answer streamed, or one the interface
// rewrote. One object per request.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import { RESETS_AT, type Envelope, type Failure, type Refused } from './envelope.ts';
import type { KeyEntry } from './keys/keys.ts';
import type { Logger } from './observe/log.ts';
import { isPrintable, nextRequestId } from './observe/request-id.ts';
import type { RouteMetrics } from './observe/metrics.ts';
import { lingerAfterAnswer } from './process/linger.ts';
import { NOTHING, type Cancelable, type Dispatch, type ForwardRequest, type ForwardResult, type ForwardTarget, type ItemsTaker } from './dispatch.ts';
import { endToEndHeaders, releaseHeld } from './upstreams/forward.ts';
import type { Upstream } from './upstreams/upstream.ts';
import type { RequestTracker } from './observe/tracker.ts';
import { RETRY_SOON } from './upstreams/throttle.ts';

export type BufferedResult = Extract<ForwardResult, { kind: 'buffered' }>;

/** A chain's request flow, made once per chain by its interface. */
export interface RouteHandler {
  /** `rest` is the path after the chain's segment, `query` the text after `?`. */
  handle(x: Exchange, rest: string, query: string): void;
  /** An upstream answer the handler asked to see whole (see dispatch.ts Transport.classify). */
  rewrite(x: Exchange, r: BufferedResult): void;
  /**
   * The gateway's own failure `body` (made once, with no request-specific
   * part) as the answer to this request, where the interface names what it
   * answers (EVM: the calls' ids, once the body is read); absent: as it is.
   */
  failed?(x: Exchange, body: string): string;
  /**
   * Whether it merges a split batch's answers itself, each in its slot (its
   * own plan: EVM's batch its guard answered in part), rather than from the
   * batch's answer joined (`rewrite`): dispatch.ts ItemsTaker. Absent: never.
   */
  takesItems?(x: Exchange): boolean;
  /** The split batch's answers, per call with an id in order, for the plan `takesItems` said it keeps. */
  takeItems?(x: Exchange, items: readonly (Buffer | readonly Buffer[])[]): void;
}

/** What every exchange of a server shares: made once, it knows nothing of the server itself. */
export interface ExchangeContext {
  readonly log: Logger;
  /** Adds the CORS headers for `origin` to a response's header list (the manifest's policy). */
  readonly cors: (origin: string, out: string[]) => void;
  /** Requests under way: told when each is over, and whether the server drains. */
  readonly tracker: RequestTracker;
}

/**
 * A client as the top layers of a chain see it (their Dispatch's target,
 * dispatch.ts): what a layer there (admission's admit step, the cache's
 * front) may answer itself, with no upstream request (a refusal, a hit, a
 * constant, a client batch merged of its parts), or hand on down as the
 * target of the chain's dispatch. The
 * Exchange is one; cache/common.ts's FlightMember is the part a flight's
 * clients share.
 */
export interface ClientTarget extends ForwardTarget {
  /** The request id, for the log and the upstream's X-Request-Id. */
  readonly id: string;
  /** The client's request: its headers (what shapes an answer: Accept, Accept-Encoding...; the JWT). */
  readonly req: IncomingMessage;
  /** The key, verified before the body was read (admission.ts identify). */
  readonly key: KeyEntry | null;
  /** A single call's method or the endpoint; 'batch' for a batch. */
  readonly label: string;
  upstream: Upstream | null;
  /** X-Cache and the access log's field. */
  cacheTag: readonly string[] | null;
  cacheLog: string;
  /** X-RateLimit-* and X-Credits-Used, for a key with a rate limit or quota. */
  limitHeaders: readonly string[] | null;
  /** What the client's going away cancels: set by a layer that sends on later (admission waiting for jose or a store). */
  forward: Cancelable | null;
  /** A refusal, in the interface's envelope (Retry-After, a quota's resetsAt). */
  refuse(r: Refused): void;
  /** The gateway's own answer. */
  send(status: number, body: string | Buffer, extra?: readonly string[]): void;
  /** A failure, in the interface's envelope. */
  fail(f: Failure, extra?: readonly string[]): void;
  /** An upstream's answer held whole, passed on as it came. */
  passOn(status: number, headers: IncomingHttpHeaders, body: Buffer): void;
  internal(err: unknown): void;
  later(step: () => void): void;
}

export class Exchange implements ClientTarget, ItemsTaker {
  readonly id: string;
  /** The id as JSON text, for the access log. */
  readonly idJson: string;
  readonly start = performance.now();
  /** The key's entry, once the key is verified. */
  key: KeyEntry | null = null;
  /** The chain's counters (the no-chain ones until a route matches); they know its interface. */
  metrics: RouteMetrics;
  /** The failures' answers: the listener's until a chain matches, then its interface's. */
  envelope: Envelope;
  /** The chain's flow, once one matches. */
  handler: RouteHandler | null = null;
  /** What the handler needs to rewrite the answer or a failure (EVM: the guard's decision, once the body is read). */
  plan: unknown = null;
  /** On chains with a cache: the X-Cache header every answer carries, and the access log's field. */
  cacheTag: readonly string[] | null = null;
  cacheLog = '';
  /** For a key with a rate limit or quota: X-RateLimit-* and X-Credits-Used. */
  limitHeaders: readonly string[] | null = null;
  /** RPC method (allowlisted only), 'batch', 'refused', or a Rosetta/Blockbook endpoint. */
  label = '-';
  upstream: Upstream | null = null;
  /** Bytes the socket had written before this request, for the access log. */
  readonly written: number;
  /** The forwarding under way, if any: cancelled when the client goes away. */
  forward: Cancelable | null = null;
  /** Runs once the response is over, finished or not. */
  readonly closed = (): void => this.host.tracker.done(this);

  constructor(
    readonly host: ExchangeContext,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    none: RouteMetrics,
    envelope: Envelope,
  ) {
    this.written = req.socket.bytesWritten;
    this.metrics = none;
    this.envelope = envelope;
    const given = req.headers['x-request-id'];
    if (typeof given === 'string' && given.length > 0 && given.length <= 128 && isPrintable(given)) {
      this.id = given;
      this.idJson = JSON.stringify(given);
    } else {
      this.id = nextRequestId();
      this.idJson = `"${this.id}"`;
    }
  }

  /** The gateway's own answer. */
  send(status: number, body: string | Buffer, extra?: readonly string[]): void {
    const res = this.res;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const headers =
      status === 204
        ? ['x-request-id', this.id]
        : ['x-request-id', this.id, 'content-type', 'application/json', 'content-length', String(typeof body === 'string' ? Buffer.byteLength(body) : body.length)];
    if (extra !== undefined) for (let i = 0; i < extra.length; i++) headers.push(extra[i]!);
    this.ownHeaders(headers);
    res.writeHead(status, headers);
    res.end(status === 204 ? undefined : body);
  }

  /** What the gateway adds to every answer, its own or an upstream's: X-Cache, the X-RateLimit headers, CORS, and `connection: close` while draining. */
  private ownHeaders(headers: string[]): void {
    const tag = this.cacheTag;
    if (tag !== null) headers.push(tag[0]!, tag[1]!);
    const limits = this.limitHeaders;
    if (limits !== null) for (let i = 0; i < limits.length; i++) headers.push(limits[i]!);
    const origin = this.req.headers.origin;
    if (origin !== undefined) this.host.cors(origin, headers);
    if (this.host.tracker.draining) headers.push('connection', 'close');
  }

  /** An upstream's answer held whole, passed on as it came (its end-to-end headers with it). */
  passOn(status: number, headers: IncomingHttpHeaders, body: Buffer): void {
    if (this.res.headersSent) {
      this.res.destroy();
      return;
    }
    this.streamHead(status, { ...headers, 'content-length': String(body.length) });
    this.res.end(body);
  }

  /** A failure, in the envelope of the exchange's interface. */
  fail(f: Failure, extra?: readonly string[]): void {
    // Every upstream throttled: with a Retry-After, 1 s where the caller does not know when one is free (throttle.ts).
    if (f === 'throttled' && extra === undefined) extra = RETRY_SOON;
    const a = this.envelope[f];
    this.sendFailure(a.status, a.body, extra);
  }

  refuse(r: Refused): void {
    const extra = r.retryAfter > 0 ? ['retry-after', String(r.retryAfter)] : undefined;
    if (r.resetsAt === undefined) return this.fail(r.reason, extra);
    const a = this.envelope[r.reason];
    this.sendFailure(a.status, a.body.replace(RESETS_AT, r.resetsAt), extra);
  }

  /** Every failure the gateway answers itself goes out here: the handler makes it this request's (EVM: the calls' ids). */
  private sendFailure(status: number, body: string, extra: readonly string[] | undefined): void {
    const h = this.handler;
    this.send(status, h === null || h.failed === undefined ? body : h.failed(this, body), extra);
  }

  /** What escaped the request's own handling: logged, and answered if nothing was sent yet. */
  internal(err: unknown): void {
    this.host.log.error({ event: 'internal_error', reqId: this.id, error: (err as Error)?.message }, 'internal error');
    if (this.res.headersSent || this.res.destroyed) {
      this.res.destroy();
      return;
    }
    this.fail('internal');
  }

  /** Runs a step that comes back later (a body read, a store's answer), catching what it throws. */
  later(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.internal(err);
    }
  }

  /** Sends `request` down the chain's layers from `top` (admission's admit step, then the cache's front, or the dispatch: retries, breaker and streaming are Forward's). */
  forwardWith(top: Dispatch<ClientTarget>, request: ForwardRequest): void {
    const sent = top(this, request);
    this.forward = sent === NOTHING ? null : sent;
  }

  // ---------------------------------------------------- ForwardTarget

  /** The head of an upstream answer that streams to the client. */
  streamHead(status: number, headers: IncomingHttpHeaders, u?: Upstream): void {
    if (u) this.upstream = u;
    const out = endToEndHeaders(headers, this.id);
    // The gateway's X-Cache is the only one: an upstream's own (a CDN in front of a node) is dropped.
    if (this.cacheTag !== null) for (let i = out.length - 2; i >= 0; i -= 2) if (out[i] === 'x-cache') out.splice(i, 2);
    this.ownHeaders(out);
    this.res.writeHead(status, out);
  }

  forwarded(r: ForwardResult): void {
    this.forward = null;
    if (r.upstream !== null) this.upstream = r.upstream;
    // Called from undici's handler: what escapes here would leave the client waiting.
    try {
      if (r.kind === 'failed') {
        if (r.upstream) this.host.log.warn({ event: 'upstream_failed', chain: r.upstream.chain, upstream: r.upstream.name, fail: r.fail, reqId: this.id }, 'upstream failed');
        this.fail(r.fail, r.retryAfter === undefined ? undefined : ['retry-after', String(r.retryAfter)]);
      } else if (r.kind === 'buffered') this.handler!.rewrite(this, r);
    } catch (err) {
      this.internal(err);
    }
  }

  /** Whether a batch split below (pool/batch.ts) hands its answers to the handler's plan in their slots (ItemsTaker). */
  get takesItems(): boolean {
    return this.handler?.takesItems?.(this) === true;
  }

  /** A split batch's answers for the handler's plan: merged and answered at once, the bytes held let go after. */
  takeItems(u: Upstream, items: readonly (Buffer | readonly Buffer[])[], held: number): void {
    this.forward = null;
    this.upstream = u;
    try {
      this.handler!.takeItems!(this, items);
    } catch (err) {
      this.internal(err);
    } finally {
      releaseHeld(held);
    }
  }
}

/** A chain's bounds on a request body (its limits). */
export interface BodyLimits {
  readonly maxBodyBytes: number;
  readonly bodyTimeoutMs: number;
}

const CLOSE = ['connection', 'close'];

/**
 * One request body being read: its chunks, and when it must have ended. The
 * bodies under way are a list (`reading`, linked through the reads
 * themselves: no hashing, as a Set's would cost every request), which one
 * sweep a quarter of a second looks through while any is (no timer per request).
 */
class BodyRead {
  prev: BodyRead | null = null;
  next: BodyRead | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** Over the size limit, timed out, or ended: whatever comes after is not kept. */
  private over = false;
  readonly until: number;

  constructor(
    private readonly x: Exchange,
    private readonly limit: number,
    timeoutMs: number,
    private readonly cb: (buf: Buffer | null) => void,
  ) {
    this.until = x.start + timeoutMs;
  }

  readonly data = (c: Buffer): void => {
    if (this.over) return;
    this.size += c.length;
    if (this.size > this.limit) {
      this.stop();
      lingerAfterAnswer(this.x.req, this.x.res);
      this.x.later(() => this.cb(null));
      return;
    }
    this.chunks.push(c);
  };

  readonly end = (): void => {
    if (this.over) return;
    unlink(this);
    this.over = true;
    const { chunks, size } = this;
    const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    // The request's handling goes on from here, outside the server's try.
    try {
      this.cb(buf);
    } catch (err) {
      this.x.internal(err);
    }
  };

  /** The body did not end in time: 408 in the chain's envelope, and the connection closes once the client stops sending (linger.ts bounds it). */
  timeout(): void {
    this.stop();
    lingerAfterAnswer(this.x.req, this.x.res);
    this.x.fail('body-timeout', CLOSE);
  }

  private stop(): void {
    unlink(this);
    this.over = true;
    this.chunks.length = 0;
  }
}

/** The bodies under way, oldest first. */
let reading: BodyRead | null = null;
let newest: BodyRead | null = null;
const SWEEP_MS = 250;
let sweeper: ReturnType<typeof setInterval> | null = null;

function link(r: BodyRead): void {
  r.prev = newest;
  if (newest === null) reading = r;
  else newest.next = r;
  newest = r;
  if (sweeper === null) sweeper = setInterval(sweep, SWEEP_MS).unref();
}

function unlink(r: BodyRead): void {
  if (r.prev === null) {
    if (reading !== r) return; // not in the list (already out)
    reading = r.next;
  } else r.prev.next = r.next;
  if (r.next === null) newest = r.prev;
  else r.next.prev = r.prev;
  r.prev = r.next = null;
}

function sweep(): void {
  if (reading === null) {
    clearInterval(sweeper!);
    sweeper = null;
    return;
  }
  const now = performance.now();
  for (let r: BodyRead | null = reading; r !== null; ) {
    const next: BodyRead | null = r.next;
    if (r.until <= now) r.timeout();
    r = next;
  }
}

/**
 * Reads a request body up to `limits.maxBodyBytes`; calls back with null when
 * it is larger (then stops keeping it: the connection closes after the 413,
 * once the client has sent the rest or a bound is hit, see process/linger.ts).
 * A body that has not ended `limits.bodyTimeoutMs` after the request's
 * headers gets the interface's 408 instead, and no callback: a client that
 * sends slowly holds its connection no longer than that.
 */
export function readBody(x: Exchange, limits: BodyLimits, cb: (buf: Buffer | null) => void): void {
  const req = x.req;
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxBodyBytes) {
    lingerAfterAnswer(req, x.res);
    return cb(null);
  }
  const r = new BodyRead(x, limits.maxBodyBytes, limits.bodyTimeoutMs, cb);
  link(r);
  req.on('data', r.data);
  req.on('end', r.end);
}
