// Forwarding, the attempts of one call: which upstream each attempt goes to,
// retries where they are safe, throttles moved past, the call's deadline, and
// the outcome reported once. `Forward` (forward.ts) is this plus the undici
// dispatch handler that reads each attempt's answer. Hot path: change with care.
import type { Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import { timeLeft, type ForwardResult, type ForwardTarget, type HeldTarget, type Sink, type ThrottleSeen, type Transport } from '../dispatch.ts';
import type { Upstream, UpstreamGroup } from './upstream.ts';
import { allThrottled, throttled } from './throttle.ts';

/** What the current attempt does with the answer's body. */
export const enum Mode {
  /** Written to the client as it comes. */
  Stream,
  /** Kept for the caller to rewrite. */
  Buffer,
  /** Read and dropped: the attempt failed and another upstream gets the request. */
  Retry,
  /** Read and dropped: a 429, the upstream throttled the call (throttle.ts). */
  Throttled,
  /** A streamed answer whose first bytes may be a throttle error: held (nothing written yet) until it is whole or too long to be one. */
  Judge,
}

const NO_HEADERS: IncomingHttpHeaders = Object.freeze({});

/**
 * One call's attempts, for all of them: the state `Forward` reads answers into
 * (its mode, the answer's head and chunks) lives here too, so a Forward is one
 * object made by one constructor.
 */
export abstract class ForwardAttempts {
  private tried: Set<Upstream> | null = null;
  private last: ForwardResult | null = null;
  private attempt = 0;
  /** Attempts an upstream throttled: they do not count against `retries`. */
  private throttles = 0;
  /** A write went to another upstream after a throttle (it may, once). */
  private moved = false;
  protected u: Upstream | null = null;
  protected canRetry = false;
  protected status = 0;
  protected headers = NO_HEADERS;
  protected mode = Mode.Stream;
  protected bad = false;
  /** The answer held to be judged (Judge mode) was an error the call did not cause: a failed attempt for the score. */
  protected erred = false;
  /**
   * Throttles seen in bodies, not yet marked (throttledInBody): the body they
   * gave alike, and each upstream with its answer's headers and when it was sent.
   */
  private alike: { readonly body: Buffer; readonly pending: Omit<ThrottleSeen, 'body'>[] } | null = null;
  /** The answer's body in Buffer mode, and in Judge mode what came so far. */
  protected chunks: Buffer[] | null = null;
  protected size = 0;
  protected controller: Dispatcher.DispatchController | null = null;
  /** Stream mode: the head is written with the first body byte, so an answer that breaks before it can still fail cleanly. */
  protected headPending = false;
  private sentAt = 0;
  private deadline: NodeJS.Timeout | null = null;
  /** The client went away: abort whatever attempt is under way. */
  protected cancelled = false;
  /** The call's deadline passed before undici started the attempt (it waited for a connection): aborted when it starts. */
  protected late = false;
  private ended = false;

  /** Where a streamed answer is written; null for a held request. */
  protected readonly sink: Sink | null;

  // A request's transport is all Forward reads of it (dispatch.ts): its calls are the layers'.
  constructor(group: UpstreamGroup, req: Transport, target: ForwardTarget);
  constructor(group: UpstreamGroup, req: Transport & { readonly hold: true }, target: HeldTarget);
  constructor(
    private readonly group: UpstreamGroup,
    protected readonly req: Transport,
    protected readonly target: HeldTarget,
  ) {
    this.sink = req.hold === true ? null : (target as ForwardTarget).res;
  }

  start(): void {
    this.next();
  }

  /** The upstream the current attempt went to (null before the first). */
  get upstream(): Upstream | null {
    return this.u;
  }

  /** The client went away before the answer was complete. */
  cancel(): void {
    if (this.ended || this.cancelled) return;
    this.cancelled = true;
    this.controller?.abort(clientGone());
  }

  protected end(r: ForwardResult): void {
    if (this.ended) return;
    this.ended = true;
    // Another upstream answered otherwise (or the call ended): the throttles seen in bodies count.
    this.markThrottled();
    this.target.forwarded(r);
  }

  protected fail(u: Upstream): void {
    u.tally.observe(performance.now() - this.sentAt, false);
    // A run of failures opens the breaker: the upstream says so to whoever listens (the server's metrics and log).
    u.markFailure();
  }

  /**
   * An answer (the breaker's run of failures is over). `failed`: a JSON-RPC
   * error the call did not cause (throttle.ts answerFailed), which counts as
   * a failed attempt in the tally, and so in the score's window (issue 43).
   */
  protected succeeded(u: Upstream, failed = false): void {
    u.tally.observe(performance.now() - this.sentAt, !failed);
    u.markSuccess();
  }

  private next(): void {
    const { group, req } = this;
    if (this.attempt === 0 && req.skip !== undefined) this.tried = new Set(req.skip);
    if (this.attempt === 0 && req.throttledIn !== undefined) this.alike = { body: req.throttledIn.body, pending: [req.throttledIn] };
    // One deadline per call: a retry gets what is left of it, and none once it is over.
    const now = performance.now();
    const wait = timeLeft(req.deadline, now);
    if (wait === 0) return this.end(this.last ?? { kind: 'failed', fail: 'timeout', upstream: this.u });
    const tried = this.tried;
    const u = tried === null ? group.pick(null, req.accept, req.cost) : group.pickRetry(tried, req.accept, req.cost);
    if (u === null) {
      this.markThrottled();
      return this.end(this.last ?? allThrottled(group, req.accept, null) ?? { kind: 'failed', fail: 'no-upstream', upstream: null });
    }
    this.u = u;
    this.canRetry = this.attempt - this.throttles < req.retries && group.hasOther(u, tried, req.accept);
    this.attempt++;
    this.mode = Mode.Stream;
    this.bad = false;
    this.erred = false;
    this.controller = null;
    this.sentAt = now;
    const headers = u.headerList.length ? req.headers.concat(u.headerList) : req.headers;
    // The head is waited for until the deadline: less than the upstream's own head timeout on a retry, or for a pool's try again.
    this.clearDeadline();
    this.late = false;
    // undici's head timeout alone overshoots a short wait by up to a second (its coarse timers): a timer of our own ends it.
    if (wait < u.timeoutMs) this.deadline = setTimeout(this.tooSlow, wait);
    u.pool.dispatch({ path: req.path(u), method: req.method, headers, body: req.body, headersTimeout: wait < u.timeoutMs ? wait : undefined }, this as Dispatcher.DispatchHandler); // always a Forward (forward.ts), the handler
  }

  protected retryElsewhere(u: Upstream, last: ForwardResult): void {
    (this.tried ??= new Set()).add(u);
    this.last = last;
    this.next();
  }

  /**
   * undici's timeouts bound the head (what is left of the call's deadline)
   * and each gap between chunks; an answer read whole before anything
   * reaches the client must also end by the call's deadline.
   */
  protected startDeadline(): void {
    this.deadline = setTimeout(this.tooSlow, timeLeft(this.req.deadline));
  }

  private readonly tooSlow = (): void => {
    this.deadline = null;
    if (this.controller === null) this.late = true;
    else this.controller.abort(answerLate());
  };

  protected clearDeadline(): void {
    if (this.deadline !== null) {
      clearTimeout(this.deadline);
      this.deadline = null;
    }
  }

  /**
   * The upstream throttled the call with a 429: it refused it, so nothing
   * ran. A read goes to another usable upstream, whatever `retries` says; a
   * write to one more, once. With none left, every upstream it could go to is
   * throttled.
   */
  protected throttledBy(u: Upstream, body: Buffer): void {
    throttled(u, this.headers, this.sentEpoch(), body);
    if (!this.moveOn(u)) this.endThrottled(u);
  }

  /**
   * A 200 (or a held error) whose body `throttled` calls a throttle: as a 429,
   * but an error that every upstream asked gives alike, byte for byte, is the
   * call's own answer (a call can make a node say anything in an error), not
   * N throttles. So the upstream is only marked throttled once another one
   * answers the call otherwise (markThrottled), or when it was the only one
   * asked. False: the body is that answer, to be relayed.
   */
  protected throttledInBody(u: Upstream, body: Buffer): boolean {
    if (this.alike !== null && !this.alike.body.equals(body)) this.markThrottled();
    (this.alike ??= { body, pending: [] }).pending.push({ u, headers: this.headers, sentAt: this.sentEpoch() });
    if (this.moveOn(u)) return true;
    if (this.alike.pending.length > 1) {
      this.alike = null;
      return false;
    }
    this.markThrottled();
    this.endThrottled(u);
    return true;
  }

  /** Sends the call to another upstream after `u` throttled it, if one may take it (false: none may). */
  private moveOn(u: Upstream): boolean {
    (this.tried ??= new Set()).add(u);
    const { req, group } = this;
    if (this.cancelled || (!req.idempotent && this.moved) || !group.hasOther(u, this.tried, req.accept)) return false;
    this.throttles++;
    if (!req.idempotent) this.moved = true;
    this.next();
    return true;
  }

  /** No upstream is left that may take the call: every one it could go to is throttled. */
  private endThrottled(u: Upstream): void {
    this.end(this.last ?? allThrottled(this.group, this.req.accept, u) ?? { kind: 'failed', fail: 'throttled', upstream: u, retryAfter: 1 });
  }

  /** The throttles seen in bodies so far, not alike the call's answer: each upstream that gave one is throttled (throttle.ts). */
  private markThrottled(): void {
    const a = this.alike;
    if (a === null) return;
    this.alike = null;
    for (const p of a.pending) throttled(p.u, p.headers, p.sentAt, a.body);
  }

  /** When the current attempt was sent, in epoch ms (the clock of the cooldowns). */
  private sentEpoch(): number {
    return Date.now() - (performance.now() - this.sentAt);
  }

  /** An answer that is no answer (an empty 200): a failed attempt, retried where safe. */
  protected badAnswer(u: Upstream): void {
    this.fail(u);
    const last: ForwardResult = { kind: 'failed', fail: 'bad-response', upstream: u };
    if (this.canRetry && this.req.idempotent) return this.retryElsewhere(u, last);
    this.end(last);
  }
}

export function answerLate(): Error {
  return Object.assign(new Error('upstream answer not complete in time'), { code: 'GW_ANSWER_TIMEOUT' });
}

export function clientGone(): Error {
  return Object.assign(new Error('client went away'), { code: 'GW_CLIENT_GONE' });
}
