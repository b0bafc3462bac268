// Vitest global setup: say which fast-check seed this run uses (see fc-seed.ts).
import { chosenSeed, DEFAULT_SEED } from './fc-seed.js';

export default function setup(): void {
  const seed = chosenSeed();
  const how = seed === DEFAULT_SEED ? 'the fixed CI seed; set FC_SEED=<integer> to try another' : 'from FC_SEED';
  console.log(`fast-check seed: ${seed} (${how})`);
}
