// Failures every interface can meet, by an interface-neutral name. Each
// interface maps them into its own envelope (a JSON-RPC error object, a
// Rosetta Error, Blockbook's {"error": ...}) with its own status; the answers
// have no request-specific part, so they are made once.
import type { FailKind } from './dispatch.ts';
import type { PolicyReason } from './keys/key-policy.ts';

/** A request its key's policy refuses, and which check refused it. */
export type PolicyRefusal = 'policy-origin' | 'policy-ip' | 'policy-user-agent' | 'policy-expired' | 'policy-jwt' | 'policy-method';

/** Why the admission stage refused a request. */
export type Refusal = 'auth-missing' | 'auth-invalid' | 'auth-forbidden' | 'auth-conflict' | 'key-store-unavailable' | 'rate-limited' | 'quota-exceeded' | PolicyRefusal;

/** In a quota refusal's body, where the time its window resets goes (the body is made once). */
export const RESETS_AT = '@@resetsAt@@';

/** The `reason` a client sees for each policy refusal. */
export const POLICY_REASONS: Readonly<Record<PolicyRefusal, PolicyReason>> = {
  'policy-origin': 'origin',
  'policy-ip': 'ip',
  'policy-user-agent': 'user_agent',
  'policy-expired': 'expired',
  'policy-jwt': 'jwt',
  'policy-method': 'method',
};

/** The key refusals' catalogue names: the same in every interface (docs/errors.md). */
export const AUTH_NAMES = {
  'auth-missing': 'GW_AUTH_KEY_MISSING',
  'auth-invalid': 'GW_AUTH_KEY_INVALID',
  'auth-forbidden': 'GW_AUTH_KEY_FORBIDDEN',
  'auth-conflict': 'GW_AUTH_KEY_CONFLICT',
  'key-store-unavailable': 'GW_AUTH_KEY_STORE_UNAVAILABLE',
} as const;

/**
 * Failures whose catalogue name is the same in every interface but for the
 * interface's prefix (GW_RPC_, GW_BB_, GW_ROSETTA_: docs/errors.md).
 */
const PREFIXED = {
  'rate-limited': 'RATE_LIMITED',
  'quota-exceeded': 'QUOTA_EXCEEDED',
  unavailable: 'UPSTREAM_UNAVAILABLE',
  timeout: 'UPSTREAM_TIMEOUT',
  'no-upstream': 'NO_HEALTHY_UPSTREAM',
  throttled: 'UPSTREAM_THROTTLED',
  'body-too-large': 'BODY_TOO_LARGE',
  'body-timeout': 'BODY_TIMEOUT',
  'malformed-http': 'MALFORMED_HTTP',
  'expectation-failed': 'EXPECTATION_FAILED',
  internal: 'INTERNAL',
} as const;
type Prefixed = keyof typeof PREFIXED;
type AuthFailure = keyof typeof AUTH_NAMES;

/**
 * An interface's catalogue name for every failure: the key refusals' (AUTH_NAMES), the shared ones under its
 * `prefix`, and its `own` (the policy refusals, and the failures whose names differ; a shared one may be given
 * another name). The names are typed from the prefix, so the caller's Record of its catalogue's names checks them.
 */
export function failureNames<P extends string, N extends string>(
  prefix: P,
  own: Readonly<Record<Exclude<Failure, Prefixed | AuthFailure>, N> & Partial<Record<Prefixed, N>>>,
): Readonly<Record<Failure, N | `${P}_${(typeof PREFIXED)[Prefixed]}` | (typeof AUTH_NAMES)[AuthFailure]>> {
  const shared = {} as Record<Prefixed, `${P}_${(typeof PREFIXED)[Prefixed]}`>;
  for (const f of Object.keys(PREFIXED) as Prefixed[]) shared[f] = `${prefix}_${PREFIXED[f]}`;
  return { ...AUTH_NAMES, ...shared, ...own };
}

/** A policy refusal's catalogue name in every interface: one for all the checks, another (or the same) for the JWT. */
export function policyNames<N extends string>(policy: N, jwt: N): Readonly<Record<PolicyRefusal, N>> {
  return { 'policy-origin': policy, 'policy-ip': policy, 'policy-user-agent': policy, 'policy-expired': policy, 'policy-jwt': jwt, 'policy-method': policy };
}

/** The `reason` a refusal names: a policy check, or 'quota'; undefined for the others. */
export function policyReason(f: Failure): PolicyReason | 'quota' | undefined {
  return f === 'quota-exceeded' ? 'quota' : POLICY_REASONS[f as PolicyRefusal];
}

/** The admission stage's answer when it refuses: each interface maps the reason into its envelope. */
export interface Refused {
  readonly ok: false;
  readonly reason: Refusal;
  /** Seconds until the request may succeed (Retry-After), or 0. */
  readonly retryAfter: number;
  /** Over quota: when its window resets (ISO time). */
  readonly resetsAt?: string;
}

export type Failure =
  | Refusal
  | FailKind
  /** No route, endpoint or path of this interface. */
  | 'not-found'
  /** An HTTP method the route does not take. */
  | 'method-not-allowed'
  | 'body-too-large'
  /** A body that did not arrive within limits.bodyTimeoutMs of its headers. */
  | 'body-timeout'
  /** A request Node's parser refused, or one without Host. */
  | 'malformed-http'
  /** An Expect other than 100-continue. */
  | 'expectation-failed'
  | 'internal';

export interface Answer {
  readonly status: number;
  readonly body: string;
}

/** The answer per failure, for one interface. */
export type Envelope = Readonly<Record<Failure, Answer>>;

/** Builds an interface's envelope from its catalogue names; the Record type makes every failure mapped. */
export function envelope<N extends string>(names: Readonly<Record<Failure, N>>, answer: (name: N, reason: PolicyReason | 'quota' | undefined) => Answer): Envelope {
  const out = {} as Record<Failure, Answer>;
  for (const f of Object.keys(names) as Failure[]) out[f] = answer(names[f], policyReason(f));
  return out;
}
