// The normalized model: defaults filled once, shorthands canonical, names
// resolved, sorted, frozen, deterministic; and the emitted TypeScript is
// byte-identical run to run.
import { describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { loadManifest } from '../../../generator/load.ts';
import { validateManifest } from '../../../generator/validate.ts';
import { buildModel, DEFAULT_LIMITS, DEFAULTS } from '../../../generator/normalize.ts';
import { emitServerSource } from '../../../generator/emit/index.ts';
import { SPEC_METHODS } from '../../../generator/known-methods.ts';
import type { GatewayModel } from '../../../generator/model.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

const GOLDEN = join(PROJECT_ROOT, 'test/golden/gateway.model.json');

function model(file: string, text?: string): GatewayModel {
  const loaded = loadManifest(join(PROJECT_ROOT, file), text);
  expect(validateManifest(loaded)).toEqual([]);
  return buildModel(loaded.value, file, loaded.text);
}
const shipped = () => model('gateway.yaml');
const json = (m: GatewayModel) => `${JSON.stringify(m, null, 2)}\n`;

describe('buildModel', () => {
  it('serves every chain of the interface spec, each EVM chain with exactly the 30 methods', () => {
    const m = shipped();
    expect(m.chains.map((c) => `${c.listener}/${c.path}:${c.interface}`)).toEqual([
      'explorer/bitcoin:blockbook',
      'rpc/bsc:evm-jsonrpc',
      'rpc/cardano:rosetta',
      'rpc/cardano-preprod:rosetta',
      'rpc/cardano-preview:rosetta',
      'rpc/ethereum:evm-jsonrpc',
      'rpc/ethereum-goerli:evm-jsonrpc',
      'rpc/ethereum-sepolia:evm-jsonrpc',
      'rpc/gnosis:evm-jsonrpc',
      'rpc/gnosis-chiado:evm-jsonrpc',
      'rpc/polygon:evm-jsonrpc',
      'rpc/polygon-mumbai:evm-jsonrpc',
    ]);
    const evm = m.chains.filter((x) => x.interface === 'evm-jsonrpc');
    expect(evm.map((c) => [c.path, c.chainId])).toEqual([
      ['bsc', 56], ['ethereum', 1], ['ethereum-goerli', 5], ['ethereum-sepolia', 11155111],
      ['gnosis', 100], ['gnosis-chiado', 10200], ['polygon', 137], ['polygon-mumbai', 80001],
    ]);
    for (const c of evm) {
      expect(c.methods).toHaveLength(30);
      expect(new Set(c.methods)).toEqual(new Set(SPEC_METHODS));
      expect(c.methodsSource).toBe('methodSets.evm');
    }
    expect(m.chains.filter((c) => c.interface === 'rosetta').map((c) => c.network)).toEqual(['mainnet', 'preprod', 'preview']);
    expect(m.listeners.map((l) => [l.name, l.chains.length])).toEqual([['explorer', 1], ['rpc', 11]]);
  });

  it('fills defaults (read from the schema), keeps variables unresolved, and is frozen', () => {
    const m = shipped();
    const eth = m.chains.find((c) => c.path === 'ethereum')!;
    expect(eth.limits).toEqual({ maxBodyBytes: 1048576, maxBatchSize: 100, timeoutMs: 30000, bodyTimeoutMs: 60000, maxPageSize: 1000, maxParamsDepth: 32, maxArrayItems: 10000, maxHexBytes: 262144 });
    expect(eth.validate).toBe(true);
    expect(DEFAULT_LIMITS).toEqual(eth.limits);
    expect(eth.upstreams[0]).toEqual({
      name: 'ethereum#0',
      url: { parts: [{ env: 'ETHEREUM_RPC_URL', default: 'http://127.0.0.1:8546' }] },
      weight: 1,
      role: 'primary',
      archive: false,
      connections: 256,
      idleTimeoutMs: 55000,
      headers: {},
    });
    expect(m.listeners[0]!.host).toEqual({ parts: ['0.0.0.0'] });
    expect(m.listeners[1]!.port).toEqual({ parts: [{ env: 'RPC_PORT', default: '8545' }] });
    expect(m.admin).toEqual({ host: { parts: [{ env: 'ADMIN_HOST', default: '127.0.0.1' }] }, port: { parts: [{ env: 'ADMIN_PORT', default: '9100' }] } });
    expect(m.rateLimit).toBeNull();
    expect(Object.isFrozen(m) && Object.isFrozen(eth) && Object.isFrozen(eth.methods) && Object.isFrozen(eth.upstreams[0]!.url.parts)).toBe(true);
    expect(JSON.stringify(m)).not.toContain(PROJECT_ROOT);
  });

  it('matches the committed golden model of gateway.yaml (UPDATE_GOLDEN=1 rewrites it)', () => {
    const text = json(shipped());
    if (process.env.UPDATE_GOLDEN === '1') writeFileSync(GOLDEN, text);
    expect(text).toBe(readFileSync(GOLDEN, 'utf8'));
    expect(json(shipped())).toBe(text);
  });

  it('does not depend on the order of listeners, chains, methods or headers in the manifest', () => {
    const doc = parse(readFileSync(join(PROJECT_ROOT, 'test/fixtures/valid/upstream-objects.yaml'), 'utf8'));
    doc.listeners = Object.fromEntries(Object.entries(doc.listeners).reverse());
    doc.chains.reverse();
    for (const c of doc.chains) {
      if (Array.isArray(c.methods)) c.methods.reverse();
      for (const u of c.upstreams) if (u.headers) u.headers = Object.fromEntries(Object.entries(u.headers).reverse());
    }
    // The text differs, so its hash does; everything the text means must not.
    const strip = (m: GatewayModel) => JSON.stringify(m, (k, v) => (k === 'source' || k === 'methodsSource' || k === 'manifestSha256' ? undefined : v));
    const a = model('test/fixtures/valid/upstream-objects.yaml');
    const b = model('test/fixtures/valid/upstream-objects.yaml', stringify(doc));
    expect(strip(b)).toBe(strip(a));
    expect(b.manifestSha256).not.toBe(a.manifestSha256);
  });

  it('records the SHA-256 of the manifest text, which identifies the build', () => {
    const text = readFileSync(join(PROJECT_ROOT, 'gateway.yaml'), 'utf8');
    expect(shipped().manifestSha256).toBe(createHash('sha256').update(text).digest('hex'));
    expect(model('gateway.yaml', `${text}# one more line\n`).manifestSha256).not.toBe(shipped().manifestSha256);
  });

  it('turns shorthands into one form: upstream objects, lower-case sorted headers, sorted deduplicated methods, rates', () => {
    const m = model('test/fixtures/valid/upstream-objects.yaml');
    expect(m.rateLimit).toEqual({ limit: 6000, windowMs: 60_000 });
    expect(m.health).toEqual({ intervalMs: 1000, timeoutMs: 500 });
    expect(m.drainTimeoutMs).toBe(0);
    const [explorer, rpc] = m.chains;
    expect(explorer).toMatchObject({ path: 'ethereum', listener: 'explorer', interface: 'blockbook', sendtx: true, source: 'chains[1]' });
    expect(rpc).toMatchObject({ path: 'ethereum', listener: 'rpc', chainId: 1, maxLag: 0, retries: 2, methodsSource: 'chains[0].methods' });
    expect(rpc!.methods).toEqual(['eth_call', 'eth_chainId', 'zks_getL1BatchNumber']);
    expect(rpc!.limits).toEqual({ ...DEFAULT_LIMITS, timeoutMs: 5000 });
    expect(rpc!.upstreams.map((u) => [u.name, u.weight, u.role])).toEqual([
      ['ethereum#0', 2, 'primary'],
      ['ethereum#1', 1, 'fallback'],
      ['ethereum#2', 1, 'primary'],
    ]);
    // A socket only where the manifest names one (issue 46), a template as the url is.
    expect(rpc!.upstreams.map((u) => u.ws)).toEqual([{ parts: [{ env: 'ETH_A_WS' }] }, undefined, undefined]);
    expect(Object.keys(rpc!.upstreams[1]!.headers)).toEqual(['authorization', 'x-api-key']);
    expect(rpc!.upstreams[1]!.headers.authorization).toEqual({ parts: ['Bearer ', { env: 'ETH_B_TOKEN' }] });
    expect(m.listeners.map((l) => l.name)).toEqual(['explorer', 'rpc']);
    expect(m.admin).toEqual({ host: { parts: [DEFAULTS.adminHost] }, port: { parts: ['0'] } });
  });

  it('fills the pool settings (issue 33): the manifest\'s where set, else the defaults, broadcast by the number of upstreams', () => {
    const m = model('test/fixtures/valid/pool.yaml');
    const chain = (path: string) => m.chains.find((c) => c.path === path)!;
    const pool = (path: string) => {
      const c = chain(path);
      return { servedTip: c.servedTip, rewriteTags: c.rewriteTags, pruneDepth: c.pruneDepth, hedge: c.hedge, broadcast: c.broadcast, quorum: c.quorum };
    };
    expect(pool('ethereum')).toEqual({ servedTip: 'majority', rewriteTags: true, pruneDepth: 64, hedge: { afterMs: 250 }, broadcast: 'one', quorum: { methods: ['eth_call', 'eth_getBalance'], of: 2 } });
    // Nothing set: the defaults, broadcast all and rewriteTags with two upstreams, one and no rewrite with one.
    expect(pool('gnosis')).toEqual({ servedTip: 'all', rewriteTags: true, pruneDepth: 128, hedge: null, broadcast: 'all', quorum: null });
    expect(pool('polygon')).toEqual({ servedTip: 'all', rewriteTags: false, pruneDepth: 32, hedge: null, broadcast: 'one', quorum: null });
    expect([DEFAULTS.servedTip, DEFAULTS.pruneDepth, DEFAULTS.archive]).toEqual(['all', 128, false]);
    // Blockbook and Rosetta take servedTip and hedge only; the EVM-only fields are absent, not defaulted.
    expect(pool('bitcoin')).toEqual({ servedTip: 'majority', rewriteTags: undefined, pruneDepth: undefined, hedge: { afterMs: 'p95' }, broadcast: undefined, quorum: undefined });
    expect(pool('cardano')).toEqual({ servedTip: 'all', rewriteTags: undefined, pruneDepth: undefined, hedge: { afterMs: 100 }, broadcast: undefined, quorum: undefined });
    for (const key of ['rewriteTags', 'pruneDepth', 'broadcast', 'quorum']) expect(key in chain('bitcoin') || key in chain('cardano'), key).toBe(false);
    expect(chain('ethereum').upstreams.map((u) => [u.name, u.archive])).toEqual([['ethereum#0', false], ['ethereum#1', false], ['ethereum#2', true]]);
    expect(chain('bitcoin').upstreams.map((u) => u.archive)).toEqual([false, false]);
    expect(Object.isFrozen(chain('ethereum').quorum!.methods) && Object.isFrozen(chain('bitcoin').hedge)).toBe(true);
  });

  it('fills the websocket limits (issue 38) only where a chain takes WebSockets or the manifest has the block', () => {
    const base = readFileSync(join(PROJECT_ROOT, 'test/fixtures/valid/pool.yaml'), 'utf8');
    const without = model('test/fixtures/valid/pool.yaml');
    expect('websocket' in without).toBe(false);
    // Each EVM chain carries the setting, its schema default (false) filled, as every setting does.
    for (const c of without.chains) expect(c.interface !== 'evm-jsonrpc' || c.websocket === false, c.path).toBe(true);
    const doc = parse(base);
    doc.chains.find((c: { path: string }) => c.path === 'polygon').websocket = true;
    const on = model('test/fixtures/valid/pool.yaml', stringify(doc));
    expect(on.websocket).toEqual({ maxConnectionsPerKey: 100, maxSubscriptionsPerConnection: 100, maxInflightPerConnection: 64, maxBufferedBytes: 4194304, pingIntervalMs: 30000 });
    expect(on.chains.filter((c) => c.websocket === true).map((c) => c.path)).toEqual(['polygon']);
    doc.websocket = { maxConnectionsPerKey: 3, pingIntervalMs: 5000 };
    expect(model('test/fixtures/valid/pool.yaml', stringify(doc)).websocket).toEqual({ maxConnectionsPerKey: 3, maxSubscriptionsPerConnection: 100, maxInflightPerConnection: 64, maxBufferedBytes: 4194304, pingIntervalMs: 5000 });
    expect(emitServerSource(on)).toContain('websocket: true');
  });

  it("fills a blockbook chain's address bounds (issue 46): true is on with the defaults, an object on with its own, each left out filled", () => {
    const doc = parse(readFileSync(join(PROJECT_ROOT, 'test/fixtures/valid/pool.yaml'), 'utf8'));
    const bitcoin = doc.chains.find((c: { interface: string }) => c.interface === 'blockbook');
    const built = () => model('test/fixtures/valid/pool.yaml', stringify(doc)).chains.find((c) => c.path === bitcoin.path)!;
    expect(built().websocket).toBe(false);
    bitcoin.websocket = true;
    expect(built().websocket).toEqual({ maxAddresses: DEFAULTS.wsMaxAddresses, maxAddressesPerKey: DEFAULTS.wsMaxAddressesPerKey, spareSocketMs: DEFAULTS.wsSpareSocketMs });
    expect([DEFAULTS.wsMaxAddresses, DEFAULTS.wsMaxAddressesPerKey, DEFAULTS.wsSpareSocketMs]).toEqual([10_000, 1000, 60_000]);
    bitcoin.websocket = { maxAddresses: 2500 };
    const on = model('test/fixtures/valid/pool.yaml', stringify(doc));
    expect(on.chains.find((c) => c.path === bitcoin.path)!.websocket).toEqual({ maxAddresses: 2500, maxAddressesPerKey: 1000, spareSocketMs: 60_000 });
    // The chain takes WebSockets: the top-level limits are filled too, and the route carries its bounds.
    expect(on.websocket).toBeDefined();
    expect(emitServerSource(on)).toContain('websocket: { "maxAddresses": 2500, "maxAddressesPerKey": 1000, "spareSocketMs": 60000 }');
  });

  it('records the manifest path as given, never an absolute one', () => {
    const loaded = loadManifest(join(PROJECT_ROOT, 'test/fixtures/valid/minimal.yaml'));
    const m = buildModel(loaded.value, 'test/fixtures/valid/minimal.yaml', loaded.text);
    expect(m.source).toBe('test/fixtures/valid/minimal.yaml');
    expect(m.keysFile).toEqual({ parts: ['./keys.yaml'] });
    expect(m.admin).toBeNull();
    expect(m.chains[0]!.chainId).toBeUndefined();
    expect('chainId' in m.chains[0]!).toBe(false);
  });

  it('emits byte-identical TypeScript for the same manifest', () => {
    const a = emitServerSource(shipped());
    const b = emitServerSource(shipped());
    expect(a === b).toBe(true);
    expect(a.startsWith('// Generated by `gateway build` from gateway.yaml. DO NOT EDIT.')).toBe(true);
    // One Set shared by the eight chains that name methodSets.evm.
    expect(a.match(/new Set\(/g)).toHaveLength(1);
    expect(a).not.toMatch(/\d{4}-\d\d-\d\dT/);
  });
});
