// Small helpers shared by the stand-in servers.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface Recorded {
  readonly method: string;
  /** Path without the query. */
  readonly path: string;
  /** The raw query string, without '?'. */
  readonly query: string;
  /** Query parameters in order, decoded. */
  readonly params: [string, string][];
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

export function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((ok, fail) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => ok(Buffer.concat(chunks)));
    req.on('error', fail);
  });
}

export async function record(req: IncomingMessage): Promise<Recorded> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const query = q === -1 ? '' : url.slice(q + 1);
  return {
    method: req.method ?? 'GET',
    path: q === -1 ? url : url.slice(0, q),
    query,
    params: [...new URLSearchParams(query)],
    headers: { ...req.headers },
    body: await readAll(req),
  };
}

export function sendJson(res: ServerResponse, status: number, body: unknown, contentType = 'application/json'): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Listens on 127.0.0.1, a free port; resolves with the base URL. */
export function listen(server: Server): Promise<string> {
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => ok(`http://127.0.0.1:${(server.address() as { port: number }).port}`));
  });
}

export function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((ok) => server.close(() => ok()));
}

export { createServer };
