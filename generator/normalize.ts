// Manifest value (already validated) -> the normalized, frozen GatewayModel.
// Defaults are filled here once; emit/ never looks at the raw manifest.
import type { Limits, ServedTip, Template, UpstreamRole } from '../runtime/types.ts';
import type { ChainConfig, ChainSettings, UpstreamConfig, UpstreamSettings } from '../runtime/chain-types.gen.ts';
import { chainSettings, limitFields, settingValue, upstreamSettings, type Field } from './chain-types.ts';
import type { ChainModel, GatewayModel, ListenerModel, UpstreamModel } from './model.ts';
import { createHash } from 'node:crypto';
import { parseTemplate } from './template.ts';
import { parseRate } from '../runtime/config/rate.ts';
import schema from '../schema/gateway.schema.json' with { type: 'json' };

// The YAML-shaped input, as the schema admits it (see schema/gateway.schema.json;
// a chain's and an upstream's types are generated from it: runtime/chain-types.gen.ts).
type PortConfig = string | number;
export interface GatewayConfig {
  version: 1;
  listeners: Record<string, { host?: string; port: PortConfig }>;
  keys?: string;
  limits?: Partial<Limits>;
  cors?: { origins?: string[] };
  methodSets?: Record<string, string[]>;
  admin?: { host?: string; port: PortConfig };
  health?: { intervalMs?: number; timeoutMs?: number };
  rateLimit?: string;
  drainTimeoutMs?: number;
  cache?: { maxBytes?: number; headPollMs?: number; batch?: number; redis?: boolean };
  trustedProxies?: string[];
  jwtAudience?: string;
  credits?: Record<string, number>;
  keyCache?: { size?: number; ttlMs?: number };
  websocket?: { maxConnectionsPerKey?: number; maxSubscriptionsPerConnection?: number; maxInflightPerConnection?: number; maxBufferedBytes?: number; pingIntervalMs?: number };
  chains: ChainConfig[];
}

/**
 * A default, read from the schema: the schema is the single source of truth,
 * and the manifest reference (docs/manifest.md) is rendered from it.
 */
function schemaDefault<T>(...path: string[]): T {
  let node: unknown = schema;
  for (const seg of path) node = (node as Record<string, unknown>)?.[seg];
  const d = (node as { default?: unknown } | undefined)?.default;
  if (d === undefined) throw new Error(`schema has no default at ${path.join('.')}`);
  return d as T;
}
const CHAIN_SCHEMA = ['properties', 'chains', 'items', 'properties'];
const UPSTREAM_SCHEMA = [...CHAIN_SCHEMA, 'upstreams', 'items', 'anyOf', '1', 'properties'];

/** The top-level limits' defaults, one per field of the schema's limits. */
export const DEFAULT_LIMITS: Limits = settingsOf<Limits>(limitFields(), {});
/** Cardano's security parameter k: a block this deep can no longer be rolled back (Rosetta's default finality). */
const CARDANO_SECURITY_PARAMETER = 2160;

