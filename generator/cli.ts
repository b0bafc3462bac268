// The `gateway` command: check (and check --probe), build, routes, keys, schema-doc.
import { Command } from 'commander';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { checkManifestFile, formatProblem } from './check.ts';
import { readFileSync } from 'node:fs';
import { addKey, checkKeysFile, KeysError, listKeys, revokeKey, setKey, type PolicyOptions } from './keys-file.ts';
import { addKeyToStore, importKeysFile, listKeysInStore, revokeKeyInStore, setKeyInStore } from './keys-store.ts';
import { renderManifestReference } from './schema-doc.ts';
import schema from '../schema/gateway.schema.json' with { type: 'json' };
import type { GatewayModel } from './model.ts';
import pkg from '../package.json' with { type: 'json' };

/** Prints every problem to stderr and returns null, or returns the model. */
function check(file: string): GatewayModel | null {
  const result = checkManifestFile(file);
  if (result.ok) return result.model;
  for (const p of result.problems) process.stderr.write(`${formatProblem(p)}\n`);
  const n = result.problems.length;
  process.stderr.write(`${file}: ${n} problem${n === 1 ? '' : 's'}\n`);
  return null;
}

const program = new Command();
program
  .name('gateway')
  .description('Blockchain access gateway: check and build a manifest, manage API keys.')
  .version(pkg.version, '-V, --version', 'print the gateway\'s version')
  .showHelpAfterError();

program
  .command('check')
  .description('validate a manifest; print every problem as FILE:LINE:COL message (needs no environment, except with --probe)')
  .argument('[file]', 'manifest', 'gateway.yaml')
  .option('--probe', 'also probe every upstream once (resolving ${VAR} from the environment): reachable, right chain, head; exit 1 if a chain has no good upstream')
  .option('--timeout <ms>', "with --probe: how long each probe may take (default: the manifest's health.timeoutMs)")
  .action(async (file: string, o: { probe?: boolean; timeout?: string }) => {
    const model = check(file);
    if (!model) process.exit(1);
    if (!o.probe) return void process.stdout.write(`${file}: ok (${model.chains.length} chains)\n`);
    const { probeCommand } = await import('./ops-cli.ts');
    process.exitCode = await probeCommand(model, o.timeout);
  });

program
  .command('routes')
  .description('print the route table a manifest produces, per listener: path, interface, upstreams and roles, allowed methods, pool settings that differ from their defaults, limits')
  .argument('[file]', 'manifest', 'gateway.yaml')
  .option('--json', 'print it as JSON')
  .action(async (file: string, o: { json?: boolean }) => {
    const model = check(file);
    if (!model) process.exit(1);
    const { routeTable, formatRouteTable } = await import('./ops-cli.ts');
    const table = routeTable(model);
    process.stdout.write(o.json ? `${JSON.stringify(table, null, 2)}\n` : formatRouteTable(table));
  });

program
  .command('build')
  .description('check, generate and bundle one server file; writes nothing if the check fails')
  .argument('[file]', 'manifest', 'gateway.yaml')
  .option('--out <path>', 'server file to write', 'dist/gateway.mjs')
  .option('--emit-ts <path>', 'also write the generated TypeScript here')
  .action(async (file: string, opts: { out: string; emitTs?: string }) => {
    const model = check(file);
    if (!model) process.exit(1);
    // Loaded only now: check must work even while emit/ or bundle.ts is broken.
    const { emitServerSource } = await import('./emit/index.ts');
    const { bundleServer } = await import('./bundle.ts');
    const { emitValidators } = await import('./validators.ts');
    const source = emitServerSource(model);
    const validators = emitValidators(model);
    if (opts.emitTs) {
      mkdirSync(dirname(resolve(opts.emitTs)), { recursive: true });
      writeFileSync(opts.emitTs, source);
      // The validators module it imports, beside it.
      writeFileSync(join(dirname(resolve(opts.emitTs)), 'validators.gen.js'), validators);
    }
    await bundleServer(source, { out: opts.out, manifest: model.source, validators });
    const kib = (statSync(opts.out).size / 1024).toFixed(0);
    process.stdout.write(`${opts.out}: ${kib} KiB, ${model.chains.length} chains, from ${model.source}\n`);
  });

const keys = program.command('keys').description('manage API keys (the file stores SHA-256 hashes only)');
const guardAsync = (fn: () => Promise<void>): Promise<void> =>
  fn().catch((err: unknown) => {
    if (!(err instanceof KeysError)) throw err;
    process.stderr.write(`gateway keys: ${err.message}\n`);
    process.exit(1);
  });
