// Optional multi-process mode: GATEWAY_WORKERS=N (or `auto`, one per core).
// The primary forks N workers that share the public listeners (the kernel
// spreads connections: SCHED_NONE), restarts a worker that dies, passes
// SIGHUP (reload keys) and SIGTERM/SIGINT (drain) on, and serves the admin
// listener itself, with /metrics summed over all workers by prom-client's
// AggregatorRegistry.
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { AggregatorRegistry } from 'prom-client';
import type { GatewaySpec } from './types.ts';
import { resolveTemplate } from './env.ts';
import { createLogger } from './observe/log.ts';
import { workerExecArgv } from './node-flags.ts';
import { failFastRedis } from './redis.ts';
import { usageAnswer } from './observe/admin.ts';
import { Usage } from './observe/usage.ts';
import { VERSION } from './version.ts';
export { workerCount } from './workers.ts';


export function runPrimary(spec: GatewaySpec, workers: number): void {
  const { log, flush } = createLogger();
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  // Workers run with V8's memory reducer off whatever the primary's command line (node-flags.ts).
  cluster.setupPrimary({ execArgv: workerExecArgv() });
  const aggregator = new AggregatorRegistry();
  let stopping = false;
  const fork = () => cluster.fork({ GATEWAY_WORKER: '1' });
  for (let i = 0; i < workers; i++) fork();
  cluster.on('exit', (w, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        log.info({ event: 'stopped', workers }, 'all workers stopped');
        flush();
        process.exit(0);
      }
      return;
    }
    log.error({ event: 'worker_exit', pid: w.process.pid, code, signal }, 'worker died; starting another');
    fork();
  });
  const each = (fn: (w: NonNullable<typeof cluster.workers>[string]) => void) => {
    for (const w of Object.values(cluster.workers ?? {})) fn(w);
  };
  process.on('SIGHUP', () => each((w) => w?.process.kill('SIGHUP')));
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ event: 'draining', signal, workers }, 'draining workers');
    each((w) => w?.process.kill(signal));
    admin?.close();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));

  let admin: ReturnType<typeof createServer> | null = null;
  const usage = spec.admin && process.env.REDIS_URL ? new Usage(failFastRedis(process.env.REDIS_URL, { commandTimeout: 2000, retryStepMs: 50, retryMaxMs: 2000 }).on('error', () => undefined), log) : null;
  if (spec.admin) {
    admin = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/metrics' && req.method === 'GET') {
        aggregator.clusterMetrics().then(
          (text) => res.writeHead(200, { 'content-type': aggregator.contentType }).end(text),
          (err: Error) => {
            log.error({ event: 'metrics_failed', error: err.message }, 'cluster metrics failed');
            res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"Internal server error"}');
          },
        );
        return;
      }
      if (path === '/usage' && req.method === 'GET') {
        const send = (status: number, body: string): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(body);
        // Each worker counts its own: only Redis has the whole.
        if (usage === null) return send(501, '{"error":"usage across workers needs REDIS_URL"}');
        return usageAnswer(usage, req.url ?? '/', send);
      }
      // The page's figures live in each worker; the primary has none to show.
      if (path === '/' || path === '/status.json') {
        return void res.writeHead(501, { 'content-type': 'application/json' }).end('{"error":"the status page shows one process: it is not served with GATEWAY_WORKERS > 1 (use /metrics)"}');
      }
      if (path === '/healthz') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Not found"}');
    });
    const host = resolveTemplate(spec.admin.host, 'admin listener');
    const port = Number(resolveTemplate(spec.admin.port, 'admin listener'));
    admin.listen(port, host, () => {
      const a = admin!.address();
      log.info({ event: 'primary_started', version: VERSION, workers, admin: { host, port: typeof a === 'object' && a ? a.port : port } }, 'cluster primary started');
    });
  }
}

export const isWorker = (): boolean => cluster.isWorker;