export const DEFAULTS = {
  listenerHost: schemaDefault<string>('properties', 'listeners', 'additionalProperties', 'properties', 'host'),
  adminHost: schemaDefault<string>('properties', 'admin', 'properties', 'host'),
  keysFile: schemaDefault<string>('properties', 'keys'),
  corsOrigins: schemaDefault<readonly string[]>('properties', 'cors', 'properties', 'origins'),
  healthIntervalMs: schemaDefault<number>('properties', 'health', 'properties', 'intervalMs'),
  healthTimeoutMs: schemaDefault<number>('properties', 'health', 'properties', 'timeoutMs'),
  drainTimeoutMs: schemaDefault<number>('properties', 'drainTimeoutMs'),
  weight: schemaDefault<number>(...UPSTREAM_SCHEMA, 'weight'),
  role: schemaDefault<UpstreamRole>(...UPSTREAM_SCHEMA, 'role'),
  archive: schemaDefault<boolean>(...UPSTREAM_SCHEMA, 'archive'),
  servedTip: schemaDefault<ServedTip>(...CHAIN_SCHEMA, 'servedTip'),
  pruneDepth: schemaDefault<number>(...CHAIN_SCHEMA, 'pruneDepth'),
  cacheMaxBytes: schemaDefault<number>('properties', 'cache', 'properties', 'maxBytes'),
  cacheHeadPollMs: schemaDefault<number>('properties', 'cache', 'properties', 'headPollMs'),
  cacheBatch: schemaDefault<number>('properties', 'cache', 'properties', 'batch'),
  cacheRedis: schemaDefault<boolean>('properties', 'cache', 'properties', 'redis'),
  keyCacheSize: schemaDefault<number>('properties', 'keyCache', 'properties', 'size'),
  keyCacheTtlMs: schemaDefault<number>('properties', 'keyCache', 'properties', 'ttlMs'),
  wsMaxConnectionsPerKey: schemaDefault<number>('properties', 'websocket', 'properties', 'maxConnectionsPerKey'),
  wsMaxSubscriptionsPerConnection: schemaDefault<number>('properties', 'websocket', 'properties', 'maxSubscriptionsPerConnection'),
  wsMaxInflightPerConnection: schemaDefault<number>('properties', 'websocket', 'properties', 'maxInflightPerConnection'),
  wsMaxBufferedBytes: schemaDefault<number>('properties', 'websocket', 'properties', 'maxBufferedBytes'),
  wsPingIntervalMs: schemaDefault<number>('properties', 'websocket', 'properties', 'pingIntervalMs'),
  wsMaxAddresses: schemaDefault<number>(...CHAIN_SCHEMA, 'websocket', 'anyOf', '1', 'properties', 'maxAddresses'),
  wsMaxAddressesPerKey: schemaDefault<number>(...CHAIN_SCHEMA, 'websocket', 'anyOf', '1', 'properties', 'maxAddressesPerKey'),
  wsSpareSocketMs: schemaDefault<number>(...CHAIN_SCHEMA, 'websocket', 'anyOf', '1', 'properties', 'spareSocketMs'),
} as const;

/** Code-unit order: the same on every machine, unlike localeCompare. */
const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}

const portTemplate = (p: PortConfig): Template => parseTemplate(String(p));

/** Only fields that are present: a field written as `undefined` would differ from a missing one in the model. */
function withoutUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/**
 * The settings of a chain or upstream, in schema order: every field the
 * schema lists for it but those the model builds itself (chain-types.ts),
 * the manifest's value else the schema's default; an object left out is null.
 */
function settingsOf<T>(fields: readonly Field[], written: object): T {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const v = settingValue(f, (written as Record<string, unknown>)[f.name]);
    if (v !== undefined) out[f.name] = v;
  }
  return out as T;
}

/** The settings whose default depends on the chain, or whose value the build puts in canonical form (COMPUTED_DEFAULTS). */
function workedOut(c: ChainConfig): Partial<ChainSettings> {
  if (c.interface === 'blockbook') {
    // On (true, or its bounds): the bounds, every one filled, so the runtime reads them without a fallback.
    const ws = c.websocket ?? false;
    if (ws === false) return {};
    const set = ws === true ? {} : ws;
    return { websocket: { maxAddresses: set.maxAddresses ?? DEFAULTS.wsMaxAddresses, maxAddressesPerKey: set.maxAddressesPerKey ?? DEFAULTS.wsMaxAddressesPerKey, spareSocketMs: set.spareSocketMs ?? DEFAULTS.wsSpareSocketMs } };
  }
  if (c.interface !== 'evm-jsonrpc') return {};
  return {
    // No schema default: a pool rewrites, so that latest is the block eth_blockNumber names; one upstream is its own tip.
    rewriteTags: c.rewriteTags ?? c.upstreams.length > 1,
    // No schema default: it depends on the pool. One upstream has nothing to broadcast to.
    broadcast: c.broadcast ?? (c.upstreams.length > 1 ? 'all' : 'one'),
    ...(c.quorum === undefined ? {} : { quorum: { methods: [...new Set(c.quorum.methods)].sort(byCodeUnit), of: c.quorum.of } }),
  };
}

