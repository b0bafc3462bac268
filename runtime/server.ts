// The gateway process: listeners, dispatch to each chain's flow, the server's
// own routes and the lifecycle. Generated code calls `main(spec)` with its
// precomputed tables; each interface's flow lives in interfaces/.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { Server as NetServer } from 'node:net';
import type { GatewaySpec, ListenerSpec, RouteSpec, Template } from './types.ts';
import { resolveTemplate } from './env.ts';
import { createLogger, type Logger } from './log.ts';
import { AccessLog } from './access-log.ts';
import { KeyStore, type KeyLookup } from './keys.ts';
import { Upstream, UpstreamGroup } from './upstream.ts';
import { Exchange, type ExchangeHost, type RouteHandler } from './exchange.ts';
import type { Envelope } from './envelope.ts';
import { AdmissionStage, RateStep } from './admission.ts';
import { listenerEnvelope, moduleOf, routeHandler } from './interfaces/index.ts';
import { Cors } from './cors.ts';
import { CacheStore } from './cache/store.ts';
import { SharedTier } from './cache/shared.ts';
import { X_CACHE, X_CACHE_LOG } from './cache/common.ts';
import { ipList } from './key-policy.ts';
import { isRedisStore, RedisKeyStore } from './keys-redis.ts';
import { Usage } from './usage.ts';
import { adminHandler, readiness } from './admin.ts';
import { StatusBoard } from './status.ts';
import { HealthChecker } from './health.ts';
import { MemoryRateLimiter, type RateLimiter } from './ratelimit.ts';
import { RedisRateLimiter } from './ratelimit-redis.ts';
import { Metrics, type RouteMetrics } from './metrics.ts';
import { isWorker } from './cluster.ts';
import { memoryReducerFlag, NO_MEMORY_REDUCER } from './node-flags.ts';
import { VERSION } from './version.ts';

/** A chain as one listener serves it: its flow, its envelope and its counters. */
interface Chain {
  readonly handler: RouteHandler;
  readonly envelope: Envelope;
  readonly metrics: RouteMetrics;
  /** Whether it has a cache: then every answer, a preflight's too, carries X-Cache. */
  readonly cached: boolean;
}

/** A listener's dispatch table: first path segment to chain, and the envelope for everything else. */
interface Dispatch {
  readonly spec: ListenerSpec;
  readonly chains: ReadonlyMap<string, Chain>;
  readonly envelope: Envelope;
}

export interface Listening {
  readonly spec: ListenerSpec | null;
  readonly server: Server;
  readonly host: string;
  readonly port: number;
}

