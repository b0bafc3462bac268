// Forwarding: one attempt per upstream, retries where they are safe, and the
// answer written straight into the client's response. Hot path: change with care.
//
// A `Forward` is the undici dispatch handler of one client request, for all
// its attempts: undici hands it the answer's head and body chunks, and it
// writes them into the ServerResponse, pausing the upstream while the client
// is slow (backpressure). When the client goes away mid-answer, `cancel()`
// aborts the upstream request, so its connection is released; a plain
// `body.pipe(res)` would leave it paused forever. (undici's `pool.stream` does
// the same through a stream and `finished()`; this does it with one object per
// request and no stream machinery, which measured ~6% more requests a second.)
// This file reads each attempt's answer; which upstream each attempt goes to,
// retries, throttles moved past and the deadline are ForwardAttempts'
// (forward-attempts.ts), the class Forward extends.
import type { Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import { sentBody, type Attempt, type Dispatch, type FailKind, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget } from '../dispatch.ts';
import type { UpstreamGroup } from './upstream.ts';
import { answerFailed, mayBeError } from './throttle.ts';
import { answerLate, clientGone, ForwardAttempts, Mode } from './forward-attempts.ts';

/** The plain dispatch: one Forward per request, started (the only place one is made). Hot path. */
export function plainDispatch(chain: UpstreamGroup): Dispatch<ForwardTarget, Attempt> {
  return (target: HeldTarget, request: ForwardRequest, group = chain) => {
    // The overloads pair a target that cannot be streamed to with a held request: passed on as given. A batch whose
    // bytes no layer joined (its Calls only) is joined here, where it is sent.
    const t = (request as HeldRequest).transport;
    const f = new Forward(group, t.body === null && request.calls.batch !== undefined ? { ...t, body: sentBody(request) } : t, target);
    f.start();
    return f;
  };
}

/**
 * Upstream answer headers the client never sees: hop-by-hop ones, and, as
 * nginx's proxy module does by default, the upstream's `server` and `date`
 * (the client gets the gateway's own date, and no word of the node software).
 */
const NOT_FORWARDED = new Set([
  'server',
  'date',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Upstream answer headers as a flat [name, value, ...] list for
 * `res.writeHead`, without NOT_FORWARDED ones, without the upstream's CORS
 * headers (the manifest's CORS policy is the only one clients see) and with
 * the gateway's request id.
 */
export function endToEndHeaders(headers: IncomingHttpHeaders, requestId: string): string[] {
  const out: string[] = [];
  for (const name in headers) {
    if (NOT_FORWARDED.has(name) || name.startsWith('access-control-') || name === 'x-request-id') continue;
    const v = headers[name];
    if (typeof v === 'string') out.push(name, v);
    else if (v !== undefined) for (const one of v) out.push(name, one);
  }
  out.push('x-request-id', requestId);
  return out;
}

interface Classified {
  readonly kind: FailKind;
  /** The upstream surely never got the request: safe to send it elsewhere. */
  readonly neverReceived: boolean;
}

function classify(err: unknown): Classified {
  const code = (err as { code?: string }).code ?? '';
  switch (code) {
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { kind: code === 'UND_ERR_CONNECT_TIMEOUT' ? 'timeout' : 'unavailable', neverReceived: true };
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'GW_ANSWER_TIMEOUT':
      return { kind: 'timeout', neverReceived: false };
    case 'GW_TOO_LARGE':
    case 'HPE_INVALID_CONSTANT':
    case 'HPE_INVALID_STATUS':
    case 'HPE_INVALID_HEADER_TOKEN':
      return { kind: 'bad-response', neverReceived: false };
    default:
      return { kind: 'unavailable', neverReceived: false };
  }
}

/**
 * A streamed answer is looked at for a throttle (`throttled`) only when its
 * first chunk is this short and holds an `"error"` key before any `"result"`
 * (throttle.ts mayBeError): a provider's throttle answer is a short JSON-RPC
 * error; every other answer streams untouched.
 */
const MAX_STREAM_JUDGED = 512;

/** The most of a 429's body kept: enough for a provider's JSON-RPC error with its backoff (throttle.ts retryAfterMs). */
const MAX_THROTTLE_BODY = 4096;

const EMPTY = Buffer.alloc(0);

/**
 * Bytes all requests together may hold to rewrite answers. Each request has
 * its own cap (`maxBuffer`); this one keeps many of them at once from taking
 * the process's memory. An answer that would go past it fails as too large.
 */
export const MAX_HELD_BYTES = 256 * 1024 * 1024;
/** Largest one answer a layer holds whole to judge or keep it (a cache's flight, a pool's try, quorum's votes, a range's chunk). */
export const MAX_HELD = 32 * 1024 * 1024;
let held = 0;

/**
 * A layer keeps `n` bytes of answers past their Forward (a merged eth_getLogs
 * range's chunks, until its client has them): counted under MAX_HELD_BYTES
 * until `releaseHeld(n)`. False, and nothing counted, when they would take
 * the total past it.
 */
export function holdBytes(n: number): boolean {
  if (held + n > MAX_HELD_BYTES) return false;
  held += n;
  return true;
}

export function releaseHeld(n: number): void {
  held -= n;
}

/**
 * Sends one request upstream, retrying on another upstream where safe, and
 * reports the outcome to `target.forwarded` exactly once. A request that is
 * not held (`hold`) needs a target that can be streamed to (`ForwardTarget`).
 */
export class Forward extends ForwardAttempts implements Dispatcher.DispatchHandler {
  // ------------------------------------------------ undici dispatch handler

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.cancelled) controller.abort(clientGone());
    else if (this.late) controller.abort(answerLate());
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    if (status < 200) return; // 1xx: the answer follows
    // The head came: a retry's own timer for it is done (a held answer gets the rest of the deadline below).
    this.clearDeadline();
    this.status = status;
    this.headers = headers;
    const req = this.req;
    if (status === 429) {
      this.mode = Mode.Throttled;
      // Its body is kept, if short, for the Retry-After it may carry (Infura's backoff_seconds: throttle.ts retryAfterMs).
      this.chunks = [];
      this.size = 0;
      this.startDeadline();
      return;
    }
    let verdict = req.classify(status, headers);
    if (verdict === 'bad') {
      if (this.canRetry && req.idempotent && !this.cancelled) {
        this.mode = Mode.Retry;
        this.startDeadline();
        return;
      }
      this.bad = true;
      verdict = 'buffer'; // the caller decides what the client may see of it
    }
    const sink = this.sink;
    if (verdict === 'stream' && sink !== null) {
      // The client is gone: undici reports the abort through onResponseError.
      if (this.cancelled || sink.destroyed) return controller.abort(clientGone());
      this.mode = Mode.Stream;
      this.headPending = true;
      return;
    }
    this.mode = Mode.Buffer;
    this.chunks = [];
    this.size = 0;
    this.startDeadline();
  }

  /** Ends Buffer mode's bookkeeping: the deadline and the bytes held. */
  private release(): void {
    this.clearDeadline();
    held -= this.size;
    this.size = 0;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    switch (this.mode) {
      case Mode.Stream: {
        const res = this.sink!;
        if (this.headPending) {
          // A short first chunk with an error may be a provider's throttle (-32005 in a 200): held until it is whole.
          if (chunk.length <= MAX_STREAM_JUDGED && this.req.throttled !== undefined && mayBeError(chunk)) {
            this.mode = Mode.Judge;
            this.chunks = [chunk];
            this.size = chunk.length;
            held += chunk.length;
            return;
          }
          this.headPending = false;
          (this.target as ForwardTarget).streamHead(this.status, this.headers, this.u!);
        }
        if (!res.write(chunk) && !res.destroyed) {
          controller.pause();
          res.once('drain', () => controller.resume());
        }
        return;
      }
      case Mode.Judge:
        this.chunks!.push(chunk);
        this.size += chunk.length;
        held += chunk.length;
        // Too long to be a throttle: streamed on from here.
        if (this.size > MAX_STREAM_JUDGED) this.streamJudged(controller);
        return;
      case Mode.Throttled:
        if (this.chunks === null || this.size + chunk.length > MAX_THROTTLE_BODY) return;
        this.chunks.push(chunk);
        this.size += chunk.length;
        held += chunk.length;
        return;
      case Mode.Buffer:
        if (this.chunks === null) return; // aborted
        if (this.size + chunk.length > this.req.maxBuffer || held + chunk.length > MAX_HELD_BYTES) {
          this.chunks = null;
          controller.abort(Object.assign(new Error('upstream answer too large'), { code: 'GW_TOO_LARGE' }));
          return;
        }
        this.size += chunk.length;
        held += chunk.length;
        this.chunks.push(chunk);
        return;
      default:
        return;
    }
  }

  onResponseEnd(): void {
    const u = this.u!;
    switch (this.mode) {
      case Mode.Retry:
        this.release();
        this.fail(u);
        return this.retryElsewhere(u, { kind: 'failed', fail: 'unavailable', upstream: u });
      case Mode.Throttled: {
        const body = Buffer.concat(this.chunks!, this.size);
        this.chunks = null;
        this.release();
        return this.throttledBy(u, body);
      }
      case Mode.Judge: {
        const chunks = this.chunks!;
        const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.size);
        if (this.req.throttled!(body)) {
          this.chunks = null;
          this.release();
          this.headPending = false;
          if (this.throttledInBody(u, body)) return;
          // Every upstream asked gave it alike: the call's answer, streamed as it is.
          this.chunks = [body];
        }
        this.erred = answerFailed(body);
        this.streamJudged(null);
        return this.onResponseEnd();
      }
      case Mode.Buffer: {
        const chunks = this.chunks!;
        const body = chunks.length === 0 ? EMPTY : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.size);
        this.chunks = null;
        // Held whole, as when streamed: an empty answer (or a 2xx that is not one) is a failed attempt.
        if (!this.bad && (body.length === 0 ? !this.req.emptyOk && this.status !== 304 : this.status < 300 && this.req.isAnswer?.(body) === false)) {
          this.release();
          return this.badAnswer(u);
        }
        // (Released first: another attempt may begin.) Unless every upstream asked gave it alike, then it is the call's answer.
        if (!this.bad && this.req.throttled?.(body) === true) {
          this.release();
          if (this.throttledInBody(u, body)) return;
        }
        if (this.bad) this.fail(u);
        else this.succeeded(u, this.req.throttled !== undefined && answerFailed(body));
        // Still counted as held while the caller rewrites it (synchronously).
        try {
          return this.end({ kind: 'buffered', upstream: u, status: this.status, headers: this.headers, body });
        } finally {
          this.release();
        }
      }
      default: {
        const res = this.sink!;
        if (this.cancelled || res.destroyed) return this.end({ kind: 'aborted', upstream: u });
        if (this.headPending) {
          // Not one byte came: only some answers may be empty.
          this.headPending = false;
          if (!this.req.emptyOk && this.status !== 304) return this.badAnswer(u);
          (this.target as ForwardTarget).streamHead(this.status, this.headers, u);
        }
        this.succeeded(u, this.erred);
        res.end();
        return this.end({ kind: 'streamed', upstream: u, status: this.status });
      }
    }
  }

  /** Judge mode is over without a throttle: the head and what was held go to the client, and the answer streams on. */
  private streamJudged(controller: Dispatcher.DispatchController | null): void {
    const chunks = this.chunks!;
    this.chunks = null;
    this.release();
    this.mode = Mode.Stream;
    this.headPending = false;
    const res = this.sink!;
    if (this.cancelled || res.destroyed) return;
    (this.target as ForwardTarget).streamHead(this.status, this.headers, this.u!);
    let ok = true;
    for (const c of chunks) ok = res.write(c);
    if (!ok && controller !== null && !res.destroyed) {
      controller.pause();
      res.once('drain', () => controller.resume());
    }
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    const u = this.u;
    const res = this.sink;
    this.headPending = false;
    this.clearDeadline();
    if (this.mode !== Mode.Stream) {
      this.chunks = null;
      this.release();
    }
    if (this.cancelled || (res !== null && res.destroyed)) return this.end({ kind: 'aborted', upstream: u });
    if (res !== null && this.mode === Mode.Stream && res.headersSent) {
      // The answer broke after it had started: the client sees a cut-off answer.
      if (u !== null) this.fail(u);
      res.destroy();
      return this.end({ kind: 'aborted', upstream: u });
    }
    if (u === null) return this.end({ kind: 'failed', fail: 'unavailable', upstream: null });
    const c = classify(err);
    this.fail(u);
    const last: ForwardResult = { kind: 'failed', fail: c.kind, upstream: u };
    if (this.canRetry && (this.req.idempotent || c.neverReceived)) return this.retryElsewhere(u, last);
    this.end(last);
  }
}
