#!/usr/bin/env node
// proxyd's WebSocket design, for bench/ws.mjs to compare the gateway with: each
// client socket is pinned to its own upstream socket, opened when the client
// connects, and frames are piped both ways unchanged (no multiplexing, no shared
// subscription). A client's frames sent before its upstream socket is open wait
// for it; when either side closes, the other is closed too.
//
//   node bench/ws-pinned-proxy.mjs PORT ws://127.0.0.1:ANVIL_PORT
//
// Listens on 127.0.0.1:PORT only and prints "listening PORT" when ready.
// GET /stats answers {"clients":N,"upstreams":N}: the sockets open on each side.
import { createServer } from 'node:http';
import WebSocket, { WebSocketServer } from 'ws';

const [port, upstreamUrl] = process.argv.slice(2);
if (!port || !upstreamUrl) {
  console.error('usage: node bench/ws-pinned-proxy.mjs PORT ws://upstream');
  process.exit(2);
}
let clients = 0;
let upstreams = 0;

const server = createServer((req, res) => {
  if (req.url === '/stats') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ clients, upstreams }));
  res.writeHead(404).end();
});
const wss = new WebSocketServer({ server, perMessageDeflate: false });
wss.on('connection', (client) => {
  clients++;
  const up = new WebSocket(upstreamUrl, { perMessageDeflate: false });
  const waiting = [];
  let upOpen = false;
  up.on('open', () => {
    upstreams++;
    upOpen = true;
    for (const [data, isBinary] of waiting) up.send(data, { binary: isBinary });
    waiting.length = 0;
  });
  client.on('message', (data, isBinary) => (upOpen ? up.send(data, { binary: isBinary }) : waiting.push([data, isBinary])));
  up.on('message', (data, isBinary) => client.readyState === WebSocket.OPEN && client.send(data, { binary: isBinary }));
  client.on('close', () => {
    clients--;
    up.close();
  });
  up.on('close', () => {
    if (upOpen) upstreams--;
    upOpen = false;
    // As proxyd does: the backend gone, the client is disconnected (no resubscribe).
    if (client.readyState === WebSocket.OPEN) client.close(1011, 'backend closed');
  });
  up.on('error', () => {});
  client.on('error', () => {});
});
server.listen(Number(port), '127.0.0.1', () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
