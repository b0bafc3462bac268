// Model -> the request validators module: ajv compiles the schemas of
// generator/specs.ts into standalone code (no ajv at run time), only for what
// the manifest's chains allow and validate. The module's default export is
// plain data the runtime reads (runtime/config/validators.ts); the bundle resolves
// VALIDATORS_SPECIFIER to this text.
import { Ajv, type AnySchema } from 'ajv';
import standaloneCodeModule from 'ajv/dist/standalone/index.js';
import type { GatewayModel } from './model.ts';
import { BLOCKBOOK_ENDPOINTS } from '../runtime/kinds/blockbook/guard.ts';
import { ROSETTA_ENDPOINTS } from '../runtime/kinds/rosetta/guard.ts';
import { blockbookParams, evmDefinitions, evmMethodNames, evmParamsSchema, rosettaBodySchema, rosettaDefinitions, type BlockbookParams } from './specs.ts';

/** The module specifier generated code imports the validators by (a tsconfig path and an esbuild plugin). */
export const VALIDATORS_SPECIFIER = '@gateway/validators';

// The package's CommonJS export, as ESM sees it.
const standaloneCode = ((standaloneCodeModule as unknown as { default?: unknown }).default ?? standaloneCodeModule) as (ajv: Ajv, refs: Record<string, string>) => string;

/** What the manifest asks for: EVM methods, Rosetta endpoints and Blockbook endpoints to validate. */
export interface ValidatedSet {
  readonly evm: readonly string[];
  readonly rosetta: readonly string[];
  readonly blockbook: readonly { readonly endpoint: string; readonly hasParam: boolean }[];
}

export function validatedSet(model: GatewayModel): ValidatedSet {
  const described = new Set(evmMethodNames());
  const evm = new Set<string>();
  let rosetta = false;
  let blockbook = false;
  let sendtx = false;
  for (const c of model.chains) {
    if (!c.validate) continue;
    // What each kind checks against its published spec; a kind the schema adds is asked for its case (none: break).
    switch (c.interface) {
      case 'evm-jsonrpc':
        for (const m of c.methods ?? []) if (described.has(m)) evm.add(m);
        break;
      case 'rosetta':
        rosetta = true;
        break;
      case 'blockbook':
        blockbook = true;
        if (c.sendtx === true) sendtx = true;
        break;
      default:
        c.interface satisfies never;
    }
  }
  const bb = blockbook ? [...BLOCKBOOK_ENDPOINTS].map(([endpoint, spec]) => ({ endpoint, hasParam: spec.params === 1 })) : [];
  if (sendtx) bb.push({ endpoint: 'sendtx', hasParam: true });
  return {
    evm: [...evm].sort(),
    rosetta: rosetta ? [...ROSETTA_ENDPOINTS.keys()].sort() : [],
    blockbook: bb.sort((a, b) => (a.endpoint < b.endpoint ? -1 : a.endpoint > b.endpoint ? 1 : 0)),
  };
}

/** An export name for a method or endpoint: `evm$eth_call`, `rosetta$block_transaction`, `blockbook$block_index`. */
function exportName(kind: string, name: string): string {
  return `${kind}$${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
}

/** A new compiler with the settings every emitted validator is built with (tests compile with the same). */
export function newAjv(standalone: boolean): Ajv {
  return new Ajv({
    ...(standalone ? { code: { source: true, esm: true } } : {}),
    strict: false,
    // Formats (int64, int32) are notes about size in these documents, not rules ajv could check.
    validateFormats: false,
    allErrors: false,
    // Errors carry the failing schema, whose title names what was expected ("must be a hex encoded address").
    verbose: true,
  });
}

export interface CompiledSchemas {
  readonly ajv: Ajv;
  /** Export name -> schema id. */
  readonly refs: Record<string, string>;
  readonly blockbook: ReadonlyMap<string, BlockbookParams>;
}

/** Adds every schema of the set to a compiler. */
export function addSchemas(ajv: Ajv, set: ValidatedSet): CompiledSchemas {
  const refs: Record<string, string> = {};
  const blockbook = new Map<string, BlockbookParams>();
  const add = (schema: Record<string, unknown>) => {
    ajv.addSchema(schema as AnySchema);
  };
  if (set.evm.length > 0) {
    const schemas = set.evm.map(evmParamsSchema);
    add(evmDefinitions(schemas));
    schemas.forEach((s, i) => {
      add(s);
      refs[exportName('evm', set.evm[i]!)] = s.$id as string;
    });
  }
  if (set.rosetta.length > 0) {
    const schemas = set.rosetta.map(rosettaBodySchema);
    add(rosettaDefinitions(schemas));
    schemas.forEach((s, i) => {
      add(s);
      refs[exportName('rosetta', set.rosetta[i]!)] = s.$id as string;
    });
  }
  for (const { endpoint, hasParam } of set.blockbook) {
    const p = blockbookParams(endpoint, hasParam);
    add(p.schema);
    blockbook.set(endpoint, p);
    refs[exportName('blockbook', endpoint)] = p.schema.$id as string;
  }
  return { ajv, refs, blockbook };
}

function objectText(entries: readonly (readonly [string, string])[], indent: string): string {
  if (entries.length === 0) return '{}';
  return `{\n${entries.map(([k, v]) => `${indent}  ${JSON.stringify(k)}: ${v},`).join('\n')}\n${indent}}`;
}

/**
 * The validators module's text, the same for the same model. Titles are kept
 * only where they can name an error: the schema of a param and the shared
 * definitions it refers to.
 */
export function emitValidators(model: GatewayModel): string {
  const set = validatedSet(model);
  const compiled = addSchemas(newAjv(true), set);
  const names = Object.keys(compiled.refs).sort();
  const code = names.length === 0 ? '' : standaloneCode(compiled.ajv, Object.fromEntries(names.map((n) => [n, compiled.refs[n]!])));
  const evm = set.evm.map((m) => [m, exportName('evm', m)] as const);
  const rosetta = set.rosetta.map((e) => [e, exportName('rosetta', e)] as const);
  const blockbook = set.blockbook.map(({ endpoint }) => {
    const p = compiled.blockbook.get(endpoint)!;
    const params = objectText(Object.keys(p.params).sort().map((k) => [k, JSON.stringify(p.params[k])] as const), '      ');
    return [endpoint, `{ validate: ${exportName('blockbook', endpoint)}, path: ${JSON.stringify(p.path)}, params: ${params} }`] as const;
  });
  return [
    `// Generated by \`gateway build\` from ${model.source}: request validators compiled by ajv from`,
    '// schema/specs (with schema/specs/overlay.yaml). Do not edit; change the specs or the manifest.',
    code.replace(/^"use strict";\n?/, ''),
    `export default {`,
    `  evm: ${objectText(evm, '  ')},`,
    `  rosetta: ${objectText(rosetta, '  ')},`,
    `  blockbook: ${objectText(blockbook, '  ')},`,
    `};`,
    '',
  ].join('\n');
}
