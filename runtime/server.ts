// The gateway process: listeners, dispatch, keys, guards, forwarding, health
// and lifecycle. Generated code calls `main(spec)` with its precomputed tables.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import type { GatewaySpec, InterfaceKind, ListenerSpec, RouteSpec } from './types.ts';
import { resolveTemplate } from './env.ts';
import { createLogger, type Logger } from './log.ts';
import { AccessLog } from './access-log.ts';
import { isKeyShaped, KeyStore, type KeyEntry } from './keys.ts';
import { splitQuery } from './url.ts';
import { Upstream, UpstreamGroup } from './upstream.ts';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import { endToEndHeaders, Forward, type FailKind, type ForwardRequest, type ForwardResult, type ForwardTarget, type Verdict } from './proxy.ts';
import { checkEvmBody, mergeBatch, type BatchMerge, type EvmDecision } from './guards/evm.ts';
import { MAX_ANSWER_DEPTH, nestsDeeper } from './json-scan.ts';
import { checkRosettaBody, isRosettaError, ROSETTA_ENDPOINTS } from './guards/rosetta.ts';
import { checkBlockbook } from './guards/blockbook.ts';
import { RPC_ERRORS, rpcErrorJson, type RpcErrorName } from './errors/evm-jsonrpc.ts';
import { BLOCKBOOK_ERRORS, blockbookErrorJson, type BlockbookErrorName } from './errors/blockbook.ts';
import { GATEWAY_ROSETTA_ALLOW_ERRORS, rosettaErrorJson, type RosettaErrorName } from './errors/rosetta.ts';
import { HealthChecker } from './health.ts';
import { MemoryRateLimiter, type RateLimiter } from './ratelimit.ts';
import { RedisRateLimiter } from './ratelimit-redis.ts';
import { Metrics, type RouteMetrics } from './metrics.ts';
import { isWorker, runPrimary, workerCount } from './cluster.ts';
import { memoryReducerFlag, NO_MEMORY_REDUCER } from './node-flags.ts';

type AuthFail = 'missing' | 'invalid' | 'forbidden' | 'conflict';

/**
 * One request: what it did (for the access log and metrics) and, while it is
 * forwarded, the target of its `Forward`. One object per request.
 */
class Ctx implements ForwardTarget {
  readonly id: string;
  /** The id as JSON text, for the access log. */
  readonly idJson: string;
  readonly start = performance.now();
  /** The key's entry, once the key is verified. */
  key: KeyEntry | null = null;
  /** The chain's counters (the no-chain ones until a route matches); they know its interface. */
  metrics: RouteMetrics;
  /** RPC method (allowlisted only), 'batch', 'refused', or a Rosetta/Blockbook endpoint. */
  label = '-';
  upstream: Upstream | null = null;
  /** Bytes the socket had written before this request, for the access log. */
  readonly written: number;
  /** The forwarding under way, if any: cancelled when the client goes away. */
  forward: Forward | null = null;
  /** Gets the answers the interface must rewrite (see Gateway.proxy). */
  onBuffered: ((ctx: Ctx, r: BufferedResult) => void) | null = null;
  /** EVM batch: how to merge the upstream's answers with the gateway's own. */
  merge: BatchMerge | null = null;
  /** Runs once the response is over, finished or not. */
  readonly closed = (): void => this.gw.done(this);

  constructor(
    readonly gw: Gateway,
    readonly listener: ListenerSpec,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    none: RouteMetrics,
  ) {
    this.written = req.socket.bytesWritten;
    this.metrics = none;
    const given = req.headers['x-request-id'];
    if (typeof given === 'string' && given.length > 0 && given.length <= 128 && isPrintable(given)) {
      this.id = given;
      this.idJson = JSON.stringify(given);
    } else {
      this.id = nextRequestId();
      this.idJson = `"${this.id}"`;
    }
  }

  streamHead(status: number, headers: IncomingHttpHeaders, u: Upstream): void {
    this.gw.writeUpstreamHead(this, status, headers, u);
  }

