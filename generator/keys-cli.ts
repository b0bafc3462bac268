// `gateway keys add|set|import|check|list|revoke` and `gateway check-keys`.
// The flags of add and set are the schema's fields (key-edit.ts, KEY_FLAGS):
// a field added to schema/keys.schema.json is a flag here with nothing to
// write. Output goes through `io`, and a failure sets an exit code rather
// than ending the process, so tests run the commands in-process.
import { existsSync, readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { FIELDS } from '../runtime/keys/key-record.ts';
import { checkManifestFile } from './check.ts';
import { flagValue, KEY_FLAGS, KeysError, type KeyEdit } from './key-edit.ts';
import { addKey, checkKeysFile, listKeys, revokeKey, setKey } from './keys-file.ts';

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** Ends the command with this exit code (the process: exits; a test: records it). */
  exit(code: number): void;
}

const camel = (flag: string): string => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

type Flags = Record<string, string | string[] | boolean | undefined>;

/** The edit the flags ask for: one entry per field flag given, and jwt from --jwt-key / --no-jwt. */
function editOf(o: Flags): KeyEdit {
  const edit: Record<string, unknown> = {};
  for (const { field, flag } of KEY_FLAGS) {
    const text = o[camel(flag)];
    if (typeof text === 'string') edit[field.name] = flagValue(field, text);
  }
  // --no-jwt makes commander's `jwt` false; --jwt-key KID:ALG:PEMFILE, repeated.
  if (o.jwt === false) edit.jwt = null;
  else if (Array.isArray(o.jwtKey)) {
    edit.jwt = {
      keys: o.jwtKey.map((spec) => {
        const [kid, alg, file] = spec.split(':');
        if (!kid || !alg || !file) throw new KeysError(`--jwt-key '${spec}' must be KID:ALG:PEMFILE (ALG: RS256 or ES256)`);
        try {
          return { kid, alg, pem: readFileSync(file, 'utf8') };
        } catch {
          throw new KeysError(`--jwt-key: cannot read ${file}`);
        }
      }),
    };
  }
  return edit as KeyEdit;
}

/** The field flags, and jwt's, on a command (`set`: wording for changing a key). */
function withFieldFlags(c: Command): Command {
  for (const { field, flag, arg } of KEY_FLAGS) {
    const how = field.kind === 'list' ? 'comma-separated; empty removes it' : "'none' removes it";
    c.option(`--${flag} ${arg}`, `${field.description} (${how})`);
  }
  return c
    .option('--jwt-key <kid:alg:pemfile>', 'require a bearer JWT signed by this public key (repeat for several)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--no-jwt', 'remove the JWT requirement');
}

const CHAIN = FIELDS.get('chains')!.pattern!;

/** `keys add --chains`: every chain must be in the manifest (given, or ./gateway.yaml when there is one). */
async function checkChainsInManifest(chains: unknown, manifest: string | undefined): Promise<void> {
  if (!Array.isArray(chains) || chains.length === 0) return;
  const file = manifest ?? (existsSync('gateway.yaml') ? 'gateway.yaml' : null);
  if (file === null) return;
  const result = checkManifestFile(file);
  if (!result.ok) throw new KeysError(`${file} has ${result.problems.length} problem${result.problems.length === 1 ? '' : 's'} (gateway check ${file}); --chains cannot be checked against it`);
  const { unknownChains } = await import('./ops-cli.ts');
  // Names that are not chain paths at all are left to the key's own check.
  const problems = unknownChains(
    result.model,
    (chains as string[]).filter((c) => CHAIN.test(c)),
    file,
  );
  if (problems.length) throw new KeysError(problems.join('\ngateway keys: '));
}

