// Issue 46: an upstream head socket that cannot be opened is tried again
// after a wait that doubles from 0.5 s (to 30 s), each jittered down to at most half,
// and says so once per run of failures, by the upstream's name and the
// answer's status, never its URL (which holds a provider's key). One whose
// peer answers no ping is dropped, but not while bytes still come (a long
// message holds the pong behind it).
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { HeadSockets } from '../../../../runtime/upstreams/head-sockets.ts';
import { ChainView } from '../../../../runtime/upstreams/chain-view.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';
import { moduleOf } from '../../../../runtime/kinds/index.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import type { RouteSpec, UpstreamSpec } from '../../../../runtime/types.ts';

const SECRET = 'head-socket-secret-5e4d3c2b1a';
let server: Server | null = null;
let sockets: HeadSockets | null = null;

afterEach(async () => {
  sockets?.stop();
  await new Promise((ok) => (server === null ? ok(undefined) : server.close(ok)));
  server = null;
});

/** The head socket of one EVM upstream at `server`'s port, pinged every `everyMs`, each pong awaited 1 s; what it logs. */
async function headSocket(everyMs: number): Promise<{ u: Upstream; lines: Record<string, unknown>[] }> {
  await new Promise<void>((ok) => server!.listen(0, '127.0.0.1', ok));
  const port = (server!.address() as AddressInfo).port;
  const spec = { name: 'eth#0', url: { parts: ['http://127.0.0.1:9'] }, ws: { parts: [`ws://127.0.0.1:${port}/ws/v3/${SECRET}`] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000 } as unknown as UpstreamSpec;
  const route = { path: 'eth', interface: 'evm-jsonrpc', maxLag: 10, limits: { timeoutMs: 1000 }, upstreams: [spec] } as unknown as RouteSpec;
  const u = new Upstream(spec, route);
  const lines: Record<string, unknown>[] = [];
  const log = { info: (o: Record<string, unknown>) => lines.push(o), warn: (o: Record<string, unknown>) => lines.push(o), error: (o: Record<string, unknown>) => lines.push(o) } as unknown as Logger;
  sockets = new HeadSockets([{ route, group: new UpstreamGroup([u]), view: new ChainView([u]), heads: true, probe: moduleOf('evm-jsonrpc').probe, everyMs }], { intervalMs: 1000, timeoutMs: 1000 }, log);
  return { u, lines };
}

function until(cond: () => boolean, what: string, ms: number): Promise<void> {
  return new Promise<void>((ok, fail) => {
    const t = setInterval(() => cond() && (clearInterval(t), clearTimeout(late), ok()), 20);
    const late = setTimeout(() => (clearInterval(t), fail(new Error(`${what}: not within ${ms} ms`))), ms);
  });
}

describe('an upstream head socket whose peer answers no ping', () => {
  it('is kept while bytes of a long message still come, and dropped (upstream_socket_no_pong) and opened again once nothing does', async () => {
    // Completes the upgrade, answers no ping, and starts one long text frame (1 MB) that it sends 100 bytes at a time.
    const wss = new WebSocketServer({ noServer: true, autoPong: false });
    const wires: Socket[] = [];
    let trickle: NodeJS.Timeout | null = null;
    server = createServer((_req, res) => res.writeHead(404).end());
    server.on('upgrade', (req, socket: Socket, head) =>
      wss.handleUpgrade(req, socket, head, () => {
        wires.push(socket);
        if (wires.length > 1) return;
        const header = Buffer.alloc(10);
        header[0] = 0x81; // FIN, text
        header[1] = 127; // unmasked (server to client), 64-bit length
        header.writeBigUInt64BE(1_000_000n, 2);
        socket.write(header);
        trickle = setInterval(() => socket.write(Buffer.alloc(100, 0x20)), 200).unref();
      }),
    );
    const { lines } = await headSocket(300);
    sockets!.start();
    await until(() => trickle !== null, 'the first upgrade', 5000);
    // Pinged at 300 ms and each second after that it waited: over three seconds of bytes and no pong, it is kept.
    const t0 = performance.now();
    await until(() => performance.now() - t0 > 3000, 'three seconds', 5000);
    expect(lines.filter((l) => l.event === 'upstream_socket_no_pong')).toEqual([]);
    expect(wires).toHaveLength(1);
    clearInterval(trickle!);
    await until(() => lines.some((l) => l.event === 'upstream_socket_no_pong'), 'upstream_socket_no_pong', 5000);
    expect(lines.find((l) => l.event === 'upstream_socket_no_pong')).toMatchObject({ upstream: 'eth#0', waitedMs: 1000 });
    await until(() => wires.length === 2, 'the socket opened again', 5000);
    wss.close();
  }, 20_000);
});

describe('an upstream head socket that cannot be opened', () => {
  it('is tried again after waits that double from 0.5 s, each at least half of it; one log line, no URL', async () => {
    // Refuses every upgrade, as a provider's endpoint does without the right key.
    const arrivals: number[] = [];
    server = createServer((_req, res) => res.writeHead(404).end());
    server.on('upgrade', (_req, socket) => {
      arrivals.push(performance.now());
      socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n');
    });
    const { u, lines } = await headSocket(1000);
    expect(u.view.socket).toBe('down');
    sockets!.start();
    await new Promise<void>((ok, fail) => {
      const t = setInterval(() => arrivals.length >= 4 && (clearInterval(t), ok()), 20);
      setTimeout(() => (clearInterval(t), fail(new Error(`${arrivals.length} tries in 10 s`))), 10_000);
    });
    const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!);
    // Each wait w is w × [0.5, 1), and the failed try's own few ms: at least half of it (a wait that did not double, or
    // a retry at once, falls below); the upper bound is loose (a loaded host's timers are late), it only says no try is lost.
    [500, 1000, 2000].forEach((w, i) => {
      expect(gaps[i]).toBeGreaterThanOrEqual(w / 2 - 5);
      expect(gaps[i]).toBeLessThan(2 * w + 1000);
    });
    expect(lines).toEqual([expect.objectContaining({ event: 'upstream_socket_down', chain: 'eth', upstream: 'eth#0', reason: 'HTTP 503' })]);
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(u.view.socket).toBe('down');
  }, 20_000);
});