  forwarded(r: ForwardResult): void {
    this.forward = null;
    // Called from undici's handler: what escapes here would leave the client waiting.
    try {
      this.gw.forwarded(this, r);
    } catch (err) {
      this.gw.internalError(err, this);
    }
  }

  /** Runs a step that comes back later (a body read, a rate-limit answer), catching what it throws. */
  later(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.gw.internalError(err, this);
    }
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

/**
 * Largest upstream answer the gateway holds in memory to rewrite it. A batch
 * answer to merge is split without being parsed (about twice its size in
 * memory), and may be as large as geth's default batch answer limit (25 MB)
 * and more; the other answers held (errors, Rosetta /network/options) are
 * parsed, and are small when they are real. All of them together are capped
 * by proxy.ts's MAX_HELD_BYTES.
 */
const MAX_MERGE_BYTES = 32 * 1024 * 1024;
const MAX_REWRITE_BYTES = 4 * 1024 * 1024;

/** A chain as the runtime keeps it: its route, its upstreams and its metrics. */
interface RouteState {
  readonly route: RouteSpec;
  readonly group: UpstreamGroup;
  readonly metrics: RouteMetrics;
}

interface Listening {
  readonly spec: ListenerSpec | null;
  readonly server: Server;
  readonly host: string;
  readonly port: number;
}

export class Gateway {
  readonly log: Logger;
  private readonly flushLog: () => void;
  /** null when the level is above info. */
  private readonly accessLog: AccessLog | null;
  readonly keys: KeyStore;
  readonly groups = new Map<RouteSpec, UpstreamGroup>();
  readonly routes: RouteSpec[] = [];
  /** Per listener: first path segment to the route and what the runtime keeps for it. */
  private readonly states = new Map<ListenerSpec, ReadonlyMap<string, RouteState>>();
  /** Metrics and log fields of requests that match no chain. */
  private readonly noRoute: RouteMetrics;
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
    this.accessLog = log.isLevelEnabled('info') ? new AccessLog(write) : null;
    this.flushLog = () => {
      this.accessLog?.flush();
      flush();
    };
    this.keys = new KeyStore(process.env.GATEWAY_KEYS_FILE ?? spec.keysFile, log);
    this.corsAll = spec.corsOrigins.includes('*');
    this.corsOrigins = new Set(spec.corsOrigins);
    this.metrics = new Metrics(() => this.inflight);
    this.noRoute = this.metrics.route(null, '-');
    for (const l of spec.listeners) {
      const states = new Map<string, RouteState>();
      for (const [segment, route] of l.routes) {
        const group = new UpstreamGroup(route.upstreams.map((u) => new Upstream(u, route)));
        this.routes.push(route);
        this.groups.set(route, group);
        states.set(segment, { route, group, metrics: this.metrics.route(route.path, route.interface) });
      }
      this.states.set(l, states);
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
      const routes = this.states.get(l)!;
      const host = resolveTemplate(l.host, `listener ${l.name}`);
      const port = parsePort(resolveTemplate(l.port, `listener ${l.name}`), `listener ${l.name}`);
      // A missing Host and an Expect the gateway does not meet are answered
      // here, in the interface's envelope, not by Node's bare 400 and 417.
      const server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 60_000, requestTimeout: 0, requireHostHeader: false }, (req, res) =>
        this.handle(l, routes, req, res),
      );
      server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => this.handle(l, routes, req, res, 'expect'));
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
    const memoryReducer = memoryReducerFlag() === 'off' ? 'off' : 'on';
    this.log.info(
      { event: 'started', manifest: this.spec.source, chains: this.routes.length, keys: this.keys.size, listeners: this.addresses(), memoryReducer },
      'gateway started',
    );
    if (memoryReducer === 'on') {
      this.log.warn(
        { event: 'memory_reducer_on', hint: `start it as \`node ${NO_MEMORY_REDUCER} <file>\` (or run the file itself): after idle spells V8's memory reducer leaves the heap growing slowly, which cost 17-36% of throughput under load here (README: Running the file)` },
        "V8's memory reducer is on",
      );
    }
    return this.listening;
  }

  addresses(): { listener: string; host: string; port: number }[] {
    return this.listening.map((l) => ({ listener: l.spec?.name ?? 'admin', host: l.host, port: l.port }));
  }

  // ---------------------------------------------------------------- dispatch

  /** Hot path: one pass over the URL, one Map lookup for the route. */
  private handle(listener: ListenerSpec, routes: ReadonlyMap<string, RouteState>, req: IncomingMessage, res: ServerResponse, expect?: 'expect'): void {
    const ctx = new Ctx(this, listener, req, res, this.noRoute);
    this.inflight++;
    res.on('close', ctx.closed);
    if (this.draining) res.shouldKeepAlive = false;
    try {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q === -1 ? url : url.slice(0, q);
      const query = q === -1 ? '' : url.slice(q + 1);
      const slash = path.indexOf('/', 1);
      const first = slash === -1 ? path.slice(1) : path.slice(1, slash);
      const state = path.charCodeAt(0) === 47 ? routes.get(first) : undefined;
      if (state !== undefined) ctx.metrics = state.metrics;
      // HTTP/1.1 requires Host (RFC 9112 3.2); Node's own check is off, see start().
      if (expect !== undefined || (req.headers.host === undefined && req.httpVersionMinor === 1)) {
        return this.malformed(listener, ctx, expect !== undefined);
      }
      if (state === undefined) return this.ownRoute(listener, path, req, res, ctx);
      const route = state.route;
      const rest = slash === -1 ? '' : path.slice(slash);
      if (req.method === 'OPTIONS') return this.preflight(req, res, ctx);
      if (route.interface === 'evm-jsonrpc') this.evm(state, rest, query, ctx);
      else if (route.interface === 'rosetta') this.rosetta(state, rest, query, req, res, ctx);
      else this.blockbook(state, rest, query, req, res, ctx);
    } catch (err) {
      this.internalError(err, ctx);
    }
  }

  /** No Host header, or an Expect other than 100-continue: 400 or 417 (Rosetta: 500) in the envelope. */
  private malformed(listener: ListenerSpec, ctx: Ctx, expect: boolean): void {
    ctx.label = expect ? 'expect' : 'malformed';
    ctx.res.shouldKeepAlive = false;
    const iface = ctx.metrics.iface === '-' ? listenerEnvelope(listener) : ctx.metrics.iface;
    if (iface === 'rosetta') return this.sendRaw(ctx.res, ctx, 500, rosettaErrorJson(expect ? 'GW_ROSETTA_EXPECTATION_FAILED' : 'GW_ROSETTA_MALFORMED_HTTP'));
    if (iface === 'evm-jsonrpc') return this.rpcFail(ctx, expect ? 'GW_RPC_EXPECTATION_FAILED' : 'GW_RPC_MALFORMED_HTTP');
    const name = expect ? 'GW_BB_EXPECTATION_FAILED' : 'GW_BB_MALFORMED_HTTP';
    this.sendRaw(ctx.res, ctx, BLOCKBOOK_ERRORS[name].status, blockbookErrorJson(name));
  }

  /** The response is over (finished, or the client went away): metrics and the access log. */
  done(ctx: Ctx): void {
    this.inflight--;
    const res = ctx.res;
    const finished = res.writableFinished;
    if (!finished && ctx.forward !== null) ctx.forward.cancel();
    const ms = performance.now() - ctx.start;
    const status = finished ? res.statusCode : 0;
    const label = ctx.metrics.observe(ctx.label, status, ms);
    // The fields that come from the manifest and the keys file are JSON text
    // made once; the line itself is made later, off the request path.
    if (this.accessLog !== null) {
      this.accessLog.add(
        ctx.idJson,
        ctx.key === null ? NO_KEY_FIELD : ctx.key.logField,
        label.logFields,
        status,
        ctx.upstream === null ? NO_UPSTREAM_FIELDS : ctx.upstream.logFields,
        ms,
        ctx.req.socket.bytesWritten - ctx.written,
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
    const ctx = { id: nextRequestId() } as Ctx;
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

  /** The CORS headers for a request that came with an Origin. */
  private cors(origin: string, out: string[]): void {
    if (this.corsAll) out.push('access-control-allow-origin', '*', 'access-control-expose-headers', 'x-request-id');
    else if (this.corsOrigins.has(origin))
      out.push('access-control-allow-origin', origin, 'vary', 'origin', 'access-control-expose-headers', 'x-request-id');
  }

  private sendRaw(res: ServerResponse, ctx: { readonly id: string }, status: number, body: string | Buffer, extra?: string[]): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const headers = ['x-request-id', ctx.id];
    if (status !== 204) headers.push('content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)));
    if (extra) headers.push(...extra);
    const origin = (res.req as IncomingMessage | undefined)?.headers.origin;
    if (origin !== undefined) this.cors(origin, headers);
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

  /** What escaped a request's own handling: logged, and answered in the envelope if nothing was sent yet. */
  internalError(err: unknown, ctx: Ctx): void {
    this.log.error({ event: 'internal_error', reqId: ctx.id, error: (err as Error)?.message }, 'internal error');
    const res = ctx.res;
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    const iface = ctx.metrics.iface;
    if (iface === 'rosetta') return this.sendRaw(res, ctx, 500, rosettaErrorJson('GW_ROSETTA_INTERNAL'));
    if (iface === 'blockbook' || (iface === '-' && listenerEnvelope(ctx.listener) !== 'evm-jsonrpc'))
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
    ctx.key = r.entry;
    return r.entry;
  }

  /**
   * Runs `go` if the key's rate limit (its own, else the manifest's) lets `n`
   * more calls through; otherwise counts the rejection and calls `reject`
   * with the seconds until the window resets. Without a limit, `go` runs at
   * once, with no promise in between.
   */
  private admit(ctx: Ctx, entry: KeyEntry, n: number, reject: (retryAfter: number) => void, go: () => void): void {
    const rate = entry.rateLimit ?? this.spec.rateLimit;
    if (rate === null) return go();
    void Promise.resolve(this.limiter.take(entry.id, rate, n)).then((v) => {
      if (v.ok) return go();
      this.metrics.rateLimited.labels(entry.id).inc();
      reject(v.retryAfter);
    }).catch((err: unknown) => this.internalError(err, ctx));
  }

  // -------------------------------------------------------------------- evm

  private rpcFail(ctx: Ctx, name: RpcErrorName, extra?: string[]): void {
    this.sendRaw(ctx.res, ctx, RPC_ERRORS[name].status, rpcErrorJson(name, 'null'), extra);
  }

  /** Hot path: no closure but the body reader's. */
  private evm(state: RouteState, rest: string, query: string, ctx: Ctx): void {
    const { route } = state;
    const req = ctx.req;
    // `/<chain>`, `/<chain>/` or `/<chain>/<key>[/]`: nothing else.
    let pathKey: string | null = null;
    if (rest.length > 1) {
      const end = rest.indexOf('/', 1);
      if (end === -1) pathKey = rest.slice(1);
      else if (end === rest.length - 1) pathKey = rest.slice(1, end);
      else return this.rpcFail(ctx, 'GW_RPC_NOT_FOUND');
    }
    if (req.method !== 'POST') return this.rpcFail(ctx, 'GW_RPC_HTTP_METHOD_NOT_ALLOWED', ['allow', 'POST, OPTIONS']);
    const auth = this.authenticate(route, req, pathKey, query === '' ? NO_KEYS : splitQuery(query).keys, ctx);
    if (typeof auth === 'string') return this.rpcFail(ctx, AUTH[auth]);
    readBody(ctx, route.limits.maxBodyBytes, (buf) => {
      if (buf === null) return this.rpcFail(ctx, 'GW_RPC_BODY_TOO_LARGE', ['connection', 'close']);
      const d = checkEvmBody(buf, route.methods!, route.limits.maxBatchSize);
      ctx.label = d.label;
      if (d.kind === 'reply') return this.sendRaw(ctx.res, ctx, d.status, d.body);
      if ((auth.rateLimit ?? this.spec.rateLimit) === null) return this.forwardEvm(state, d, ctx);
      this.admit(
        ctx,
        auth,
        d.count,
        (after) => this.rpcFail(ctx, 'GW_RPC_RATE_LIMITED', ['retry-after', String(after)]),
        () => this.forwardEvm(state, d, ctx),
      );
    });
  }

  private forwardEvm(state: RouteState, d: EvmForward, ctx: Ctx): void {
    const merge = d.merge;
    ctx.merge = merge;
    this.proxy(
      state,
      ctx,
      forwardRequest(
        state.route,
        'POST',
        rpcPath,
        // undici adds content-length from the body.
        ['content-type', 'application/json', 'x-request-id', ctx.id],
        d.body,
        d.idempotent,
        merge === null ? classifyRpc : classifyRpcBuffered,
        merge === null ? MAX_REWRITE_BYTES : MAX_MERGE_BYTES,
        !d.answered,
      ),
      this.evmBuffered,
    );
  }

  /** An EVM answer the gateway holds: a batch to merge, or a node's error passed on. */
  private readonly evmBuffered = (ctx: Ctx, r: BufferedResult): void => {
    if (ctx.merge !== null && r.status >= 200 && r.status < 300) {
      const merged = mergeBatch(ctx.merge, r.body);
      // Nothing to answer (only notifications): no body, as JSON-RPC requires.
      if (merged !== null) return this.sendRaw(ctx.res, ctx, merged.length === 2 ? 204 : 200, merged);
    } else if (ctx.merge === null && isJsonRpcAnswer(r.body)) {
      // The node's own JSON-RPC error, with its status: passed on unchanged.
      return this.sendRaw(ctx.res, ctx, r.status, r.body);
    }
    this.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: ctx.id }, 'upstream answer is not JSON-RPC');
    this.sendRaw(ctx.res, ctx, 502, rpcErrorJson('GW_RPC_UPSTREAM_BAD_RESPONSE', 'null'));
  };

  // ------------------------------------------------------------- forwarding

  /**
   * Forwards to the route's upstreams with the parts every interface shares
   * (retries, rewrite limit, response head, circuit breaker, failure
   * envelopes); `onBuffered` gets the answers the interface must rewrite.
   */
  private proxy(state: RouteState, ctx: Ctx, request: ForwardRequest, onBuffered: (ctx: Ctx, r: BufferedResult) => void): void {
    ctx.onBuffered = onBuffered;
    const f = new Forward(state.group, request, ctx, this.circuitOpen);
    ctx.forward = f;
    f.start();
  }

  /** Where a Forward reports (through its Ctx). */
  forwarded(ctx: Ctx, r: ForwardResult): void {
    if (r.upstream !== null) ctx.upstream = r.upstream;
    if (r.kind === 'failed') this.upstreamFailed(r, ctx);
    else if (r.kind === 'buffered') ctx.onBuffered!(ctx, r);
  }

  /** The head of an upstream answer that streams to the client. */
  writeUpstreamHead(ctx: Ctx, status: number, headers: IncomingHttpHeaders, u?: Upstream): void {
    if (u) ctx.upstream = u;
    const out = endToEndHeaders(headers, ctx.id);
    const origin = ctx.req.headers.origin;
    if (origin !== undefined) this.cors(origin, out);
    if (this.draining) out.push('connection', 'close');
    ctx.res.writeHead(status, out);
  }

  private upstreamFailed(r: Extract<ForwardResult, { kind: 'failed' }>, ctx: Ctx): void {
    const res = ctx.res;
    const iface = ctx.metrics.iface;
    if (r.upstream) this.log.warn({ event: 'upstream_failed', chain: r.upstream.chain, upstream: r.upstream.name, fail: r.fail, reqId: ctx.id }, 'upstream failed');
    if (iface === 'evm-jsonrpc') {
      const name = RPC_FAIL[r.fail];
      return this.sendRaw(res, ctx, RPC_ERRORS[name].status, rpcErrorJson(name, 'null'));
    }
    if (iface === 'blockbook') {
      const name = BB_FAIL[r.fail];
      return this.sendRaw(res, ctx, BLOCKBOOK_ERRORS[name].status, blockbookErrorJson(name));
    }
    this.sendRaw(res, ctx, 500, rosettaErrorJson(ROSETTA_FAIL[r.fail]));
  }

  // ---------------------------------------------------------------- rosetta

  private rosetta(state: RouteState, rest: string, query: string, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    const { route } = state;
    const fail = (name: RosettaErrorName, details?: Record<string, unknown>, extra?: string[]) =>
      this.sendRaw(res, ctx, 500, rosettaErrorJson(name, details), extra);
    // Rosetta takes the key in the header or the query only: a key-shaped
    // segment here is just an unknown endpoint.
    const endpoint = rest.length > 1 ? rest.slice(1) : '';
    if (!ROSETTA_ENDPOINTS.has(endpoint)) return fail('GW_ROSETTA_UNKNOWN_ENDPOINT');
    ctx.label = endpoint;
    if (req.method !== 'POST') return fail('GW_ROSETTA_METHOD_NOT_ALLOWED', undefined, ['allow', 'POST, OPTIONS']);
    const auth = this.authenticate(route, req, null, query === '' ? NO_KEYS : splitQuery(query).keys, ctx);
    if (typeof auth === 'string') return fail(AUTH[auth]);
    readBody(ctx, route.limits.maxBodyBytes, (buf) => {
      if (buf === null) return fail('GW_ROSETTA_BODY_TOO_LARGE', undefined, ['connection', 'close']);
      const d = checkRosettaBody(buf, endpoint, route.network!);
      if (d.kind === 'reply') return this.sendRaw(res, ctx, 500, d.body);
      this.admit(
        ctx,
        auth,
        1,
        (after) => fail('GW_ROSETTA_RATE_LIMITED', undefined, ['retry-after', String(after)]),
        () => this.forwardRosetta(state, endpoint, d.body, ctx),
      );
    });
  }

  private forwardRosetta(state: RouteState, endpoint: string, body: string, ctx: Ctx): void {
    const { res } = ctx;
    const isOptions = endpoint === 'network/options';
    const headers = ['content-type', 'application/json', 'x-request-id', ctx.id];
    const accept = ctx.req.headers.accept;
    if (accept) headers.push('accept', accept);
    this.proxy(
      state,
      ctx,
      forwardRequest(
        state.route,
        'POST',
        (u) => `${u.basePath}/${endpoint}`,
        headers,
        body,
        ROSETTA_ENDPOINTS.get(endpoint)!.idempotent,
        // Only a plain 200 streams; errors and /network/options are rewritten.
        (status, h) => (status > 500 || isHtml(h) ? 'bad' : status === 200 && !isOptions ? 'stream' : 'buffer'),
      ),
      (_ctx, r) => {
        const text = r.body.toString('utf8');
        let doc: unknown;
        try {
          // Re-serializing /network/options recurses: bound its depth first.
          doc = isOptions && nestsDeeper(r.body, MAX_ANSWER_DEPTH) ? undefined : JSON.parse(text);
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
          return this.sendRaw(res, ctx, 500, text);
        }
        this.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: ctx.id }, 'upstream answer is not Rosetta');
        this.sendRaw(res, ctx, 500, rosettaErrorJson('GW_ROSETTA_UPSTREAM_BAD_RESPONSE', { upstream_status: r.status }));
      },
    );
  }

  // -------------------------------------------------------------- blockbook

  private blockbook(state: RouteState, rest: string, query: string, req: IncomingMessage, res: ServerResponse, ctx: Ctx): void {
    const { route } = state;
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
        ctx,
        auth,
        1,
        (s) => fail('GW_BB_RATE_LIMITED', ['retry-after', String(s)]),
        () => this.forwardBlockbook(state, d.path, sq.rest, body, ctx),
      );
    if (method === 'POST') {
      readBody(ctx, route.limits.maxBodyBytes, (buf) => (buf === null ? fail('GW_BB_BODY_TOO_LARGE', ['connection', 'close']) : afterRate(buf)));
    } else afterRate(null);
  }

  private forwardBlockbook(state: RouteState, path: string, query: string, body: Buffer | null, ctx: Ctx): void {
    const headers = ['x-request-id', ctx.id];
    for (const name of BLOCKBOOK_PASS) {
      const v = ctx.req.headers[name];
      if (typeof v === 'string') headers.push(name, v);
    }
    const tail = query === '' ? path : `${path}?${query}`;
    this.proxy(
      state,
      ctx,
      forwardRequest(state.route, body === null ? 'GET' : 'POST', (u) => u.basePath + tail, headers, body, body === null, classifyBlockbook),
      this.blockbookBuffered,
    );
  }

  /** A 502-504 with no healthy peer to retry on: Blockbook's answers pass through unchanged. */
  private readonly blockbookBuffered = (ctx: Ctx, r: BufferedResult): void => {
    this.writeUpstreamHead(ctx, r.status, { ...r.headers, 'content-length': String(r.body.length) });
    ctx.res.end(r.body);
  };

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

