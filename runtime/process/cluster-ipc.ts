// What the cluster primary (process/cluster.ts) and its workers (process/cluster-worker.ts)
// say to each other over IPC, and what a worker is told of the addresses
// served at its start. Messages are objects with a `gw` field; prom-client's
// own cluster messages are not used (the primary keeps what retired workers
// counted, which prom-client's aggregation cannot: process/cluster-metrics.ts).
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/** A registry's metrics as prom-client's getMetricsAsJSON gives them. */
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
