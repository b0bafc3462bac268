// Admission, in two places: who is asking (identify: the key's extraction,
// verification, the chain's scope, the key's policy), which every interface
// calls before it reads a body; and whether they may be served now (admit:
// its JWT, its rate limit and quota, in credits, then the usage count), the
// top layer of every chain (AdmitLayer, composed by chains.ts over the cache's
// front or the chain's dispatch). A step answers at once when it can (a Map
// lookup, the in-memory limiter) and with a promise only when it must (jose,
// Redis), so a request pays for a promise only then, and a key without a
// policy or limits pays a null test for each.
import type { ClientTarget, Exchange } from '../exchange.ts';
import { NOTHING, type Cancelable, type Dispatch, type ForwardRequest } from '../dispatch.ts';
import { add as addUsage, type Usage } from '../observe/usage.ts';
import type { Refusal, Refused } from '../envelope.ts';
import { isKeyShaped, type KeyCheck, type KeyEntry, type KeyLookup } from '../keys/keys.ts';
import type { Metrics } from '../observe/metrics.ts';
import { quotaWindow, rateWindow, type Admitted, type RateLimiter, type Taken } from './ratelimit.ts';
import type { RateLimitSpec, RouteSpec } from '../types.ts';
import type { BlockList } from 'node:net';
import { clientAddress, requestRefusal, type PolicyReason } from '../keys/key-policy.ts';
import { bearerVerifies } from '../keys/jwt.ts';

/**
 * Where a request goes once its key is known: a refusal is answered in its
 * envelope, a key store that had to be asked is waited for (only then a
 * promise), and the interface goes on with `next` (no closure on the hot path:
 * a method of the handler and its own argument).
 */
export function whenIdentified<T>(x: Exchange, who: KeyEntry | Refused | Promise<KeyEntry | Refused>, next: (x: Exchange, key: KeyEntry, arg: T) => void, arg: T): void {
  if (who instanceof Promise) {
    who.then(
      (w) => x.later(() => (isRefused(w) ? x.refuse(w) : next(x, w, arg))),
      (err: unknown) => x.internal(err),
    );
    return;
  }
  if (isRefused(who)) return x.refuse(who);
  next(x, who, arg);
}

export function isRefused(v: KeyEntry | Refused): v is Refused {
  return (v as Refused).ok === false;
}

/**
 * What identify reads of a request (its headers and peer) and sets (the key
 * it found): an Exchange, or an open WebSocket asked again (ws/connection.ts).
 */
export type Asking = Pick<Exchange, 'req' | 'key'>;

/** Where an admitted request goes on, with its own argument (no closure on the hot path). */
export type Next<T> = (x: ClientTarget, arg: T) => void;

const refused = (reason: Refusal, retryAfter = 0): Refused => ({ ok: false, reason, retryAfter });
const MISSING = refused('auth-missing');
const INVALID = refused('auth-invalid');
const FORBIDDEN = refused('auth-forbidden');
const CONFLICT = refused('auth-conflict');
const STORE_DOWN = refused('key-store-unavailable', 1);
const POLICY: Readonly<Record<Exclude<PolicyReason, 'contract'>, Refused>> = {
  origin: refused('policy-origin'),
  ip: refused('policy-ip'),
  user_agent: refused('policy-user-agent'),
  expired: refused('policy-expired'),
  jwt: refused('policy-jwt'),
  method: refused('policy-method'),
};

/** Where the request comes from, for `allow.ips` (manifest `trustedProxies`), and who a JWT must name (`jwtAudience`). */
export interface PolicySettings {
  readonly trustedProxies: BlockList | null;
  readonly jwtAudience: string | null;
}

/**
 * The key's rate limit (else the manifest's) and its quota, both counted in
 * credits, taken in one step (with Redis, one round trip): the rate limit
 * first, so a request the rate limit refuses never spends quota.
 */
export class RateStep {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly fallback: RateLimitSpec | null,
    private readonly metrics: Metrics,
  ) {}

  /** Nothing to count for this key: the stage skips the step (and sends no X-RateLimit headers). */
  idle(key: KeyEntry): boolean {
    return (key.rateLimit ?? this.fallback) === null && key.quota === null;
  }

  /** The key's rate limit and quota; null when it has neither. */
  take(key: KeyEntry, credits: number, now: number): Admitted | Promise<Admitted> | null {
    const r = key.rateLimit ?? this.fallback;
    if (r === null && key.quota === null) return null;
    return this.limiter.admit(key.id, r === null ? null : rateWindow(r, now), key.quota === null ? null : quotaWindow(key.quota, now), credits);
  }

  /** The key's quota alone (a WebSocket's notifications). */
  quota(key: KeyEntry, credits: number, now: number): Taken | Promise<Taken> | null {
    if (key.quota === null) return null;
    const a = this.limiter.admit(key.id, null, quotaWindow(key.quota, now), credits);
    return a instanceof Promise ? a.then((v) => v.quota!) : a.quota!;
  }

  rateLimited(key: KeyEntry): void {
    this.metrics.rateLimited.labels(key.id).inc();
  }

  /** On the refusal path only: nothing per served request. */
  quotaExceeded(key: KeyEntry): void {
    this.metrics.quotaExceeded.labels(key.id).inc();
  }
}

