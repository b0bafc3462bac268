// A node's WebSocket endpoint behind a stand-in a test can count and break
// (issue 46's upstream head sockets): every upgrade that reaches it is counted
// (with its path and headers), each socket is relayed message by message to
// the node (anvil serves ws on its http port's root), and a test can
//  - kill() it: every socket dropped and the port closed (a node's ws down);
//  - restore() it on the same port;
//  - mute() the sockets open now: they stay connected but pass nothing more
//    from the node (a socket gone quiet); sockets opened later are relayed;
//  - hang() every socket, open now or opened until unhang(): it stays
//    connected but passes nothing either way and answers no ping (a half-open
//    connection, the node's side gone without a FIN). unhang() relays the
//    sockets opened after it; a hung one stays hung, as a dead connection does.
// No test framework in here.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';

export interface WsProxy {
  /** ws://127.0.0.1:PORT/PATH (the path as the gateway was told it; the node is asked at its root, as anvil serves it). */
  readonly url: string;
  /** Upgrades that reached it, in order: their path and headers. */
  readonly upgrades: { readonly path: string; readonly headers: IncomingHttpHeaders }[];
  /** Sockets relayed now. */
  readonly open: number;
  /** Messages the node pushed that were passed on (eth_subscription notifications included). */
  readonly relayed: number;
  kill(): Promise<void>;
  restore(): Promise<void>;
  mute(): void;
  hang(): void;
  unhang(): void;
  close(): Promise<void>;
}

/** `target`: the node's ws origin (ws://127.0.0.1:PORT). `path`: what the proxy's URL carries (a provider's key lives there). */
export async function startWsProxy(target: string, path = '/'): Promise<WsProxy> {
  const upgrades: { path: string; headers: IncomingHttpHeaders }[] = [];
  const sockets = new Set<{ client: WebSocket; node: WebSocket; muted: boolean; hung: boolean }>();
  let relayed = 0;
  let hanging = false;
  let server: Server;
  let port = 0;

  const listen = (): Promise<void> => {
    server = createServer((_req, res) => res.writeHead(426).end());
    // Pongs are its own (below): a hung socket answers none.
    const wss = new WebSocketServer({ noServer: true, autoPong: false });
    server.on('upgrade', (req, socket, head) => {
      upgrades.push({ path: req.url ?? '', headers: req.headers });
      wss.handleUpgrade(req, socket, head, (client) => {
        const node = new WebSocket(target);
        const pair = { client, node, muted: false, hung: hanging };
        sockets.add(pair);
        const early: string[] = [];
        node.on('open', () => early.splice(0).forEach((m) => node.send(m)));
        client.on('ping', (data: Buffer) => {
          if (!pair.hung) client.pong(data);
        });
        client.on('message', (m: Buffer) => {
          if (pair.hung) return;
          if (node.readyState === WebSocket.OPEN) node.send(m.toString());
          else early.push(m.toString());
        });
        node.on('message', (m: Buffer) => {
          if (pair.muted || pair.hung || client.readyState !== WebSocket.OPEN) return;
          relayed++;
          client.send(m.toString());
        });
        const end = () => {
          sockets.delete(pair);
          client.terminate();
          node.terminate();
        };
        client.on('close', end);
        node.on('close', end);
        client.on('error', end);
        node.on('error', end);
      });
    });
    return new Promise((ok) => server.listen(port, '127.0.0.1', () => ((port = (server.address() as AddressInfo).port), ok())));
  };

  const kill = (): Promise<void> => {
    for (const s of sockets) {
      s.client.terminate();
      s.node.terminate();
    }
    sockets.clear();
    return new Promise((ok) => {
      server.close(() => ok());
      server.closeAllConnections();
    });
  };

  await listen();
  return {
    get url() {
      return `ws://127.0.0.1:${port}${path}`;
    },
    upgrades,
    get open() {
      return sockets.size;
    },
    get relayed() {
      return relayed;
    },
    kill,
    restore: listen,
    mute() {
      for (const s of sockets) s.muted = true;
    },
    hang() {
      hanging = true;
      for (const s of sockets) s.hung = true;
    },
    unhang() {
      hanging = false;
    },
    close: () => (server.listening ? kill() : Promise.resolve()),
  };
}
