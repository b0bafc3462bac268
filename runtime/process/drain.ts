// A draining listener's keep-alive connections, closed without racing the
// client. http.Server.close() (and closeIdleConnections) drops an idle
// keep-alive connection at once; a client sending its next request on it at
// that moment gets a reset (ECONNRESET, undici's "other side closed"): 2 of
// the requests a restart lost under load (issue 47). So while draining:
//
//   - every answer says Connection: close (server.ts), and so does an answer
//     still in flight when the drain begins, if its head is not out yet: the
//     client reads the answer, then the end of the connection;
//   - a connection without a request is closed once nothing has moved on it
//     either way for DRAIN_IDLE_MS (checked every DRAIN_IDLE_MS): a client in
//     a request loop pauses far less than that between two requests, and uses
//     the connection again before it is closed, so it gets Connection: close.
//
// A socket upgraded to a WebSocket is not an HTTP connection any more (Node
// frees its parser); ws/sockets.ts closes those with 1001.
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export const DRAIN_IDLE_MS = 1000;

/** What Node's http server keeps on a connection's socket: the answer under way, and the parser (null once upgraded). */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null; parser?: unknown };

/** The open connections of one listener, for its drain: one Set entry per connection, nothing per request. */
export class Connections {
  private readonly open = new Set<Socket>();

  constructor(server: Server) {
    server.on('connection', (s: Socket) => {
      this.open.add(s);
      s.once('close', () => this.open.delete(s));
    });
  }

  /** The drain begins: each HTTP connection is closed after its answer, or once idle (above). */
  drain(idleMs = DRAIN_IDLE_MS): void {
    for (const s of this.open) closeWhenIdle(s as HttpSocket, idleMs);
  }
}

function closeWhenIdle(s: HttpSocket, idleMs: number): void {
  if (s.parser == null || s.destroyed) return;
  const answer = s._httpMessage;
  if (answer && !answer.headersSent) answer.shouldKeepAlive = false;
  let moved = s.bytesRead + s.bytesWritten;
  const timer = setInterval(() => {
    const now = s.bytesRead + s.bytesWritten;
    if (now === moved && !s._httpMessage) s.destroy();
    moved = now;
  }, idleMs).unref();
  s.once('close', () => clearInterval(timer));
}