function buildUpstream(chainPath: string, u: string | UpstreamConfig, index: number): UpstreamModel {
  const o: UpstreamConfig = typeof u === 'string' ? { url: u } : u;
  // Lower-cased first, then sorted, so the model's key order does not depend on how the manifest spelled them.
  const raw = Object.entries(o.headers ?? {}).map(([name, v]) => [name.toLowerCase(), v] as const);
  raw.sort((a, b) => byCodeUnit(a[0], b[0]));
  const headers: Record<string, Template> = {};
  for (const [name, v] of raw) headers[name] = parseTemplate(v);
  const rate = o.rateLimit === undefined ? {} : { rateLimit: upstreamRate(o.rateLimit) };
  const ws = o.ws === undefined ? {} : { ws: parseTemplate(o.ws) };
  return { name: `${chainPath}#${index}`, url: parseTemplate(o.url), ...ws, ...settingsOf<UpstreamSettings>(upstreamSettings(), o), ...rate, headers };
}

/** An upstream's rateLimit (the schema's pattern: N/s or N/min) as requests a second. */
function upstreamRate(text: string): number {
  const r = parseRate(text)!;
  return (r.limit * 1000) / r.windowMs;
}

/**
 * Builds the model from a manifest value that passed validateManifest.
 * `source` is the manifest path as given (relative); it goes into the generated header.
 * `text` is the manifest as read: its hash identifies the build.
 */
