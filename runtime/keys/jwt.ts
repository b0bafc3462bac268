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

/** Does the Authorization header carry a token that verifies against one of `keys`? Never rejects. */
export async function bearerVerifies(authorization: string | undefined, keys: readonly JwtKey[], audience: string | null): Promise<boolean> {
  if (authorization === undefined || authorization.length < 8 || authorization.slice(0, 7).toLowerCase() !== 'bearer ') return false;
  const token = authorization.slice(7).trim();
  try {
    const header = decodeProtectedHeader(token);
    const k = keys.find((c) => c.kid === header.kid);
    if (k === undefined || header.alg !== k.alg) return false;
    await jwtVerify(token, k.key, {
      algorithms: [k.alg],
      clockTolerance: LEEWAY_SECONDS,
      requiredClaims: ['exp'],
      ...(audience === null ? {} : { audience }),
    });
    return true;
  } catch {
    return false;
  }
}
