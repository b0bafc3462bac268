// Error catalogue for the blockbook interface. Bodies use Blockbook's own
// shape, {"error": "<message>"}; only the gateway's own failures come from
// here, upstream answers pass through unchanged.
export interface BlockbookErrorEntry {
  readonly message: string;
  readonly status: number;
}

export const BLOCKBOOK_ERRORS = {
  GW_AUTH_KEY_MISSING: { message: 'API key required', status: 401 },
  GW_AUTH_KEY_INVALID: { message: 'Invalid API key', status: 403 },
  GW_AUTH_KEY_FORBIDDEN: { message: 'API key not allowed for this chain', status: 403 },
  GW_AUTH_KEY_CONFLICT: { message: 'Conflicting API keys in request', status: 400 },
  GW_AUTH_KEY_STORE_UNAVAILABLE: { message: 'Key store unavailable', status: 503 },
  // With "reason": origin, ip, user_agent, expired, jwt, method.
  GW_KEY_POLICY: { message: "Request not allowed by this key's policy", status: 403 },
  GW_KEY_JWT: { message: "Request not allowed by this key's policy", status: 401 },
  GW_BB_NOT_FOUND: { message: 'Not found', status: 404 },
  GW_BB_MALFORMED_HTTP: { message: 'Malformed HTTP request', status: 400 },
  GW_BB_EXPECTATION_FAILED: { message: 'Unsupported Expect header', status: 417 },
  GW_BB_METHOD_NOT_ALLOWED: { message: 'Method not allowed', status: 405 },
  GW_BB_BAD_PAGE: { message: "Parameter 'page' must be a positive integer", status: 400 },
  GW_BB_BAD_PAGE_SIZE: { message: "Parameter 'pageSize' must be a positive integer no larger than the limit", status: 400 },
  // The body names the parameter and the problem: {"error": "Invalid parameter '<name>': <problem>", "parameter": "<name>"} (validate: params).
  GW_BB_INVALID_PARAM: { message: 'Invalid parameter', status: 400 },
  GW_BB_BODY_TOO_LARGE: { message: 'Request body too large', status: 413 },
  GW_BB_BODY_TIMEOUT: { message: 'Request body not received in time', status: 408 },
  GW_BB_RATE_LIMITED: { message: 'Rate limit exceeded', status: 429 },
  // With "reason":"quota" and "resetsAt".
  GW_BB_QUOTA_EXCEEDED: { message: 'Quota exceeded', status: 429 },
  GW_BB_UPSTREAM_UNAVAILABLE: { message: 'Upstream unavailable', status: 502 },
  GW_BB_UPSTREAM_TIMEOUT: { message: 'Upstream timeout', status: 504 },
  GW_BB_NO_HEALTHY_UPSTREAM: { message: 'No healthy upstream', status: 503 },
  // Every upstream throttled the request or is in a throttle's cooldown; with Retry-After.
  GW_BB_UPSTREAM_THROTTLED: { message: 'Every upstream throttled', status: 429 },
  GW_BB_INTERNAL: { message: 'Internal server error', status: 500 },
  // A WebSocket upgrade by a key that already holds websocket.maxConnectionsPerKey sockets; with "maxConnectionsPerKey".
  GW_WS_TOO_MANY_CONNECTIONS: { message: 'Limit exceeded: WebSocket connections per key', status: 429 },
} as const satisfies Record<string, BlockbookErrorEntry>;

export type BlockbookErrorName = keyof typeof BLOCKBOOK_ERRORS;

export function blockbookErrorJson(name: BlockbookErrorName, reason?: string, resetsAt?: string): string {
  const r = (reason === undefined ? '' : `,"reason":${JSON.stringify(reason)}`) + (resetsAt === undefined ? '' : `,"resetsAt":${JSON.stringify(resetsAt)}`);
  return `{"error":${JSON.stringify(BLOCKBOOK_ERRORS[name].message)}${r}}`;
}
