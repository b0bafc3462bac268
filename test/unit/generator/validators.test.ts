// The validators the generator emits (ajv standalone code, as bundled) against
// ajv compiling the same schemas here: on values generated from the schemas
// and on mutations of them, both say the same, with the same errors. Also:
// the emitted module is deterministic, holds only what the manifest allows,
// and the overlay's deliberate changes do what they say.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkManifestFile } from '../../../generator/check.ts';
import { loadSpecs, SPECS_DIR } from '../../../generator/specs.ts';
import { addSchemas, emitValidators, newAjv, validatedSet, type CompiledSchemas } from '../../../generator/validators.ts';
import type { GatewayModel } from '../../../generator/model.ts';
import type { ValidateFn, ValidatorTables } from '../../../runtime/config/validators.ts';
import { arbitraryOf, mutate, mutation } from '../../support/schema-arbitrary.ts';
import { PROJECT_ROOT, SPECS } from '../../support/index.ts';

let model: GatewayModel;
let emitted: ValidatorTables;
let reference: CompiledSchemas;

function shippedModel(): GatewayModel {
  const r = checkManifestFile(join(PROJECT_ROOT, 'gateway.yaml'));
  if (!r.ok) throw new Error('gateway.yaml does not check');
  return r.model;
}

beforeAll(async () => {
  model = shippedModel();
  const text = emitValidators(model);
  // As the bundle gives it: a require for ajv's runtime helpers.
  const dir = join(PROJECT_ROOT, '.tmp', 'validators');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `validators-${process.pid}.mjs`);
  writeFileSync(file, `import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\n${text}`);
  emitted = ((await import(pathToFileURL(file).href)) as { default: ValidatorTables }).default;
  reference = addSchemas(newAjv(false), validatedSet(model));
});

/** The reference validator for an export: the same schema, compiled here. */
function ref(kind: 'evm' | 'rosetta' | 'blockbook', name: string): ValidateFn {
  const id = `${kind}.${kind === 'rosetta' ? name.replace(/\//g, '_') : name}`;
  const v = reference.ajv.getSchema(id);
  if (v === undefined) throw new Error(`no schema ${id}`);
  return v as unknown as ValidateFn;
}

function resolver(kind: 'evm' | 'rosetta' | 'blockbook') {
  const specs = loadSpecs();
  return (r: string): Record<string, unknown> => {
    const hash = r.indexOf('#');
    const doc = kind === 'evm' ? specs.openrpc : kind === 'rosetta' ? specs.rosetta : specs.blockbook;
    let node: any = doc;
    for (const seg of r.slice(hash + 2).split('/')) node = node[seg.replace(/~1/g, '/').replace(/~0/g, '~')];
    return node as Record<string, unknown>;
  };
}

function schemaOf(kind: 'evm' | 'rosetta' | 'blockbook', name: string): Record<string, unknown> {
  const id = `${kind}.${kind === 'rosetta' ? name.replace(/\//g, '_') : name}`;
  return reference.ajv.getSchema(id)!.schema as Record<string, unknown>;
}

/** Runs generated and mutated values through both validators; returns how many were valid and invalid. */
function agree(kind: 'evm' | 'rosetta' | 'blockbook', name: string, fn: ValidateFn, runs: number): { valid: number; invalid: number } {
  const refFn = ref(kind, name);
  const value = arbitraryOf(schemaOf(kind, name), resolver(kind));
  const counts = { valid: 0, invalid: 0 };
  fc.assert(
    fc.property(value, mutation, fc.boolean(), (v, m, doMutate) => {
      const input = doMutate ? mutate(v, m) : v;
      const a = fn(input);
      const b = refFn(input);
      expect(a, `${name}: ${JSON.stringify(input)}`).toBe(b);
      if (!a) expect(fn.errors, `${name}: ${JSON.stringify(input)}`).toEqual(refFn.errors);
      counts[a ? 'valid' : 'invalid']++;
    }),
    { numRuns: runs },
  );
  return counts;
}

describe('emitted validators agree with ajv compiling the same schemas', () => {
  it('EVM params, every method of the shipped manifest: generated and mutated values', () => {
    expect(Object.keys(emitted.evm).sort()).toEqual(validatedSet(model).evm);
    expect(Object.keys(emitted.evm)).toHaveLength(30);
    const figures: string[] = [];
    for (const [method, fn] of Object.entries(emitted.evm)) {
      const c = agree('evm', method, fn, 150);
      figures.push(`${method} ${c.valid}/${c.invalid}`);
      expect(c.invalid, method).toBeGreaterThan(0);
      // Every method but those with no params gets some valid values: the generator means something.
      expect(c.valid, method).toBeGreaterThan(0);
    }
    console.log(`validators (valid/invalid per method): ${figures.join(', ')}`);
  });

  it('Rosetta request bodies, every endpoint', () => {
    expect(Object.keys(emitted.rosetta)).toHaveLength(20);
    for (const [endpoint, fn] of Object.entries(emitted.rosetta)) {
      const c = agree('rosetta', endpoint, fn, 60);
      expect(c.invalid, endpoint).toBeGreaterThan(0);
      expect(c.valid, endpoint).toBeGreaterThan(0);
    }
  });

  it('Blockbook parameters, every v2 endpoint', () => {
    expect(Object.keys(emitted.blockbook).length).toBeGreaterThanOrEqual(16);
    for (const [endpoint, v] of Object.entries(emitted.blockbook)) {
      const c = agree('blockbook', endpoint, v.validate, 80);
      expect(c.invalid, endpoint).toBeGreaterThan(0);
      expect(c.valid, endpoint).toBeGreaterThan(0);
    }
  });
});

