// JSON-RPC error catalogue for the evm-jsonrpc interface. The key is the
// stable name; `code` is what a client sees in `error.code`. Codes follow
// JSON-RPC 2.0 and EIP-1474 where one fits; the gateway's own codes sit in
// -32040..-32069, clear of EIP-1474's -32000..-32006. Never reuse a retired name
// or give a code a new meaning: wallets match on them.
export interface RpcErrorEntry {
  readonly code: number;
  readonly message: string;
  readonly status: number;
}

export const RPC_ERRORS = {
  GW_RPC_PARSE_ERROR: { code: -32700, message: 'Parse error', status: 400 },
  GW_RPC_INVALID_REQUEST: { code: -32600, message: 'Invalid Request', status: 400 },
  GW_RPC_MALFORMED_HTTP: { code: -32600, message: 'Invalid Request: malformed HTTP request', status: 400 },
  GW_RPC_EMPTY_BATCH: { code: -32600, message: 'Invalid Request: empty batch', status: 400 },
  GW_RPC_TOO_DEEP: { code: -32600, message: 'Invalid Request: nested more than 128 levels deep', status: 400 },
  GW_RPC_EXPECTATION_FAILED: { code: -32600, message: 'Invalid Request: unsupported Expect header', status: 417 },
  GW_RPC_BODY_TIMEOUT: { code: -32600, message: 'Invalid Request: request body not received in time', status: 408 },
  GW_RPC_METHOD_NOT_FOUND: { code: -32601, message: 'Method not found', status: 200 },
  // data: {"path": JSON pointer into params, "message"} (validate: params).
  GW_RPC_INVALID_PARAMS: { code: -32602, message: 'Invalid params', status: 200 },
  GW_RPC_INTERNAL: { code: -32603, message: 'Internal error', status: 500 },
  // data, when the key's own maxBatchSize (keys file) is the limit: {"reason":"key","maxBatchSize":N}.
  GW_RPC_BATCH_TOO_LARGE: { code: -32005, message: 'Limit exceeded: batch too large', status: 413 },
  GW_RPC_BODY_TOO_LARGE: { code: -32005, message: 'Limit exceeded: request body too large', status: 413 },
  GW_RPC_RATE_LIMITED: { code: -32005, message: 'Limit exceeded: rate limit', status: 429 },
  // data: {"reason":"quota","resetsAt":"<ISO time>"}
  GW_RPC_QUOTA_EXCEEDED: { code: -32005, message: 'Limit exceeded: quota', status: 429 },
  GW_AUTH_KEY_MISSING: { code: -32040, message: 'API key required', status: 401 },
  GW_AUTH_KEY_INVALID: { code: -32041, message: 'Invalid API key', status: 403 },
  GW_AUTH_KEY_FORBIDDEN: { code: -32042, message: 'API key not allowed for this chain', status: 403 },
  GW_AUTH_KEY_CONFLICT: { code: -32043, message: 'Conflicting API keys in request', status: 400 },
  GW_AUTH_KEY_STORE_UNAVAILABLE: { code: -32045, message: 'Key store unavailable', status: 503 },
  // data.reason names the check: origin, ip, user_agent, expired, jwt (the request), method, contract (one call).
  GW_KEY_POLICY: { code: -32044, message: "Request not allowed by this key's policy", status: 403 },
  GW_KEY_JWT: { code: -32044, message: "Request not allowed by this key's policy", status: 401 },
  GW_KEY_CALL_POLICY: { code: -32044, message: "Request not allowed by this key's policy", status: 200 },
  GW_RPC_UPSTREAM_UNAVAILABLE: { code: -32050, message: 'Upstream unavailable', status: 502 },
  GW_RPC_UPSTREAM_TIMEOUT: { code: -32051, message: 'Upstream timeout', status: 504 },
  GW_RPC_NO_HEALTHY_UPSTREAM: { code: -32052, message: 'No healthy upstream', status: 503 },
  GW_RPC_UPSTREAM_BAD_RESPONSE: { code: -32053, message: 'Invalid upstream response', status: 502 },
  // Every upstream the call could go to throttled it or is in a throttle's cooldown; with Retry-After.
  GW_RPC_UPSTREAM_THROTTLED: { code: -32005, message: 'Limit exceeded: every upstream throttled', status: 429 },
  GW_RPC_NOT_FOUND: { code: -32060, message: 'Not found', status: 404 },
  GW_RPC_HTTP_METHOD_NOT_ALLOWED: { code: -32061, message: 'HTTP method not allowed; use POST', status: 405 },
  // WebSocket (docs/websocket.md): the upgrade refused for the key's socket count; an eth_subscribe past
  // maxSubscriptionsPerConnection, data {"maxSubscriptionsPerConnection":N}; eth_unsubscribe of an id the socket does not hold;
  // an eth_subscribe while the gateway drains (the socket closes with 1001 once its calls are answered).
  GW_WS_TOO_MANY_CONNECTIONS: { code: -32005, message: 'Limit exceeded: WebSocket connections per key', status: 429 },
  GW_WS_TOO_MANY_SUBSCRIPTIONS: { code: -32005, message: 'Limit exceeded: subscriptions per connection', status: 200 },
  GW_WS_SUBSCRIPTION_NOT_FOUND: { code: -32062, message: 'Subscription not found', status: 200 },
  GW_WS_DRAINING: { code: -32005, message: 'Limit exceeded: server going away', status: 200 },
} as const satisfies Record<string, RpcErrorEntry>;

export type RpcErrorName = keyof typeof RPC_ERRORS;

/**
 * The error a call gets when its upstream request failed (proxy.ts's FailKind):
 * a lone call's answer (kinds/evm/module.ts) and a batch's slot (pool/batch.ts)
 * alike.
 */
export const RPC_FAILED = {
  unavailable: 'GW_RPC_UPSTREAM_UNAVAILABLE',
  timeout: 'GW_RPC_UPSTREAM_TIMEOUT',
  'no-upstream': 'GW_RPC_NO_HEALTHY_UPSTREAM',
  'bad-response': 'GW_RPC_UPSTREAM_BAD_RESPONSE',
  throttled: 'GW_RPC_UPSTREAM_THROTTLED',
} as const satisfies Readonly<Record<string, RpcErrorName>>;

/** The JSON text of one error response object; `idJson` is the id already as JSON, `dataJson` the error's data as JSON. */
export function rpcErrorJson(name: RpcErrorName, idJson: string, dataJson?: string): string {
  const e = RPC_ERRORS[name];
  const data = dataJson === undefined ? '' : `,"data":${dataJson}`;
  return `{"jsonrpc":"2.0","id":${idJson},"error":{"code":${e.code},"message":${JSON.stringify(e.message)}${data}}}`;
}
