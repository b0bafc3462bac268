// The gateway process: listeners, dispatch to each chain's flow, the server's
// own routes and the lifecycle. Generated code calls `main(spec)` with its
// precomputed tables; each interface's flow lives in interfaces/.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';
import type { GatewaySpec } from './types.ts';
import { keysSource, requiredRedisUrl, resolveTemplate } from './config/env.ts';
import { createLogger, type Logger } from './observe/log.ts';
import { AccessLog } from './observe/access-log.ts';
import { KeyStore, type KeyLookup } from './keys/keys.ts';
import type { Upstream } from './upstreams/upstream.ts';
import { Exchange, type ExchangeContext } from './exchange.ts';
import { RequestTarget } from './url.ts';
import { AdmissionStage, RateStep } from './admission/admission.ts';
import { Cors } from './admission/cors.ts';
import { CacheStore, SharedTier, X_CACHE, X_CACHE_LOG } from './cache/index.ts';
import { ipList } from './keys/key-policy.ts';
import { isRedisStore, RedisKeyStore } from './keys/keys-redis.ts';
import { Usage, USAGE_TIMES } from './observe/usage.ts';
import { failFastRedis } from './redis.ts';
import { adminHandler, readiness } from './admin/admin.ts';
import { StatusBoard } from './admin/status.ts';
import { Poller } from './upstreams/poller.ts';
import { MemoryRateLimiter, type RateLimiter } from './admission/ratelimit.ts';
import { RedisRateLimiter } from './admission/ratelimit-redis.ts';
import { Metrics, type RedisPart, type RouteMetrics } from './observe/metrics.ts';
import { isWorker } from './process/cluster.ts';
import { memoryReducerFlag, NO_MEMORY_REDUCER } from './process/node-flags.ts';
import { VERSION } from './config/version.ts';
import { buildChains, type Chain, type DispatchTable } from './chains.ts';
import { answerClientError } from './process/client-error.ts';
import { RequestTracker } from './observe/tracker.ts';
import { Sockets } from './ws/sockets.ts';
import { listen, parsePort, type Listening } from './process/listen.ts';
import { bindOrder } from './process/cluster-ipc.ts';

export class Gateway {
  readonly log: Logger;
  private readonly flushLog: () => void;
  readonly keys: KeyLookup;
  /** Every chain of the manifest, as the server runs it (chains.ts). */
  readonly chains: readonly Chain[];
  private readonly dispatch: readonly DispatchTable[];
  /** Metrics and log fields of requests that match no chain. */
  private readonly noRoute: RouteMetrics;
  private readonly listening: Listening[] = [];
  private readonly poller: Poller;
  private readonly limiter: RateLimiter;
  /** The cache's Redis tier, with cache.redis. */
  private readonly shared: SharedTier | null;
  /** Calls and credits per key, day, chain and method (admin GET /usage). */
  readonly usage: Usage;
  /** Each Redis-backed store and its state (metrics, status page). */
  readonly redis: RedisPart[] = [];
  private readonly corsPolicy: Cors;
  readonly metrics: Metrics;
  /** The admin status page's figures; made only where the admin listener runs. */
  status: StatusBoard | null = null;
  /** Requests under way, and the end of each: metrics and the access log. */
  private readonly tracker: RequestTracker;
  /** What every exchange shares. */
  private readonly context: ExchangeContext;
  /** WebSocket upgrades and subscriptions, where a chain has websocket: true (null: none has). */
  readonly sockets: Sockets | null;

