// Small helpers shared by the stand-in servers: recording a request, answering
// JSON, listening on 127.0.0.1 with a free port, closing without waiting for
// idle keep-alive sockets. No test framework in here: the demo uses them too.
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';

export interface Recorded {
  readonly method: string;
  /** Path without the query, as received (not decoded). */
  readonly path: string;
  /** Path and query exactly as received (the request target). */
  readonly url: string;
  /** The raw query string, without '?' ('' when there is none). */
  readonly query: string;
  /** Query parameters decoded, in the order they were sent (repeats kept). */
  readonly params: [string, string][];
  /** Header names lower-case, as node:http gives them. */
  readonly headers: Record<string, string | string[] | undefined>;
  /** Header names and values in the order they were sent, names as sent. */
  readonly rawHeaders: string[];
  readonly body: Buffer;
}

/** User-Agent prefix of the gateway's own health checks (runtime/health.ts). */
export const HEALTH_AGENT_PREFIX = 'chain-gateway-health';

export const isHealthCheck = (r: Pick<Recorded, 'headers'>): boolean => String(r.headers['user-agent'] ?? '').startsWith(HEALTH_AGENT_PREFIX);

/**
 * How many requests a stand-in keeps (the newest); beyond that the oldest go,
 * so a long-running demo does not grow without end. Health checks keep fewer.
 */
export const MAX_RECORDED = 100_000;
export const MAX_HEALTH_CHECKS = 1_000;

/** Appends, then drops the oldest entries once `cap` is passed by a tenth (amortised O(1)). */
export function pushCapped<T>(list: T[], item: T, cap: number): void {
  list.push(item);
  if (list.length > cap + Math.ceil(cap / 10)) list.splice(0, list.length - cap);
}

/** Files a recorded request under `requests`, or `healthChecks` when it is one of the gateway's. */
export function file<T extends Pick<Recorded, 'headers'>>(entry: T, requests: T[], healthChecks: T[]): void {
  if (isHealthCheck(entry)) pushCapped(healthChecks, entry, MAX_HEALTH_CHECKS);
  else pushCapped(requests, entry, MAX_RECORDED);
}

export function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((ok, fail) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => ok(Buffer.concat(chunks)));
    req.on('error', fail);
    // 'close' before 'end': the client went away mid-body (settling twice is a no-op).
    req.on('close', () => fail(new Error('request closed before its body ended')));
  });
}

export function splitTarget(target: string): { path: string; query: string } {
  const q = target.indexOf('?');
  return q === -1 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

export async function record(req: IncomingMessage): Promise<Recorded> {
  const url = req.url ?? '/';
  const { path, query } = splitTarget(url);
  return {
    method: req.method ?? 'GET',
    path,
    url,
    query,
    params: [...new URLSearchParams(query)],
    headers: { ...req.headers },
    rawHeaders: [...req.rawHeaders],
    body: await readAll(req),
  };
}

/** JSON.parse that answers undefined instead of throwing. */
export function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, contentType = 'application/json'): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * A node:http server whose async handler can never leave a rejected promise
 * behind: a throw becomes `onError` (by default a bare 500), a client that went
 * away is simply dropped.
 */
export function createSafeServer(
  handler: (req: IncomingMessage, res: ServerResponse) => Promise<void> | void,
  onError: (res: ServerResponse, err: unknown) => void = (res) => {
    if (!res.headersSent && !res.destroyed) res.writeHead(500).end();
  },
): Server {
  const listener: RequestListener = (req, res) => {
    let settled: Promise<void> | void;
    try {
      settled = handler(req, res);
    } catch (err) {
      onError(res, err);
      return;
    }
    if (settled) settled.catch((err: unknown) => onError(res, err));
  };
  const server = createServer(listener);
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });
  return server;
}

/** Listens on 127.0.0.1 and a free port (or `port`); resolves with the base URL once listening. */
export function listen(server: Server, port = 0): Promise<string> {
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', fail);
      ok(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    });
  });
}

/** Stops listening and drops every connection, idle or not; resolves when closed. */
export function close(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((ok) => {
    server.close(() => ok());
    server.closeAllConnections();
  });
}

export { createServer };

/** A node that answers every request with `body` (a JSON text): for tests of what the gateway does before its upstream. */
export async function startFixedAnswer(body: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body));
  });
  return { server, url: await listen(server) };
}

/** A free port on 127.0.0.1, for a server given its port on the command line (nginx, redis-server). */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createNetServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

/** Waits a stand-in's close() can cut short: `wait(ms)` resolves after `ms`; `clear()` drops every wait still pending. */
export class Waits {
  private readonly timers = new Set<NodeJS.Timeout>();
  readonly wait = (ms: number): Promise<void> =>
    new Promise((ok) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        ok();
      }, ms);
      this.timers.add(t);
    });
  clear(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
