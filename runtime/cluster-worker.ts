// A worker's side of multi-process mode (cluster.ts runs the primary): it
// says when it is ready or why it cannot start, answers the primary's asks for
// its metrics and status figures, and retires in two steps when a roll
// replaces it. Messages are objects with a `gw` field; prom-client's own
// cluster messages are not used (the primary keeps what retired workers
// counted, which prom-client's aggregation cannot).
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Gateway } from './server.ts';

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** Worker to primary. */
export type FromWorker =
  | { gw: 'ready'; manifestSha256: string; addresses: string[] }
  | { gw: 'failed'; reason: string }
  | { gw: 'metrics'; id: number; metrics: MetricsJson }
  | { gw: 'status'; id: number; body: string | null }
  | { gw: 'closed' }
  | { gw: 'final'; metrics: MetricsJson };

/** Primary to worker: ask for metrics or status; retire: stop accepting, then (drain) finish and exit. */
export type ToWorker = { gw: 'metrics'; id: number } | { gw: 'status'; id: number } | { gw: 'retire' } | { gw: 'drain' };

const tell = (m: FromWorker, then?: () => void): void => void process.send!(m, undefined, undefined, then);

/**
 * Starts the worker's gateway; a start that fails is reported (the primary
 * refuses the build), drained, and ends the process. `problem` words the error.
 */
export function runWorker(make: () => Gateway, problem: (err: Error) => string): void {
  let gw: Gateway;
  try {
    gw = make();
  } catch (err) {
    return fail(problem(err as Error), null);
  }
  process.on('message', (m: ToWorker) => {
    if (m.gw === 'metrics') void gw.metrics.registry.getMetricsAsJSON().then((metrics) => tell({ gw: 'metrics', id: m.id, metrics: metrics as MetricsJson }));
    else if (m.gw === 'status') {
      const board = gw.status;
      if (board === null) tell({ gw: 'status', id: m.id, body: null });
      else void board.json().then((body) => tell({ gw: 'status', id: m.id, body }), () => tell({ gw: 'status', id: m.id, body: null }));
    } else if (m.gw === 'retire') {
      gw.stopAccepting('reload');
      tell({ gw: 'closed' });
    } else if (m.gw === 'drain') {
      // What this worker counted, after its last answer: the primary adds it to what /metrics sums.
      void gw.shutdown('reload').then(async () => tell({ gw: 'final', metrics: (await gw.metrics.registry.getMetricsAsJSON()) as MetricsJson }, () => process.exit(0)));
    }
  });
  process.on('SIGHUP', () => void gw.reloadKeys('SIGHUP'));
  const stop = (signal: string) => void gw.shutdown(signal).then(() => process.exit(0));
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  gw.start().then(
    () => tell({ gw: 'ready', manifestSha256: gw.spec.manifestSha256, addresses: gw.addresses().filter((a) => a.listener !== 'admin').map((a) => `${a.host}:${a.port}`) }),
    (err: Error) => fail(problem(err), gw),
  );
}

/** Says why, then drains what a listener bound before the failure may have taken, and exits 1. */
function fail(reason: string, gw: Gateway | null): void {
  process.stderr.write(`gateway: ${reason}\n`);
  tell({ gw: 'failed', reason }, () => {
    if (gw === null) process.exit(1);
    else void gw.shutdown('start_failed').then(() => process.exit(1));
  });
}

/** What the primary passes a new worker: the addresses the workers serve now, `host:port` separated by spaces. */
export const SERVED_ENV = 'GATEWAY_SERVED';

/**
 * The order a worker binds its listeners in: addresses no worker serves yet
 * first. Those the workers serve now always bind (the primary holds the
 * socket); a new one may not (a port in use), and a worker that cannot start
 * should fail before it has taken a connection.
 */
export function bindOrder<T extends { readonly host: string; readonly port: number }>(list: T[], served = process.env[SERVED_ENV]): T[] {
  if (served === undefined || served === '') return list;
  const known = new Set(served.split(' '));
  const isServed = (a: T): number => (known.has(`${a.host}:${a.port}`) ? 1 : 0);
  return [...list].sort((a, b) => isServed(a) - isServed(b));
}
