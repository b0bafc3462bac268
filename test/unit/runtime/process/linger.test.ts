// The lingering close (runtime/process/linger.ts) on a real node:http server and real
// sockets on 127.0.0.1: after an early answer the socket stays open while the
// client is still sending, and closes when it is done or at the first bound
// hit; each way is counted. The bounds are small here so that each is reached
// in well under a second.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { lingerAfterAnswer, lingerStats, LINGER, type LingerBounds, type LingerOutcome } from '../../../../runtime/process/linger.ts';

const ANSWER = '{"error":"Request body too large"}';
let bounds: LingerBounds = LINGER;
let server: Server;
let port = 0;
/** When the server closed each connection, in the order the requests came. */
const closes: Promise<number>[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    lingerAfterAnswer(req, res, bounds);
    closes.push(once(req.socket, 'close').then(() => Date.now()));
    res.writeHead(413, { 'content-type': 'application/json', 'content-length': ANSWER.length });
    res.end(ANSWER);
  });
  // As the gateway does (server.ts clientError): a client gone mid-body is a parse error at its end of stream.
  server.on('clientError', (_err, socket) => socket.destroy());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as { port: number }).port;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

const HEAD = (length: number) => `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

interface Talk {
  readonly socket: Socket;
  /** Once the server has closed the connection: what it sent, and how long after the request it closed. */
  readonly closed: Promise<{ answer: string; ms: number }>;
  /** Resolves when the answer's last byte is in. */
  readonly answered: Promise<void>;
}

/**
 * A client that goes on writing after the server's end of stream
 * (allowHalfOpen), as one busy sending does. One request at a time: its
 * connection's close is the next one the server records.
 */
function talk(first: string | Buffer): Talk {
  const index = closes.length;
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  const started = Date.now();
  let answer = '';
  let onAnswer: () => void;
  const answered = new Promise<void>((r) => (onAnswer = r));
  socket.on('data', (d: Buffer) => {
    answer += d.toString('latin1');
    if (answer.endsWith(ANSWER)) onAnswer();
  });
  socket.on('error', () => {});
  // All the server sent is in once its end of stream is (or the connection is gone).
  const drained = new Promise<void>((r) => {
    socket.on('end', r);
    socket.on('close', r);
  });
  socket.write(first);
  const closed = until(() => closes[index] !== undefined)
    .then(() => Promise.all([closes[index]!, drained]))
    .then(([at]) => {
      socket.destroy();
      return { answer, ms: at - started };
    });
  return { socket, closed, answered };
}

function counts(): Record<LingerOutcome, number> {
  return { ...lingerStats.outcomes };
}

function delta(before: Record<LingerOutcome, number>): Partial<Record<LingerOutcome, number>> {
  const out: Partial<Record<LingerOutcome, number>> = {};
  for (const [k, v] of Object.entries(lingerStats.outcomes) as [LingerOutcome, number][]) if (v !== before[k]) out[k] = v - before[k];
  return out;
}

describe('lingering close', () => {
  it('the default bounds are the documented ones (5 s, 2 s idle, 8 MiB, 256 sockets)', () => {
    expect(LINGER).toEqual({ ms: 5_000, idleMs: 2_000, maxBytes: 8 * 1024 * 1024, maxSockets: 256 });
  });

  it('a client that sends the rest of its body gets the answer, and the server closes once the body is in (complete)', async () => {
    bounds = { ms: 5_000, idleMs: 2_000, maxBytes: 1 << 20, maxSockets: 4 };
    const before = counts();
    const dropped = lingerStats.discardedBytes;
    const t = talk(HEAD(200_000) + 'x'.repeat(1000));
    await t.answered;
    // The answer is there, and the server still reads: the rest of the body is taken, then the connection closes.
    t.socket.write('x'.repeat(199_000));
    const { answer, ms } = await t.closed;
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(answer.endsWith(ANSWER)).toBe(true);
    expect(ms).toBeLessThan(2_000);
    expect(delta(before)).toEqual({ complete: 1 });
    expect(lingerStats.discardedBytes - dropped).toBe(200_000);
    expect(lingerStats.active).toBe(0);
  });

  it('a client that closes once it has the answer (as undici does) ends it (closed)', async () => {
    bounds = { ms: 5_000, idleMs: 2_000, maxBytes: 1 << 20, maxSockets: 4 };
    const before = counts();
    const t = talk(HEAD(200_000) + 'x'.repeat(1000));
    await t.answered;
    t.socket.destroy();
    await t.closed;
    await until(() => lingerStats.active === 0);
    expect(delta(before)).toEqual({ closed: 1 });
  });

  it('a client that stops sending but keeps the connection is closed after idleMs (idle)', async () => {
    bounds = { ms: 5_000, idleMs: 150, maxBytes: 1 << 20, maxSockets: 4 };
    const before = counts();
    const t = talk(HEAD(200_000) + 'x'.repeat(1000));
    const { answer, ms } = await t.closed;
    expect(answer.endsWith(ANSWER)).toBe(true);
    expect(ms).toBeGreaterThanOrEqual(140);
    expect(ms).toBeLessThan(2_000);
    expect(delta(before)).toEqual({ idle: 1 });
  });

  it('a client that trickles its body is closed after ms in all (time)', async () => {
    bounds = { ms: 300, idleMs: 200, maxBytes: 1 << 20, maxSockets: 4 };
    const before = counts();
    const t = talk(HEAD(200_000));
    const trickle = setInterval(() => t.socket.writable && t.socket.write('x'), 20);
    const { answer, ms } = await t.closed;
    clearInterval(trickle);
    expect(answer.endsWith(ANSWER)).toBe(true);
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(2_000);
    expect(delta(before)).toEqual({ time: 1 });
  });

  it('a client that never stops writing is closed once maxBytes is dropped (bytes), chunked bodies too', async () => {
    bounds = { ms: 5_000, idleMs: 2_000, maxBytes: 256 * 1024, maxSockets: 4 };
    for (const head of [HEAD(64 << 20), 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n']) {
      const chunked = head.includes('chunked');
      const before = counts();
      const dropped = lingerStats.discardedBytes;
      const t = talk(head);
      const piece = chunked ? `10000\r\n${'x'.repeat(0x10000)}\r\n` : 'x'.repeat(0x10000);
      const pump = () => {
        while (!t.socket.destroyed && t.socket.writable) if (!t.socket.write(piece)) return void t.socket.once('drain', pump);
      };
      pump();
      const { answer, ms } = await t.closed;
      expect(answer.endsWith(ANSWER), head).toBe(true);
      expect(ms).toBeLessThan(2_000);
      expect(delta(before), head).toEqual({ bytes: 1 });
      // The bound, give or take the chunk that crossed it.
      expect(lingerStats.discardedBytes - dropped).toBeGreaterThan(256 * 1024);
      expect(lingerStats.discardedBytes - dropped).toBeLessThan(256 * 1024 + 256 * 1024);
    }
  });

  it('past maxSockets lingering at once, a socket is closed at once (busy), and the lingering one is not disturbed', async () => {
    bounds = { ms: 5_000, idleMs: 500, maxBytes: 1 << 20, maxSockets: 1 };
    const before = counts();
    const first = talk(HEAD(200_000) + 'x');
    await first.answered;
    expect(lingerStats.active).toBe(1);
    const second = talk(HEAD(200_000) + 'x');
    const { answer, ms } = await second.closed;
    expect(answer.endsWith(ANSWER)).toBe(true);
    expect(ms).toBeLessThan(400);
    expect(delta(before)).toEqual({ busy: 1 });
    await first.closed;
    expect(delta(before)).toEqual({ busy: 1, idle: 1 });
    expect(lingerStats.active).toBe(0);
  });
});

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 1));
}
