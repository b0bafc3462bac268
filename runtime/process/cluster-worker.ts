// A worker's side of multi-process mode (process/cluster.ts runs the primary): it
// says when it is ready or why it cannot start, answers the primary's asks for
// its metrics and status figures, and retires in two steps when a roll
// replaces it (process/cluster-ipc.ts has the messages).
import type { FromWorker, MetricsJson, ToWorker } from './cluster-ipc.ts';

/** What a worker reads and drives of its gateway (server.ts's Gateway). */
export interface WorkerGateway {
  readonly spec: { readonly manifestSha256: string };
  readonly metrics: { readonly registry: { getMetricsAsJSON(): Promise<unknown[]> } };
  readonly status: { json(): Promise<string> } | null;
  start(): Promise<unknown>;
  addresses(): { listener: string; host: string; port: number }[];
  stopAccepting(signal: string): void;
  shutdown(signal: string): Promise<void>;
  reloadKeys(reason: string): Promise<boolean>;
}

const tell = (m: FromWorker, then?: () => void): void => void process.send!(m, undefined, undefined, then);

/**
 * Starts the worker's gateway; a start that fails is reported (the primary
 * refuses the build), drained, and ends the process. `problem` words the error.
 */
export function runWorker(make: () => WorkerGateway, problem: (err: Error) => string): void {
  let gw: WorkerGateway;
  try {
    gw = make();
  } catch (err) {
    return fail(problem(err as Error), null);
  }
  const metrics = async (): Promise<MetricsJson> => (await gw.metrics.registry.getMetricsAsJSON()) as MetricsJson;
  process.on('message', (m: ToWorker) => {
    if (m.gw === 'metrics') void metrics().then((json) => tell({ gw: 'metrics', id: m.id, metrics: json }));
    else if (m.gw === 'status') {
      const board = gw.status;
      if (board === null) tell({ gw: 'status', id: m.id, body: null });
      else void board.json().then((body) => tell({ gw: 'status', id: m.id, body }), () => tell({ gw: 'status', id: m.id, body: null }));
    } else if (m.gw === 'retire') {
      gw.stopAccepting('reload');
      tell({ gw: 'closed' });
    } else if (m.gw === 'drain') {
      // What this worker counted, after its last answer: the primary adds it to what /metrics sums.
      void gw.shutdown('reload').then(async () => tell({ gw: 'final', metrics: await metrics() }, () => process.exit(0)));
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
function fail(reason: string, gw: WorkerGateway | null): void {
  process.stderr.write(`gateway: ${reason}\n`);
  tell({ gw: 'failed', reason }, () => {
    if (gw === null) process.exit(1);
    else void gw.shutdown('start_failed').then(() => process.exit(1));
  });
}
