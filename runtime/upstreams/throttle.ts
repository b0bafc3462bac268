// Upstreams that throttle (issue 39): which answers say "too many requests",
// and what follows. A throttled answer is the provider refusing the call (it
// was not run): a read goes at once to another usable upstream, a write to
// another one once, and the upstream takes no client traffic until its
// Retry-After has passed, or, without one, for a cooldown of 1 s that doubles
// with each throttle in a row up to 60 s (an answer, to a call or a poll, ends
// the run). The cooldown is upstream state, in its view (upstream-view.ts
// UpstreamView), so that selection (upstream.ts `usable`) and the pools skip
// it; with every upstream of a chain throttled the client gets its
// interface's "every upstream throttled" (HTTP 429, Retry-After: the soonest
// one is free again), also where they are out only because their polls were
// throttled before one verified them.
// docs/upstreams.md: "Throttling".
//
// Only HTTP 429, the throttle codes and the providers' own sentences are
// throttles, never an execution result (issue 43: any client can make a node
// revert with "rate limit exceeded"); and a throttle error that every upstream
// asked gives alike is the call's answer (forward-attempts.ts ForwardAttempts.throttledInBody).
// Retry-After is read strictly and honoured up to MAX_RETRY_AFTER_MS.
// Each entry of the table names the provider that says it and where the text
// comes from, as the state-error table does (kinds/evm/state-errors.ts).
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Upstream, UpstreamGroup } from './upstream.ts';

export interface ThrottleText {
  readonly pattern: RegExp;
  readonly provider: string;
  readonly source: string;
}

/**
 * The providers' own sentences for "over your plan", matched whole from the
 * message's start (case as they write it), on a JSON-RPC error's message (or
 * Blockbook's `error`). Narrow on purpose (issue 43): a loose pattern ("rate
 * limit", "too many requests") is a text any client can make a node say (a
 * revert reason), and one such call would take every upstream of a chain out.
 */
export const THROTTLE_TEXTS: readonly ThrottleText[] = [
  { pattern: /^daily request count exceeded, request rate limited$/, provider: 'Infura', source: '-32005, HTTP 429, data.rate.backoff_seconds (blockscout#7339, nimbus-eth2#1632)' },
  { pattern: /^project ID request rate exceeded$/, provider: 'Infura', source: '-32005 (status-go rpc/chain isRPSLimitError; Infura docs "Avoid rate limiting")' },
  {
    pattern: /^Your app has exceeded its compute units per second capacity\. If you have retries enabled, you can safely ignore this message\./,
    provider: 'Alchemy',
    source: 'HTTP 429, code 429 (grants-stack-indexer#156, kwenta#40); a link to its docs may follow',
  },
  { pattern: /^Your app has exceeded its throughput limit\.?$/, provider: 'Alchemy (older wording)', source: 'status-go rpc/chain isRPSLimitError' },
  { pattern: /^Monthly capacity limit exceeded\. Visit https:\/\/dashboard\.alchemyapi\.io\/settings\/billing /, provider: 'Alchemy', source: 'HTTP 403, -32600 (xmtpd#672)' },
  {
    pattern: /^\d+\/second request limit reached - reduce calls per second or upgrade your account at quicknode\.com$/,
    provider: 'QuickNode',
    source: '-32007 (alloy json-rpc error tests; dank_mids#642)',
  },
];

/** JSON-RPC error codes that say "limit exceeded": EIP-1474's -32005 (Infura), 429 (Alchemy), and QuickNode's -32007. */
export const THROTTLE_CODES: ReadonlySet<number> = new Set([-32005, 429, -32007]);

/**
 * -32005 is EIP-1474's "limit exceeded" for any limit: Infura also answers a
 * log range too wide with it ("query returned more than 10000 results"). That
 * is a range limit (a narrower range answers), not a throttle.
 */
const RANGE_LIMIT = /more than \d+ results|block range|blocks range|range .*(limit|too large)|response size/i;

/**
 * An execution result is the call's answer whatever its text, never a
 * throttle: code 3 (EIP-1474's execution error), a message that begins
 * "execution reverted" (geth, anvil, the providers), revert data in `data`
 * (hex, or Nethermind's "Reverted 0x..."), and geth's init code limit (an
 * `eth_call` without `to` runs any init code a client sends).
 */
function executionResult(code: unknown, message: string, data: unknown): boolean {
  return code === 3 || /^execution reverted/i.test(message) || message.startsWith('max initcode size exceeded') || (typeof data === 'string' && /^(0x|Reverted)/.test(data));
}