/** `keys add --chains`: every chain must be in the manifest (given, or ./gateway.yaml when there is one). */
async function checkChainsInManifest(chains: readonly string[], manifest: string | undefined): Promise<void> {
  const file = manifest ?? (existsSync('gateway.yaml') ? 'gateway.yaml' : null);
  if (file === null) return;
  const result = checkManifestFile(file);
  if (!result.ok) throw new KeysError(`${file} has ${result.problems.length} problem${result.problems.length === 1 ? '' : 's'} (gateway check ${file}); --chains cannot be checked against it`);
  const { unknownChains } = await import('./ops-cli.ts');
  // Names that are not chain paths at all are left to the keys file's own check.
  const problems = unknownChains(result.model, chains.filter((c) => CHAIN_PATH.test(c)), file);
  if (problems.length) throw new KeysError(problems.join('\ngateway keys: '));
}
const CHAIN_PATH = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** Options for a key's policy, shared by `keys add` and `keys set`. */
interface PolicyFlags {
  origins?: string;
  ips?: string;
  userAgents?: string;
  methods?: string;
  contracts?: string;
  expires?: string;
  quota?: string;
  jwtKey?: string[];
  noJwt?: boolean;
}
const list = (v: string | undefined): string[] | undefined => (v === undefined ? undefined : v.split(',').map((x) => x.trim()).filter(Boolean));
function policyOptions(o: PolicyFlags): PolicyOptions {
  let jwtKeys: PolicyOptions['jwtKeys'];
  if (o.noJwt) jwtKeys = [];
  else if (o.jwtKey !== undefined) {
    jwtKeys = o.jwtKey.map((spec) => {
      const [kid, alg, file] = spec.split(':');
      if (!kid || !alg || !file) throw new KeysError(`--jwt-key '${spec}' must be KID:ALG:PEMFILE (ALG: RS256 or ES256)`);
      try {
        return { kid, alg, pem: readFileSync(file, 'utf8') };
      } catch {
        throw new KeysError(`--jwt-key: cannot read ${file}`);
      }
    });
  }
  return { origins: list(o.origins), ips: list(o.ips), userAgents: list(o.userAgents), methods: list(o.methods), contracts: list(o.contracts), expires: o.expires, quota: o.quota, jwtKeys };
}
const withPolicy = (c: Command): Command =>
  c
    .option('--origins <list>', 'allowed Origin values, comma-separated (https://app.example.com, https://*.example.com); empty: any')
    .option('--ips <list>', 'allowed client addresses and CIDR blocks, comma-separated; empty: any')
    .option('--user-agents <list>', 'allowed User-Agent substrings, comma-separated; empty: any')
    .option('--methods <list>', 'allowed JSON-RPC methods or Rosetta/Blockbook endpoints, comma-separated; empty: all the chain allows')
    .option('--contracts <list>', 'allowed contract and account addresses, comma-separated; empty: any')
    .option('--expires <time>', "RFC 3339 date-time after which the key is refused ('none' removes it)")
    .option('--quota <quota>', "credits per UTC day or month: N/day or N/month ('none' removes it)")
    .option('--jwt-key <kid:alg:pemfile>', 'require a bearer JWT signed by this public key (repeat for several)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--no-jwt', 'remove the JWT requirement');

withPolicy(
  keys
    .command('add')
    .description('make a strong random key, print it once (stdout), store only its hash')
    .requiredOption('--id <name>', 'name for logs and metrics (never the key)')
    .option('--chains <list>', 'comma-separated chain paths (default: every chain)')
    .option('--rate-limit <rate>', "N/s, N/min or N/h (default: the manifest's rateLimit)")
    .option('--file <path>', 'keys file', 'keys.yaml')
    .option('--store <url>', 'a redis:// key store instead of the file')
    .option('--manifest <file>', "refuse --chains the manifest does not have (default: gateway.yaml, when there is one here)"),
).action((o: PolicyFlags & { id: string; chains?: string; rateLimit?: string; file: string; store?: string; jwt?: boolean; manifest?: string }) =>
    guardAsync(async () => {
      const chains = o.chains?.split(',').map((s) => s.trim()).filter(Boolean);
      if (chains?.length) await checkChainsInManifest(chains, o.manifest);
      const opts = { id: o.id, chains, rateLimit: o.rateLimit, ...policyOptions({ ...o, noJwt: o.jwt === false }) };
      const key = o.store ? await addKeyToStore(o.store, opts) : addKey(o.file, opts);
      // The key alone on stdout, so `KEY=$(gateway keys add ...)` works; the note goes to stderr.
      process.stdout.write(`${key}\n`);
      process.stderr.write(`key '${o.id}' added to ${o.store ? 'the key store' : o.file}; it is shown only this once\n`);
    }),
  );