  constructor(readonly spec: GatewaySpec) {
    const { log, flush, write } = createLogger();
    this.log = log;
    const accessLog = log.isLevelEnabled('info') ? new AccessLog(write) : null;
    this.flushLog = () => {
      accessLog?.flush();
      flush();
    };
    this.tracker = new RequestTracker(accessLog);
    const keys = keysSource(spec.keysFile);
    this.keys = isRedisStore(keys) ? new RedisKeyStore(keys, spec.keyCache ?? { size: 100_000, ttlMs: 60_000 }, log) : new KeyStore(keys, log);
    const cors = new Cors(spec.corsOrigins);
    this.corsPolicy = cors;
    this.context = { log, cors: (origin, out) => cors.add(origin, out), tracker: this.tracker };
    this.metrics = new Metrics(() => this.tracker.inflight);
    this.noRoute = this.metrics.route(null, '-');
    this.limiter = process.env.REDIS_URL ? new RedisRateLimiter(process.env.REDIS_URL, log) : new MemoryRateLimiter();
    this.usage = new Usage(process.env.REDIS_URL ? failFastRedis(process.env.REDIS_URL, USAGE_TIMES) : null, log);
    const table = spec.credits;
    const credits = table === undefined ? null : (name: string): number => table[name] ?? 1;
    const rate = new RateStep(this.limiter, spec.rateLimit, this.metrics);
    const admission = new AdmissionStage(this.keys, rate, {
      trustedProxies: spec.trustedProxies === undefined || spec.trustedProxies.length === 0 ? null : ipList(spec.trustedProxies),
      jwtAudience: spec.jwtAudience ?? null,
    });
    this.shared = spec.cache?.redis ? new SharedTier(requiredRedisUrl(), log) : null;
    if (this.keys instanceof RedisKeyStore) this.redis.push({ part: 'keys', link: this.keys.link });
    if (this.limiter instanceof RedisRateLimiter) this.redis.push({ part: 'limits', link: this.limiter.link });
    if (this.usage.link !== null) this.redis.push({ part: 'usage', link: this.usage.link });
    if (this.shared !== null) this.redis.push({ part: 'cache', link: this.shared.link });
    this.metrics.redis(this.redis);
    const cache = spec.cache ? { store: new CacheStore(spec.cache.maxBytes), spec: spec.cache, shared: this.shared, log } : null;
    const chains = buildChains(spec, { admission, log, credits, usage: this.usage, validators: spec.validators }, this.metrics, cache);
    for (const c of chains.all) c.group.onCircuitOpen(this.circuitOpen);
    this.chains = chains.all;
    this.dispatch = chains.dispatch;
    this.poller = new Poller(chains.polled, spec.health, log, this.metrics);
    this.sockets =
      spec.websocket === undefined || !this.chains.some((c) => c.socket !== null)
        ? null
        : new Sockets(
            { admission, context: this.context, log, limits: spec.websocket, jwtAudience: spec.jwtAudience ?? null, noRoute: this.noRoute },
            this.chains,
            this.metrics,
          );
  }

  get draining(): boolean {
    return this.tracker.draining;
  }