/** Whether a JSON-RPC error (its code, message and data) says the upstream throttled the call. */
export function saysThrottled(code: unknown, message: string, data?: unknown): boolean {
  if (executionResult(code, message, data) || RANGE_LIMIT.test(message)) return false;
  if (typeof code === 'number' && THROTTLE_CODES.has(code)) return true;
  for (const t of THROTTLE_TEXTS) if (t.pattern.test(message)) return true;
  return false;
}

/** Whether one answer's error (JSON-RPC's {code, message, data}, or Blockbook's text) says the upstream throttled it. */
export function errorThrottled(e: unknown): boolean {
  if (typeof e === 'string') return saysThrottled(undefined, e);
  if (e === null || typeof e !== 'object') return false;
  const { code, message, data } = e as { code?: unknown; message?: unknown; data?: unknown };
  return saysThrottled(code, typeof message === 'string' ? message : '', data);
}

/** Whether a single JSON-RPC answer is a throttle error (a 200 from a provider that throttles in the body). */
export function answerThrottled(body: Buffer): boolean {
  // Throttle answers are short; a long one is an answer, not a refusal.
  if (body.length > MAX_JUDGED || body.indexOf('"error"') === -1) return false;
  const e = errorOf(body);
  return e !== null && typeof e === 'object' && errorThrottled(e);
}

/** JSON-RPC errors that the call itself causes, whichever node answers it: an invalid request, an unknown method, invalid params. */
const CALL_ERRORS: ReadonlySet<number> = new Set([-32600, -32601, -32602]);

/**
 * Whether a short JSON-RPC answer (not a throttle) is an error that the call
 * did not cause (issue 43): the upstream failed it, and the score counts it
 * as a failure (upstream-score.ts). The call causes -32600, -32601, -32602, an
 * execution result and a log range's complaint; everything else, such as
 * -32603 "Internal error", is the node's. A batch's answer is not judged.
 */
export function answerFailed(body: Buffer): boolean {
  // Most answers have no "error" key (one native search); an answer whose result holds the word stops at its "result" key.
  if (body.length > MAX_JUDGED || body.indexOf('"error"') === -1 || !mayBeError(body)) return false;
  const e = errorOf(body);
  if (e === null || typeof e !== 'object') return false;
  const { code, message, data } = e as { code?: unknown; message?: unknown; data?: unknown };
  const text = typeof message === 'string' ? message : '';
  return !(typeof code === 'number' && CALL_ERRORS.has(code)) && !executionResult(code, text, data) && !RANGE_LIMIT.test(text);
}

/** The `error` of a short JSON answer (null: none, or not JSON). */
function errorOf(body: Buffer): unknown {
  try {
    return (JSON.parse(body.toString('utf8')) as { error?: unknown } | null)?.error ?? null;
  } catch {
    return null;
  }
}

const MAX_JUDGED = 4096;

/**
 * Whether the first chunk of an answer that streams may be an error answer
 * (then held and judged with answerThrottled): the first `"result` or
 * `"error"` in it is `"error"`. A byte loop that stops at the result key: an
 * answer with a result (geth and the providers write it after "jsonrpc" and
 * "id") pays a few dozen byte reads, where Buffer.indexOf costs a native call.
 */
export function mayBeError(b: Buffer): boolean {
  const n = b.length - 6;
  for (let i = 0; i < n; i++) {
    if (b[i] !== 0x22) continue; // "
    const c = b[i + 1];
    if (c === 0x72 && b[i + 2] === 0x65 && b[i + 3] === 0x73 && b[i + 4] === 0x75 && b[i + 5] === 0x6c && b[i + 6] === 0x74) return false; // "result
    if (c === 0x65 && b[i + 2] === 0x72 && b[i + 3] === 0x72 && b[i + 4] === 0x6f && b[i + 5] === 0x72 && b[i + 6] === 0x22) return true; // "error"
  }
  return false;
}

/** Whether a Blockbook error answer ({"error": "..."}) says the upstream throttled the call. */
export function blockbookThrottled(body: Buffer): boolean {
  if (body.length > MAX_JUDGED || body.indexOf('"error"') === -1) return false;
  const e = errorOf(body);
  return typeof e === 'string' && errorThrottled(e);
}

/** The first cooldown without a Retry-After, and the longest. */
export const COOLDOWN_FIRST_MS = 1000;
export const COOLDOWN_MAX_MS = 60_000;

/**
 * The longest Retry-After honoured (issue 43): past it the poller asks the
 * upstream again, and a poll it throttles starts another cooldown. A provider
 * (or a front that copies the header) saying "a day" must not take the
 * upstream out, unasked, for a day.
 */
export const MAX_RETRY_AFTER_MS = 300_000;

/** RFC 9110's IMF-fixdate, the one HTTP date form a sender may write. */
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$/;

