// A node behind a meter (issue 39 budgets): a proxy in front of a real node
// (anvil) that passes every request on, the gateway's polls included, and
// stamps each with the time it arrived, so that a test can count what reached
// the node in each second. No test framework in here.
import { request } from 'undici';
import { close, createSafeServer, isHealthCheck, listen, record } from './http.ts';

export interface Counted {
  /** Date.now() when it arrived. */
  readonly at: number;
  /** One of the gateway's polls (User-Agent chain-gateway-health/...). */
  readonly poll: boolean;
}

export interface CountingProxy {
  /** http://127.0.0.1:PORT: the node's URL, through the proxy. */
  readonly url: string;
  /** Every request, polls included, in arrival order. */
  readonly arrivals: Counted[];
  /** The most requests (polls included) that arrived within any one second (a sliding window), of those at or after `from` (Date.now() ms). */
  busiestSecond(from: number): number;
  close(): Promise<void>;
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length']);

/** `target`: the node's origin (its path comes from each request). */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const origin = new URL(target).origin;
  let closed = false;
  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    proxy.arrivals.push({ at: Date.now(), poll: isHealthCheck(r) });
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
    busiestSecond(from) {
      const t = proxy.arrivals.filter((a) => a.at >= from).map((a) => a.at);
      let most = 0;
      let j = 0;
      for (let i = 0; i < t.length; i++) {
        while (t[i]! - t[j]! >= 1000) j++;
        most = Math.max(most, i - j + 1);
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
