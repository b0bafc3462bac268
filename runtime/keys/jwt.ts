// A key's JWT check (keys file `jwt.keys`): the request must also carry
// `Authorization: Bearer <JWT>` that verifies against one of the key's public
// keys, picked by the token's `kid`, with that key's algorithm only (RS256 or
// ES256: `none`, HS256 and any other algorithm are refused, so a public key
// can never be used as an HMAC secret). `exp` is required, `nbf` honoured,
// with 30 s of leeway; `aud` must name the manifest's jwtAudience when it sets
// one. Verification is jose's.
import { decodeProtectedHeader, jwtVerify } from 'jose';
import type { JwtKey } from './key-policy.ts';

const LEEWAY_SECONDS = 30;

/** A token that verified: the key it verified against and its time claims (seconds since the epoch), for stillVerified. */
export interface Verified {
  readonly key: JwtKey;
  readonly exp: number;
  readonly nbf: number | null;
}

/** Does the Authorization header carry a token that verifies against one of `keys`? Never rejects. */
export async function bearerVerifies(authorization: string | undefined, keys: readonly JwtKey[], audience: string | null): Promise<boolean> {
  return (await verifyBearer(authorization, keys, audience)) !== null;
}

/** The Authorization header's token verified against one of `keys`: what it verified against, or null. Never rejects. */
export async function verifyBearer(authorization: string | undefined, keys: readonly JwtKey[], audience: string | null): Promise<Verified | null> {
  if (authorization === undefined || authorization.length < 8 || authorization.slice(0, 7).toLowerCase() !== 'bearer ') return null;
  const token = authorization.slice(7).trim();
  try {
    const header = decodeProtectedHeader(token);
    const k = keys.find((c) => c.kid === header.kid);
    if (k === undefined || header.alg !== k.alg) return null;
    const { payload } = await jwtVerify(token, k.key, {
      algorithms: [k.alg],
      clockTolerance: LEEWAY_SECONDS,
      requiredClaims: ['exp'],
      ...(audience === null ? {} : { audience }),
    });
    // jose checked both are numbers (exp is required).
    return { key: k, exp: payload.exp!, nbf: payload.nbf ?? null };
  } catch {
    return null;
  }
}

/**
 * The same token checked again, now, against `keys` (a socket's, at each
 * ping interval), without verifying its signature again: jose's verdict
 * cannot change while the key it verified against is still among `keys`
 * (same kid, algorithm and public key; the audience is the manifest's), so
 * only the clock is checked, with jose's rules and leeway. null: that key
 * changed or is gone, the token must be verified again (verifyBearer).
 */
export function stillVerified(v: Verified, keys: readonly JwtKey[], nowMs: number): boolean | null {
  const k = keys.find((c) => c.kid === v.key.kid);
  // A keys file reload or a key store's new lookup builds new objects for the same key: compared by value.
  if (k === undefined || (k !== v.key && (k.alg !== v.key.alg || !k.key.equals(v.key.key)))) return null;
  const now = Math.floor(nowMs / 1000);
  return v.exp > now - LEEWAY_SECONDS && (v.nbf === null || v.nbf <= now + LEEWAY_SECONDS);
}
