// How many worker processes the gateway runs (GATEWAY_WORKERS): read by the
// primary (process/cluster.ts) and by what divides a per-process share among them
// (upstream-budget.ts). A leaf: it imports nothing of the runtime.
import { availableParallelism } from 'node:os';

export function workerCount(): number {
  const raw = process.env.GATEWAY_WORKERS;
  if (!raw) return 1;
  if (raw === 'auto') return availableParallelism();
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`GATEWAY_WORKERS must be a positive integer or 'auto', not '${raw}'`);
  return n;
}
