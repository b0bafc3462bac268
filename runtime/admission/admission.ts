// The admission stage every interface calls the same way: who is asking (the
// key: extraction, verification, the chain's scope, the key's policy), then
// whether they may be served now (its JWT, its rate limit and quota, in
// credits). A step answers at once when it can (a Map lookup, the in-memory
// limiter) and with a promise only when it must (jose, Redis), so a request
// pays for a promise only then, and a key without a policy or limits pays a
// null test for each.
import type { Exchange } from '../exchange.ts';
import type { Refusal, Refused } from '../envelope.ts';
import { isKeyShaped, type KeyCheck, type KeyEntry, type KeyLookup } from '../keys/keys.ts';
import type { Metrics } from '../observe/metrics.ts';
import { quotaWindow, rateWindow, type RateLimiter, type Taken } from './ratelimit.ts';
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

/** Where an admitted request goes on: a method of the interface's route handler, with its own argument. */
export type Next<T> = (x: Exchange, arg: T) => void;

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
 * credits. The rate limit is taken first, then the quota, so a request the
 * rate limit refuses never spends quota.
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

  rate(key: KeyEntry, credits: number, now: number): Taken | Promise<Taken> | null {
    const r = key.rateLimit ?? this.fallback;
    return r === null ? null : this.limiter.take(key.id, rateWindow(r, now), credits);
  }

  quota(key: KeyEntry, credits: number, now: number): Taken | Promise<Taken> | null {
    return key.quota === null ? null : this.limiter.take(key.id, quotaWindow(key.quota, now), credits);
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
  identify(x: Exchange, route: RouteSpec, pathKey: string | null, queryKeys: readonly string[], endpoint: string | null): KeyEntry | Refused | Promise<KeyEntry | Refused> {
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
  private clientOf(x: Exchange): string {
    return clientAddress(x.req.socket.remoteAddress ?? '', x.req.headers['x-forwarded-for'], this.settings.trustedProxies);
  }

  private checked(x: Exchange, endpoint: string | null, r: KeyCheck): KeyEntry | Refused {
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

  /**
   * Runs the steps for a request of `credits` credits of `key`; if all pass,
   * `next(x, arg)`, at once when every step answered at once. A refusal is
   * answered here, in the exchange's envelope.
   */
  admit<T>(x: Exchange, key: KeyEntry, credits: number, next: Next<T>, arg: T): void {
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

  private limit<T>(x: Exchange, key: KeyEntry, credits: number, next: Next<T>, arg: T): void {
    if (this.rate.idle(key)) return next(x, arg);
    const now = Date.now();
    const r = this.rate.rate(key, credits, now);
    if (!(r instanceof Promise)) return this.afterRate(x, key, credits, next, arg, now, r);
    r.then(
      (v) => x.later(() => this.afterRate(x, key, credits, next, arg, now, v)),
      (err: unknown) => x.internal(err),
    );
  }

  private afterRate<T>(x: Exchange, key: KeyEntry, credits: number, next: Next<T>, arg: T, now: number, r: Taken | null): void {
    if (r !== null && !r.ok) {
      this.rate.rateLimited(key);
      x.limitHeaders = limitHeaders(r, null, 0, now);
      return x.refuse(refused('rate-limited', secondsUntil(r.endsAt, now)));
    }
    const q = this.rate.quota(key, credits, now);
    if (!(q instanceof Promise)) return this.afterQuota(x, key, credits, next, arg, now, r, q);
    q.then(
      (v) => x.later(() => this.afterQuota(x, key, credits, next, arg, now, r, v)),
      (err: unknown) => x.internal(err),
    );
  }

  private afterQuota<T>(x: Exchange, key: KeyEntry, credits: number, next: Next<T>, arg: T, now: number, r: Taken | null, q: Taken | null): void {
    if (q !== null && !q.ok) {
      this.rate.quotaExceeded(key);
      x.limitHeaders = limitHeaders(r, q, 0, now);
      return x.refuse({ ok: false, reason: 'quota-exceeded', retryAfter: secondsUntil(q.endsAt, now), resetsAt: new Date(q.endsAt).toISOString() });
    }
    x.limitHeaders = limitHeaders(r, q, credits, now);
    next(x, arg);
  }
}