/** X-RateLimit-* for the tighter of the two (fewer credits left), and X-Credits-Used. */
function limitHeaders(rate: Taken | null, quota: Taken | null, charged: number, now: number): string[] {
  let t = rate ?? quota!;
  if (rate !== null && quota !== null && quota.limit - quota.used < rate.limit - rate.used) t = quota;
  return [
    'x-ratelimit-limit',
    String(t.limit),
    'x-ratelimit-remaining',
    String(Math.max(0, t.limit - t.used)),
    'x-ratelimit-reset',
    String(secondsUntil(t.endsAt, now)),
    'x-credits-used',
    String(charged),
  ];
}

function secondsUntil(t: number, now: number): number {
  return Math.max(1, Math.ceil((t - now) / 1000));
}

export class AdmissionStage {
  constructor(
    private readonly keys: KeyLookup,
    private readonly rate: RateStep,
    private readonly settings: PolicySettings = { trustedProxies: null, jwtAudience: null },
  ) {}

  /**
   * The key: it may come in the X-API-Key header, a path segment and the
   * api_key query parameter; if it comes in several, all must be equal. On
   * success the exchange knows its key (for the access log). `endpoint`: what
   * the request asks for, checked here against a key's `methods`; null where
   * the interface checks them call by call itself (JSON-RPC).
   */
  identify(x: Asking, route: RouteSpec, pathKey: string | null, queryKeys: readonly string[], endpoint: string | null): KeyEntry | Refused | Promise<KeyEntry | Refused> {
    const header = x.req.headers['x-api-key'];
    let key: string | null = typeof header === 'string' && header !== '' ? header : null;
    if (pathKey !== null) {
      if (key !== null && key !== pathKey) return CONFLICT;
      key = pathKey;
    }
    for (const k of queryKeys) {
      if (key !== null && key !== k) return CONFLICT;
      key = k;
    }
    if (key === null) return MISSING;
    if (!isKeyShaped(key)) return INVALID;
    const r = this.keys.check(key, route.path);
    // A key store that must be asked (Redis, a key not cached): only then a promise.
    if (r instanceof Promise) return r.then((v) => this.checked(x, endpoint, v));
    return this.checked(x, endpoint, r);
  }

  /** The client's address, for allow.ips: the peer, or behind trusted proxies the X-Forwarded-For hop that counts. */
  private clientOf(x: Asking): string {
    return clientAddress(x.req.socket.remoteAddress ?? '', x.req.headers['x-forwarded-for'], this.settings.trustedProxies);
  }

  private checked(x: Asking, endpoint: string | null, r: KeyCheck): KeyEntry | Refused {
    if (!r.ok) return r.reason === 'invalid' ? INVALID : r.reason === 'forbidden' ? FORBIDDEN : STORE_DOWN;
    x.key = r.entry;
    const p = r.entry.policy;
    if (p !== null) {
      // The key's policy: where the request comes from, and the endpoint where the interface names one.
      if (p.request) {
        const why = requestRefusal(p, x.req.headers, () => this.clientOf(x), Date.now());
        if (why !== null) return POLICY[why as Exclude<PolicyReason, 'contract'>];
      }
      if (p.methods !== null && endpoint !== null && !p.methods.has(endpoint)) return POLICY.method;
    }
    return r.entry;
  }

  /** Takes `credits` from the key's quota alone (what a socket pushes: AdmitLayer.pushed); null: the key has none. */
  quota(key: KeyEntry, credits: number): Taken | Promise<Taken> | null {
    return this.rate.quota(key, credits, Date.now());
  }

  /** Whether `key` has nothing to wait for or count before it is served: no JWT, no rate limit, no quota. */
  open(key: KeyEntry): boolean {
    return !key.policy?.jwt && this.rate.idle(key);
  }

  /**
   * Runs the steps for a request of `credits` credits of `key`; if all pass,
   * `next(x, arg)`, at once when every step answered at once. A refusal is
   * answered here, in the exchange's envelope.
   */
  admit<T>(x: ClientTarget, key: KeyEntry, credits: number, next: Next<T>, arg: T): void {
    const jwt = key.policy?.jwt;
    if (jwt) {
      // A key with a JWT waits for its verification (asynchronous: only such keys pay for it).
      bearerVerifies(x.req.headers.authorization, jwt, this.settings.jwtAudience).then(
        (ok) => x.later(() => (ok ? this.limit(x, key, credits, next, arg) : x.refuse(POLICY.jwt))),
        (err: unknown) => x.internal(err),
      );
      return;
    }
    this.limit(x, key, credits, next, arg);
  }

  private limit<T>(x: ClientTarget, key: KeyEntry, credits: number, next: Next<T>, arg: T): void {
    // A key with nothing to count reads no clock.
    if (this.rate.idle(key)) return next(x, arg);
    const now = Date.now();
    const a = this.rate.take(key, credits, now);
    if (a === null) return next(x, arg);
    if (!(a instanceof Promise)) return this.limited(x, key, credits, next, arg, now, a);
    a.then(
      (v) => x.later(() => this.limited(x, key, credits, next, arg, now, v)),
      (err: unknown) => x.internal(err),
    );
  }