withPolicy(
  keys
    .command('set')
    .description("change a key's chains, rate limit and policy; the key itself stays the same")
    .requiredOption('--id <name>', 'key id')
    .option('--chains <list>', 'comma-separated chain paths (empty: every chain)')
    .option('--rate-limit <rate>', "N/s, N/min or N/h ('none': the manifest's)")
    .option('--file <path>', 'keys file', 'keys.yaml')
    .option('--store <url>', 'a redis:// key store instead of the file'),
).action((o: PolicyFlags & { id: string; chains?: string; rateLimit?: string; file: string; store?: string; jwt?: boolean }) =>
  guardAsync(async () => {
    const opts = { chains: list(o.chains), rateLimit: o.rateLimit, ...policyOptions({ ...o, noJwt: o.jwt === false }) };
    if (o.store) await setKeyInStore(o.store, o.id, opts);
    else setKey(o.file, o.id, opts);
    process.stderr.write(`key '${o.id}' updated in ${o.store ? 'the key store' : o.file}\n`);
  }),
);

keys
  .command('import')
  .description('move a keys file into a redis:// key store (checked whole first; every replica picks it up at once)')
  .argument('<file>', 'keys file')
  .requiredOption('--store <url>', 'the redis:// key store')
  .action((file: string, o: { store: string }) =>
    guardAsync(async () => {
      const n = await importKeysFile(o.store, file);
      process.stderr.write(`${n} keys imported from ${file}\n`);
    }),
  );

/** `keys check` and `check-keys`: the keys file as the server would read it. */
const checkKeys = (file: string): void => {
  const r = checkKeysFile(file);
  if (!r.ok) {
    process.stderr.write(`${r.problems}\n`);
    const n = r.problems.split('\n').length;
    process.stderr.write(`${file}: ${n} problem${n === 1 ? '' : 's'}\n`);
    process.exit(1);
  }
  process.stdout.write(`${file}: ok (${r.keys} keys)\n`);
};
keys
  .command('check')
  .description('validate a keys file; print every problem as FILE:LINE:COL message')
  .argument('[file]', 'keys file', 'keys.yaml')
  .action(checkKeys);
program
  .command('check-keys')
  .description('validate a keys file (same as keys check)')
  .argument('[file]', 'keys file', 'keys.yaml')
  .action(checkKeys);

keys
  .command('list')
  .description('list keys: id, state, chains, rate limit and a hash prefix (never a key)')
  .option('--file <path>', 'keys file', 'keys.yaml')
  .option('--store <url>', 'a redis:// key store instead of the file')
  .action((o: { file: string; store?: string }) =>
    guardAsync(async () => {
      for (const k of o.store ? await listKeysInStore(o.store) : listKeys(o.file)) {
        process.stdout.write(`${k.id}\t${k.disabled ? 'disabled' : 'active'}\tchains=${k.chains}\trate=${k.rateLimit}\tquota=${k.quota}\tsha256=${k.hash}\tpolicy=${k.policy}\n`);
      }
    }),
  );
keys
  .command('revoke')
  .description('disable a key (or --delete it); a running server picks this up without a restart')
  .requiredOption('--id <name>', 'key id')
  .option('--delete', 'remove the entry instead of disabling it')
  .option('--file <path>', 'keys file', 'keys.yaml')
  .option('--store <url>', 'a redis:// key store instead of the file')
  .action((o: { id: string; delete?: boolean; file: string; store?: string }) =>
    guardAsync(async () => {
      if (o.store) await revokeKeyInStore(o.store, o.id, o.delete === true);
      else revokeKey(o.file, o.id, o.delete === true);
      process.stderr.write(`key '${o.id}' ${o.delete ? 'deleted' : 'disabled'} in ${o.store ? 'the key store' : o.file}\n`);
    }),
  );

program
  .command('usage')
  .description("a key's calls and credits per day, chain and method, as a table")
  .requiredOption('--key <id>', 'key id')
  .option('--from <day>', 'first day, YYYY-MM-DD (UTC; default today)')
  .option('--to <day>', 'last day, YYYY-MM-DD (default: --from, or today)')
  .option('--redis <url>', 'read the counters from Redis (default: $REDIS_URL)')
  .option('--admin <url>', "else ask a running gateway's admin listener", 'http://127.0.0.1:9100')
  .action(async (o: { key: string; from?: string; to?: string; redis?: string; admin: string }) => {
    const { printUsage } = await import('./usage-cli.ts');
    process.exitCode = await printUsage(o);
  });

program
  .command('schema-doc')
  .description('print the manifest reference (markdown) rendered from the schema, for docs/manifest.md')
  .action(() => {
    process.stdout.write(`${renderManifestReference(schema)}\n`);
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`gateway: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
