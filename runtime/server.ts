// The gateway process: listeners, dispatch, keys, guards, forwarding, health
// and lifecycle. Generated code calls `main(spec)` with its precomputed tables.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import type { GatewaySpec, InterfaceKind, ListenerSpec, RouteSpec } from './types.ts';
import { resolveTemplate } from './env.ts';
import { createLogger, type Logger } from './log.ts';
import { isKeyShaped, KeyStore, type KeyEntry } from './keys.ts';
import { splitQuery } from './url.ts';
import { Upstream, UpstreamGroup } from './upstream.ts';
import { endToEndHeaders, forward, type FailKind, type ForwardRequest, type ForwardResult } from './proxy.ts';
import { checkEvmBody, mergeBatch } from './guards/evm.ts';
import { checkRosettaBody, isRosettaError, ROSETTA_ENDPOINTS } from './guards/rosetta.ts';
import { checkBlockbook } from './guards/blockbook.ts';
import { RPC_ERRORS, rpcErrorJson, type RpcErrorName } from './errors/evm-jsonrpc.ts';
import { BLOCKBOOK_ERRORS, blockbookErrorJson, type BlockbookErrorName } from './errors/blockbook.ts';
import { GATEWAY_ROSETTA_ALLOW_ERRORS, rosettaErrorJson, type RosettaErrorName } from './errors/rosetta.ts';
import { HealthChecker } from './health.ts';
import { MemoryRateLimiter, type RateLimiter } from './ratelimit.ts';
import { RedisRateLimiter } from './ratelimit-redis.ts';
import { Metrics } from './metrics.ts';
import { isWorker, runPrimary, workerCount } from './cluster.ts';

type AuthFail = 'missing' | 'invalid' | 'forbidden' | 'conflict';

/** What one request did, for the access log and metrics. */
class Ctx {
  readonly id: string;
  readonly start = process.hrtime.bigint();
  keyId: string | null = null;
  chain: string | null = null;
  iface: InterfaceKind | null = null;
  /** RPC method (allowlisted only), 'batch', 'refused', or a Rosetta/Blockbook endpoint. */
  label = '-';
  upstream: string | null = null;
  /** Bytes the socket had written before this request, for the access log. */
  readonly written: number;
  constructor(req: IncomingMessage) {
    this.written = req.socket.bytesWritten;
    const given = req.headers['x-request-id'];
    this.id = typeof given === 'string' && given.length > 0 && given.length <= 128 && isPrintable(given) ? given : randomUUID();
  }
}

