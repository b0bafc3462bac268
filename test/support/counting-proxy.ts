// A node behind a meter (issue 39 budgets): a proxy in front of a real node
// (anvil) that passes every request on, the gateway's polls included, and
// stamps each with the time it arrived, so that a test can count what reached
// the node in each second. No test framework in here.
import { request } from 'undici';
import { close, createSafeServer, isHealthCheck, listen, parseJson, record } from './http.ts';

export interface Counted {
  /** Date.now() when it arrived. */
  readonly at: number;
  /** One of the gateway's polls (User-Agent chain-gateway-health/...). */
  readonly poll: boolean;
  /** The JSON-RPC calls in it: a batch's items, else 1. */
  readonly calls: number;
}

export interface CountingProxy {
  /** http://127.0.0.1:PORT: the node's URL, through the proxy. */
  readonly url: string;
  /** Every request, polls included, in arrival order. */
  readonly arrivals: Counted[];
  /** The most requests (polls included) that arrived within any one second (a sliding window), of those at or after `from` (Date.now() ms); with `calls`, the most JSON-RPC calls (a batch counts its items). */
  busiestSecond(from: number, calls?: boolean): number;
  close(): Promise<void>;
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length']);

/** `target`: the node's origin (its path comes from each request). */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const origin = new URL(target).origin;
  let closed = false;
  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const json = parseJson(r.body);
    proxy.arrivals.push({ at: Date.now(), poll: isHealthCheck(r), calls: Array.isArray(json) ? json.length : 1 });
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    const up = await request(`${origin}${r.url}`, { method: r.method as 'POST', headers, body: r.body.length > 0 ? r.body : null });
    const body = Buffer.from(await up.body.arrayBuffer());
    if (closed || res.destroyed) return;
    res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json'), 'content-length': body.length }).end(body);
  });
  const url = await listen(server);
  const proxy: CountingProxy = {
    url,
    arrivals: [],
    busiestSecond(from, calls = false) {
      const a = proxy.arrivals.filter((x) => x.at >= from);
      let most = 0;
      let sum = 0;
      let j = 0;
      for (let i = 0; i < a.length; i++) {
        sum += calls ? a[i]!.calls : 1;
        for (; a[i]!.at - a[j]!.at >= 1000; j++) sum -= calls ? a[j]!.calls : 1;
        most = Math.max(most, sum);
      }
      return most;
    },
    close: async () => {
      closed = true;
      await close(server);
    },
  };
  return proxy;
}
