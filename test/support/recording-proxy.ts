// Sits between the gateway and a node and records every request that reached
// the node, so a test can prove what arrived (and what never did). Each request
// is forwarded with undici `request` and the target's answer is returned
// unchanged: status, headers (hop-by-hop ones excepted) and body.
import { request } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import { close, createSafeServer, file, listen, parseJson, record, type Recorded } from './http.ts';

export interface RecordedRequest extends Recorded {
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly json: unknown;
}
/** @deprecated the earlier name of RecordedRequest */
export type ProxiedRequest = RecordedRequest;

export interface RecordingProxy {
  /** http://127.0.0.1:PORT, to be used in place of the target's URL. */
  readonly url: string;
  /** Requests that reached the target, in arrival order; the gateway's health checks are kept apart. */
  readonly requests: RecordedRequest[];
  /** The gateway's health checks (User-Agent chain-gateway-health/...), forwarded like the rest. */
  readonly healthChecks: RecordedRequest[];
  /** Empties `requests` (health checks keep accumulating: a test may want the ones from before). */
  clear(): void;
  /** JSON-RPC method names that reached the target, batches flattened, in order. */
  methodsSeen(): string[];
  close(): Promise<void>;
}

/** RFC 9110 §7.6.1 connection-specific fields, plus the legacy ones proxies drop. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authenticate', 'proxy-authorization']);

function hopByHop(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Set<string> {
  const out = new Set(HOP);
  const conn = headers.connection;
  for (const v of Array.isArray(conn) ? conn : conn ? [conn] : []) for (const name of v.split(',')) if (name.trim()) out.add(name.trim().toLowerCase());
  return out;
}

/** JSON-RPC method names in the bodies of `requests`, batches flattened. */
export function methodsIn(requests: readonly { json: unknown }[]): string[] {
  return requests.flatMap((r) => {
    const items = Array.isArray(r.json) ? (r.json as unknown[]) : [r.json];
    return items
      .map((i) => (i && typeof i === 'object' ? (i as { method?: unknown }).method : undefined))
      .filter((m): m is string => typeof m === 'string');
  });
}

export async function startRecordingProxy(targetUrl: string): Promise<RecordingProxy> {
  const target = targetUrl.replace(/\/+$/, '');
  const requests: RecordedRequest[] = [];
  const healthChecks: RecordedRequest[] = [];
  const server = createSafeServer(
    async (req, res) => {
      const r = await record(req);
      const entry: RecordedRequest = { ...r, json: parseJson(r.body) };
      file(entry, requests, healthChecks);

      const drop = hopByHop(r.headers);
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !drop.has(k) && k !== 'host' && k !== 'content-length') headers[k] = v;
      let up;
      try {
        up = await request(`${target}${r.url}`, {
          method: r.method as 'POST',
          headers,
          body: r.body.length > 0 ? r.body : null,
        });
      } catch (err) {
        const text = `recording proxy: target unreachable: ${(err as Error).message}`;
        res.writeHead(502, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) }).end(text);
        return;
      }
      const body = Buffer.from(await up.body.arrayBuffer());
      const back = hopByHop(up.headers);
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !back.has(k)) out[k] = v;
      // the body goes back whole, so it gets its real length instead of the
      // dropped chunked framing (HEAD, 204 and 304 keep what the target said)
      if (r.method !== 'HEAD' && up.statusCode !== 204 && up.statusCode !== 304) out['content-length'] = String(body.length);
      res.writeHead(up.statusCode, out);
      res.end(r.method === 'HEAD' ? undefined : body);
    },
    (res) => {
      if (!res.headersSent && !res.destroyed) res.writeHead(502).end();
    },
  );
  const url = await listen(server);
  return {
    url,
    requests,
    healthChecks,
    clear: () => void requests.splice(0),
    methodsSeen: () => methodsIn(requests),
    close: () => close(server),
  };
}
