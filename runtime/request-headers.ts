// Every request header the runtime reads, in one table. The CORS preflight's
// grant is derived from it: a browser sends a cross-origin request with a
// header its script set only if the preflight granted that header, so a
// header read here but not granted is one no browser dapp can use (issue 32:
// a key's JWT in Authorization). test/unit/runtime/request-headers.test.ts
// finds every read of a request header in runtime/ and fails on one missing
// here, and on an entry nothing reads any more.

/**
 * Who sets the header: a page's script (the preflight must grant it), the
 * browser itself (a forbidden header name: no script can set it, nothing to
 * grant), or a proxy in front of the gateway (believed only from trusted
 * proxies; a page has no reason to send it).
 */
export type SetBy = 'script' | 'browser' | 'proxy';

export const REQUEST_HEADERS = {
  // admission.ts: the key, and a key's JWT (Bearer).
  'x-api-key': 'script',
  authorization: 'script',
  // exchange.ts: the client's id, passed on and returned.
  'x-request-id': 'script',
  // key-policy.ts: allow.userAgents (Firefox lets a script set it; Chromium ignores it).
  'user-agent': 'script',
  // Passed on to Rosetta (accept) and Blockbook (all).
  accept: 'script',
  'accept-language': 'script',
  'content-type': 'script',
  'if-none-match': 'script',
  'if-modified-since': 'script',
  'accept-encoding': 'browser',
  // cors.ts, key-policy.ts (allow.origins).
  origin: 'browser',
  // server.ts: HTTP/1.1 without Host is refused.
  host: 'browser',
  // exchange.ts readBody: a body declared too large is refused before it is read.
  'content-length': 'browser',
  // admission.ts: the client's address behind trustedProxies (allow.ips).
  'x-forwarded-for': 'proxy',
  // ws/sockets.ts: a WebSocket upgrade, and how the body of an upgrade request to anything else comes.
  upgrade: 'browser',
  'transfer-encoding': 'browser',
} as const satisfies Readonly<Record<string, SetBy>>;

export type RequestHeader = keyof typeof REQUEST_HEADERS;

/** The preflight's Access-Control-Allow-Headers: every header the gateway reads that a page's script may set. */
export const CORS_ALLOW_HEADERS: string = (Object.keys(REQUEST_HEADERS) as RequestHeader[])
  .filter((name) => REQUEST_HEADERS[name] === 'script')
  .sort()
  .join(', ');
