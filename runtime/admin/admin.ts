// The admin listener (status page, metrics, liveness, readiness, usage) and
// the readiness report that every listener's /readyz shares.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { nextRequestId } from '../observe/request-id.ts';
import type { Metrics } from '../observe/metrics.ts';
import type { Chain } from '../chains.ts';
import { daysBetween, totals, type Usage } from '../observe/usage.ts';
import type { StatusBoard } from './status.ts';
import { statusPage } from './status-page.ts';

/** What /readyz says: ready when every chain has a healthy upstream and the process is not draining. */
export function readiness(all: readonly Pick<Chain, 'route' | 'group'>[], draining: boolean): { ready: boolean; body: string } {
  const chains: Record<string, unknown> = {};
  let ready = !draining;
  for (const { route, group } of all) {
    const up = group.healthy;
    if (!up) ready = false;
    chains[route.path] = {
      interface: route.interface,
      state: up ? 'up' : 'down',
      upstreams: group.all.map((u) => ({ name: u.name, role: u.role, state: u.state, head: u.head })),
    };
  }
  const status = draining ? 'draining' : ready ? 'ready' : 'not_ready';
  return { ready, body: JSON.stringify({ status, chains }) };
}

export interface AdminDeps {
  readonly metrics: Metrics;
  readonly usage: Usage;
  /** The status page's figures (GET /status.json). */
  readonly status: StatusBoard | null;
  readiness(): { ready: boolean; body: string };
  cors(origin: string, out: string[]): void;
  readonly draining: boolean;
}

/**
 * GET /usage?key=<id>&from=YYYY-MM-DD&to=YYYY-MM-DD (both default to today,
 * UTC): the key's calls and credits per day, chain and method, and totals.
 */
export function usageAnswer(usage: Usage, url: string, send: (status: number, body: string) => void): void {
  const q = new URL(url, 'http://admin').searchParams;
  const key = q.get('key');
  const today = new Date().toISOString().slice(0, 10);
  const from = q.get('from') ?? q.get('to') ?? today;
  const to = q.get('to') ?? (q.get('from') === null ? today : from > today ? from : today);
  if (key === null || key === '') return send(400, '{"error":"key is required: /usage?key=<id>&from=YYYY-MM-DD&to=YYYY-MM-DD"}');
  try {
    daysBetween(from, to);
  } catch (err) {
    return send(400, JSON.stringify({ error: (err as Error).message }));
  }
  usage.query(key, from, to).then(
    (rows) => send(200, JSON.stringify({ key, from, to, days: rows, total: totals(rows) })),
    () => send(503, '{"error":"usage store unreachable"}'),
  );
}

/** The admin listener's request handler: GET /, /status.json, /metrics, /healthz, /readyz, /usage. */
export function adminHandler(deps: AdminDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { metrics } = deps;
  const send = (res: ServerResponse, status: number, body: string): void => {
    const headers = ['x-request-id', nextRequestId(), 'content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))];
    const origin = (res.req as IncomingMessage | undefined)?.headers.origin;
    if (origin !== undefined) deps.cors(origin, headers);
    if (deps.draining) headers.push('connection', 'close');
    res.writeHead(status, headers);
    res.end(body);
  };
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics' && req.method === 'GET') {
      metrics.render().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.contentType });
          res.end(text);
        },
        () => send(res, 500, '{"error":"Internal server error"}'),
      );
      return;
    }
    if (path === '/' && (req.method === 'GET' || req.method === 'HEAD')) {
      const p = statusPage();
      res.writeHead(200, p.headers as string[]);
      res.end(req.method === 'HEAD' ? undefined : p.body);
      return;
    }
    if (path === '/status.json' && req.method === 'GET' && deps.status !== null) {
      deps.status.json().then(
        (body) => send(res, 200, body),
        () => send(res, 500, '{"error":"Internal server error"}'),
      );
      return;
    }
    if (path === '/usage' && req.method === 'GET') return usageAnswer(deps.usage, req.url ?? '/', (status, body) => send(res, status, body));
    if (path === '/healthz') return send(res, 200, '{"status":"ok"}');
    if (path === '/readyz') {
      const r = deps.readiness();
      return send(res, r.ready ? 200 : 503, r.body);
    }
    send(res, 404, '{"error":"Not found"}');
  };
}
