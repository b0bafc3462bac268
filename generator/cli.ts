// The `gateway` command: check, build, keys, schema-doc.
import { Command } from 'commander';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { loadManifest } from './load.ts';
import { validateManifest } from './validate.ts';
import { buildModel } from './normalize.ts';
import { addKey, KeysError, listKeys, revokeKey } from './keys-file.ts';
import { renderManifestReference } from './schema-doc.ts';
import schema from '../schema/gateway.schema.json' with { type: 'json' };
import type { GatewayModel } from './model.ts';
import type { Problem } from './load.ts';

function formatProblem(p: Problem): string {
  return `${p.file}:${p.line}:${p.col} ${p.message}${p.hint ? ` (hint: ${p.hint})` : ''}`;
}

/** The manifest path as it appears in messages and in generated headers: relative, never absolute. */
function displayPath(file: string): string {
  return isAbsolute(file) ? relative(process.cwd(), file) || file : file;
}

/** Loads and checks; prints every problem; returns the model or null. */
export function checkManifest(file: string): GatewayModel | null {
  const shown = displayPath(file);
  if (!existsSync(file)) {
    process.stderr.write(`${shown}:1:1 manifest not found\n`);
    return null;
  }
  const loaded = loadManifest(file);
  const problems = validateManifest({ ...loaded, file: shown });
  if (problems.length) {
    for (const p of problems) process.stderr.write(`${formatProblem({ ...p, file: shown })}\n`);
    process.stderr.write(`${shown}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n`);
    return null;
  }
  return buildModel(loaded.value as Record<string, unknown>, shown.split('\\').join('/'));
}

const program = new Command();
program.name('gateway').description('Blockchain access gateway: check and build a manifest, manage API keys.').showHelpAfterError();

program
  .command('check')
  .description('validate a manifest; print every problem as FILE:LINE:COL message')
  .argument('[file]', 'manifest', 'gateway.yaml')
  .action((file: string) => {
    const model = checkManifest(file);
    if (!model) process.exit(1);
    process.stdout.write(`${displayPath(file)}: ok (${model.chains.length} chains)\n`);
  });

program
  .command('build')
  .description('check, generate and bundle one server file; writes nothing if the check fails')
  .argument('[file]', 'manifest', 'gateway.yaml')
  .option('--out <path>', 'server file to write', 'dist/gateway.mjs')
  .option('--emit-ts <path>', 'also write the generated TypeScript here')
  .action(async (file: string, opts: { out: string; emitTs?: string }) => {
    const model = checkManifest(file);
    if (!model) process.exit(1);
    const { emitServerSource } = await import('./emit/index.ts');
    const { bundleServer } = await import('./bundle.ts');
    const source = emitServerSource(model);
    const { bytes } = await bundleServer(source, { out: opts.out, manifest: model.source });
    if (opts.emitTs) {
      mkdirSync(dirname(resolve(opts.emitTs)), { recursive: true });
      writeFileSync(opts.emitTs, source);
    }
    process.stdout.write(`${displayPath(opts.out)}: ${(bytes / 1024).toFixed(0)} KiB, ${model.chains.length} chains, from ${model.source}\n`);
  });

const keys = program.command('keys').description('manage API keys (the file stores SHA-256 hashes only)');
const keysFile = (o: { file?: string }) => o.file ?? 'keys.yaml';
const guard = (fn: () => void) => {
  try {
    fn();
  } catch (err) {
    process.stderr.write(`gateway keys: ${(err as Error).message}\n`);
    process.exit(1);
  }
};
keys
  .command('add')
  .description('make a strong random key, print it once, store only its hash')
  .requiredOption('--id <name>', 'name for logs and metrics (never the key)')
  .option('--chains <list>', 'comma-separated chain paths (default: every chain)')
  .option('--rate-limit <rate>', 'N/s, N/min or N/h')
  .option('--file <path>', 'keys file', 'keys.yaml')
  .action((o: { id: string; chains?: string; rateLimit?: string; file?: string }) =>
    guard(() => {
      const key = addKey(keysFile(o), {
        id: o.id,
        chains: o.chains?.split(',').map((s) => s.trim()).filter(Boolean),
        rateLimit: o.rateLimit,
      });
      process.stdout.write(`${key}\n`);
      process.stderr.write(`key '${o.id}' added to ${keysFile(o)}; it is shown only this once\n`);
    }),
  );
keys
  .command('list')
  .description('list keys: id, chains, state and a hash prefix (never a key)')
  .option('--file <path>', 'keys file', 'keys.yaml')
  .action((o: { file?: string }) =>
    guard(() => {
      for (const k of listKeys(keysFile(o))) {
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
  .action((o: { id: string; delete?: boolean; file?: string }) =>
    guard(() => {
      revokeKey(keysFile(o), o.id, o.delete === true);
      process.stderr.write(`key '${o.id}' ${o.delete ? 'deleted' : 'disabled'}\n`);
    }),
  );

program
  .command('schema-doc')
  .description("print the manifest reference (markdown) derived from the schema")
  .action(() => {
    process.stdout.write(`${renderManifestReference(schema as never)}\n`);
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`gateway: ${err instanceof KeysError ? err.message : (err as Error).stack}\n`);
  process.exit(1);
});