const NO_KEY_FIELD = ',"keyId":null';
const NO_UPSTREAM_FIELDS = ',"upstream":null,"ms":';

/**
 * Request ids for requests that come without one: UUID-shaped (RFC 9562
 * version 8, the custom layout), 74 random bits made once per process and a
 * 48-bit counter, so ids are unique across processes and replicas without
 * asking for randomness per request.
 */
const ID_PREFIX = (() => {
  const h = randomBytes(10).toString('hex');
  const variant = ((parseInt(h[15]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(12, 15)}-${variant}${h.slice(16, 19)}-`;
})();
let idSeq = 0;
function nextRequestId(): string {
  idSeq = (idSeq + 1) % 0x1000000000000;
  const n = idSeq.toString(16);
  return ID_PREFIX + ZEROS.slice(n.length) + n;
}
const ZEROS = '000000000000';

type BufferedResult = Extract<ForwardResult, { kind: 'buffered' }>;
type EvmForward = Extract<EvmDecision, { kind: 'forward' }>;

const NO_KEYS: readonly string[] = [];

/** A ForwardRequest: every one made here, so all share one shape. */
function forwardRequest(
  route: RouteSpec,
  method: 'GET' | 'POST',
  path: (u: Upstream) => string,
  headers: string[],
  body: Buffer | string | null,
  idempotent: boolean,
  classify: (status: number, headers: IncomingHttpHeaders) => Verdict,
  maxBuffer = MAX_REWRITE_BYTES,
  emptyOk = false,
): ForwardRequest {
  return { method, path, headers, body, idempotent, retries: route.retries, maxBuffer, timeoutMs: route.limits.timeoutMs, emptyOk, classify };
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
  // A 204 (a notification's answer) streams too: Forward fails an empty answer to a call.
  return status === 200 || status === 204 ? 'stream' : 'buffer';
}
function classifyRpcBuffered(status: number, h: Record<string, string | string[] | undefined>): 'stream' | 'buffer' | 'bad' {
  return status >= 500 || isHtml(h) ? 'bad' : 'buffer';
}
/** Blockbook answers pass through unchanged, its own 4xx/500 errors included; 502-504 mean the upstream is in trouble. */
function classifyBlockbook(status: number): 'stream' | 'buffer' | 'bad' {
  return status >= 502 ? 'bad' : 'stream';
}

function isJsonRpcAnswer(body: Buffer): boolean {
  try {
    const v = JSON.parse(body.toString('utf8')) as unknown;
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
function readBody(ctx: Ctx, limit: number, cb: (buf: Buffer | null) => void): void {
  const req = ctx.req;
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
      chunks.length = 0;
      ctx.later(() => cb(null));
      return;
    }
    chunks.push(c);
  });
  req.on('end', () => {
    if (over) return;
    const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    // The request's handling goes on from here, outside handle()'s try.
    try {
      cb(buf);
    } catch (err) {
      ctx.gw.internalError(err, ctx);
    }
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