  private limited<T>(x: ClientTarget, key: KeyEntry, credits: number, next: Next<T>, arg: T, now: number, { rate: r, quota: q }: Admitted): void {
    if (r !== null && !r.ok) {
      this.rate.rateLimited(key);
      x.limitHeaders = limitHeaders(r, null, 0, now);
      return x.refuse(refused('rate-limited', secondsUntil(r.endsAt, now)));
    }
    if (q !== null && !q.ok) {
      this.rate.quotaExceeded(key);
      x.limitHeaders = limitHeaders(r, q, 0, now);
      return x.refuse({ ok: false, reason: 'quota-exceeded', retryAfter: secondsUntil(q.endsAt, now), resetsAt: new Date(q.endsAt).toISOString() });
    }
    x.limitHeaders = limitHeaders(r, q, credits, now);
    next(x, arg);
  }
}

/**
 * Admission's admit step as a layer, the top of every chain (chains.ts): a
 * request of a verified key (`x.key`) is served only if its JWT, rate limit
 * and quota allow, in credits (the manifest's `credits`, else one per call);
 * a refusal is answered in the interface's envelope. An admitted request is
 * counted as used, per method (a batch's each), and goes on to `next` (the
 * cache's front, or the chain's dispatch): a cache hit is limited and
 * counted as any call. A key without JWT or limits pays a null test.
 */
export class AdmitLayer {
  constructor(
    private readonly stage: AdmissionStage,
    /** The chain's path, for the usage count. */
    private readonly chain: string,
    private readonly usage: Usage,
    /** What a method or endpoint costs, where the manifest has `credits`; null: every call costs 1. */
    private readonly cost: ((name: string) => number) | null,
    private readonly next: Dispatch<ClientTarget>,
  ) {}

  readonly front = (x: ClientTarget, request: ForwardRequest): Cancelable => {
    const key = x.key!;
    if (this.stage.open(key)) {
      this.count(key, request);
      return this.next(x, request);
    }
    this.stage.admit(x, key, this.credits(request), this.admitted, request);
    // Admitted at once: admitted() sent it on, and x.forward is what it sent; else it goes on once jose or the store answers.
    return x.forward ?? NOTHING;
  };

  private readonly admitted = (x: ClientTarget, request: ForwardRequest): void => {
    this.count(x.key!, request);
    x.forward = this.next(x, request);
  };

  /** The request's credits: each of its calls' methods (a call's method, an endpoint); without `credits`, one per call. */
  private credits(request: ForwardRequest): number {
    const cost = this.cost;
    const calls = request.calls.batch;
    if (calls === undefined) return cost === null ? 1 : cost(request.calls.one.method);
    if (cost === null) return calls.length;
    let n = 0;
    for (const c of calls) n += cost(c.method);
    return n;
  }

  /**
   * A call the chain answers itself, with no layer under this one (a socket's
   * subscription calls, ws/): admitted and counted as a call of its label, as
   * any call is, then `answer`.
   */
  local(x: ClientTarget, answer: (x: ClientTarget) => void): void {
    const key = x.key!;
    if (this.stage.open(key)) {
      this.countOne(key, x.label);
      return answer(x);
    }
    this.stage.admit(x, key, this.cost === null ? 1 : this.cost(x.label), this.answered, answer);
  }

  private readonly answered = (x: ClientTarget, answer: (x: ClientTarget) => void): void => {
    this.countOne(x.key!, x.label);
    answer(x);
  };

  /**
   * What the chain pushes to a key unasked (a socket's notification): taken
   * from the key's quota alone (not its rate limit) and counted as a call of
   * `method`. The quota's answer (null: the key has none); one spent at once
   * is not counted.
   */
  pushed(key: KeyEntry, method: string): Taken | Promise<Taken> | null {
    const credits = this.cost === null ? 1 : this.cost(method);
    const q = key.quota === null ? null : this.stage.quota(key, credits);
    if (q !== null && !(q instanceof Promise) && !q.ok) return q;
    addUsage(this.usage.bucket(key.id, this.chain), method, 1, credits);
    return q;
  }

  private countOne(key: KeyEntry, method: string): void {
    addUsage(this.usage.bucket(key.id, this.chain), method, 1, this.cost === null ? 1 : this.cost(method));
  }

  /** Counted as used: one call per method (each of a batch's calls), at its credits. */
  private count(key: KeyEntry, request: ForwardRequest): void {
    const cost = this.cost;
    const bucket = this.usage.bucket(key.id, this.chain);
    const calls = request.calls.batch;
    if (calls === undefined) addUsage(bucket, request.calls.one.method, 1, cost === null ? 1 : cost(request.calls.one.method));
    else for (const c of calls) addUsage(bucket, c.method, 1, cost === null ? 1 : cost(c.method));
  }
}
