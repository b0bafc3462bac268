// Optional multi-process mode: GATEWAY_WORKERS=N (or `auto`, one per core).
// The primary forks N workers that share the public listeners (the kernel
// spreads connections: SCHED_NONE), restarts a worker that dies, passes
// SIGTERM/SIGINT (drain) on, and serves the admin listener itself: /metrics
// summed over all workers (process/cluster-metrics.ts), /status.json from one worker.
//
// Deploys (issue 47). SIGHUP reloads the keys, and hashes the server file at
// the path the primary was started from. If its content differs from the
// build the workers run, the primary rolls them onto it:
//
//   1. the file is copied to a private folder (the build a worker runs, and
//      any worker restarted later, is that copy: a file replaced again, or
//      broken, on disk changes nothing until the next SIGHUP) and checked
//      with `node --check`;
//   2. N new workers start from the copy; each is ready once it listens, with
//      its upstreams polled once (server.ts start()). One that cannot start
//      (a ${VAR} without a value, a port it cannot bind, a file that does not
//      load) says why, or exits: the build is refused (one `reload_refused`
//      line), the new workers go, the old ones never stopped serving;
//   3. once all N are ready, every old worker stops accepting (its listeners
//      close; the new ones take every new connection), then, once all have,
//      drains: answers in flight finish with Connection: close, idle
//      keep-alive connections close once idle (process/drain.ts), WebSocket clients
//      get 1001 and reconnect to a new worker, and it exits, handing its
//      counters to the primary first.
//
// A SIGHUP during a roll is taken once the roll is over.
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import type { GatewaySpec } from '../types.ts';
import { resolveTemplate } from '../config/env.ts';
import { createLogger } from '../observe/log.ts';
import { workerExecArgv } from './node-flags.ts';
import { failFastRedis } from '../redis.ts';
import { usageAnswer } from '../admin/admin.ts';
import { statusPage } from '../admin/status-page.ts';
import { Usage } from '../observe/usage.ts';
import { VERSION } from '../config/version.ts';
import { SERVED_ENV, type FromWorker } from './cluster-ipc.ts';
import { WorkerMetrics } from './cluster-metrics.ts';
import { BuildFiles, syntaxProblem, type Build } from './cluster-builds.ts';
import { Asks, Member } from './cluster-members.ts';
export { workerCount } from './workers.ts';

/** How long new workers have to be ready before their build is refused. */
const START_TIMEOUT_MS = 60_000;
/** Past its drainTimeoutMs, how long a retiring worker has to exit before it is killed. */
const EXIT_GRACE_MS = 5_000;