/**
 * How long the upstream asks to be left alone, in ms from now, at most
 * MAX_RETRY_AFTER_MS; null when it does not say. Its Retry-After (seconds, a
 * fraction rounded up to the next whole second, or an IMF-fixdate; any other
 * text is none), else the backoff_seconds of Infura's -32005 data in `body`.
 */
export function retryAfterMs(headers: IncomingHttpHeaders, now: number, body?: Buffer | string): number | null {
  const v = headers['retry-after'];
  const text = typeof v === 'string' ? v.trim() : Array.isArray(v) ? v[0]?.trim() : undefined;
  let ms: number | null = null;
  if (text !== undefined && /^\d+(\.\d+)?$/.test(text)) ms = Math.ceil(Number(text)) * 1000;
  else if (text !== undefined && IMF_FIXDATE.test(text)) ms = Math.max(0, Date.parse(text) - now);
  else if (body !== undefined) ms = backoffMs(body);
  return ms === null ? null : Math.min(MAX_RETRY_AFTER_MS, ms);
}

/** Infura's {"error": {"code": -32005, "data": {"rate": {"backoff_seconds": 30, ...}}}} as ms (rounded up to whole seconds); null without one. */
function backoffMs(body: Buffer | string): number | null {
  if (body.length > MAX_JUDGED || body.indexOf('backoff_seconds') === -1) return null;
  const e = errorOf(typeof body === 'string' ? Buffer.from(body) : body) as { data?: { rate?: { backoff_seconds?: unknown } } } | null;
  const s = e?.data?.rate?.backoff_seconds;
  return typeof s === 'number' && Number.isFinite(s) && s >= 0 ? Math.ceil(s) * 1000 : null;
}

/**
 * An upstream throttled a call sent at `sentAt` (epoch ms): it takes no client
 * traffic until its Retry-After has passed (`body`: the throttle answer, for
 * Infura's backoff_seconds), or for the run's cooldown. A throttle of a call
 * sent before the current cooldown began is the same burst (calls under way
 * together): it does not count as a repeat.
 */
export function throttled(u: Upstream, headers: IncomingHttpHeaders, sentAt: number, body?: Buffer | string): void {
  const v = u.view;
  const now = Date.now();
  v.throttledTotal++;
  const repeat = sentAt >= v.throttleSince;
  if (repeat) {
    v.throttleRun++;
    v.throttleSince = now;
  }
  const after = retryAfterMs(headers, now, body);
  const ms = after ?? Math.min(COOLDOWN_MAX_MS, COOLDOWN_FIRST_MS * 2 ** Math.min(16, Math.max(0, v.throttleRun - 1)));
  v.throttledUntil = Math.max(v.throttledUntil, now + ms);
}

/**
 * Not yet verified (the manifest names what it must serve, or its pool takes
 * that from its upstreams) only because its polls so far were throttled: it
 * takes no traffic before a poll answers, but what keeps it out is the throttle.
 */
export function throttledBeforeVerified(u: Upstream): boolean {
  const v = u.view;
  return v.pollThrottled && v.state === 'unknown' && v.verify;
}

/**
 * No upstream could take a request: when one it could have gone to is only
 * throttled (or throttled before its first good poll), the client gets "every
 * upstream throttled", with the seconds until the soonest is free again; null
 * otherwise (no healthy upstream).
 */
export function allThrottled(group: UpstreamGroup, accept: ((u: Upstream) => boolean) | undefined, upstream: Upstream | null): { kind: 'failed'; fail: 'throttled'; upstream: Upstream | null; retryAfter: number } | null {
  const now = Date.now();
  let soonest = Infinity;
  for (const u of group.all) {
    const first = throttledBeforeVerified(u);
    if (!first && !u.serving) continue;
    // Throttled, or out of room in its budget (upstream-budget.ts) until then.
    let until = u.budget === null ? u.view.throttledUntil : Math.max(u.view.throttledUntil, u.budget.readyAt(now));
    // Throttled before its first good poll: once the throttle is over, the poll that may verify it is at most an interval away.
    if (first) until = Math.max(until, now + 1);
    // Routing by block cannot judge one throttled before its first good poll (no head yet): it counts for any call.
    if (until > now && (first || accept === undefined || accept(u)) && until < soonest) soonest = until;
  }
  if (soonest === Infinity) return null;
  return { kind: 'failed', fail: 'throttled', upstream, retryAfter: Math.max(1, Math.ceil((soonest - now) / 1000)) };
}

/** Retry-After for an answer of "every upstream throttled" that does not know when (a batch's, a flight's): 1 s. */
export const RETRY_SOON: readonly string[] = ['retry-after', '1'];
