// `floor` for bench/ab.sh hit: a bare node:http server that does for each
// request what every answer of the gateway does whatever the chain, the key
// or the cache, with the gateway's own code, and nothing else: the body read
// whole, a request id, the answer with the gateway's headers (X-Request-Id,
// Content-Type, Content-Length, X-Cache), and at its end the chain's metrics
// and the access log line (tracker.ts, metrics.ts, access-log.ts, log.ts).
// No key, no guard, no rate limit, no cache: the ceiling of any hit path with
// logging and metrics on, between `limit` (no gateway at all) and the hit.
//   bundled by ab.sh: node floor.mjs ANSWER_FILE PORT
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { AccessLog } from '../runtime/observe/access-log.ts';
import { createLogger } from '../runtime/observe/log.ts';
import { Metrics, type RouteMetrics } from '../runtime/observe/metrics.ts';
import { nextRequestId } from '../runtime/observe/request-id.ts';
import { RequestTracker } from '../runtime/observe/tracker.ts';

const answer = readFileSync(process.argv[2]!);
const { write } = createLogger();
const tracker = new RequestTracker(new AccessLog(write));
const metrics = new Metrics(() => tracker.inflight);
const route = metrics.route('eth', 'evm-jsonrpc');
const KEY_FIELD = ',"keyId":"bench"';

class Answer {
  readonly start = performance.now();
  readonly written: number;
  readonly id = nextRequestId();
  readonly idJson = `"${this.id}"`;
  readonly forward = null;
  readonly metrics: RouteMetrics = route;
  readonly label = 'eth_chainId';
  readonly key = { logField: KEY_FIELD };
  readonly cacheLog = ',"cache":"HIT"';
  readonly upstream = null;
  readonly closed = (): void => tracker.done(this);
  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
  ) {
    this.written = req.socket.bytesWritten;
  }
}

// The gateway's own server options (server.ts).
createServer({ keepAliveTimeout: 65_000, headersTimeout: 60_000, requestTimeout: 0, requireHostHeader: false }, (req, res) => {
  const x = new Answer(req, res);
  tracker.begin();
  res.on('close', x.closed);
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(200, ['x-request-id', x.id, 'content-type', 'application/json', 'content-length', String(answer.length), 'x-cache', 'HIT']);
    res.end(answer);
  });
}).listen(Number(process.argv[3]), '127.0.0.1');
