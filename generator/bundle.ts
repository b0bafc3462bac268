// Emitted TypeScript + runtime/ -> one ESM file that runs with plain `node`.
import { build } from 'esbuild';
import { mkdirSync, renameSync, writeFileSync, chmodSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { emitHeader } from './emit/header.ts';
import { RUNTIME_SPECIFIER } from './emit/index.ts';
import { VALIDATORS_SPECIFIER } from './validators.ts';
import { NO_MEMORY_REDUCER } from '../runtime/process/node-flags.ts';
import pkg from '../package.json' with { type: 'json' };

/** The project root: esbuild resolves runtime/ and node_modules from here. */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export interface BundleOptions {
  readonly out: string;
  /** Manifest path as shown in the header (relative). */
  readonly manifest: string;
  /** The request validators module (generator/validators.ts); none: an empty table. */
  readonly validators?: string;
}

/** What `@gateway/validators` is when a build has no validators to emit. */
export const EMPTY_VALIDATORS = 'export default { evm: {}, rosetta: {}, blockbook: {} };\n';

/**
 * Bundles and returns the file's bytes. Paths in esbuild's comments are
 * relative to PROJECT_ROOT, so the output holds no absolute path.
 */
export async function bundleServerText(source: string, manifest: string, validators: string = EMPTY_VALIDATORS): Promise<string> {
  const result = await build({
    // The validators module is made in memory, next to the emitted source.
    plugins: [
      {
        name: 'gateway-validators',
        setup(b) {
          b.onResolve({ filter: new RegExp(`^${VALIDATORS_SPECIFIER}$`) }, () => ({ path: 'validators.gen.js', namespace: 'gateway-validators' }));
          b.onLoad({ filter: /.*/, namespace: 'gateway-validators' }, () => ({ contents: validators, loader: 'js', resolveDir: PROJECT_ROOT }));
        },
      },
      {
        // ws's optional native add-ons are left out: its require() of them, in a try, gets a module that
        // throws, and ws uses its own JavaScript (the file needs no node_modules, nor looks for any).
        name: 'gateway-no-ws-addons',
        setup(b) {
          b.onResolve({ filter: /^(bufferutil|utf-8-validate)$/ }, (a) => ({ path: a.path, namespace: 'gateway-absent' }));
          b.onLoad({ filter: /.*/, namespace: 'gateway-absent' }, (a) => ({ contents: `throw new Error(${JSON.stringify(`${a.path} is not bundled`)});`, loader: 'js' }));
        },
      },
    ],
    stdin: { contents: source, resolveDir: PROJECT_ROOT, sourcefile: 'gateway.gen.ts', loader: 'ts' },
    absWorkingDir: PROJECT_ROOT,
    alias: { [RUNTIME_SPECIFIER]: './runtime/index.ts' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20.18',
    write: false,
    legalComments: 'none',
    // runtime/config/version.ts: the version is part of the file, like the tables.
    define: { __GATEWAY_VERSION__: JSON.stringify(pkg.version) },
    logLevel: 'silent',
    // Bundled CommonJS dependencies call require(); give ESM one.
    banner: {
      js: [
        // V8's memory reducer off when the file is run itself (runtime/process/node-flags.ts).
        `#!/usr/bin/env -S node ${NO_MEMORY_REDUCER}`,
        emitHeader(manifest),
        `// Run it as \`node ${NO_MEMORY_REDUCER} <this file>\`, or run the file itself (docs/operations.md: Running the file).`,
        "import { createRequire as __gwCreateRequire } from 'node:module';",
        'const require = __gwCreateRequire(import.meta.url);',
      ].join('\n'),
    },
  });
  return result.outputFiles[0]!.text;
}

/** Writes the bundle atomically: a reader sees the old file or the new one. */
export async function bundleServer(source: string, opts: BundleOptions): Promise<{ bytes: number }> {
  const text = await bundleServerText(source, opts.manifest, opts.validators);
  const out = resolve(opts.out);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  chmodSync(tmp, 0o755);
  renameSync(tmp, out);
  return { bytes: Buffer.byteLength(text) };
}