function isPrintable(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/** Key errors carry the same names in all three catalogues (GW_AUTH_*), each in its own envelope. */
const AUTH = {
  missing: 'GW_AUTH_KEY_MISSING',
  invalid: 'GW_AUTH_KEY_INVALID',
  forbidden: 'GW_AUTH_KEY_FORBIDDEN',
  conflict: 'GW_AUTH_KEY_CONFLICT',
} as const satisfies Record<AuthFail, RpcErrorName & BlockbookErrorName & RosettaErrorName>;
const RPC_FAIL: Record<FailKind, RpcErrorName> = {
  unavailable: 'GW_RPC_UPSTREAM_UNAVAILABLE',
  timeout: 'GW_RPC_UPSTREAM_TIMEOUT',
  'no-upstream': 'GW_RPC_NO_HEALTHY_UPSTREAM',
  'bad-response': 'GW_RPC_UPSTREAM_BAD_RESPONSE',
};
const BB_FAIL: Record<FailKind, BlockbookErrorName> = {
  unavailable: 'GW_BB_UPSTREAM_UNAVAILABLE',
  timeout: 'GW_BB_UPSTREAM_TIMEOUT',
  'no-upstream': 'GW_BB_NO_HEALTHY_UPSTREAM',
  'bad-response': 'GW_BB_UPSTREAM_UNAVAILABLE',
};
const ROSETTA_FAIL: Record<FailKind, RosettaErrorName> = {
  unavailable: 'GW_ROSETTA_UPSTREAM_UNAVAILABLE',
  timeout: 'GW_ROSETTA_UPSTREAM_TIMEOUT',
  'no-upstream': 'GW_ROSETTA_NO_HEALTHY_UPSTREAM',
  'bad-response': 'GW_ROSETTA_UPSTREAM_BAD_RESPONSE',
};

/** Request headers passed on to Blockbook; everything else (cookies, the key) stays here. */
const BLOCKBOOK_PASS = ['accept', 'accept-encoding', 'accept-language', 'user-agent', 'if-none-match', 'if-modified-since', 'content-type'];

/** Largest upstream answer the gateway holds in memory to rewrite it (batch merge, Rosetta errors). */
const MAX_REWRITE_BYTES = 64 * 1024 * 1024;

interface Listening {
  readonly spec: ListenerSpec | null;
  readonly server: Server;
  readonly host: string;
  readonly port: number;
}

export class Gateway {
  readonly log: Logger;
  private readonly flushLog: () => void;
  private readonly writeLog: (line: string) => void;
  private readonly accessLog: boolean;
  readonly keys: KeyStore;
  readonly groups = new Map<RouteSpec, UpstreamGroup>();
  readonly routes: RouteSpec[] = [];
  private readonly listening: Listening[] = [];
  private readonly health: HealthChecker;
  private readonly limiter: RateLimiter;
  readonly metrics: Metrics;
  private readonly corsAll: boolean;
  private readonly corsOrigins: ReadonlySet<string>;
  private draining = false;
  private inflight = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(readonly spec: GatewaySpec) {
    const { log, flush, write } = createLogger();
    this.log = log;
    this.flushLog = flush;
    this.writeLog = write;
    this.accessLog = log.isLevelEnabled('info');
    this.keys = new KeyStore(process.env.GATEWAY_KEYS_FILE ?? spec.keysFile, log);
    this.corsAll = spec.corsOrigins.includes('*');
    this.corsOrigins = new Set(spec.corsOrigins);
    this.metrics = new Metrics(() => this.inflight);
    for (const l of spec.listeners) {
      for (const route of l.routes.values()) {
        this.routes.push(route);
        this.groups.set(route, new UpstreamGroup(route.upstreams.map((u) => new Upstream(u, route))));
      }
    }
    this.health = new HealthChecker(this.routes, this.groups, spec.health, log, this.metrics);
    this.limiter = process.env.REDIS_URL ? new RedisRateLimiter(process.env.REDIS_URL, log) : new MemoryRateLimiter();
  }

  /** Binds every listener. Resolves once all are listening. */
  async start(): Promise<Listening[]> {
    this.keys.load();
    this.keys.watch();
    await this.limiter.ready();
    for (const l of this.spec.listeners) {
      const host = resolveTemplate(l.host, `listener ${l.name}`);
      const port = parsePort(resolveTemplate(l.port, `listener ${l.name}`), `listener ${l.name}`);
      const server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 60_000, requestTimeout: 0 }, (req, res) =>
        this.handle(l, req, res),
      );
      server.on('clientError', (err, socket) => this.clientError(l, err as Error & { code?: string; rawPacket?: Buffer }, socket));
      this.listening.push(await listen(server, host, port, l));
    }
    // In multi-process mode the primary serves the admin listener for all workers.
    if (this.spec.admin && !isWorker()) {
      const host = resolveTemplate(this.spec.admin.host, 'admin listener');
      const port = parsePort(resolveTemplate(this.spec.admin.port, 'admin listener'), 'admin listener');
      const server = createServer((req, res) => this.handleAdmin(req, res));
      this.listening.push(await listen(server, host, port, null));
    }
    this.health.start();
    this.log.info(
      { event: 'started', manifest: this.spec.source, chains: this.routes.length, keys: this.keys.size, listeners: this.addresses() },
      'gateway started',
    );
    return this.listening;
  }

  addresses(): { listener: string; host: string; port: number }[] {
    return this.listening.map((l) => ({ listener: l.spec?.name ?? 'admin', host: l.host, port: l.port }));
  }

  // ---------------------------------------------------------------- dispatch

  /** Hot path: one pass over the URL, one Map lookup for the route. */
  private handle(listener: ListenerSpec, req: IncomingMessage, res: ServerResponse): void {
    const ctx = new Ctx(req);
    this.inflight++;
    res.once('close', () => this.done(ctx, res));
    if (this.draining) res.shouldKeepAlive = false;
    try {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q === -1 ? url : url.slice(0, q);
      const query = q === -1 ? '' : url.slice(q + 1);
      const slash = path.indexOf('/', 1);
      const first = slash === -1 ? path.slice(1) : path.slice(1, slash);
      const route = path.charCodeAt(0) === 47 ? listener.routes.get(first) : undefined;
      if (route === undefined) return this.ownRoute(listener, path, req, res, ctx);
      ctx.chain = route.path;
      ctx.iface = route.interface;
      const rest = slash === -1 ? '' : path.slice(slash);
      if (req.method === 'OPTIONS') return this.preflight(req, res, ctx);
      if (route.interface === 'evm-jsonrpc') this.evm(route, rest, query, req, res, ctx);
      else if (route.interface === 'rosetta') this.rosetta(route, rest, query, req, res, ctx);
      else this.blockbook(route, rest, query, req, res, ctx);
    } catch (err) {
      this.internalError(listener, err, res, ctx);
    }
  }

  private done(ctx: Ctx, res: ServerResponse): void {
    this.inflight--;
    const ms = Number(process.hrtime.bigint() - ctx.start) / 1e6;
    const status = res.writableFinished ? res.statusCode : 0;
    this.metrics.observe(ctx.chain ?? '-', ctx.iface ?? '-', ctx.label, status, ms);
    // The access log line, in pino's own format and through pino's
    // destination, but written without pino's generic serializer: this runs
    // for every request (it measured ~15 µs a request as log.info()).
    if (this.accessLog) {
      this.writeLog(
        `{"level":"info","time":"${isoNow()}","reqId":${JSON.stringify(ctx.id)},"keyId":${ctx.keyId === null ? 'null' : JSON.stringify(ctx.keyId)},"chain":${ctx.chain === null ? 'null' : JSON.stringify(ctx.chain)},"method":${JSON.stringify(ctx.label)},"status":${status},"upstream":${ctx.upstream === null ? 'null' : JSON.stringify(ctx.upstream)},"ms":${Math.round(ms * 1000) / 1000},"bytes":${(res.req as IncomingMessage).socket.bytesWritten - ctx.written},"msg":"request"}\n`,
      );
    }
    if (this.inflight === 0 && this.idleWaiters.length) for (const w of this.idleWaiters.splice(0)) w();
  }

  private ownRoute(listener: ListenerSpec, path: string, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    if (path === '/healthz' || path === '/readyz') {
      ctx.label = path.slice(1);
      if (req.method !== 'GET' && req.method !== 'HEAD') return this.sendRaw(res, ctx, 405, '{"error":"Method not allowed"}', ['allow', 'GET, HEAD']);
      if (path === '/healthz') return this.sendRaw(res, ctx, 200, '{"status":"ok"}');
      const { ready, body } = this.readiness();
      return this.sendRaw(res, ctx, ready ? 200 : 503, body);
    }
    ctx.label = 'unknown';
    if (listenerEnvelope(listener) === 'evm-jsonrpc') return this.sendRaw(res, ctx, 404, rpcErrorJson('GW_RPC_NOT_FOUND', 'null'));
    return this.sendRaw(res, ctx, 404, '{"error":"Not found"}');
  }

  readiness(): { ready: boolean; body: string } {
    const chains: Record<string, unknown> = {};
    let ready = !this.draining;
    for (const route of this.routes) {
      const group = this.groups.get(route)!;
      const up = group.healthy;
      if (!up) ready = false;
      chains[route.path] = {
        interface: route.interface,
        state: up ? 'up' : 'down',
        upstreams: group.all.map((u) => ({ name: u.name, role: u.role, state: u.state, head: u.head })),
      };
    }
    const status = this.draining ? 'draining' : ready ? 'ready' : 'not_ready';
    return { ready, body: JSON.stringify({ status, chains }) };
  }

  private handleAdmin(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    const ctx = { id: randomUUID() } as Ctx;
    if (path === '/metrics' && req.method === 'GET') {
      this.metrics.render().then(
        (text) => {
          res.writeHead(200, { 'content-type': this.metrics.contentType });
          res.end(text);
        },
        () => this.sendRaw(res, ctx, 500, '{"error":"Internal server error"}'),
      );
      return;
    }
    if (path === '/healthz') return this.sendRaw(res, ctx, 200, '{"status":"ok"}');
    if (path === '/readyz') {
      const { ready, body } = this.readiness();
      return this.sendRaw(res, ctx, ready ? 200 : 503, body);
    }
    this.sendRaw(res, ctx, 404, '{"error":"Not found"}');
  }

  /**
   * A request Node's HTTP parser refused (bad bytes in the URL, oversized
   * headers...) still gets an answer in its interface's envelope, chosen by
   * the first path segment of the raw request line when it can be read.
   */
  private clientError(listener: ListenerSpec, err: Error & { code?: string; rawPacket?: Buffer }, socket: import('node:stream').Duplex): void {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const line = err.rawPacket?.toString('latin1', 0, Math.min(err.rawPacket.length, 2048)).split('\r\n', 1)[0] ?? '';
    const target = line.split(' ')[1] ?? '';
    const first = target.startsWith('/') ? target.slice(1).split(/[/?]/, 1)[0]! : '';
    const iface = listener.routes.get(first)?.interface ?? listenerEnvelope(listener);
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    let status = tooLarge ? 431 : 400;
    let body: string;
    if (iface === 'rosetta') {
      status = 500;
      body = rosettaErrorJson('GW_ROSETTA_MALFORMED_HTTP');
    } else if (iface === 'evm-jsonrpc') body = rpcErrorJson('GW_RPC_MALFORMED_HTTP', 'null');
    else body = blockbookErrorJson('GW_BB_MALFORMED_HTTP');
    const reason = status === 500 ? 'Internal Server Error' : tooLarge ? 'Request Header Fields Too Large' : 'Bad Request';
    const head = line.startsWith('HEAD ');
    socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${head ? '' : body}`);
  }

  // -------------------------------------------------------------- responses

  private cors(req: IncomingMessage, out: string[]): void {
    const origin = req.headers.origin;
    if (origin === undefined) return;
    if (this.corsAll) out.push('access-control-allow-origin', '*', 'access-control-expose-headers', 'x-request-id');
    else if (this.corsOrigins.has(origin))
      out.push('access-control-allow-origin', origin, 'vary', 'origin', 'access-control-expose-headers', 'x-request-id');
  }

  private corsInto(origin: string, out: Record<string, string | string[]>): void {
    if (this.corsAll) {
      out['access-control-allow-origin'] = '*';
      out['access-control-expose-headers'] = 'x-request-id';
    } else if (this.corsOrigins.has(origin)) {
      out['access-control-allow-origin'] = origin;
      out['access-control-expose-headers'] = 'x-request-id';
      out.vary = 'origin';
    }
  }

  private sendRaw(res: ServerResponse, ctx: Ctx, status: number, body: string, extra?: string[]): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const headers = ['x-request-id', ctx.id];
    if (status !== 204) headers.push('content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)));
    if (extra) headers.push(...extra);
    const req = res.req as IncomingMessage | undefined;
    if (req) this.cors(req, headers);
    if (this.draining) headers.push('connection', 'close');
    res.writeHead(status, headers);
    res.end(status === 204 ? undefined : body);
  }

  private preflight(req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    ctx.label = 'preflight';
    const origin = req.headers.origin;
    const headers = ['x-request-id', ctx.id, 'allow', 'GET, POST, OPTIONS'];
    if (origin !== undefined && (this.corsAll || this.corsOrigins.has(origin))) {
      headers.push(
        'access-control-allow-origin',
        this.corsAll ? '*' : origin,
        'access-control-allow-methods',
        'GET, POST, OPTIONS',
        'access-control-allow-headers',
        'content-type, x-api-key, x-request-id',
        'access-control-max-age',
        '600',
      );
      if (!this.corsAll) headers.push('vary', 'origin');
    }
    res.writeHead(204, headers);
    res.end();
  }

  private internalError(listener: ListenerSpec, err: unknown, res: ServerResponse, ctx: Ctx): void {
    this.log.error({ event: 'internal_error', reqId: ctx.id, error: (err as Error)?.message }, 'internal error');
    if (ctx.iface === 'rosetta') return this.sendRaw(res, ctx, 500, rosettaErrorJson('GW_ROSETTA_INTERNAL'));
    if (ctx.iface === 'blockbook' || (ctx.iface === null && listenerEnvelope(listener) !== 'evm-jsonrpc'))
      return this.sendRaw(res, ctx, 500, blockbookErrorJson('GW_BB_INTERNAL'));
    this.sendRaw(res, ctx, 500, rpcErrorJson('GW_RPC_INTERNAL', 'null'));
  }

  // ------------------------------------------------------------------- keys

  /**
   * A key may come in the X-API-Key header, the path and the api_key query
   * parameter; if it comes in several, all must be equal.
   */
  private authenticate(route: RouteSpec, req: IncomingMessage, pathKey: string | null, queryKeys: readonly string[], ctx: Ctx): KeyEntry | AuthFail {
    const header = req.headers['x-api-key'];
    let key: string | null = typeof header === 'string' && header !== '' ? header : null;
    if (pathKey !== null) {
      if (key !== null && key !== pathKey) return 'conflict';
      key = pathKey;
    }
    for (const k of queryKeys) {
      if (key !== null && key !== k) return 'conflict';
      key = k;
    }
    if (key === null) return 'missing';
    if (!isKeyShaped(key)) return 'invalid';
    const r = this.keys.check(key, route.path);
    if (!r.ok) return r.reason;
    ctx.keyId = r.entry.id;
    return r.entry;
  }

  /**
   * Runs `go` if the key's rate limit (its own, else the manifest's) lets `n`
   * more calls through; otherwise counts the rejection and calls `reject`
   * with the seconds until the window resets. Without a limit, `go` runs at
   * once, with no promise in between.
   */
  private admit(entry: KeyEntry, n: number, reject: (retryAfter: number) => void, go: () => void): void {
    const rate = entry.rateLimit ?? this.spec.rateLimit;
    if (rate === null) return go();
    void Promise.resolve(this.limiter.take(entry.id, rate, n)).then((v) => {
      if (v.ok) return go();
      this.metrics.rateLimited.labels(entry.id).inc();
      reject(v.retryAfter);
    });
  }

  // -------------------------------------------------------------------- evm

  private evm(route: RouteSpec, rest: string, query: string, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    const fail = (name: RpcErrorName, idJson = 'null', extra?: string[]) =>
      this.sendRaw(res, ctx, RPC_ERRORS[name].status, rpcErrorJson(name, idJson), extra);
    // `/<chain>`, `/<chain>/` or `/<chain>/<key>[/]`: nothing else.
    let pathKey: string | null = null;
    if (rest.length > 1) {
      const end = rest.indexOf('/', 1);
      if (end === -1) pathKey = rest.slice(1);
      else if (end === rest.length - 1) pathKey = rest.slice(1, end);
      else return fail('GW_RPC_NOT_FOUND');
    }
    if (req.method !== 'POST') return fail('GW_RPC_HTTP_METHOD_NOT_ALLOWED', 'null', ['allow', 'POST, OPTIONS']);
    const auth = this.authenticate(route, req, pathKey, query === '' ? [] : splitQuery(query).keys, ctx);
    if (typeof auth === 'string') return fail(AUTH[auth]);
    readBody(req, route.limits.maxBodyBytes, (buf) => {
      if (buf === null) return fail('GW_RPC_BODY_TOO_LARGE', 'null', ['connection', 'close']);
      const d = checkEvmBody(buf, route.methods!, route.limits.maxBatchSize);
      ctx.label = d.label;
      if (d.kind === 'reply') return this.sendRaw(res, ctx, d.status, d.body);
      this.admit(
        auth,
        d.count,
        (after) => fail('GW_RPC_RATE_LIMITED', 'null', ['retry-after', String(after)]),
        () => this.forwardEvm(route, d.body, d.idempotent, d.merge, req, res, ctx),
      );
    });
  }

  /**
   * Forwards to the route's upstreams with the parts every interface shares
   * (retries, rewrite limit, response head, circuit breaker, failure
   * envelopes); `onBuffered` gets the answers the interface must rewrite.
   */
  private proxy(
    route: RouteSpec,
    req: IncomingMessage,
    res: ServerResponse,
    ctx: Ctx,
    spec: Pick<ForwardRequest, 'method' | 'path' | 'headers' | 'body' | 'idempotent' | 'classify'>,
    onBuffered: (r: Extract<ForwardResult, { kind: 'buffered' }>) => void,
  ): void {
    forward(
      this.groups.get(route)!,
      {
        ...spec,
        retries: route.retries,
        maxBuffer: MAX_REWRITE_BYTES,
        writeHead: (status, headers, u) => this.writeUpstreamHead(req, res, ctx, status, headers, u),
      },
      res,
      this.circuitOpen,
      (r) => {
        ctx.upstream = r.upstream?.name ?? null;
        if (r.kind === 'failed') this.upstreamFailed(route, r, res, ctx);
        else if (r.kind === 'buffered') onBuffered(r);
      },
    );
  }

  private forwardEvm(
    route: RouteSpec,
    body: Buffer | string,
    idempotent: boolean,
    merge: ReturnType<typeof checkEvmBody> extends infer D ? (D extends { merge: infer M } ? M : never) : never,
    req: IncomingMessage,
    res: ServerResponse,
    ctx: Ctx,
  ): void {
    const length = String(typeof body === 'string' ? Buffer.byteLength(body) : body.length);
    this.proxy(
      route,
      req,
      res,
      ctx,
      {
        method: 'POST',
        path: rpcPath,
        headers: ['content-type', 'application/json', 'content-length', length, 'x-request-id', ctx.id],
        body,
        idempotent,
        classify: merge === null ? classifyRpc : classifyRpcBuffered,
      },
      (r) => {
        const text = r.body.toString('utf8');
        if (r.status === 200 && merge !== null) {
          const merged = mergeBatch(merge, text);
          if (merged !== null) return this.sendRaw(res, ctx, 200, merged);
        } else if (isJsonRpcAnswer(text)) {
          // The node's own JSON-RPC error, with its status: passed on unchanged.
          return this.sendRaw(res, ctx, r.status, text);
        }
        this.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: ctx.id }, 'upstream answer is not JSON-RPC');
        this.sendRaw(res, ctx, 502, rpcErrorJson('GW_RPC_UPSTREAM_BAD_RESPONSE', 'null'));
      },
    );
  }

  private writeUpstreamHead(req: IncomingMessage, res: ServerResponse, ctx: Ctx, status: number, headers: Record<string, string | string[] | undefined>, u?: Upstream): void {
    if (u) ctx.upstream = u.name;
    // An object, not a list: Node takes it as is, without a setHeader per entry.
    const out = endToEndHeaders(headers, ctx.id);
    if (req.headers.origin !== undefined) this.corsInto(req.headers.origin, out);
    if (this.draining) out.connection = 'close';
    res.writeHead(status, out);
  }

  private upstreamFailed(route: RouteSpec, r: Extract<ForwardResult, { kind: 'failed' }>, res: ServerResponse, ctx: Ctx): void {
    if (r.upstream) this.log.warn({ event: 'upstream_failed', chain: route.path, upstream: r.upstream.name, fail: r.fail, reqId: ctx.id }, 'upstream failed');
    if (route.interface === 'evm-jsonrpc') {
      const name = RPC_FAIL[r.fail];
      return this.sendRaw(res, ctx, RPC_ERRORS[name].status, rpcErrorJson(name, 'null'));
    }
    if (route.interface === 'blockbook') {
      const name = BB_FAIL[r.fail];
      return this.sendRaw(res, ctx, BLOCKBOOK_ERRORS[name].status, blockbookErrorJson(name));
    }
    this.sendRaw(res, ctx, 500, rosettaErrorJson(ROSETTA_FAIL[r.fail]));
  }

  // ---------------------------------------------------------------- rosetta

  private rosetta(route: RouteSpec, rest: string, query: string, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    const fail = (name: RosettaErrorName, details?: Record<string, unknown>, extra?: string[]) =>
      this.sendRaw(res, ctx, 500, rosettaErrorJson(name, details), extra);
    // Rosetta takes the key in the header or the query only: a key-shaped
    // segment here is just an unknown endpoint.
    const endpoint = rest.length > 1 ? rest.slice(1) : '';
    if (!ROSETTA_ENDPOINTS.has(endpoint)) return fail('GW_ROSETTA_UNKNOWN_ENDPOINT');
    ctx.label = endpoint;
    if (req.method !== 'POST') return fail('GW_ROSETTA_METHOD_NOT_ALLOWED', undefined, ['allow', 'POST, OPTIONS']);
    const auth = this.authenticate(route, req, null, query === '' ? [] : splitQuery(query).keys, ctx);
    if (typeof auth === 'string') return fail(AUTH[auth]);
    readBody(req, route.limits.maxBodyBytes, (buf) => {
      if (buf === null) return fail('GW_ROSETTA_BODY_TOO_LARGE', undefined, ['connection', 'close']);
      const d = checkRosettaBody(buf, endpoint, route.network!);
      if (d.kind === 'reply') return this.sendRaw(res, ctx, 500, d.body);
      this.admit(
        auth,
        1,
        (after) => fail('GW_ROSETTA_RATE_LIMITED', undefined, ['retry-after', String(after)]),
        () => this.forwardRosetta(route, endpoint, d.body, req, res, ctx),
      );
    });
  }

  private forwardRosetta(route: RouteSpec, endpoint: string, body: string, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    const isOptions = endpoint === 'network/options';
    const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'x-request-id', ctx.id];
    const accept = req.headers.accept;
    if (accept) headers.push('accept', accept);
    this.proxy(
      route,
      req,
      res,
      ctx,
      {
        method: 'POST',
        path: (u) => `${u.basePath}/${endpoint}`,
        headers,
        body,
        idempotent: ROSETTA_ENDPOINTS.get(endpoint)!.idempotent,
        // Only a plain 200 streams; errors and /network/options are rewritten.
        classify: (status, h) => (status > 500 || isHtml(h) ? 'bad' : status === 200 && !isOptions ? 'stream' : 'buffer'),
      },
      (r) => {
        let doc: unknown;
        try {
          doc = JSON.parse(r.body.toString('utf8'));
        } catch {
          doc = undefined;
        }
        if (r.status === 200 && isOptions && doc !== null && typeof doc === 'object') {
          const allow = (doc as { allow?: { errors?: unknown } }).allow;
          if (allow && Array.isArray(allow.errors)) {
            const have = new Set(allow.errors.map((e: { code?: unknown }) => e?.code));
            for (const e of GATEWAY_ROSETTA_ALLOW_ERRORS) if (!have.has(e.code)) allow.errors.push({ ...e });
            return this.sendRaw(res, ctx, 200, JSON.stringify(doc));
          }
        }
        if (r.status !== 200 && isRosettaError(doc)) {
          // Newer servers send non-retriable errors with 400: the body stays, the status is 500.
          return this.sendRaw(res, ctx, 500, r.body.toString('utf8'));
        }
        this.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: ctx.id }, 'upstream answer is not Rosetta');
        this.sendRaw(res, ctx, 500, rosettaErrorJson('GW_ROSETTA_UPSTREAM_BAD_RESPONSE', { upstream_status: r.status }));
      },
    );
  }

  // -------------------------------------------------------------- blockbook

  private blockbook(route: RouteSpec, rest: string, query: string, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    const fail = (name: BlockbookErrorName, extra?: string[]) =>
      this.sendRaw(res, ctx, BLOCKBOOK_ERRORS[name].status, blockbookErrorJson(name), extra);
    // `/<chain>/v2/...` or `/<chain>/<key>/v2/...`: a segment is a key only there.
    let pathKey: string | null = null;
    let after: string;
    if (rest.startsWith('/v2/')) after = rest.slice(4);
    else {
      const end = rest.indexOf('/', 1);
      if (end === -1 || !rest.startsWith('/v2/', end)) return fail('GW_BB_NOT_FOUND');
      pathKey = rest.slice(1, end);
      if (pathKey === '') return fail('GW_BB_NOT_FOUND');
      after = rest.slice(end + 4);
    }
    const method = req.method ?? 'GET';
    if (method !== 'GET' && method !== 'POST') return fail('GW_BB_METHOD_NOT_ALLOWED', ['allow', 'GET, OPTIONS']);
    const sq = splitQuery(query);
    const d = checkBlockbook(method, after, sq.rest, route.sendtx === true, route.limits.maxPageSize);
    if (d.kind === 'error') return fail(d.name, d.name === 'GW_BB_METHOD_NOT_ALLOWED' ? ['allow', 'GET, OPTIONS'] : undefined);
    ctx.label = d.endpoint;
    const auth = this.authenticate(route, req, pathKey, sq.keys, ctx);
    if (typeof auth === 'string') return fail(AUTH[auth]);
    const afterRate = (body: Buffer | null) =>
      this.admit(
        auth,
        1,
        (s) => fail('GW_BB_RATE_LIMITED', ['retry-after', String(s)]),
        () => this.forwardBlockbook(route, d.path, sq.rest, body, req, res, ctx),
      );
    if (method === 'POST') {
      readBody(req, route.limits.maxBodyBytes, (buf) => (buf === null ? fail('GW_BB_BODY_TOO_LARGE', ['connection', 'close']) : afterRate(buf)));
    } else afterRate(null);
  }

  private forwardBlockbook(route: RouteSpec, path: string, query: string, body: Buffer | null, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    const headers = ['x-request-id', ctx.id];
    for (const name of BLOCKBOOK_PASS) {
      const v = req.headers[name];
      if (typeof v === 'string') headers.push(name, v);
    }
    if (body !== null) headers.push('content-length', String(body.length));
    const tail = query === '' ? path : `${path}?${query}`;
    this.proxy(
      route,
      req,
      res,
      ctx,
      { method: body === null ? 'GET' : 'POST', path: (u) => u.basePath + tail, headers, body, idempotent: body === null, classify: classifyBlockbook },
      (r) => {
        // A 502-504 with no healthy peer to retry on: Blockbook's answers pass through unchanged.
        this.writeUpstreamHead(req, res, ctx, r.status, { ...r.headers, 'content-length': String(r.body.length) });
        res.end(r.body);
      },
    );
  }

  // -------------------------------------------------------------- lifecycle

  /** Readiness goes 503 at once; new connections are refused; in-flight work finishes. */
  async shutdown(signal: string): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.log.info({ event: 'draining', signal, inflight: this.inflight }, 'draining');
    this.health.stop();
    this.keys.close();
    // Stop accepting, but leave open keep-alive connections be: a load
    // balancer probing /readyz on one gets the 503, and any request on them is
    // answered with Connection: close. (http.Server.close would drop idle
    // connections at once.) Once in-flight work is done, everything closes.
    const closed = this.listening.map((l) => new Promise<void>((done) => NetServer.prototype.close.call(l.server, () => done())));
    const idle = this.inflight === 0 ? Promise.resolve() : new Promise<void>((r) => this.idleWaiters.push(r));
    const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), this.spec.drainTimeoutMs).unref());
    const outcome = await Promise.race([idle.then(() => 'idle' as const), timer]);
    for (const l of this.listening) l.server.closeAllConnections();
    await Promise.race([Promise.all(closed), new Promise((r) => setTimeout(r, 1000).unref())]);
    await Promise.all([...this.groups.values()].map((g) => g.close()));
    await this.limiter.close();
    this.log.info({ event: 'stopped', outcome }, 'stopped');
    this.flushLog();
  }

  private readonly circuitOpen = (u: Upstream): void => {
    this.metrics.upstreamUp.labels(u.chain, u.name).set(0);
    this.log.warn({ event: 'upstream_circuit_open', chain: u.chain, upstream: u.name }, 'upstream taken out after a run of failed requests');
  };

  reloadKeys(reason: string): boolean {
    return this.keys.reload(reason);
  }
}

let isoMs = 0;
let isoText = '';
/** The current time as ISO text, made at most once per millisecond (one access-log line per request). */
function isoNow(): string {
  const now = Date.now();
  if (now !== isoMs) {
    isoMs = now;
    isoText = new Date(now).toISOString();
  }
  return isoText;
}

function rpcPath(u: Upstream): string {
  return u.rpcPath;
}
/** An HTML page is a proxy's or load balancer's error page, never a node's answer. */
function isHtml(h: Record<string, string | string[] | undefined>): boolean {
  const ct = h['content-type'];
  return typeof ct === 'string' && ct.indexOf('html') !== -1;
}
function classifyRpc(status: number, h: Record<string, string | string[] | undefined>): 'stream' | 'buffer' | 'bad' {
  if (status >= 500 || isHtml(h)) return 'bad';
  return status === 200 ? 'stream' : 'buffer';
}
function classifyRpcBuffered(status: number, h: Record<string, string | string[] | undefined>): 'stream' | 'buffer' | 'bad' {
  return status >= 500 || isHtml(h) ? 'bad' : 'buffer';
}
/** Blockbook answers pass through unchanged, its own 4xx/500 errors included; 502-504 mean the upstream is in trouble. */
function classifyBlockbook(status: number): 'stream' | 'buffer' | 'bad' {
  return status >= 502 ? 'bad' : 'stream';
}

function isJsonRpcAnswer(text: string): boolean {
  try {
    const v = JSON.parse(text) as unknown;
    const one = (x: unknown) => x !== null && typeof x === 'object' && (x as { jsonrpc?: unknown }).jsonrpc === '2.0';
    return Array.isArray(v) ? v.every(one) : one(v);
  } catch {
    return false;
  }
}

/** The envelope for answers that belong to no chain on a listener. */
function listenerEnvelope(l: ListenerSpec): InterfaceKind {
  for (const r of l.routes.values()) if (r.interface === 'evm-jsonrpc') return 'evm-jsonrpc';
  return 'blockbook';
}

/**
 * Reads a request body up to `limit` bytes; calls back with null when it is
 * larger (then stops reading: the connection closes after the 413).
 */
function readBody(req: IncomingMessage, limit: number, cb: (buf: Buffer | null) => void): void {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    req.resume();
    return cb(null);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  req.on('data', (c: Buffer) => {
    if (over) return;
    size += c.length;
    if (size > limit) {
      over = true;
      cb(null);
      return;
    }
    chunks.push(c);
  });
  req.on('end', () => {
    if (over) return;
    cb(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  });
}

function parsePort(s: string, where: string): number {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${where}: port '${s}' is not a port number`);
  return n;
}

