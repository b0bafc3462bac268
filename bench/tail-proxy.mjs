#!/usr/bin/env node
// The upstreams of `TAIL=1 npm run bench:mix` (bench/tail.mjs): per target three listeners, each piping
// raw TCP to the same EVM node (anvil), one of which answers late now and then: it holds every
// SLOW_EVERY-th request it is sent (the 20th, 40th, ...: 5% by default) SLOW_MS before passing it on,
// so that answer comes SLOW_MS late. Health checks (User-Agent chain-gateway-health/1) are never held and
// not counted towards the 1 in SLOW_EVERY: the gateway must keep the slow node in its pool, as a real
// node that stalls now and then stays in one. Deterministic: no randomness, the same count on every run.
//
// Raw piping as bench/mix-proxy.mjs does (one node connection per incoming connection, nothing parsed but
// each request's head), because this process shares the load core with anvil and the load generator. A
// request is held by holding its bytes: its head, and its body until the answer starts. Neither nginx
// nor undici pipelines requests on a keep-alive connection, so the bytes from the client after an answer
// are the next request's.
//
//   UPSTREAM_URL=http://127.0.0.1:8545 LISTEN=nginx/a:18781,nginx/b:18782,nginx/c:18783 SLOW=c SLOW_MS=200 SLOW_EVERY=20 \
//     CONTROL_PORT=18761 node bench/tail-proxy.mjs
//
// LISTEN: name:port pairs; SLOW: the names (after the last "/") of the listeners that answer late.
// GET http://127.0.0.1:CONTROL_PORT/counts answers {"<name>": {"requests", "health", "held", "conns"}}: requests
// (health checks included), of them health checks, requests held, and connections opened (a client that gives
// up on a request, as the gateway does with the slower of a hedged call's two, closes its connection).
import http from 'node:http';
import net from 'node:net';

const HOST = '127.0.0.1';
const up = new URL(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:8545');
const UP_PORT = Number(up.port || 80);
const listen = (process.env.LISTEN ?? '').split(',').filter(Boolean).map((s) => {
  const at = s.lastIndexOf(':');
  return { name: s.slice(0, at), port: Number(s.slice(at + 1)) };
});
const SLOW = new Set((process.env.SLOW ?? '').split(',').filter(Boolean));
const SLOW_MS = Number(process.env.SLOW_MS ?? 200);
const SLOW_EVERY = Number(process.env.SLOW_EVERY ?? 20);
const CONTROL_PORT = Number(process.env.CONTROL_PORT ?? 0);
const HEAD_END = Buffer.from('\r\n\r\n');
const HEALTH = /^user-agent:[ \t]*chain-gateway-health\//im;

const counts = {};
function listener(name, port) {
  const c = { requests: 0, health: 0, held: 0, conns: 0 };
  counts[name] = c;
  const slow = SLOW.has(name.slice(name.lastIndexOf('/') + 1));
  let seen = 0; // requests not health checks, for the 1 in SLOW_EVERY
  const server = net.createServer((client) => {
    c.conns++;
    const node = net.connect(UP_PORT, up.hostname);
    client.setNoDelay(true);
    node.setNoDelay(true);
    let fresh = true; // the next bytes from the client begin a request
    let head = null; // a request's head not complete yet
    let held = null; // bytes held back while the request is delayed (null: none held)
    let closed = false;
    const pass = (chunk) => {
      if (held !== null) held.push(chunk);
      else node.write(chunk);
    };
    client.on('data', (chunk) => {
      if (!fresh && head === null) return pass(chunk);
      fresh = false;
      head = head === null ? chunk : Buffer.concat([head, chunk]);
      const end = head.indexOf(HEAD_END);
      if (end < 0 && head.length < 65536) return; // the rest of the head is still coming
      const bytes = head;
      head = null;
      c.requests++;
      if (HEALTH.test(bytes.latin1Slice(0, end < 0 ? bytes.length : end))) {
        c.health++;
        return pass(bytes);
      }
      if (slow && ++seen % SLOW_EVERY === 0) {
        c.held++;
        held = [bytes];
        setTimeout(() => {
          const out = held;
          held = null;
          if (!closed) for (const b of out) node.write(b);
        }, SLOW_MS);
        return;
      }
      pass(bytes);
    });
    node.on('data', (chunk) => {
      fresh = true;
      client.write(chunk);
    });
    const end = () => {
      closed = true;
      client.destroy();
      node.destroy();
    };
    client.on('error', end);
    node.on('error', end);
    client.on('close', end);
    node.on('close', end);
  });
  server.listen(port, HOST);
  return server;
}

const servers = listen.map(({ name, port }) => listener(name, port));
const control = http.createServer((req, res) => {
  if (req.url !== '/counts') return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(counts));
});
control.listen(CONTROL_PORT, HOST, () =>
  console.log(`tail-proxy: ${listen.map((l) => `${l.name}@${l.port}${SLOW.has(l.name.slice(l.name.lastIndexOf('/') + 1)) ? ` (1 in ${SLOW_EVERY} held ${SLOW_MS} ms)` : ''}`).join(' ')} -> ${up.host}, counts on ${CONTROL_PORT}`),
);

const stop = () => {
  control.close();
  for (const s of servers) s.close();
  setTimeout(() => process.exit(0), 200).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
