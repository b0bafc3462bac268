// Lingering close, as nginx does it (lingering_close, lingering_time,
// lingering_timeout). A body over maxBodyBytes is answered early: 413
// (Rosetta: 500, code 6012) with Connection: close, before the client has
// finished sending it. Closing the socket then, with the body still arriving,
// makes the kernel answer the next bytes with a reset, and a client that is
// still writing (Node's fetch, so viem and ethers back ends) fails with EPIPE
// or ECONNRESET before it reads the answer: 8 tries in 20 with a 5 MB body
// here. So the socket is half-closed after the answer (the client reads it,
// then end of stream) and the rest of the body is read and dropped, until the
// client has sent it all or closed its side, or a bound is hit:
//
//   - 5 s in all from the answer (nginx lingering_time: 30 s);
//   - 2 s without a byte (nginx lingering_timeout: 5 s);
//   - 8 MiB dropped;
//   - 256 sockets lingering at once, per process; past that a socket closes
//     at once, as before.
//
// So a flood of large bodies holds no connection for more than 5 s and makes
// the gateway read at most 8 MiB more per connection. Real clients rarely
// need any of it: undici stops writing and closes as soon as it has the whole
// answer. Each lingering close is counted by how it ended
// (gateway_lingering_closes_total), and the bytes dropped
// (gateway_lingering_discarded_bytes_total).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface LingerBounds {
  /** In all, from the answer. */
  readonly ms: number;
  /** Without a byte from the client. */
  readonly idleMs: number;
  /** Dropped in all. */
  readonly maxBytes: number;
  /** Lingering at once (per process). */
  readonly maxSockets: number;
}

export const LINGER: LingerBounds = { ms: 5_000, idleMs: 2_000, maxBytes: 8 * 1024 * 1024, maxSockets: 256 };

/** After the byte bound, how long reading stays stopped before the close: the client's time to read the answer. */
const BYTES_GRACE_MS = 250;

/**
 * How a lingering close ended: the client sent the whole body (complete) or
 * closed the connection (closed), or a bound was hit (idle, time, bytes);
 * busy: too many sockets lingered already, this one closed at once.
 */
export const LINGER_OUTCOMES = ['complete', 'closed', 'idle', 'time', 'bytes', 'busy'] as const;
export type LingerOutcome = (typeof LINGER_OUTCOMES)[number];

/** This process's counts, read by the metrics on scrape. */
export const lingerStats = {
  outcomes: Object.fromEntries(LINGER_OUTCOMES.map((o) => [o, 0])) as Record<LingerOutcome, number>,
  discardedBytes: 0,
  /** Sockets lingering now. */
  active: 0,
};

type Closable = Socket & { destroySoon(): void };

/** The sockets lingering now. */
const lingering = new WeakSet<Socket>();

/**
 * Called when the request's answer is decided before its body was read
 * (then the answer is sent): the connection closes after the answer, and the
 * socket lingers until the client is done sending, within the bounds above.
 * The answer must not be one Node keeps the connection alive after; this
 * sees to that. The bounds are LINGER's but in tests.
 */
export function lingerAfterAnswer(req: IncomingMessage, res: ServerResponse, bounds: LingerBounds = LINGER): void {
  const socket = req.socket as Closable;
  res.shouldKeepAlive = false;
  // Already lingering (a 413 decided it before the answer; ws/sockets.ts asks again once any answer is sent).
  if (req.complete || socket.destroyed || lingering.has(socket)) return;
  if (lingerStats.active >= bounds.maxSockets) {
    lingerStats.outcomes.busy++;
    return;
  }
  lingerStats.active++;
  lingering.add(socket);
  let answered = false;
  let ended = false;
  let dropped = 0;

  const destroySoon = socket.destroySoon;
  const end = (outcome: LingerOutcome, destroy: boolean): void => {
    if (ended) return;
    ended = true;
    lingering.delete(socket);
    lingerStats.active--;
    lingerStats.outcomes[outcome]++;
    clearTimeout(total);
    clearTimeout(idle);
    req.off('data', onData);
    req.off('end', onEnd);
    socket.off('close', onClose);
    // The body is in: close as Node would have, once the end of stream is written. A bound: at once.
    if (outcome === 'complete') destroySoon.call(socket);
    else if (outcome === 'bytes') {
      // A client still writing at full speed may not have read the answer yet: a reset now could take it with it
      // (the kernel drops what it had not read). Stop reading, so its writes stall and it reads, then close.
      req.pause();
      socket.pause();
      setTimeout(() => socket.destroy(), BYTES_GRACE_MS).unref();
    } else if (destroy) socket.destroy();
  };
  const onData = (c: Buffer): void => {
    dropped += c.length;
    lingerStats.discardedBytes += c.length;
    if (dropped > bounds.maxBytes) end('bytes', true);
    else idle.refresh();
  };
  // The whole body is in: nothing more is coming, so closing now resets nothing.
  const onEnd = (): void => {
    if (answered) end('complete', true);
  };
  const onClose = (): void => end('closed', false);
  const total = setTimeout(() => end('time', true), bounds.ms).unref();
  const idle = setTimeout(() => end('idle', true), bounds.idleMs).unref();

  // Node's server ends a Connection: close answer with destroySoon(): end,
  // then destroy once the end is written. This socket's version ends (the
  // answer, then end of stream) and leaves the destroy to the lingering.
  socket.destroySoon = () => {
    answered = true;
    socket.end();
    if (req.complete) end('complete', true);
  };
  req.on('data', onData);
  req.on('end', onEnd);
  socket.on('close', onClose);
  // The body is dropped as it comes (whoever else reads it has stopped keeping it).
  req.resume();
}