function listen(server: Server, host: string, port: number, spec: ListenerSpec | null): Promise<Listening> {
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, host, () => {
      server.off('error', fail);
      const a = server.address();
      ok({ spec, server, host, port: typeof a === 'object' && a ? a.port : port });
    });
  });
}

/**
 * Entry point of the emitted server. Start-up problems (a missing variable,
 * a bad keys file, a port in use) end the process with one clear line.
 */
export function main(spec: GatewaySpec): void {
  let workers: number;
  try {
    workers = workerCount();
  } catch (err) {
    process.stderr.write(`gateway: ${(err as Error).message}\n`);
    process.exit(1);
  }
  if (workers > 1 && !isWorker()) return runPrimary(spec, workers);
  let gw: Gateway;
  try {
    gw = new Gateway(spec);
  } catch (err) {
    process.stderr.write(`gateway: ${(err as Error).message}\n`);
    process.exit(1);
  }
  gw.start().then(
    () => {
      process.on('SIGHUP', () => gw.reloadKeys('SIGHUP'));
      const stop = (signal: string) => void gw.shutdown(signal).then(() => process.exit(0));
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    },
    (err: Error & { code?: string }) => {
      const msg = err.code === 'ENOENT' ? `keys file not found: ${resolve(process.env.GATEWAY_KEYS_FILE ?? spec.keysFile)}` : err.message;
      process.stderr.write(`gateway: ${msg}\n`);
      process.exit(1);
    },
  );
}