export class Gateway implements ExchangeHost {
  readonly log: Logger;
  private readonly flushLog: () => void;
  /** null when the level is above info. */
  private readonly accessLog: AccessLog | null;
  readonly keys: KeyLookup;
  readonly groups = new Map<RouteSpec, UpstreamGroup>();
  readonly routes: RouteSpec[] = [];
  private readonly dispatch: Dispatch[] = [];
  /** Metrics and log fields of requests that match no chain. */
  private readonly noRoute: RouteMetrics;
  private readonly listening: Listening[] = [];
  private readonly health: HealthChecker;
  private readonly limiter: RateLimiter;
  /** The cache's Redis tier, with cache.redis. */
  private readonly shared: SharedTier | null;
  /** Calls and credits per key, day, chain and method (admin GET /usage). */
  readonly usage: Usage;
  private readonly corsPolicy: Cors;
  readonly metrics: Metrics;
  /** Each chain's counters, by route (the status page reads them). */
  readonly routeMetrics = new Map<RouteSpec, RouteMetrics>();
  /** The admin status page's figures; made only where the admin listener runs. */
  status: StatusBoard | null = null;
  draining = false;
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
    const keys = keysSource(spec.keysFile);
    this.keys = isRedisStore(keys) ? new RedisKeyStore(keys, spec.keyCache ?? { size: 100_000, ttlMs: 60_000 }, log) : new KeyStore(keys, log);
    this.corsPolicy = new Cors(spec.corsOrigins);
    this.metrics = new Metrics(() => this.inflight);
    this.noRoute = this.metrics.route(null, '-');
    this.limiter = process.env.REDIS_URL ? new RedisRateLimiter(process.env.REDIS_URL, log) : new MemoryRateLimiter();
    this.usage = new Usage(this.limiter instanceof RedisRateLimiter ? this.limiter.client : null, log);
    const table = spec.credits;
    const credits = table === undefined ? null : (name: string): number => table[name] ?? 1;
    const admission = new AdmissionStage(this.keys, new RateStep(this.limiter, spec.rateLimit, this.metrics), {
      trustedProxies: spec.trustedProxies === undefined || spec.trustedProxies.length === 0 ? null : ipList(spec.trustedProxies),
      jwtAudience: spec.jwtAudience ?? null,
    });
    this.shared = spec.cache?.redis ? new SharedTier(requiredRedisUrl(), log) : null;
    const cache = spec.cache ? { store: new CacheStore(spec.cache.maxBytes), spec: spec.cache, shared: this.shared } : null;
    for (const l of spec.listeners) {
      const chains = new Map<string, Chain>();
      for (const [segment, route] of l.routes) {
        const group = new UpstreamGroup(route.upstreams.map((u) => new Upstream(u, route)));
        this.metrics.upstreams(group.all);
        this.routes.push(route);
        this.groups.set(route, group);
        const counters = this.metrics.route(route.path, route.interface);
        this.routeMetrics.set(route, counters);
        chains.set(segment, {
          handler: routeHandler(route, { admission, group, log, metrics: this.metrics, cache, circuitOpen: this.circuitOpen, credits, usage: this.usage, validators: spec.validators }),
          envelope: moduleOf(route).envelope,
          metrics: counters,
          cached: cache !== null && route.cache === true,
        });
      }
      this.dispatch.push({ spec: l, chains, envelope: listenerEnvelope(l) });
    }
    this.health = new HealthChecker(this.routes, this.groups, spec.health, log, this.metrics);
  }

  /** Binds every listener. Resolves once all are listening. */
  async start(): Promise<Listening[]> {
    await this.keys.load();
    this.keys.watch();
    await this.limiter.ready();
    // The first health round before the first request: an upstream on another chain never gets one.
    await this.health.start();
    for (const d of this.dispatch) {
      const l = d.spec;
      const host = resolveTemplate(l.host, `listener ${l.name}`);
      const port = parsePort(resolveTemplate(l.port, `listener ${l.name}`), `listener ${l.name}`);
      // A missing Host and an Expect the gateway does not meet are answered
      // in handle(), in the interface's envelope, not by Node's bare 400 and 417.
      const server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 60_000, requestTimeout: 0, requireHostHeader: false }, (req, res) =>
        this.handle(d, req, res),
      );
      server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => this.handle(d, req, res, true));
      server.on('clientError', (err, socket) => this.clientError(d, err as Error & { code?: string; rawPacket?: Buffer }, socket));
      this.listening.push(await listen(server, host, port, l));
    }
    // In multi-process mode the primary serves the admin listener for all workers.
    if (this.spec.admin && !isWorker()) {
      const host = resolveTemplate(this.spec.admin.host, 'admin listener');
      const port = parsePort(resolveTemplate(this.spec.admin.port, 'admin listener'), 'admin listener');
      this.status = new StatusBoard(this);
      this.status.start();
      const server = createServer(adminHandler(this));
      this.listening.push(await listen(server, host, port, null));
    }
    this.usage.start();
    for (const d of this.dispatch) for (const c of d.chains.values()) c.handler.start?.();
    const memoryReducer = memoryReducerFlag() === 'off' ? 'off' : 'on';
    this.log.info(
      { event: 'started', version: VERSION, manifest: this.spec.source, chains: this.routes.length, keys: this.keys.size >= 0 ? this.keys.size : 'redis', listeners: this.addresses(), memoryReducer },
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

  /** Hot path: one pass over the URL, one Map lookup for the chain. */
  private handle(d: Dispatch, req: IncomingMessage, res: ServerResponse, expect = false): void {
    const x = new Exchange(this, req, res, this.noRoute, d.envelope);
    this.inflight++;
    res.on('close', x.closed);
    if (this.draining) res.shouldKeepAlive = false;
    try {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q === -1 ? url : url.slice(0, q);
      const slash = path.indexOf('/', 1);
      const first = slash === -1 ? path.slice(1) : path.slice(1, slash);
      const chain = path.charCodeAt(0) === 47 ? d.chains.get(first) : undefined;
      if (chain !== undefined) {
        x.metrics = chain.metrics;
        x.envelope = chain.envelope;
        // Every answer of a cached chain says X-Cache; BYPASS until the cache takes part.
        if (chain.cached) {
          x.cacheTag = X_CACHE.bypass;
          x.cacheLog = X_CACHE_LOG.bypass;
        }
      }
      // HTTP/1.1 requires Host (RFC 9112 3.2); Node's own check is off, see start().
      if (expect || (req.headers.host === undefined && req.httpVersionMinor === 1)) {
        x.label = expect ? 'expect' : 'malformed';
        res.shouldKeepAlive = false;
        return x.fail(expect ? 'expectation-failed' : 'malformed-http');
      }
      if (chain === undefined) return this.ownRoute(path, x);
      if (req.method === 'OPTIONS') return this.corsPolicy.preflight(x);
      x.handler = chain.handler;
      chain.handler.handle(x, slash === -1 ? '' : path.slice(slash), q === -1 ? '' : url.slice(q + 1));
    } catch (err) {
      x.internal(err);
    }
  }

  cors(origin: string, out: string[]): void {
    this.corsPolicy.add(origin, out);
  }

  /** The response is over (finished, or the client went away): metrics and the access log. */
  done(x: Exchange): void {
    this.inflight--;
    const res = x.res;
    const finished = res.writableFinished;
    if (!finished && x.forward !== null) x.forward.cancel();
    const ms = performance.now() - x.start;
    const status = finished ? res.statusCode : 0;
    const label = x.metrics.observe(x.label, status, ms);
    // The fields that come from the manifest and the keys file are JSON text
    // made once; the line itself is made later, off the request path.
    if (this.accessLog !== null) {
      this.accessLog.add(
        x.idJson,
        x.key === null ? NO_KEY_FIELD : x.key.logField,
        label.logFields,
        status,
        x.cacheLog + (x.upstream === null ? NO_UPSTREAM_FIELDS : x.upstream.logFields),
        ms,
        x.req.socket.bytesWritten - x.written,
      );
    }
    if (this.inflight === 0 && this.idleWaiters.length) for (const w of this.idleWaiters.splice(0)) w();
  }

  /** /healthz and /readyz on every listener, without a key; anything else matches nothing. */
  private ownRoute(path: string, x: Exchange): void {
    if (path === '/healthz' || path === '/readyz') {
      x.label = path.slice(1);
      if (x.req.method !== 'GET' && x.req.method !== 'HEAD') return x.send(405, '{"error":"Method not allowed"}', ['allow', 'GET, HEAD']);
      if (path === '/healthz') return x.send(200, '{"status":"ok"}');
      const { ready, body } = this.readiness();
      return x.send(ready ? 200 : 503, body);
    }
    x.label = 'unknown';
    x.fail('not-found');
  }

  readiness(): { ready: boolean; body: string } {
    return readiness(this.routes, this.groups, this.draining);
  }

  /**
   * A request Node's HTTP parser refused (bad bytes in the URL, oversized
   * headers...) still gets an answer in its interface's envelope, chosen by
   * the first path segment of the raw request line when it can be read.
   */
  private clientError(d: Dispatch, err: Error & { code?: string; rawPacket?: Buffer }, socket: Duplex): void {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const line = err.rawPacket?.toString('latin1', 0, Math.min(err.rawPacket.length, 2048)).split('\r\n', 1)[0] ?? '';
    const target = line.split(' ')[1] ?? '';
    const first = target.startsWith('/') ? target.slice(1).split(/[/?]/, 1)[0]! : '';
    const answer = (d.chains.get(first)?.envelope ?? d.envelope)['malformed-http'];
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    // Rosetta answers every error with 500.
    const status = answer.status === 500 ? 500 : tooLarge ? 431 : 400;
    const reason = status === 500 ? 'Internal Server Error' : tooLarge ? 'Request Header Fields Too Large' : 'Bad Request';
    const head = line.startsWith('HEAD ');
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(answer.body)}\r\nconnection: close\r\n\r\n${head ? '' : answer.body}`,
    );
  }

  // -------------------------------------------------------------- lifecycle

  /** Readiness goes 503 at once; new connections are refused; in-flight work finishes. */
  async shutdown(signal: string): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.log.info({ event: 'draining', signal, inflight: this.inflight }, 'draining');
    this.health.stop();
    this.status?.stop();
    for (const d of this.dispatch) for (const c of d.chains.values()) c.handler.stop?.();
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
    await this.usage.stop();
    await this.limiter.close();
    this.shared?.close();
    this.log.info({ event: 'stopped', outcome }, 'stopped');
    this.flushLog();
  }

  readonly circuitOpen = (u: Upstream): void => {
    this.metrics.upstreamUp.labels(u.chain, u.name).set(0);
    this.metrics.state(u);
    this.log.warn({ event: 'upstream_circuit_open', chain: u.chain, upstream: u.name }, 'upstream taken out after a run of failed requests');
  };

  reloadKeys(reason: string): Promise<boolean> {
    return this.keys.reload(reason);
  }
}

const NO_KEY_FIELD = ',"keyId":null';
const NO_UPSTREAM_FIELDS = ',"upstream":null,"ms":';

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

/** cache.redis needs somewhere to share: REDIS_URL, checked at start like every other setting. */
function requiredRedisUrl(): string {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('the manifest sets cache.redis: true, but REDIS_URL is not set');
  return url;
}

/**
 * Where keys come from: GATEWAY_KEYS, else GATEWAY_KEYS_FILE, else the
 * manifest's `keys:` with its ${VAR} parts resolved now: a file path, or a
 * redis:// or rediss:// URL for the key store.
 */
export function keysSource(manifestKeys: Template): string {
  return process.env.GATEWAY_KEYS ?? process.env.GATEWAY_KEYS_FILE ?? resolveTemplate(manifestKeys, 'keys');
}
