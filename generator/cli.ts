// The `gateway` command: check (and check --probe), build, routes, keys, schema-doc.
import { Command } from 'commander';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { checkManifestFile, formatProblem } from './check.ts';
import { addKeysCommands } from './keys-cli.ts';
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

addKeysCommands(program, {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  exit: (code) => process.exit(code),
});

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