describe('the emitted module', () => {
  it('is the same text for the same model, and names no absolute path', () => {
    const a = emitValidators(model);
    const b = emitValidators(shippedModel());
    expect(a === b).toBe(true);
    expect(a.startsWith('// Generated by `gateway build` from ')).toBe(true);
    expect(a).not.toContain(PROJECT_ROOT);
  });

  it('holds validators only for what the chains allow and validate', () => {
    const only = {
      ...model,
      chains: model.chains
        .filter((c) => c.interface === 'evm-jsonrpc')
        .slice(0, 2)
        .map((c, i) => ({ ...c, methods: i === 0 ? ['eth_getBalance', 'eth_blockNumber', 'eth_getLogs'] : ['eth_call'], validate: i === 0 })),
    };
    const text = emitValidators(only);
    // eth_call's chain has validate: off; eth_getLogs has no spec (limits only).
    expect(validatedSet(only)).toEqual({ evm: ['eth_blockNumber', 'eth_getBalance'], rosetta: [], blockbook: [] });
    expect(text).toContain('export const evm$eth_getBalance');
    expect(text).not.toContain('evm$eth_call');
    expect(text).not.toContain('rosetta$');
    const none = emitValidators({ ...only, chains: only.chains.map((c) => ({ ...c, validate: false })) });
    expect(none).toContain('evm: {}');
    expect(none).not.toContain('validate');
  });
});

describe('schema/specs', () => {
  it('holds verbatim copies of the test specs (the overlay is the only change)', () => {
    for (const f of ['eth-openrpc.json', 'rosetta-api.json', 'blockbook-openapi.yaml']) {
      const a = createHash('sha256').update(readFileSync(join(SPECS_DIR, f))).digest('hex');
      const b = createHash('sha256').update(readFileSync(join(SPECS, f))).digest('hex');
      expect(a, f).toBe(b);
    }
  });

  it('the overlay tightens and extends as it says', () => {
    const v = emitted.evm;
    const addr = '0x' + 'ab'.repeat(20);
    // A quantity: no leading zeros, upper-case digits as nodes take them.
    expect(v.eth_getBlockByNumber!(['0x1f', false])).toBe(true);
    expect(v.eth_getBlockByNumber!(['0x1F', false])).toBe(true);
    expect(v.eth_getBlockByNumber!(['0x01', false])).toBe(false);
    expect(v.eth_getBlockByNumber!(['0x', false])).toBe(false);
    // Block tags, and nothing else.
    for (const tag of ['earliest', 'finalized', 'safe', 'latest', 'pending']) expect(v.eth_getBalance!([addr, tag]), tag).toBe(true);
    expect(v.eth_getBalance!([addr, 'Latest'])).toBe(false);
    // An address is 20 bytes.
    expect(v.eth_getBalance!(['0x' + 'ab'.repeat(19), 'latest'])).toBe(false);
    expect(v.eth_getBalance!(['0x' + 'ab'.repeat(21), 'latest'])).toBe(false);
    // EIP-1898 objects.
    const hash = '0x' + '12'.repeat(32);
    expect(v.eth_getBalance!([addr, { blockHash: hash }])).toBe(true);
    expect(v.eth_getBalance!([addr, { blockHash: hash, requireCanonical: true }])).toBe(true);
    expect(v.eth_getBalance!([addr, { blockNumber: '0x10' }])).toBe(true);
    expect(v.eth_getBalance!([addr, { blockHash: hash, blockNumber: '0x10' }])).toBe(false);
    expect(v.eth_getBalance!([addr, { blockhash: hash }])).toBe(false);
    // Whole bytes of data; `data` as clients send it; a field in another case refused.
    expect(v.eth_call!([{ to: addr, data: '0x1234' }, 'latest'])).toBe(true);
    expect(v.eth_call!([{ to: addr, data: '0x123' }, 'latest'])).toBe(false);
    expect(v.eth_call!([{ to: addr, TO: addr }, 'latest'])).toBe(false);
    // Optional params: absent or null; state and block overrides.
    expect(v.eth_call!([{ to: addr }])).toBe(true);
    expect(v.eth_call!([{ to: addr }, null])).toBe(true);
    expect(v.eth_call!([{ to: addr }, 'latest', { [addr]: { balance: '0x1', stateDiff: { [hash]: hash } } }, { number: '0x5', time: '0x10' }])).toBe(true);
    expect(v.eth_call!([{ to: addr }, 'latest', { [addr]: { balanse: '0x1' } }])).toBe(false);
    expect(v.eth_call!([{ to: addr }, 'latest', { nonsense: {} }])).toBe(false);
    expect(v.eth_call!([{ to: addr }, 'latest', {}, {}, 'extra'])).toBe(false);
    // Required params the document leaves optional by omission.
    expect(v.eth_getBlockTransactionCountByHash!([])).toBe(false);
    expect(v.eth_blockNumber!([])).toBe(true);
    expect(v.eth_blockNumber!(['latest'])).toBe(false);
  });
});
