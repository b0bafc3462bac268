// `npm run demo`: the whole gateway on this machine, from gateway.yaml.
// Builds dist/gateway.mjs, starts one anvil per EVM chain (with that chain's
// id), the Blockbook and Rosetta stand-ins behind the explorer and Cardano
// chains, makes a demo key, starts the gateway and prints curl lines.
// Ctrl-C stops everything it started.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { checkManifestFile } from '../generator/check.ts';
import type { ChainModel } from '../generator/model.ts';
import { NO_MEMORY_REDUCER } from '../runtime/process/node-flags.ts';
import { KINDS } from '../test/support/kinds.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MANIFEST = process.argv[2] ?? 'gateway.yaml';
const stops: (() => unknown)[] = [];
let gateway: ChildProcess | null = null;

async function shutdown(code: number): Promise<never> {
  if (gateway && gateway.exitCode === null) {
    const exited = new Promise((r) => gateway!.once('exit', r));
    gateway.kill('SIGTERM');
    await exited;
  }
  await Promise.allSettled(stops.map((s) => s()));
  process.exit(code);
}
process.once('SIGINT', () => void shutdown(0));
process.once('SIGTERM', () => void shutdown(0));

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((ok, fail) => {
    const p = spawn(cmd, args, { cwd: ROOT, stdio: 'inherit' });
    p.once('exit', (code) => (code === 0 ? ok() : fail(new Error(`${args.join(' ')} exited ${code}`))));
  });
}

/** The first `${VAR}` of a chain's first upstream: where the demo points it. */
function upstreamVar(chain: ChainModel): string {
  for (const part of chain.upstreams[0]!.url.parts) if (typeof part !== 'string') return part.env;
  throw new Error(`${chain.path}: its upstream has no \${VAR} for the demo to set`);
}

async function main(): Promise<void> {
  console.log(`building dist/gateway.mjs from ${MANIFEST} ...`);
  await run(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', MANIFEST, '--out', 'dist/gateway.mjs']);
  const checked = checkManifestFile(join(ROOT, MANIFEST));
  if (!checked.ok) throw new Error(`${MANIFEST} is invalid: run npx gateway check ${MANIFEST}`);
  const model = checked.model;

  const env: Record<string, string> = { PATH: process.env.PATH ?? '' };
  // Each chain's node or stand-in, as its kind starts one (test/support/kinds.ts).
  for (const chain of model.chains) {
    const node = await KINDS[chain.interface].standIn(chain);
    stops.push(() => node.stop());
    env[upstreamVar(chain)] = node.url;
  }

  const key = randomBytes(24).toString('base64url');
  const dir = join(ROOT, '.tmp', 'demo');
  mkdirSync(dir, { recursive: true });
  const keysFile = join(dir, 'keys.yaml');
  writeFileSync(keysFile, `keys:\n  - id: demo\n    sha256: "${createHash('sha256').update(key).digest('hex')}"\n`, { mode: 0o600 });
  env.GATEWAY_KEYS_FILE = keysFile;
  for (const name of ['EXPLORER_PORT', 'RPC_PORT', 'ADMIN_PORT', 'LOG_LEVEL']) if (process.env[name]) env[name] = process.env[name]!;

  gateway = spawn(process.execPath, [NO_MEMORY_REDUCER, join(ROOT, 'dist/gateway.mjs')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
  gateway.once('exit', (code) => {
    console.error(`gateway exited (${code})`);
    void shutdown(code ?? 1);
  });
  const ports = await new Promise<Record<string, number>>((ok) => {
    let buf = '';
    gateway!.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (process.env.DEMO_LOGS) console.log(line);
        try {
          const e = JSON.parse(line) as { event?: string; listeners?: { listener: string; port: number }[] };
          if (e.event === 'started') ok(Object.fromEntries(e.listeners!.map((l) => [l.listener, l.port])));
        } catch {
          // not a log line
        }
      }
    });
  });

  const rpc = `http://127.0.0.1:${ports.rpc}`;
  const explorer = `http://127.0.0.1:${ports.explorer}`;
  const body = `'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'`;
  const rosetta = (net: string) => `'{"network_identifier":{"blockchain":"cardano","network":"${net}"},"metadata":{}}'`;
  const lines = [
    `# EVM JSON-RPC, key in the header, the path, the query`,
    `curl -s ${rpc}/ethereum -H 'X-API-Key: ${key}' -H 'Content-Type: application/json' -d ${body}`,
    `curl -s ${rpc}/ethereum/${key} -H 'Content-Type: application/json' -d ${body}`,
    `curl -s '${rpc}/polygon?api_key=${key}' -H 'Content-Type: application/json' -d ${body}`,
    `# a method outside the allowlist: -32601`,
    `curl -s ${rpc}/ethereum -H 'X-API-Key: ${key}' -d '{"jsonrpc":"2.0","id":1,"method":"eth_accounts","params":[]}'`,
    `curl -s ${rpc}/ethereum -H 'X-API-Key: ${key}' -d '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x12","latest"]}'   # invalid params: -32602 at the edge`,
    `# Explorer (Blockbook), key in the header, the path, the query`,
    `curl -s '${explorer}/bitcoin/v2/block/1?pageSize=10' -H 'X-API-Key: ${key}'`,
    `curl -s '${explorer}/bitcoin/${key}/v2/block/1?pageSize=10'`,
    `curl -s '${explorer}/bitcoin/v2/block/1?api_key=${key}&pageSize=10'`,
    `# Cardano Rosetta, key in the header or the query (errors are HTTP 500 Rosetta errors)`,
    `curl -s ${rpc}/cardano-preprod/network/status -H 'X-API-Key: ${key}' -H 'Content-Type: application/json' -d ${rosetta('preprod')}`,
    `curl -s '${rpc}/cardano/network/status?api_key=${key}' -H 'Content-Type: application/json' -d ${rosetta('mainnet')}`,
    `curl -s ${rpc}/cardano-preview/network/status -H 'X-API-Key: ${key}' -d ${rosetta('mainnet')}   # network mismatch: 4002`,
    `# health and metrics`,
    `curl -s ${rpc}/readyz`,
    ...(ports.admin ? [`curl -s http://127.0.0.1:${ports.admin}/metrics | head`] : []),
    ...(ports.admin ? [`# the status page: open http://127.0.0.1:${ports.admin}/ in a browser; its figures:`, `curl -s http://127.0.0.1:${ports.admin}/status.json`] : []),
  ];
  console.log(`\ngateway is up. demo key (shown once): ${key}\n`);
  console.log(lines.join('\n'));
  console.log('\nCtrl-C stops the gateway, anvil and the stand-ins. DEMO_LOGS=1 shows the access log.');
}

main().catch((err: Error) => {
  console.error(`demo: ${err.message}`);
  void shutdown(1);
});