export function runPrimary(spec: GatewaySpec, workers: number): void {
  const { log, flush } = createLogger();
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  const entry = resolve(process.argv[1]!);
  const files = new BuildFiles(entry);
  let current = files.keep(files.read());
  const members = new Map<number, Member>();
  const metrics = new WorkerMetrics();
  const asks = new Asks();
  let stopping = false;
  let rolling = false;
  let hupAgain = false;

  const fork = (build: Build): Member => {
    // Workers run with V8's memory reducer off whatever the primary's command line (process/node-flags.ts).
    cluster.setupPrimary({ exec: build.file, execArgv: workerExecArgv() });
    const served = new Set([...members.values()].flatMap((w) => w.addresses));
    const m = new Member(cluster.fork({ GATEWAY_WORKER: '1', [SERVED_ENV]: [...served].join(' ') }), build);
    members.set(m.worker.id, m);
    m.worker.on('message', (msg: FromWorker) => {
      if (msg.gw === 'ready') {
        m.ready = true;
        m.manifestSha256 = msg.manifestSha256;
        m.addresses = msg.addresses;
        m.settle(null);
      } else if (msg.gw === 'failed') {
        m.failure = msg.reason;
        m.settle(msg.reason);
      }
      else if (msg.gw === 'closed') m.close();
      else if (msg.gw === 'final') metrics.gone(m.worker.id, msg.metrics);
      else asks.answer(m, msg);
    });
    return m;
  };
  for (let i = 0; i < workers; i++) fork(current);

  cluster.on('exit', (w, code, signal) => {
    const m = members.get(w.id);
    if (m === undefined) return;
    members.delete(w.id);
    metrics.gone(w.id);
    asks.gone(m);
    const why = m.failure ?? `a worker exited (${signal ?? `code ${code}`}) before it was ready`;
    m.settle(why);
    m.close();
    m.exit();
    if (stopping) {
      if (members.size === 0) finish();
      return;
    }
    // A retiring worker, or a new one the roll refused or will top up: the roll sees to it.
    if (m.retiring || m.build !== current) return;
    if (m.ready) {
      log.error({ event: 'worker_exit', pid: w.process.pid, code, signal }, 'worker died; starting another');
      fork(current);
    } else if (running().some((o) => o.ready)) {
      // A restarted worker of the build served that cannot start (its keys file broken since, say): again, in a second.
      log.error({ event: 'worker_exit', pid: w.process.pid, code, signal, reason: why }, `a worker could not start: ${why}; starting another in a second`);
      setTimeout(() => stopping || running().length >= workers || fork(current), 1000);
    } else {
      // Nothing serves: the gateway cannot start. Exit 1, as one process does (systemd's Restart= then retries).
      log.error({ event: 'start_failed', reason: why }, `the gateway cannot start: ${why}`);
      exitCode = 1;
      stop('SIGTERM');
    }
  });

  let exitCode = 0;
  const finish = (): void => {
    log.info({ event: 'stopped', workers }, 'all workers stopped');
    flush();
    files.remove();
    process.exit(exitCode);
  };

  const running = (): Member[] => [...members.values()].filter((m) => !m.retiring);

  /** Stops accepting on every one, then, once all have, drains them; resolves once all have exited. */
  const retire = async (list: Member[]): Promise<void> => {
    for (const m of list) {
      m.retiring = true;
      // One still starting (restarted during the roll) has taken nothing yet.
      if (m.ready) m.send({ gw: 'retire' });
      else {
        m.worker.process.kill('SIGTERM');
        m.close();
      }
    }
    // A worker that says nothing (hung) is not waited for past the drain's own bound: it is drained, then killed.
    let stuck: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(list.map((m) => m.closed)), new Promise<void>((r) => (stuck = setTimeout(r, spec.drainTimeoutMs + EXIT_GRACE_MS)))]);
    clearTimeout(stuck);
    for (const m of list) {
      m.send({ gw: 'drain' });
      const kill = setTimeout(() => m.worker.process.kill('SIGKILL'), spec.drainTimeoutMs + EXIT_GRACE_MS);
      void m.exited.then(() => clearTimeout(kill));
    }
    await Promise.all(list.map((m) => m.exited));
  };

  const roll = async (next: Build): Promise<void> => {
    const t0 = Date.now();
    log.info({ event: 'rolling', from: current.sha256, to: next.sha256, workers }, 'a new server file: rolling the workers onto it');
    let why = await syntaxProblem(next.file);
    // Stopped during the check: no worker is started after stop() signalled those there were.
    if (why === null && stopping) why = 'the gateway is stopping';
    const fresh: Member[] = [];
    if (why === null) {
      for (let i = 0; i < workers; i++) fresh.push(fork(next));
      // The first reason one of them gives, or null once all are ready.
      let timer: NodeJS.Timeout | undefined;
      why = await new Promise<string | null>((done) => {
        let ready = 0;
        for (const m of fresh) void m.started.then((w) => (w !== null ? done(w) : ++ready === fresh.length && done(null)));
        timer = setTimeout(() => done(`the new workers were not ready within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
      });
      clearTimeout(timer);
    }
    if (why !== null) {
      log.error(
        { event: 'reload_refused', reason: why, file: entry, sha256: next.sha256, serving: current.sha256, pids: running().filter((m) => m.build === current).map((m) => m.pid) },
        `the new server file cannot start: ${why}; the workers keep serving the build they run`,
      );
      // Ready ones may have taken connections: they drain like old ones. The others stop (a failed one drains itself).
      const ready = fresh.filter((m) => m.ready);
      for (const m of fresh) if (!m.ready) m.worker.process.kill('SIGTERM');
      await Promise.all([retire(ready), ...fresh.map((m) => m.exited)]);
      files.drop(next);
      return;
    }
    const previous = current;
    current = next;
    await retire(running().filter((m) => m.build !== next));
    files.drop(previous);
    // A new worker that died after it was ready is started again now; not once the gateway stops (stop() signalled
    // the workers there were: one started now would run on, and the primary would never see them all exit).
    if (!stopping) for (let i = running().length; i < workers; i++) fork(current);
    const now = running();
    log.info(
      { event: 'reloaded', sha256: next.sha256, manifestSha256: now.find((m) => m.manifestSha256 !== null)?.manifestSha256 ?? null, pids: now.map((m) => m.pid), ms: Date.now() - t0 },
      'the workers run the new server file',
    );
  };

  const hup = (): void => {
    if (stopping) return;
    if (rolling) {
      hupAgain = true;
      log.info({ event: 'reload_queued' }, 'SIGHUP during a roll: taken once it is over');
      return;
    }
    // Keys first, as without a new build (a worker still starting reads them anyway, and has no SIGHUP handler yet).
    for (const m of running()) if (m.ready) m.worker.process.kill('SIGHUP');
    let next: Build;
    try {
      const read = files.read();
      if (read.sha256 === current.sha256) return;
      next = files.keep(read);
    } catch (err) {
      log.error({ event: 'reload_refused', reason: (err as Error).message, file: entry, serving: current.sha256 }, `the server file cannot be read: ${(err as Error).message}`);
      return;
    }
    rolling = true;
    void roll(next)
      .catch((err: Error) => log.error({ event: 'roll_failed', error: err.message }, 'the roll failed'))
      .finally(() => {
        rolling = false;
        if (hupAgain) {
          hupAgain = false;
          hup();
        }
      });
  };
  process.on('SIGHUP', hup);

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ event: 'draining', signal, workers }, 'draining workers');
    for (const m of members.values()) m.worker.process.kill(signal);
    admin?.close();
    if (members.size === 0) finish();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));

  let admin: ReturnType<typeof createServer> | null = null;
  const usage = spec.admin && process.env.REDIS_URL ? new Usage(failFastRedis(process.env.REDIS_URL, { commandTimeout: 2000, retryStepMs: 50, retryMaxMs: 2000 }).on('error', () => undefined), log) : null;
  if (spec.admin) {
    admin = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      const send = (status: number, body: string): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(body);
      if (path === '/metrics' && req.method === 'GET') {
        // Every worker that can answer does; one that cannot (starting, or gone) counts with its last answer.
        const ready = [...members.values()].filter((m) => m.ready);
        void Promise.all(ready.map((m) => asks.ask(m, 'metrics').then((a) => a !== null && a.gw === 'metrics' && metrics.seenFrom(m.worker.id, a.metrics))))
          .then(() => metrics.render())
          .then(
            (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
            (err: Error) => {
              log.error({ event: 'metrics_failed', error: err.message }, 'cluster metrics failed');
              send(500, '{"error":"Internal server error"}');
            },
          );
        return;
      }
      if (path === '/usage' && req.method === 'GET') {
        // Each worker counts its own: only Redis has the whole.
        if (usage === null) return send(501, '{"error":"usage across workers needs REDIS_URL"}');
        return usageAnswer(usage, req.url ?? '/', send);
      }
      if (path === '/' && (req.method === 'GET' || req.method === 'HEAD')) {
        const p = statusPage();
        return void res.writeHead(200, p.headers as string[]).end(req.method === 'HEAD' ? undefined : p.body);
      }
      if (path === '/status.json' && req.method === 'GET') return void statusJson(send);
      if (path === '/healthz') return send(200, '{"status":"ok"}');
      send(404, '{"error":"Not found"}');
    });
    const host = resolveTemplate(spec.admin.host, 'admin listener');
    const port = Number(resolveTemplate(spec.admin.port, 'admin listener'));
    admin.listen(port, host, () => {
      const a = admin!.address();
      log.info({ event: 'primary_started', version: VERSION, workers, sha256: current.sha256, admin: { host, port: typeof a === 'object' && a ? a.port : port } }, 'cluster primary started');
    });
  } else log.info({ event: 'primary_started', version: VERSION, workers, sha256: current.sha256 }, 'cluster primary started');

  /**
   * A worker of the build being served answers: its figures (each worker
   * counts its own; /metrics has the sums), its build, and the workers'.
   */
  const statusJson = async (send: (status: number, body: string) => void): Promise<void> => {
    const shown = running().find((m) => m.ready && m.build === current);
    const a = shown === undefined ? null : await asks.ask(shown, 'status');
    if (shown === undefined || a === null || a.gw !== 'status' || a.body === null) return send(503, '{"error":"no worker answered; try again"}');
    const doc = JSON.parse(a.body) as Record<string, unknown>;
    const list = running().filter((m) => m.ready);
    doc.workers = { count: list.length, pids: list.map((m) => m.pid), shown: shown.pid, sha256: current.sha256, rolling };
    send(200, JSON.stringify(doc));
  };
}

export const isWorker = (): boolean => cluster.isWorker;