/** Adds the keys commands to `program`. */
export function addKeysCommands(program: Command, io: CliIo): void {
  const run = (fn: () => Promise<void>): Promise<void> =>
    fn().catch((err: unknown) => {
      if (!(err instanceof KeysError)) throw err;
      io.err(`gateway keys: ${err.message}\n`);
      io.exit(1);
    });
  // The store is loaded only when asked for: a file's commands need no Redis client.
  const store = () => import('./keys-store.ts');
  const keys = program.command('keys').description('manage API keys (the file stores SHA-256 hashes only)');

  withFieldFlags(
    keys
      .command('add')
      .description('make a strong random key, print it once (stdout), store only its hash')
      .requiredOption('--id <name>', 'name for logs and metrics (never the key)')
      .option('--file <path>', 'keys file', 'keys.yaml')
      .option('--store <url>', 'a redis:// key store instead of the file')
      .option('--manifest <file>', 'refuse --chains the manifest does not have (default: gateway.yaml, when there is one here)'),
  ).action((o: Flags & { id: string; file: string; store?: string; manifest?: string }) =>
    run(async () => {
      const edit = editOf(o);
      await checkChainsInManifest(edit.chains, o.manifest);
      const key = o.store ? await (await store()).addKeyToStore(o.store, o.id, edit) : addKey(o.file, o.id, edit);
      // The key alone on stdout, so `KEY=$(gateway keys add ...)` works; the note goes to stderr.
      io.out(`${key}\n`);
      io.err(`key '${o.id}' added to ${o.store ? 'the key store' : o.file}; it is shown only this once\n`);
    }),
  );

  withFieldFlags(
    keys
      .command('set')
      .description("change a key's fields (limits, chains, policy); the key itself stays the same")
      .requiredOption('--id <name>', 'key id')
      .option('--file <path>', 'keys file', 'keys.yaml')
      .option('--store <url>', 'a redis:// key store instead of the file'),
  ).action((o: Flags & { id: string; file: string; store?: string }) =>
    run(async () => {
      const edit = editOf(o);
      if (o.store) await (await store()).setKeyInStore(o.store, o.id, edit);
      else setKey(o.file, o.id, edit);
      io.err(`key '${o.id}' updated in ${o.store ? 'the key store' : o.file}\n`);
    }),
  );

  keys
    .command('import')
    .description('move a keys file into a redis:// key store (checked whole first; every replica picks it up at once)')
    .argument('<file>', 'keys file')
    .requiredOption('--store <url>', 'the redis:// key store')
    .action((file: string, o: { store: string }) =>
      run(async () => {
        const n = await (await store()).importKeysFile(o.store, file);
        io.err(`${n} keys imported from ${file}\n`);
      }),
    );

  /** `keys check` and `check-keys`: the keys file as the server would read it. */
  const checkKeys = (file: string): void => {
    const r = checkKeysFile(file);
    if (!r.ok) {
      io.err(`${r.problems}\n`);
      const n = r.problems.split('\n').length;
      io.err(`${file}: ${n} problem${n === 1 ? '' : 's'}\n`);
      return io.exit(1);
    }
    io.out(`${file}: ok (${r.keys} keys)\n`);
  };
  keys.command('check').description('validate a keys file; print every problem as FILE:LINE:COL message').argument('[file]', 'keys file', 'keys.yaml').action(checkKeys);
  program.command('check-keys').description('validate a keys file (same as keys check)').argument('[file]', 'keys file', 'keys.yaml').action(checkKeys);

  keys
    .command('list')
    .description('list keys: id, state, chains, rate limit, quota, a hash prefix (never a key) and the other fields')
    .option('--file <path>', 'keys file', 'keys.yaml')
    .option('--store <url>', 'a redis:// key store instead of the file')
    .action((o: { file: string; store?: string }) =>
      run(async () => {
        for (const k of o.store ? await (await store()).listKeysInStore(o.store) : listKeys(o.file)) {
          io.out(`${k.id}\t${k.disabled ? 'disabled' : 'active'}\tchains=${k.chains}\trate=${k.rateLimit}\tquota=${k.quota}\tsha256=${k.hash}\tpolicy=${k.policy}\n`);
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
      run(async () => {
        if (o.store) await (await store()).revokeKeyInStore(o.store, o.id, o.delete === true);
        else revokeKey(o.file, o.id, o.delete === true);
        io.err(`key '${o.id}' ${o.delete ? 'deleted' : 'disabled'} in ${o.store ? 'the key store' : o.file}\n`);
      }),
    );
}
