// A provider that throttles (issue 39): a proxy in front of a real node
// (anvil, or the Blockbook or Rosetta stand-in) that passes every request on,
// and answers the client requests a test picks (and, apart, the gateway's
// polls it picks) the way providers refuse calls over a plan: HTTP 429 with or without
// Retry-After (seconds or an HTTP date), or a JSON-RPC error in a 200. Every
// client request is recorded with its arrival time (Date.now(), the clock the
// gateway's cooldowns use) and whether it was throttled, so a test can count
// what reached the node and when. No test framework in here.
import { request } from 'undici';
import { close, createSafeServer, isHealthCheck, listen, parseJson, record, type Recorded } from './http.ts';

/** How one client request is refused. */
export interface Throttle {
  /** HTTP status (default 429 with `body`, 200 with `error`). */
  readonly status?: number;
  /** The Retry-After header, as sent ("2", or an HTTP date). */
  readonly retryAfter?: string;
  /** A JSON-RPC error, with the client's id (as the provider writes it). */
  readonly error?: { readonly code: number; readonly message: string; readonly data?: unknown };
  /** A body as it is (Blockbook's {"error": ...}, a plain text). */
  readonly body?: string;
}

/**
 * The providers' answers, as they send them:
 *  - Infura: HTTP 429 with -32005 "daily request count exceeded, request rate limited" and its rate data
 *    (gochain/web3#180, nimbus-eth2#1632); -32005 "project ID request rate exceeded" (status-go isRPSLimitError);
 *  - Alchemy: HTTP 429 with code 429 "Your app has exceeded its compute units per second capacity. ..."
 *    (kwenta#40, grants-stack-indexer#156), and the older "Your app has exceeded its throughput limit";
 *  - QuickNode: -32007 "15/second request limit reached - reduce calls per second or upgrade your account at
 *    quicknode.com" (alloy's json-rpc error tests; dank_mids#642).
 */
export const PROVIDER = {
  infura429: { status: 429, error: { code: -32005, message: 'daily request count exceeded, request rate limited', data: { rate: { allowed_rps: 1, backoff_seconds: 30, current_rps: 2.2 }, see: 'https://infura.io/dashboard' } } },
  infuraRate: { code: -32005, message: 'project ID request rate exceeded' },
  alchemy429: { status: 429, error: { code: 429, message: 'Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message. If not, check out https://docs.alchemy.com/reference/throughput' } },
  alchemyThroughput: { code: -32000, message: 'Your app has exceeded its throughput limit' },
  quicknode: { code: -32007, message: '15/second request limit reached - reduce calls per second or upgrade your account at quicknode.com' },
} as const;

export interface ThrottleArrival extends Recorded {
  /** The body parsed as JSON (undefined when it is not JSON). */
  readonly json: unknown;
  /** The JSON-RPC method of a single call (undefined for anything else). */
  readonly rpcMethod: string | undefined;
  /** Date.now() when it arrived. */
  readonly at: number;
  /** It was answered with a throttle. */
  throttled: boolean;
}

export interface ThrottleStandin {
  /** http://127.0.0.1:PORT: the node's URL through the stand-in (append the node's own path, e.g. /api). */
  readonly url: string;
  /** Client requests (not the gateway's polls), in arrival order. */
  readonly arrivals: ThrottleArrival[];
  /** How a client request is answered: undefined passes the node's answer on. */
  throttle: (a: ThrottleArrival) => Throttle | undefined;
  /** The gateway's polls (health and head), in arrival order. */
  readonly polls: ThrottleArrival[];
  /** A client batch's call whose answer item is this JSON-RPC error instead of the node's (the batch goes to the node, the items are swapped); undefined: the node's. */
  throttleItem: (call: { readonly method?: unknown }) => Throttle['error'];
  /** How a poll is answered: undefined (the default) passes the node's answer on. */
  throttlePoll: (a: ThrottleArrival) => Throttle | undefined;
  /** Client requests answered with a throttle. */
  throttledCount(): number;
  close(): Promise<void>;
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length']);

/** `target`: the node's origin (its path comes from each request). */
export async function startThrottleStandin(target: string): Promise<ThrottleStandin> {
  const origin = new URL(target).origin;
  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const json = parseJson(r.body);
    const single = json !== null && typeof json === 'object' && !Array.isArray(json) ? (json as { id?: unknown; method?: unknown }) : undefined;
    const poll = isHealthCheck(r);
    const arrival: ThrottleArrival = { ...r, json, rpcMethod: typeof single?.method === 'string' ? single.method : undefined, at: Date.now(), throttled: false };
    (poll ? standin.polls : standin.arrivals).push(arrival);
    const t = poll ? standin.throttlePoll(arrival) : standin.throttle(arrival);
    if (t !== undefined) {
      arrival.throttled = true;
      const body = t.error !== undefined ? JSON.stringify({ jsonrpc: '2.0', id: single?.id ?? null, error: t.error }) : (t.body ?? '');
      const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      if (t.retryAfter !== undefined) headers['retry-after'] = t.retryAfter;
      res.writeHead(t.status ?? (t.error !== undefined ? 200 : 429), headers).end(body);
      return;
    }
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    const up = await request(`${origin}${r.url}`, { method: r.method as 'POST', headers, body: r.body.length > 0 ? r.body : null });
    let body = Buffer.from(await up.body.arrayBuffer());
    if (!poll && Array.isArray(json)) {
      // Items of a client batch answered with an error, each with its call's id.
      const errors = new Map<unknown, Throttle['error']>();
      for (const c of json as { id?: unknown; method?: unknown }[]) {
        const e = standin.throttleItem(c);
        if (e !== undefined) errors.set(c.id, e);
      }
      if (errors.size > 0) {
        arrival.throttled = true;
        const items = JSON.parse(body.toString()) as { id?: unknown }[];
        body = Buffer.from(JSON.stringify(items.map((it) => (errors.has(it.id) ? { jsonrpc: '2.0', id: it.id, error: errors.get(it.id) } : it))));
      }
    }
    if (res.destroyed) return;
    res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json'), 'content-length': body.length }).end(body);
  });
  const url = await listen(server);
  const standin: ThrottleStandin = {
    url,
    arrivals: [],
    throttle: () => undefined,
    polls: [],
    throttlePoll: () => undefined,
    throttleItem: () => undefined,
    throttledCount: () => standin.arrivals.filter((a) => a.throttled).length,
    close: () => close(server),
  };
  return standin;
}
