// Rosetta error catalogue: the gateway's own errors. Rosetta requires every
// code to be unique and its message never to change; context goes in
// `details`. Codes live in 6000..6099, clear of the Cardano Rosetta catalogue
// (4000..4039 and 5000..5059, both implementations), which a test checks.
// 4002 and 4004 are Cardano's own codes, reused on purpose so clients that know
// Cardano Rosetta recognise a network mismatch from the gateway too.
// Every Rosetta error is sent with HTTP 500.
export interface RosettaErrorEntry {
  readonly code: number;
  readonly message: string;
  readonly retriable: boolean;
}

export const ROSETTA_ERRORS = {
  GW_ROSETTA_NETWORK_NOT_FOUND: { code: 4002, message: 'Network not found', retriable: false },
  GW_ROSETTA_INVALID_BLOCKCHAIN: { code: 4004, message: 'Invalid blockchain', retriable: false },
  GW_AUTH_KEY_MISSING: { code: 6001, message: 'API key required', retriable: false },
  GW_AUTH_KEY_INVALID: { code: 6002, message: 'Invalid API key', retriable: false },
  GW_AUTH_KEY_FORBIDDEN: { code: 6003, message: 'API key not allowed for this network', retriable: false },
  GW_AUTH_KEY_CONFLICT: { code: 6004, message: 'Conflicting API keys in request', retriable: false },
  GW_AUTH_KEY_STORE_UNAVAILABLE: { code: 6007, message: 'Key store unavailable', retriable: true },
  // details.reason names the check: origin, ip, user_agent, expired, jwt, method.
  GW_KEY_POLICY: { code: 6005, message: "Request not allowed by this key's policy", retriable: false },
  GW_ROSETTA_INVALID_JSON: { code: 6010, message: 'Request body is not valid JSON', retriable: false },
  GW_ROSETTA_INVALID_REQUEST: { code: 6011, message: 'Invalid request: network_identifier is missing or malformed', retriable: false },
  GW_ROSETTA_BODY_TOO_LARGE: { code: 6012, message: 'Request body too large', retriable: false },
  GW_ROSETTA_UNKNOWN_ENDPOINT: { code: 6013, message: 'Unknown Rosetta endpoint', retriable: false },
  GW_ROSETTA_METHOD_NOT_ALLOWED: { code: 6014, message: 'HTTP method not allowed; use POST', retriable: false },
  GW_ROSETTA_MALFORMED_HTTP: { code: 6015, message: 'Malformed HTTP request', retriable: false },
  GW_ROSETTA_EXPECTATION_FAILED: { code: 6016, message: 'Unsupported Expect header', retriable: false },
  GW_ROSETTA_TOO_DEEP: { code: 6017, message: 'Request body nested too deeply', retriable: false },
  // details: {path: JSON pointer into the body, message} (validate: params).
  GW_ROSETTA_INVALID_BODY: { code: 6018, message: 'Invalid request body: does not match the Rosetta API', retriable: false },
  GW_ROSETTA_BODY_TIMEOUT: { code: 6019, message: 'Request body not received in time', retriable: true },
  GW_ROSETTA_RATE_LIMITED: { code: 6020, message: 'Rate limit exceeded', retriable: true },
  // details: {reason: "quota", resetsAt}
  GW_ROSETTA_QUOTA_EXCEEDED: { code: 6021, message: 'Quota exceeded', retriable: true },
  GW_ROSETTA_UPSTREAM_UNAVAILABLE: { code: 6030, message: 'Upstream unavailable', retriable: true },
  GW_ROSETTA_UPSTREAM_TIMEOUT: { code: 6031, message: 'Upstream timeout', retriable: true },
  GW_ROSETTA_NO_HEALTHY_UPSTREAM: { code: 6032, message: 'No healthy upstream', retriable: true },
  GW_ROSETTA_UPSTREAM_BAD_RESPONSE: { code: 6033, message: 'Invalid upstream response', retriable: true },
  // Every upstream throttled the request or is in a throttle's cooldown; with Retry-After.
  GW_ROSETTA_UPSTREAM_THROTTLED: { code: 6034, message: 'Every upstream throttled', retriable: true },
  GW_ROSETTA_INTERNAL: { code: 6099, message: 'Internal gateway error', retriable: true },
} as const satisfies Record<string, RosettaErrorEntry>;

export type RosettaErrorName = keyof typeof ROSETTA_ERRORS;

export function rosettaErrorJson(name: RosettaErrorName, details?: Record<string, unknown>): string {
  const e = ROSETTA_ERRORS[name];
  return JSON.stringify(details === undefined ? { ...e } : { ...e, details });
}

/** Entries for /network/options `allow.errors`: the gateway's own, not Cardano's reused ones. */
export const GATEWAY_ROSETTA_ALLOW_ERRORS: readonly RosettaErrorEntry[] = Object.values(ROSETTA_ERRORS)
  .filter((e) => e.code >= 6000)
  .map((e) => ({ code: e.code, message: e.message, retriable: e.retriable }));
