// The upstreams of `npm run bench:throttle` (bench/throttle.mjs): EVM nodes that answer by method from
// memory, as bench/rpc-upstream.mjs does (the gateway's poll passes: chain id, latest, safe, finalized and
// genesis blocks), extended to the bench's read mix (eth_call, eth_getBalance, eth_getTransactionCount,
// eth_getCode, eth_gasPrice, blocks by number and by hash), on several ports of one process:
//   - a port named in SLOW answers every request (polls too) SLOW_MS later;
//   - a port named in THROTTLE refuses every THROTTLE_EVERY-th client call (the gateway's polls and health
//     checks aside, as test/support/throttle-standin.ts does) the way Infura does, alternately:
//       HTTP 429 with Retry-After: 1 and {"error": {"code": -32005, "message": "daily request count
//       exceeded, request rate limited"}}, and a 200 with the same JSON-RPC error (no Retry-After).
// A JSON-RPC batch counts as one client call.
//
//   LISTEN=gateway/fast:19880,gateway/slow:19881,gateway/throttle:19882 SLOW=slow SLOW_MS=20 THROTTLE=throttle \
//     THROTTLE_EVERY=10 CONTROL_PORT=19861 node bench/throttle-upstream.mjs
//
// LISTEN: name:port pairs; SLOW and THROTTLE: the names (after the last "/") of the listeners that answer late or
// throttle. GET http://127.0.0.1:CONTROL_PORT/counts answers {"<name>": {"requests", "health", "throttled429",
// "throttled200"}}: requests (polls and health checks included), of them the gateway's (user-agent
// chain-gateway-health), and client calls refused each way.
import { createServer } from 'node:http';

const HOST = '127.0.0.1';
const listen = (process.env.LISTEN ?? '').split(',').filter(Boolean).map((s) => {
  const at = s.lastIndexOf(':');
  return { name: s.slice(0, at), port: Number(s.slice(at + 1)) };
});
const names = (v) => new Set((v ?? '').split(',').filter(Boolean));
const SLOW = names(process.env.SLOW);
const SLOW_MS = Number(process.env.SLOW_MS ?? 20);
const THROTTLE = names(process.env.THROTTLE);
const THROTTLE_EVERY = Number(process.env.THROTTLE_EVERY ?? 10);
const CONTROL_PORT = Number(process.env.CONTROL_PORT ?? 0);
const HEALTH = 'chain-gateway-health';

const HEAD = 0x1000;
const hex = (n) => `0x${n.toString(16)}`;
const hash = (n) => `0x${n.toString(16).padStart(64, '0')}`;
const block = (n) => ({ number: hex(n), hash: hash(n + 1), parentHash: hash(n), timestamp: hex(1_700_000_000 + 12 * n), gasUsed: '0x5208', transactions: [] });
const TAGS = { latest: HEAD, pending: HEAD, safe: HEAD - 32, finalized: HEAD - 64, earliest: 0 };
const blockOf = (tag) => (typeof tag === 'string' && tag.startsWith('0x') ? Number.parseInt(tag, 16) : TAGS[tag ?? 'latest']);
const THROTTLE_ERROR = { code: -32005, message: 'daily request count exceeded, request rate limited', data: { rate: { allowed_rps: 1, backoff_seconds: 1, current_rps: 12.5 } } };

function answer(call) {
  const id = call?.id ?? null;
  const ok = (result) => ({ jsonrpc: '2.0', id, result });
  const p = call?.params ?? [];
  switch (call?.method) {
    case 'eth_chainId': return ok('0x1');
    case 'net_version': return ok('1');
    case 'eth_blockNumber': return ok(hex(HEAD));
    case 'eth_gasPrice': return ok('0x3b9aca00');
    case 'eth_getBalance': return ok(hex(1e18 + (Number.parseInt(String(p[0]).slice(-6), 16) || 0)));
    case 'eth_getTransactionCount': return ok(hex(Number.parseInt(String(p[0]).slice(-2), 16) || 0));
    case 'eth_getCode': return ok('0x6080604052');
    case 'eth_call': return ok(`0x${'0'.repeat(56)}${(Number.parseInt(String(p[0]?.to).slice(-8), 16) || 0).toString(16).padStart(8, '0')}`);
    case 'eth_getBlockByNumber': {
      const n = blockOf(p[0]);
      return ok(n === undefined || n > HEAD ? null : block(n));
    }
    case 'eth_getBlockByHash': {
      const n = Number.parseInt(String(p[0]), 16) - 1;
      return ok(n >= 0 && n <= HEAD ? block(n) : null);
    }
    default: return { jsonrpc: '2.0', id, error: { code: -32601, message: `the method ${call?.method} does not exist/is not available` } };
  }
}

const counts = {};
function listener(name, port) {
  const c = { requests: 0, health: 0, throttled429: 0, throttled200: 0 };
  counts[name] = c;
  const short = name.slice(name.lastIndexOf('/') + 1);
  const slow = SLOW.has(short);
  const throttles = THROTTLE.has(short);
  let calls = 0; // client calls, for the 1 in THROTTLE_EVERY
  const server = createServer((req, res) => {
    const parts = [];
    req.on('data', (b) => parts.push(b));
    req.on('end', () => {
      c.requests++;
      const health = String(req.headers['user-agent'] ?? '').startsWith(HEALTH);
      if (health) c.health++;
      let status = 200;
      const headers = { 'content-type': 'application/json' };
      let body;
      let v;
      try {
        v = JSON.parse(Buffer.concat(parts).toString());
      } catch {
        v = undefined;
      }
      if (v === undefined) body = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}';
      else if (throttles && !health && ++calls % THROTTLE_EVERY === 0) {
        const err = (call) => ({ jsonrpc: '2.0', id: call?.id ?? null, error: THROTTLE_ERROR });
        body = JSON.stringify(Array.isArray(v) ? v.map(err) : err(v));
        if ((calls / THROTTLE_EVERY) % 2 === 1) {
          status = 429;
          headers['retry-after'] = '1';
          c.throttled429++;
        } else c.throttled200++;
      } else body = JSON.stringify(Array.isArray(v) ? v.map(answer) : answer(v));
      headers['content-length'] = Buffer.byteLength(body);
      const send = () => res.writeHead(status, headers).end(body);
      if (slow) setTimeout(send, SLOW_MS);
      else send();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, HOST);
  return server;
}

const servers = listen.map(({ name, port }) => listener(name, port));
const control = createServer((req, res) => {
  if (req.url !== '/counts') return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(counts));
});
control.listen(CONTROL_PORT, HOST, () =>
  console.log(`throttle-upstream: ${listen.map((l) => l.name + '@' + l.port).join(' ')}; slow ${[...SLOW]} +${SLOW_MS} ms; throttle ${[...THROTTLE]} 1 in ${THROTTLE_EVERY}; counts on ${CONTROL_PORT}`),
);

const stop = () => {
  control.close();
  for (const s of servers) s.close();
  setTimeout(() => process.exit(0), 200).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
