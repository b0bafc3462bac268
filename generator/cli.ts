// The `gateway` command: check, build, keys, schema-doc.
import { Command } from 'commander';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { checkManifestFile, formatProblem } from './check.ts';
import { addKey, KeysError, listKeys, revokeKey } from './keys-file.ts';
import { renderManifestReference } from './schema-doc.ts';
import schema from '../schema/gateway.schema.json' with { type: 'json' };
import type { GatewayModel } from './model.ts';

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
  .showHelpAfterError();

program
  .command('check')
  .description('validate a manifest; print every problem as FILE:LINE:COL message (needs no environment)')
  .argument('[file]', 'manifest', 'gateway.yaml')
  .action((file: string) => {
    const model = check(file);
    if (!model) process.exit(1);
    process.stdout.write(`${file}: ok (${model.chains.length} chains)\n`);
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
    const source = emitServerSource(model);
    if (opts.emitTs) {
      mkdirSync(dirname(resolve(opts.emitTs)), { recursive: true });
      writeFileSync(opts.emitTs, source);
    }
    await bundleServer(source, { out: opts.out, manifest: model.source });
    const kib = (statSync(opts.out).size / 1024).toFixed(0);
    process.stdout.write(`${opts.out}: ${kib} KiB, ${model.chains.length} chains, from ${model.source}\n`);
  });

const keys = program.command('keys').description('manage API keys (the file stores SHA-256 hashes only)');
const guard = (fn: () => void) => {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof KeysError)) throw err;
    process.stderr.write(`gateway keys: ${err.message}\n`);
    process.exit(1);
  }
};
keys
  .command('add')
  .description('make a strong random key, print it once (stdout), store only its hash')
  .requiredOption('--id <name>', 'name for logs and metrics (never the key)')
  .option('--chains <list>', 'comma-separated chain paths (default: every chain)')
  .option('--rate-limit <rate>', "N/s, N/min or N/h (default: the manifest's rateLimit)")
  .option('--file <path>', 'keys file', 'keys.yaml')
  .action((o: { id: string; chains?: string; rateLimit?: string; file: string }) =>
    guard(() => {
      const chains = o.chains?.split(',').map((s) => s.trim()).filter(Boolean);
      const key = addKey(o.file, { id: o.id, chains, rateLimit: o.rateLimit });
      // The key alone on stdout, so `KEY=$(gateway keys add ...)` works; the note goes to stderr.
      process.stdout.write(`${key}\n`);
      process.stderr.write(`key '${o.id}' added to ${o.file}; it is shown only this once\n`);
    }),
  );
keys
  .command('list')
  .description('list keys: id, state, chains, rate limit and a hash prefix (never a key)')
  .option('--file <path>', 'keys file', 'keys.yaml')
  .action((o: { file: string }) =>
    guard(() => {
      for (const k of listKeys(o.file)) {
        process.stdout.write(`${k.id}\t${k.disabled ? 'disabled' : 'active'}\tchains=${k.chains}\trate=${k.rateLimit}\tsha256=${k.hash}\n`);
      }
    }),
  );
keys
  .command('revoke')
  .description('disable a key (or --delete it); a running server picks this up without a restart')
  .requiredOption('--id <name>', 'key id')
  .option('--delete', 'remove the entry instead of disabling it')
  .option('--file <path>', 'keys file', 'keys.yaml')
  .action((o: { id: string; delete?: boolean; file: string }) =>
    guard(() => {
      revokeKey(o.file, o.id, o.delete === true);
      process.stderr.write(`key '${o.id}' ${o.delete ? 'deleted' : 'disabled'} in ${o.file}\n`);
    }),
  );

program
  .command('schema-doc')
  .description('print the manifest reference (markdown) rendered from the schema, for README.md')
  .action(() => {
    process.stdout.write(`${renderManifestReference(schema)}\n`);
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`gateway: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
