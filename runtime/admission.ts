// The admission stage every interface calls the same way: who is asking (the
// key: extraction, verification, the chain's scope), then whether they may be
// served now (the steps: today the rate limit). A step answers at once when it
// can (a Map lookup, the in-memory limiter) and with a promise only when it
// must ask a store (Redis), so a request pays for a promise only then.
import type { Exchange } from './exchange.ts';
import type { Refusal, Refused } from './envelope.ts';
import { isKeyShaped, type KeyEntry, type KeyStore } from './keys.ts';
import type { Metrics } from './metrics.ts';
import type { RateLimiter } from './ratelimit.ts';
import type { RateLimitSpec, RouteSpec } from './types.ts';
import type { BlockList } from 'node:net';
import { clientAddress, requestRefusal, type PolicyReason } from './key-policy.ts';
import { bearerVerifies } from './jwt.ts';

export function isRefused(v: KeyEntry | Refused): v is Refused {
  return (v as Refused).ok === false;
}

/** One check of the stage: null to pass, a refusal to stop, a promise only when it must wait for a store. */
export interface AdmissionStep {
  check(key: KeyEntry, calls: number): Refused | null | Promise<Refused | null>;
}

/** Where an admitted request goes on: a method of the interface's route handler, with its own argument. */
export type Next<T> = (x: Exchange, arg: T) => void;

const refused = (reason: Refusal, retryAfter = 0): Refused => ({ ok: false, reason, retryAfter });
const MISSING = refused('auth-missing');
const INVALID = refused('auth-invalid');
const FORBIDDEN = refused('auth-forbidden');
const CONFLICT = refused('auth-conflict');
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

/** The key's rate limit, else the manifest's: a fixed window, a batch counting as its items. */
export class RateStep implements AdmissionStep {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly fallback: RateLimitSpec | null,
    private readonly metrics: Metrics,
  ) {}

  /** Nothing to check for this key: the stage skips the step. */
  idle(key: KeyEntry): boolean {
    return (key.rateLimit ?? this.fallback) === null;
  }

  check(key: KeyEntry, calls: number): Refused | null | Promise<Refused | null> {
    const v = this.limiter.take(key.id, (key.rateLimit ?? this.fallback)!, calls);
    if (!(v instanceof Promise)) return this.verdict(key, v.ok, v.retryAfter);
    return v.then((w) => this.verdict(key, w.ok, w.retryAfter));
  }

  private verdict(key: KeyEntry, ok: boolean, retryAfter: number): Refused | null {
    if (ok) return null;
    this.metrics.rateLimited.labels(key.id).inc();
    return refused('rate-limited', retryAfter);
  }
}

export class AdmissionStage {
  constructor(
    private readonly keys: KeyStore,
    private readonly rate: RateStep,
    private readonly settings: PolicySettings = { trustedProxies: null, jwtAudience: null },
  ) {}

  /**
   * The key: it may come in the X-API-Key header, a path segment and the
   * api_key query parameter; if it comes in several, all must be equal. On
   * success the exchange knows its key (for the access log).
   */
  identify(x: Exchange, route: RouteSpec, pathKey: string | null, queryKeys: readonly string[]): KeyEntry | Refused {
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
    if (!r.ok) return r.reason === 'invalid' ? INVALID : FORBIDDEN;
    x.key = r.entry;
    const p = r.entry.policy;
    if (p !== null) {
      // The key's policy: where the request comes from, and (Rosetta, Blockbook) the endpoint.
      if (p.request) {
        const req = x.req;
        const address = clientAddress(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], this.settings.trustedProxies);
        const why = requestRefusal(p, req.headers, address, Date.now());
        if (why !== null) return POLICY[why as Exclude<PolicyReason, 'contract'>];
      }
      if (p.methods !== null && route.interface !== 'evm-jsonrpc' && !p.methods.has(x.label)) return POLICY.method;
    }
    return r.entry;
  }

  /**
   * Runs the steps for `calls` calls of `key`; if all pass, `next(x, arg)`,
   * at once when every step answered at once. A refusal is answered here, in
   * the exchange's envelope.
   */
  admit<T>(x: Exchange, key: KeyEntry, calls: number, next: Next<T>, arg: T): void {
    const jwt = key.policy?.jwt;
    if (jwt) {
      // A key with a JWT waits for its verification (asynchronous: only such keys pay for it).
      bearerVerifies(x.req.headers.authorization, jwt, this.settings.jwtAudience).then(
        (ok) => (ok ? x.later(() => this.limit(x, key, calls, next, arg)) : x.refuse(POLICY.jwt)),
        (err: unknown) => x.internal(err),
      );
      return;
    }
    this.limit(x, key, calls, next, arg);
  }

  private limit<T>(x: Exchange, key: KeyEntry, calls: number, next: Next<T>, arg: T): void {
    if (this.rate.idle(key)) return next(x, arg);
    const r = this.rate.check(key, calls);
    if (r === null) return next(x, arg);
    if (!(r instanceof Promise)) return x.refuse(r);
    r.then(
      (v) => (v === null ? x.later(() => next(x, arg)) : x.refuse(v)),
      (err: unknown) => x.internal(err),
    );
  }
}
