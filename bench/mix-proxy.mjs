#!/usr/bin/env node
// The counting proxy of `npm run bench:mix`: one listener per target, each piping
// raw TCP to the same EVM node (anvil) and counting what goes upstream: HTTP
// requests ("POST " request lines), JSON-RPC calls ("method" members, so a batch's
// items count one by one) and calls per method. The same process and code path
// serve every target, so "upstream requests per 1,000 client requests" is
// measured the same way for all of them.
//
// Raw piping (one node connection per incoming connection, bytes scanned with
// Buffer.indexOf, nothing parsed) because this process shares the load core with
// wrk and anvil: it cost ~1.8% of a core per 1,000 req/s here, against ~3.3% for
// node:http + an undici Pool, and left the load side ~40% more room. The scan
// assumes what every target here sends: plain JSON-RPC POSTs whose params hold
// no "method" string.
//
//   UPSTREAM_URL=http://127.0.0.1:8545 LISTEN=gateway:18762,nginx:18763 CONTROL_PORT=18761 node bench/mix-proxy.mjs
//
// GET http://127.0.0.1:CONTROL_PORT/counts answers {"<name>": {"requests", "calls", "methods": {...}}}.
import http from 'node:http';
import net from 'node:net';

const HOST = '127.0.0.1';
const up = new URL(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:8545');
const UP_PORT = Number(up.port || 80);
const listen = (process.env.LISTEN ?? '').split(',').filter(Boolean).map((s) => {
  const [name, port] = s.split(':');
  return { name, port: Number(port) };
});
const CONTROL_PORT = Number(process.env.CONTROL_PORT ?? 0);
const METHOD = Buffer.from('"method"');
const POST = Buffer.from('POST ');
const COLON = 0x3a;
const QUOTE = 0x22;

/** The end of a chunk that begins "method" or "POST " (a proper prefix, so it never counts twice), else null. */
function partialAtEnd(buf) {
  for (let k = Math.min(METHOD.length - 1, buf.length); k > 0; k--) {
    const tail = buf.subarray(buf.length - k);
    if (METHOD.subarray(0, k).equals(tail) || (k < POST.length && POST.subarray(0, k).equals(tail))) return Buffer.from(tail);
  }
  return null;
}

const counts = {};
function counter(name, port) {
  const c = { requests: 0, calls: 0, methods: Object.create(null) };
  counts[name] = c;
  const server = net.createServer((client) => {
    const node = net.connect(UP_PORT, up.hostname);
    client.setNoDelay(true);
    node.setNoDelay(true);
    // A "method" member or "POST " cut by a chunk boundary is kept and scanned with the next chunk.
    let carry = null;
    client.on('data', (chunk) => {
      const buf = carry ? Buffer.concat([carry, chunk]) : chunk;
      carry = null;
      for (let at = buf.indexOf(POST); at >= 0; at = buf.indexOf(POST, at + 5)) c.requests++;
      let i = 0;
      while ((i = buf.indexOf(METHOD, i)) >= 0) {
        const colon = buf.indexOf(COLON, i + 8);
        const open = colon < 0 ? -1 : buf.indexOf(QUOTE, colon + 1);
        const close = open < 0 ? -1 : buf.indexOf(QUOTE, open + 1);
        if (close < 0) {
          carry = Buffer.from(buf.subarray(i));
          break;
        }
        c.calls++;
        const m = buf.latin1Slice(open + 1, close);
        c.methods[m] = (c.methods[m] ?? 0) + 1;
        i = close + 1;
      }
      if (carry === null) carry = partialAtEnd(buf);
    });
    client.pipe(node);
    node.pipe(client);
    const end = () => {
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

const servers = listen.map(({ name, port }) => counter(name, port));
const control = http.createServer((req, res) => {
  if (req.url !== '/counts') return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(counts));
});
control.listen(CONTROL_PORT, HOST, () => console.log(`mix-proxy: ${listen.map((l) => `${l.name}@${l.port}`).join(' ')} -> ${up.host}, counts on ${CONTROL_PORT}`));

const stop = () => {
  control.close();
  for (const s of servers) s.close();
  setTimeout(() => process.exit(0), 200).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
