// A node as a test wants it (issue 37): a proxy in front of a real node
// (anvil, or the Blockbook stand-in) that passes every request on, and for the
// client requests a test picks (never the gateway's polls) answers late, or
// in a way of its own: a JSON-RPC error as the node would write it, an empty
// or cut-off 200, a 502 from a load balancer in front of the node. Every
// client request is recorded with the time it arrived, so a test can count
// what reached the node. A held answer goes when its delay is over, or never
// once the proxy is closed. No test framework in here.
import { request } from 'undici';
import { close, createSafeServer, isHealthCheck, listen, parseJson, record, Waits, type Recorded } from './http.ts';

export interface Arrival extends Recorded {
  /** The body parsed as JSON (undefined when it is not JSON). */
  readonly json: unknown;
  /** The JSON-RPC method of a single call (undefined for anything else). */
  readonly rpcMethod: string | undefined;
  /** performance.now() when it arrived. */
  readonly at: number;
}

/** What to do with one client request instead of passing the node's answer on as it comes. */
export interface Tweak {
  /** Write the answer this many ms after the node answered (or, with `body`/`error`, after arrival). */
  readonly delayMs?: number;
  /** The node is not asked: this JSON-RPC error goes back, with the client's id (as the node would write it). */
  readonly error?: { readonly code: number; readonly message: string };
  /** The node is not asked: this status and body go back as they are ('' is an empty answer). */
  readonly status?: number;
  readonly body?: string;
}

export interface TweakProxy {
  /** http://127.0.0.1:PORT: the node's URL, through the proxy (append the node's own path, e.g. /api). */
  readonly url: string;
  /** Client requests (not the gateway's polls), in arrival order. */
  readonly arrivals: Arrival[];
  /** How a client request is answered: undefined passes the node's answer on at once. */
  tweak: (a: Arrival) => Tweak | undefined;
  /** Client requests of this JSON-RPC method (or, for a path starting with '/', whose path contains it) so far. */
  count(what: string): number;
  close(): Promise<void>;
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length']);

/** `target`: the node's origin (its path comes from each request). */
export async function startTweakProxy(target: string): Promise<TweakProxy> {
  const origin = new URL(target).origin;
  const waits = new Waits();
  const later = waits.wait;
  let closed = false;
  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const json = parseJson(r.body);
    const single = json !== null && typeof json === 'object' && !Array.isArray(json) ? (json as { id?: unknown; method?: unknown }) : undefined;
    const poll = isHealthCheck(r);
    const arrival: Arrival = { ...r, json, rpcMethod: typeof single?.method === 'string' ? single.method : undefined, at: performance.now() };
    if (!poll) proxy.arrivals.push(arrival);
    const t = poll ? undefined : proxy.tweak(arrival);
    let status: number;
    let type = 'application/json';
    let body: Buffer;
    if (t?.error !== undefined) {
      status = 200;
      body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: single?.id ?? null, error: t.error }));
    } else if (t?.body !== undefined) {
      status = t.status ?? 200;
      type = status >= 500 ? 'text/html' : 'application/json';
      body = Buffer.from(t.body);
    } else {
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
      const up = await request(`${origin}${r.url}`, { method: r.method as 'POST', headers, body: r.body.length > 0 ? r.body : null });
      status = up.statusCode;
      type = String(up.headers['content-type'] ?? type);
      body = Buffer.from(await up.body.arrayBuffer());
    }
    if (t?.delayMs !== undefined && t.delayMs > 0) await later(t.delayMs);
    if (closed || res.destroyed) return;
    res.writeHead(status, { 'content-type': type, 'content-length': body.length }).end(body);
  });
  const url = await listen(server);
  const proxy: TweakProxy = {
    url,
    arrivals: [],
    tweak: () => undefined,
    count: (what) => proxy.arrivals.filter((a) => (what.startsWith('/') ? a.path.includes(what) : a.rpcMethod === what)).length,
    close: async () => {
      closed = true;
      waits.clear();
      await close(server);
    },
  };
  return proxy;
}
