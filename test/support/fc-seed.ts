// One fast-check seed for the whole suite, so a run is repeatable: CI always
// uses DEFAULT_SEED; set FC_SEED=<integer> locally to explore another one. The
// global setup prints the seed in use once per run; every property test picks
// it up through fc.configureGlobal in each worker.
import fc from 'fast-check';

export const DEFAULT_SEED = 20261125;

export function chosenSeed(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.FC_SEED;
  if (raw === undefined || raw === '') return DEFAULT_SEED;
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed)) throw new Error(`FC_SEED must be an integer, got ${JSON.stringify(raw)}`);
  return seed;
}

fc.configureGlobal({ ...fc.readConfigureGlobal(), seed: chosenSeed() });
