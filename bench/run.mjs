#!/usr/bin/env node
// `npm run bench`: build the gateway for bench/gateway.bench.yaml, then run the
// shared side-by-side harness (../shared/bench/bench.sh) with the gateway as
// one more target. The gateway is measured doing its full job: the key comes
// in the path AND the header (post.lua always sends X-API-Key), both are
// checked and stripped, the allowlist is checked, logging and metrics are on.
//
//   npm run bench                          # small, big and batch; 5 interleaved rounds
//   SCENARIOS=small RUNS=3 npm run bench   # any bench.sh knob passes through
//   WORKERS=2 npm run bench                # cluster mode (one worker per core), its own row
import { spawnSync, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BENCH_DIR = resolve(process.env.BENCH_DIR ?? join(ROOT, '..', 'shared', 'bench'));
if (!existsSync(join(BENCH_DIR, 'bench.sh'))) {
  console.error(`bench: no harness at ${BENCH_DIR} (set BENCH_DIR)`);
  process.exit(1);
}
const API_KEY = process.env.API_KEY ?? 'bench-key-5f2c9a7e-0123456789';
const PORT = process.env.GATEWAY_PORT ?? '18549';
const workers = process.env.WORKERS ?? '';

const t0 = process.hrtime.bigint();
execFileSync(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', 'bench/gateway.bench.yaml', '--out', 'dist/bench-gateway.mjs'], {
  cwd: ROOT,
  stdio: 'inherit',
});
console.error(`bench: build took ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(0)} ms`);

const work = join(ROOT, '.tmp', 'bench');
mkdirSync(work, { recursive: true });
const keys = join(work, 'keys.yaml');
writeFileSync(keys, `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(API_KEY).digest('hex')}"\n`);

const cmd = [`GATEWAY_KEYS_FILE=${keys}`, workers ? `GATEWAY_WORKERS=${workers}` : '', `exec node --no-memory-reducer ${join(ROOT, 'dist/bench-gateway.mjs')}`]
  .filter(Boolean)
  .join(' ');
const env = {
  ...process.env,
  API_KEY,
  GATEWAY_CMD: cmd,
  GATEWAY_URL: `http://127.0.0.1:${PORT}/eth/${API_KEY}`,
  GATEWAY_NAME: workers ? `gateway-x${workers}` : 'gateway',
  SCENARIOS: process.env.SCENARIOS ?? 'small big batch',
};
// shared/ is read-only here, and bench.sh installs its peers (npm ci) and
// writes results beside itself: run a copy, keeping its node_modules between runs.
const harness = join(work, 'harness');
cpSync(BENCH_DIR, harness, { recursive: true, filter: (src) => !src.includes('node_modules') && !src.includes('/results') });
env.OUT_DIR ??= join(ROOT, 'bench', 'results', new Date().toISOString().replace(/[-:]/g, '').slice(0, 15));
const r = spawnSync('bash', [join(harness, 'bench.sh')], { cwd: ROOT, env, stdio: 'inherit' });
process.exit(r.status ?? 1);
