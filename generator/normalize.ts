// Manifest value (already validated) -> the normalized, frozen GatewayModel.
// Defaults are filled here once; emit/ never looks at the raw manifest.
import type { Limits, RosettaNetwork, InterfaceKind, UpstreamRole } from '../runtime/types.ts';
import type { ChainModel, GatewayModel, ListenerModel, UpstreamModel } from './model.ts';
import { parseTemplate } from './template.ts';
import { parseRate } from '../runtime/rate.ts';

export const DEFAULT_LIMITS: Limits = { maxBodyBytes: 1_048_576, maxBatchSize: 100, timeoutMs: 30_000, maxPageSize: 1000 };

type Obj = Record<string, any>;
const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Obj)[k]);
  }
  return v;
}

function portTemplate(p: unknown) {
  return parseTemplate(typeof p === 'number' ? String(p) : String(p));
}

export function buildModel(doc: Obj, source: string): GatewayModel {
  const limits: Limits = { ...DEFAULT_LIMITS, ...(doc.limits ?? {}) };
  const sets: Obj = doc.methodSets ?? {};
  const chains: ChainModel[] = (doc.chains as Obj[]).map((c, i) => {
    const upstreams: UpstreamModel[] = (c.upstreams as unknown[]).map((u, j) => {
      const o: Obj = typeof u === 'string' ? { url: u } : (u as Obj);
      const headers: Record<string, ReturnType<typeof parseTemplate>> = {};
      for (const name of Object.keys(o.headers ?? {}).sort(byCodeUnit)) headers[name.toLowerCase()] = parseTemplate(String(o.headers[name]));
      return { name: `${c.path}#${j}`, url: parseTemplate(o.url), weight: o.weight ?? 1, role: (o.role ?? 'primary') as UpstreamRole, connections: o.connections ?? 256, headers };
    });
    const chain: Record<string, unknown> = {
      path: c.path,
      interface: c.interface as InterfaceKind,
      listener: c.listener,
      source: `chains[${i}]`,
      limits: { ...limits, ...(c.limits ?? {}) },
      upstreams,
      maxLag: c.maxLag ?? 5,
      retries: c.retries ?? 1,
    };
    if (c.interface === 'evm-jsonrpc') {
      chain.chainId = c.chainId;
      const list: string[] = typeof c.methods === 'string' ? sets[c.methods] : c.methods;
      chain.methods = [...new Set(list)].sort(byCodeUnit);
      chain.methodsSource = typeof c.methods === 'string' ? `methodSets.${c.methods}` : `chains[${i}].methods`;
    }
    if (c.interface === 'rosetta') chain.network = c.network as RosettaNetwork;
    if (c.interface === 'blockbook') chain.sendtx = c.sendtx === true;
    return chain as unknown as ChainModel;
  });
  chains.sort((a, b) => byCodeUnit(a.path, b.path) || byCodeUnit(a.listener, b.listener));
  const listeners: ListenerModel[] = Object.keys(doc.listeners)
    .sort(byCodeUnit)
    .map((name) => ({
      name,
      host: parseTemplate(doc.listeners[name].host ?? '0.0.0.0'),
      port: portTemplate(doc.listeners[name].port),
      chains: chains.filter((c) => c.listener === name).map((c) => c.path),
    }));
  const model: GatewayModel = {
    version: 1,
    source,
    keysFile: doc.keys ?? './keys.yaml',
    listeners,
    chains,
    corsOrigins: doc.cors?.origins ?? ['*'],
    admin: doc.admin ? { host: parseTemplate(doc.admin.host ?? '127.0.0.1'), port: portTemplate(doc.admin.port) } : null,
    health: { intervalMs: doc.health?.intervalMs ?? 5000, timeoutMs: doc.health?.timeoutMs ?? 2000 },
    rateLimit: typeof doc.rateLimit === 'string' ? parseRate(doc.rateLimit) : null,
    drainTimeoutMs: doc.drainTimeoutMs ?? 10_000,
  };
  return deepFreeze(model);
}