  /** Binds every listener. Resolves once all are listening. */
  async start(): Promise<Listening[]> {
    await this.keys.load();
    this.keys.watch();
    await this.limiter.ready();
    // The first poll of every upstream before the first request: an upstream on another chain never gets one.
    await this.poller.start();
    // Every address is resolved before the first is bound, and those no worker serves yet are bound first: a variable
    // without a value or a port in use refuses the start before any listener takes a connection (in a roll, a new
    // worker that cannot start must not have taken any).
    const addresses = this.dispatch.map((d) => ({ d, host: resolveTemplate(d.spec.host, `listener ${d.spec.name}`), port: parsePort(resolveTemplate(d.spec.port, `listener ${d.spec.name}`), `listener ${d.spec.name}`) }));
    for (const { d, host, port } of bindOrder(addresses)) {
      const l = d.spec;
      // A missing Host and an Expect the gateway does not meet are answered
      // in handle(), in the interface's envelope, not by Node's bare 400 and 417.
      const server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 60_000, requestTimeout: 0, requireHostHeader: false }, (req, res) =>
        this.handle(d, req, res),
      );
      server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => this.handle(d, req, res, true));
      server.on('clientError', (err, socket) => answerClientError(d, err as Error & { code?: string; rawPacket?: Buffer }, socket));
      // Only a listener with a chain that takes WebSockets listens for upgrades.
      const sockets = this.sockets;
      if (sockets !== null && sockets.serves(d)) server.on('upgrade', (req: IncomingMessage, socket, head: Buffer) => sockets.upgrade(d, req, socket, head, (r, res) => this.handle(d, r, res)));
      this.listening.push(await listen(server, host, port, l));
    }
    // In multi-process mode the primary serves the admin listener for all workers, with a worker's status figures.
    if (this.spec.admin) {
      this.status = new StatusBoard(this);
      this.status.start();
    }
    if (this.spec.admin && !isWorker()) {
      const host = resolveTemplate(this.spec.admin.host, 'admin listener');
      const port = parsePort(resolveTemplate(this.spec.admin.port, 'admin listener'), 'admin listener');
      const tracker = this.tracker;
      const deps = { metrics: this.metrics, usage: this.usage, status: this.status, readiness: () => this.readiness(), cors: this.context.cors, get draining() { return tracker.draining; } };
      const server = createServer(adminHandler(deps));
      this.listening.push(await listen(server, host, port, null));
    }
    this.usage.start();
    this.sockets?.start();
    const memoryReducer = memoryReducerFlag() === 'off' ? 'off' : 'on';
    this.log.info(
      { event: 'started', version: VERSION, manifest: this.spec.source, chains: this.chains.length, keys: this.keys.size >= 0 ? this.keys.size : 'redis', listeners: this.addresses(), memoryReducer },
      'gateway started',
    );
    if (memoryReducer === 'on') {
      this.log.warn(
        { event: 'memory_reducer_on', hint: `start it as \`node ${NO_MEMORY_REDUCER} <file>\` (or run the file itself): after idle spells V8's memory reducer leaves the heap growing slowly, which cost 17-36% of throughput under load here (docs/operations.md: Running the file)` },
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
  private handle(d: DispatchTable, req: IncomingMessage, res: ServerResponse, expect = false): void {
    const x = new Exchange(this.context, req, res, this.noRoute, d.envelope);
    this.tracker.begin();
    res.on('close', x.closed);
    if (this.tracker.draining) res.shouldKeepAlive = false;
    try {
      const target = new RequestTarget(req.url ?? '/');
      const chain = target.first === null ? undefined : d.chains.get(target.first);
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
      if (chain === undefined) return this.ownRoute(target.path, x);
      if (req.method === 'OPTIONS') return this.corsPolicy.preflight(x);
      x.handler = chain.handler;
      chain.handler.handle(x, target.rest, target.query);
    } catch (err) {
      x.internal(err);
    }
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
    return readiness(this.chains, this.draining);
  }

  // -------------------------------------------------------------- lifecycle

  /** Every listener's connections closed (each listener's close callback); set when the drain begins. */
  private closed: Promise<unknown> | null = null;
  /** The shutdown under way: a second caller (a worker's roll drain, then SIGTERM) waits for the same one. */
  private stopping: Promise<void> | null = null;

  /**
   * The drain begins: readiness goes 503 at once, the listeners stop
   * accepting (in a roll, the other workers take the new connections), and
   * open connections are closed after their answer or once idle (process/drain.ts).
   */
  stopAccepting(signal: string): void {
    if (this.tracker.draining) return;
    this.tracker.draining = true;
    this.log.info({ event: 'draining', signal, inflight: this.tracker.inflight }, 'draining');
    // Not http.Server.close: it would drop idle keep-alive connections at once. A load balancer probing /readyz on
    // one gets the 503, and any request on them is answered with Connection: close.
    this.closed = Promise.all(this.listening.map((l) => new Promise<void>((done) => NetServer.prototype.close.call(l.server, () => done()))));
    for (const l of this.listening) l.connections.drain();
  }

  /** Readiness goes 503 at once; new connections are refused; in-flight work finishes, within drainTimeoutMs. */
  shutdown(signal: string): Promise<void> {
    return (this.stopping ??= this.stop(signal));
  }

  private async stop(signal: string): Promise<void> {
    const deadline = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), this.spec.drainTimeoutMs).unref());
    this.stopAccepting(signal);
    this.poller.stop();
    this.status?.stop();
    this.keys.close();
    // Sockets with nothing under way close now (1001), the others once their calls are answered. In a roll the drain
    // begins once every old worker has stopped accepting, so a reconnect lands on the new build.
    this.sockets?.drain();
    const outcome = await Promise.race([this.tracker.idle().then(() => 'idle' as const), deadline]);
    // Every socket left is told the server goes away (1001) once the requests are answered.
    await this.sockets?.close();
    // Keep-alive connections close on their own once idle; past the deadline, whatever is left is dropped.
    await Promise.race([this.closed, deadline]);
    for (const l of this.listening) l.server.closeAllConnections();
    await Promise.race([this.closed, new Promise((r) => setTimeout(r, 1000).unref())]);
    await Promise.all(this.chains.map((c) => c.group.close()));
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
