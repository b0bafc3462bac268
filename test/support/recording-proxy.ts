// Sits between the gateway and a node and records every request that reached
// the node, so a test can prove what arrived (and what never did).
import { request } from 'undici';
import type { Server } from 'node:http';
import { close, createServer, listen, record, type Recorded } from './http.ts';

export interface ProxiedRequest extends Recorded {
  /** The body parsed as JSON, or undefined. */
  readonly json: unknown;
}

export interface RecordingProxy {
  readonly url: string;
  /** Requests that reached the target, the gateway's health checks excepted. */
  readonly requests: ProxiedRequest[];
  /** The gateway's health checks (User-Agent chain-gateway-health/...). */
  readonly healthChecks: ProxiedRequest[];
  clear(): void;
  /** JSON-RPC method names that reached the target, batches flattened, in order. */
  methodsSeen(): string[];
  close(): Promise<void>;
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-connection']);

export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const requests: ProxiedRequest[] = [];
  const healthChecks: ProxiedRequest[] = [];
  const server: Server = createServer(async (req, res) => {
    const r = await record(req);
    // The gateway's own health checks are not what a test sends: keep them apart.
    const health = String(r.headers['user-agent'] ?? '').startsWith('chain-gateway-health');
    let json: unknown;
    try {
      json = JSON.parse(r.body.toString('utf8'));
    } catch {
      json = undefined;
    }
    (health ? healthChecks : requests).push({ ...r, json });
    try {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(r.headers)) if (typeof v === 'string' && !HOP.has(k) && k !== 'host') headers[k] = v;
      const up = await request(`${target}${req.url}`, { method: r.method as 'POST', headers, body: r.body.length ? r.body : null });
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v;
      res.writeHead(up.statusCode, out);
      res.end(Buffer.from(await up.body.arrayBuffer()));
    } catch {
      res.writeHead(502).end();
    }
  });
  const url = await listen(server);
  return {
    url,
    requests,
    healthChecks,
    clear: () => void requests.splice(0),
    methodsSeen: () =>
      requests.flatMap((r) => {
        const items = Array.isArray(r.json) ? r.json : [r.json];
        return items.map((i) => (i && typeof i === 'object' ? (i as { method?: unknown }).method : undefined)).filter((m): m is string => typeof m === 'string');
      }),
    close: () => close(server),
  };
}
