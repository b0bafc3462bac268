// A draining listener's keep-alive connections (process/drain.ts, issue 47): an answer
// in flight says Connection: close, a client in a request loop is never cut
// under a request, an idle connection is closed once idle, and a socket
// upgraded away from HTTP is left to its owner. (Answers begun after the drain
// say Connection: close because server.ts says so; this server does not.)
import { afterEach, describe, expect, it } from 'vitest';
import { Agent, createServer, request, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Connections } from '../../../../runtime/process/drain.ts';

let server: Server | null = null;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = null;
});

/** A server whose answers to /held wait for `release`; every other path is answered at once. */
async function serve() {
  const held: (() => void)[] = [];
  const upgraded: Socket[] = [];
  server = createServer((req, res) => {
    const answer = () => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    if (req.url === '/held') held.push(answer);
    else answer();
  });
  server.on('upgrade', (_req, socket: Socket) => {
    upgraded.push(socket);
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n');
  });
  const connections = new Connections(server);
  await new Promise<void>((ok) => server!.listen(0, '127.0.0.1', ok));
  const port = (server.address() as { port: number }).port;
  return { port, connections, held, upgraded, release: () => held.splice(0).forEach((a) => a()) };
}

function get(port: number, path: string, agent: Agent): Promise<{ status: number; connection: string | undefined }> {
  return new Promise((ok, fail) => {
    request({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume().on('end', () => ok({ status: res.statusCode!, connection: res.headers.connection }));
    })
      .on('error', fail)
      .end();
  });
}

const until = async (cond: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`not within 10 s: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('Connections.drain', () => {
  it('an answer in flight says Connection: close; an idle connection is closed once idle; a client in a loop is not cut', async () => {
    const s = await serve();
    const idleAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    const busyAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    const loopAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    expect((await get(s.port, '/', idleAgent)).connection).toBe('keep-alive');
    await get(s.port, '/', loopAgent);
    const idleSocket = Object.values(idleAgent.freeSockets)[0]![0]!;
    let idleClosed = false;
    idleSocket.once('close', () => (idleClosed = true));
    const inFlight = get(s.port, '/held', busyAgent);
    await until(() => s.held.length === 1, 'the held request reached the server');

    s.connections.drain(100);
    // A client in a request loop with pauses under the idle bound, on its one connection: every answer comes on
    // it, while the idle one is closed. Ten answers at least, however fast the idle one goes (a loaded machine makes
    // each round slow: the count, not the time, says the loop went on across the drain).
    const loopSocket = Object.values(loopAgent.freeSockets)[0]![0]!;
    const answers: number[] = [];
    const deadline = Date.now() + 20_000;
    while ((!idleClosed || answers.length < 10) && Date.now() < deadline) {
      answers.push((await get(s.port, '/', loopAgent)).status);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(idleClosed).toBe(true);
    expect(answers.length).toBeGreaterThanOrEqual(10);
    expect(answers.every((a) => a === 200)).toBe(true);
    expect(loopSocket.destroyed).toBe(false);
    s.release();
    expect(await inFlight).toEqual({ status: 200, connection: 'close' });
    for (const a of [idleAgent, busyAgent, loopAgent]) a.destroy();
  });

  it('leaves a socket upgraded away from HTTP open', async () => {
    const s = await serve();
    const client = connect(s.port, '127.0.0.1');
    let closed = false;
    client.once('close', () => (closed = true));
    client.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n');
    await until(() => s.upgraded.length === 1, 'the upgrade');
    s.connections.drain(20);
    // Several idle bounds later, it is still open: the owner of an upgraded socket closes it (ws: 1001).
    await new Promise((r) => setTimeout(r, 200));
    expect(closed).toBe(false);
    expect(s.upgraded[0]!.destroyed).toBe(false);
    client.destroy();
  });
});