export function buildModel(value: unknown, source: string, text: string): GatewayModel {
  const doc = value as GatewayConfig;
  const limits: Limits = { ...DEFAULT_LIMITS, ...doc.limits };
  const sets = doc.methodSets ?? {};
  const chains: ChainModel[] = doc.chains.map((c, i) => {
    const chain: ChainModel = {
      path: c.path,
      interface: c.interface,
      listener: c.listener,
      source: `chains[${i}]`,
      limits: { ...limits, ...c.limits },
      validate: (c.validate ?? 'params') === 'params',
      upstreams: c.upstreams.map((u, j) => buildUpstream(c.path, u, j)),
      ...settingsOf<ChainSettings>(chainSettings(c.interface), { ...c, ...workedOut(c) }),
    };
    switch (c.interface) {
      case 'evm-jsonrpc': {
        const named = typeof c.methods === 'string';
        const list = (named ? sets[c.methods as string] : (c.methods as string[] | undefined)) ?? [];
        return withoutUndefined({
          ...chain,
          methods: [...new Set(list)].sort(byCodeUnit),
          methodsSource: named ? `methodSets.${c.methods as string}` : `chains[${i}].methods`,
          // Only with a top-level cache block, so a manifest without one builds the model it always did.
          cache: doc.cache === undefined ? undefined : c.cache !== 'off',
          finality: doc.cache === undefined ? undefined : c.finality === undefined || c.finality === 'tag' ? null : c.finality.depth,
        });
      }
      case 'rosetta':
        return withoutUndefined({
          ...chain,
          cache: doc.cache === undefined ? undefined : c.cache !== 'off',
          finality: doc.cache === undefined ? undefined : typeof c.finality === 'object' ? c.finality.depth : CARDANO_SECURITY_PARAMETER,
        });
      case 'blockbook':
        return withoutUndefined({ ...chain, cache: doc.cache === undefined ? undefined : c.cache !== 'off' });
      default:
        return unknownInterface(c);
    }
  });
  // One path may be served on two listeners; listener breaks the tie.
  chains.sort((a, b) => byCodeUnit(a.path, b.path) || byCodeUnit(a.listener, b.listener));

  const listeners: ListenerModel[] = Object.keys(doc.listeners)
    .sort(byCodeUnit)
    .map((name) => ({
      name,
      host: parseTemplate(doc.listeners[name]!.host ?? DEFAULTS.listenerHost),
      port: portTemplate(doc.listeners[name]!.port),
      chains: chains.filter((c) => c.listener === name).map((c) => c.path),
    }));

  const model: GatewayModel = {
    version: 1,
    source,
    manifestSha256: createHash('sha256').update(text).digest('hex'),
    keysFile: parseTemplate(doc.keys ?? DEFAULTS.keysFile),
    listeners,
    chains,
    corsOrigins: [...(doc.cors?.origins ?? DEFAULTS.corsOrigins)],
    admin: doc.admin ? { host: parseTemplate(doc.admin.host ?? DEFAULTS.adminHost), port: portTemplate(doc.admin.port) } : null,
    health: {
      intervalMs: doc.health?.intervalMs ?? DEFAULTS.healthIntervalMs,
      timeoutMs: doc.health?.timeoutMs ?? DEFAULTS.healthTimeoutMs,
    },
    // The schema's pattern (N/s, N/min, N/h) is a subset of what parseRate reads.
    rateLimit: doc.rateLimit === undefined ? null : parseRate(doc.rateLimit),
    ...(doc.credits === undefined || Object.keys(doc.credits).length === 0 ? {} : { credits: Object.fromEntries(Object.entries(doc.credits).sort(([a], [b]) => byCodeUnit(a, b))) }),
    ...(doc.trustedProxies === undefined ? {} : { trustedProxies: [...doc.trustedProxies] }),
    ...(doc.keyCache === undefined ? {} : { keyCache: { size: doc.keyCache.size ?? DEFAULTS.keyCacheSize, ttlMs: doc.keyCache.ttlMs ?? DEFAULTS.keyCacheTtlMs } }),
    ...(doc.jwtAudience === undefined ? {} : { jwtAudience: doc.jwtAudience }),
    drainTimeoutMs: doc.drainTimeoutMs ?? DEFAULTS.drainTimeoutMs,
    // With a websocket block or a chain (of any kind the schema lets say so) that takes WebSockets: the limits, every one filled.
    ...(doc.websocket === undefined && !doc.chains.some((c) => 'websocket' in c && c.websocket !== undefined && c.websocket !== false)
      ? {}
      : {
          websocket: {
            maxConnectionsPerKey: doc.websocket?.maxConnectionsPerKey ?? DEFAULTS.wsMaxConnectionsPerKey,
            maxSubscriptionsPerConnection: doc.websocket?.maxSubscriptionsPerConnection ?? DEFAULTS.wsMaxSubscriptionsPerConnection,
            maxInflightPerConnection: doc.websocket?.maxInflightPerConnection ?? DEFAULTS.wsMaxInflightPerConnection,
            maxBufferedBytes: doc.websocket?.maxBufferedBytes ?? DEFAULTS.wsMaxBufferedBytes,
            pingIntervalMs: doc.websocket?.pingIntervalMs ?? DEFAULTS.wsPingIntervalMs,
          },
        }),
    cache:
      doc.cache === undefined
        ? null
        : {
            maxBytes: doc.cache.maxBytes ?? DEFAULTS.cacheMaxBytes,
            headPollMs: doc.cache.headPollMs ?? DEFAULTS.cacheHeadPollMs,
            batch: doc.cache.batch ?? DEFAULTS.cacheBatch,
            redis: doc.cache.redis ?? DEFAULTS.cacheRedis,
          },
  };
  return deepFreeze(model);
}

/** The compiler sees every interface kind handled above; a new one fails to build until it is. */
function unknownInterface(c: never): never {
  throw new Error(`no model for interface '${String((c as ChainConfig).interface)}'`);
}
