// Schema first (ajv, every error), then the checks a schema cannot express
// (cross-references, uniqueness, URLs, ports). Every problem is collected, with
// the line and column of the offending key or value, and sorted; nothing stops
// at the first one.
import { Ajv } from 'ajv';
import schema from '../schema/gateway.schema.json' with { type: 'json' };
import type { LoadedManifest, YamlPath } from './load.ts';
import { didYouMean, getAt, isObj, orList, problemsIn, schemaProblems, sortProblems, whereInList, type Problem, type Report } from '../runtime/config/schema-problems.ts';
import { parseTemplate, templateDefaultValue, TemplateError } from './template.ts';
import type { InterfaceKind, Template } from '../runtime/types.ts';
import { KNOWN_METHODS, NOT_COMPARABLE } from './known-methods.ts';
import { ipList } from '../runtime/keys/key-policy.ts';
import { INTERFACES as MODULES } from '../runtime/kinds/index.ts';

export type { Problem } from './load.ts';
export { didYouMean };

// Compiled once per process. verbose: messages need the failing schema (descriptions, branches).
const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, strictRequired: false, allowUnionTypes: true });
const validateSchema = ajv.compile(schema);

/** Paths the server itself answers on every listener. */
export const RESERVED_PATHS = ['healthz', 'readyz', 'metrics'] as const;

type Obj = Record<string, unknown>;

interface SchemaNode {
  description?: string;
  type?: string | string[];
  enum?: unknown[];
  pattern?: string;
  properties?: Record<string, SchemaNode | boolean>;
  allOf?: { if?: { properties?: { interface?: { const?: string } } }; then?: SchemaNode }[];
}

const CHAIN_SCHEMA = (schema.properties.chains.items as unknown) as SchemaNode;
const INTERFACES = (CHAIN_SCHEMA.properties!.interface as SchemaNode).enum as string[];
const METHOD_NAME = new RegExp((schema.properties.methodSets.additionalProperties.items as SchemaNode).pattern!);

/**
 * Interfaces each interface-specific field belongs to, read from the schema's
 * if/then rules (a field is forbidden with `false` on the other interfaces).
 */
const FIELD_OWNERS: ReadonlyMap<string, readonly string[]> = (() => {
  const forbidden = new Map<string, Set<string>>();
  for (const rule of CHAIN_SCHEMA.allOf ?? []) {
    const iface = rule.if?.properties?.interface?.const;
    if (iface === undefined) continue;
    for (const [field, s] of Object.entries(rule.then?.properties ?? {})) {
      if (s !== false) continue;
      const set = forbidden.get(field) ?? new Set<string>();
      set.add(iface);
      forbidden.set(field, set);
    }
  }
  return new Map([...forbidden].map(([field, on]) => [field, INTERFACES.filter((i) => !on.has(i))]));
})();

/** Whether a kind's upstreams have a socket the gateway uses (its heads, or its own socket protocol's): then `ws` applies. */
const socketKind = (m: (typeof MODULES)[InterfaceKind]): boolean => m.probe.socket !== undefined || m.socket !== null;

/** Names for enum-valued fields, so "unknown Rosetta network 'testnet'" reads as ops think of it. */
const ENUM_NOUNS: Readonly<Record<string, string>> = {
  interface: 'interface',
  network: 'Rosetta network',
  role: 'upstream role',
  servedTip: 'servedTip',
  broadcast: 'broadcast',
};

export function validateManifest(m: LoadedManifest): Problem[] {
  // Without a trustworthy value, schema errors would only be echoes of the syntax error.
  if (m.syntax.length) return sortProblems([...m.syntax]);
  const { report, problems } = problemsIn(m);
  const value = m.value;
  const where = whereInList(value, 'chains', 'path');

  if (!validateSchema(value)) {
    schemaProblems(validateSchema.errors ?? [], value, report, where, {
      forbidden: (field, base) => `${where(base)}: '${field}' applies to ${orList(FIELD_OWNERS.get(field) ?? [])} chains only, not ${String(getAt(value, [...base, 'interface']))}`,
      enumNouns: ENUM_NOUNS,
      requiredFor: (path) => {
        const iface = getAt(value, [...path, 'interface']);
        return typeof iface === 'string' ? ` (required for ${iface} chains)` : '';
      },
      describeAt: (schemaPath) => {
        let node: unknown = schema;
        for (const seg of schemaPath.replace(/^#\/?/, '').split('/').filter(Boolean)) node = (node as Record<string, unknown> | undefined)?.[seg];
        const d = (node as { description?: unknown } | undefined)?.description;
        return typeof d === 'string' ? d : undefined;
      },
    });
  }
  if (isObj(value)) semanticProblems(value, report, where);
  return sortProblems(problems);
}

function semanticProblems(doc: Obj, report: Report, where: (p: YamlPath) => string): void {
  const listeners = isObj(doc.listeners) ? doc.listeners : {};
  const listenerNames = Object.keys(listeners);
  const methodSets = isObj(doc.methodSets) ? doc.methodSets : {};
  const setNames = Object.keys(methodSets);

  if (isObj(doc.credits)) {
    // What each interface's module says credits may name: its methods or endpoints.
    const names = [...new Set(Object.values(MODULES).flatMap((m) => m.creditNames))];
    for (const name of Object.keys(doc.credits)) {
      if (names.includes(name)) continue;
      const hint = didYouMean(name, names);
      report('key', ['credits', name], `credits.${name}: not a method or endpoint of any interface`, hint ?? 'eth_call, eth_getLogs, block, address');
    }
  }
  if (Array.isArray(doc.trustedProxies)) {
    doc.trustedProxies.forEach((e, i) => {
      if (typeof e !== 'string') return;
      try {
        ipList([e]);
      } catch {
        report('value', ['trustedProxies', i], `trustedProxies[${i}]: '${e}' is not an IP address or CIDR block`, '10.0.0.0/8, 2001:db8::/32, 192.0.2.10');
      }
    });
  }

  const checkTemplate = (path: YamlPath, s: unknown): Template | null => {
    if (typeof s !== 'string') return null;
    try {
      return parseTemplate(s);
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      report('value', path, `${where(path)}: ${err.message}`, 'write ${VAR} or ${VAR:-default}');
      return null;
    }
  };

  // Ports: an integer, or a template whose value with defaults filled in is the
  // port used when no variable is set. Two listeners on one port fail at start.
  const portOf = (path: YamlPath, v: unknown): number | null => {
    if (typeof v === 'number') return Number.isInteger(v) && v >= 0 && v <= 65535 ? v : null; // else the schema reports it
    const t = checkTemplate(path, v);
    const literal = t && templateDefaultValue(t);
    if (literal === null || literal === undefined) return null; // ${VAR} without default: known only at start
    const n = /^\d{1,5}$/.test(literal) ? Number(literal) : NaN;
    if (!(n <= 65535)) {
      report('value', path, `${where(path)}: '${literal}' is not a port number`, 'use 0..65535, or ${VAR:-default}');
      return null;
    }
    return n;
  };
  const publicPorts = new Map<number, string>();
  for (const name of listenerNames) {
    const l = listeners[name];
    if (!isObj(l)) continue;
    checkTemplate(['listeners', name, 'host'], l.host);
    const port = portOf(['listeners', name, 'port'], l.port);
    if (port === null || port === 0) continue; // 0: the OS picks a free port each time
    const other = publicPorts.get(port);
    if (other !== undefined) report('value', ['listeners', name, 'port'], `listeners.${name}.port: port ${port} is already used by listener '${other}'`);
    else publicPorts.set(port, name);
  }
  if (isObj(doc.admin)) {
    checkTemplate(['admin', 'host'], doc.admin.host);
    const port = portOf(['admin', 'port'], doc.admin.port);
    const other = port === null || port === 0 ? undefined : publicPorts.get(port);
    if (other !== undefined) {
      report('value', ['admin', 'port'], `admin.port: port ${port} is also the port of listener '${other}'`, '/metrics must stay off the public listeners; give admin its own port');
    }
  }
  if (typeof doc.keys === 'string') checkTemplate(['keys'], doc.keys);

  // A misspelt method would silently refuse every call to it. Names far from
  // every known method are accepted: chains may allow their own.
  const checkMethods = (path: YamlPath, list: unknown) => {
    if (!Array.isArray(list)) return;
    list.forEach((name, i) => {
      if (typeof name !== 'string' || !METHOD_NAME.test(name) || KNOWN_METHODS.has(name)) return;
      const hint = didYouMean(name, KNOWN_METHODS);
      if (hint) report('value', [...path, i], `${where([...path, i])}: unknown method '${name}'`, hint);
    });
  };
  for (const name of setNames) checkMethods(['methodSets', name], methodSets[name]);

  if (!Array.isArray(doc.chains)) return;
  const pathsByListener = new Map<string, Map<string, number>>();
  const idsByListener = new Map<string, Map<number, number>>();
  doc.chains.forEach((c, i) => {
    if (!isObj(c)) return;
    const base: YamlPath = ['chains', i];
    const listener = typeof c.listener === 'string' ? c.listener : null;
    if (listener !== null && !listenerNames.includes(listener)) {
      report('value', [...base, 'listener'], `${where(base)}: unknown listener '${listener}'`, didYouMean(listener, listenerNames) ?? `listeners: ${listenerNames.join(', ') || '(none)'}`);
    }
    if (typeof c.path === 'string') {
      if ((RESERVED_PATHS as readonly string[]).includes(c.path)) {
        report('value', [...base, 'path'], `${where(base)}: path '${c.path}' clashes with the server's own /${c.path} route`, `reserved: ${RESERVED_PATHS.join(', ')}`);
      }
      if (listener !== null) {
        const seen = pathsByListener.get(listener) ?? new Map<string, number>();
        pathsByListener.set(listener, seen);
        const first = seen.get(c.path);
        if (first !== undefined) report('value', [...base, 'path'], `${where(base)}: path '${c.path}' is already used on listener '${listener}' by chains[${first}]`);
        else seen.set(c.path, i);
      }
    }
    // methods and chainId on other interfaces are reported by the schema's if/then.
    if (c.interface === 'evm-jsonrpc') {
      if (typeof c.methods === 'string' && !setNames.includes(c.methods)) {
        report('value', [...base, 'methods'], `${where(base)}: unknown methodSet '${c.methods}'`, didYouMean(c.methods, setNames) ?? `methodSets: ${setNames.join(', ') || '(none)'}`);
      }
      checkMethods([...base, 'methods'], c.methods);
      if (typeof c.chainId === 'number' && listener !== null) {
        const ids = idsByListener.get(listener) ?? new Map<number, number>();
        idsByListener.set(listener, ids);
        const first = ids.get(c.chainId);
        if (first !== undefined) report('value', [...base, 'chainId'], `${where(base)}: chainId ${c.chainId} is already used on listener '${listener}' by chains[${first}]`);
        else ids.set(c.chainId, i);
      }
    }
    poolProblems(c, base);
    if (Array.isArray(c.upstreams)) {
      c.upstreams.forEach((u, j) => checkUpstream([...base, 'upstreams', j], u, c.interface));
    }
  });

  // The pool settings (issue 33) against the chain's upstreams and allowlist.
  // Fields on the wrong interface are reported by the schema's if/then.
  function poolProblems(c: Obj, base: YamlPath): void {
    const count = Array.isArray(c.upstreams) ? c.upstreams.length : 0;
    if (count === 1 && c.hedge !== undefined) {
      report('key', [...base, 'hedge'], `${where(base)}: hedge needs a second upstream to send a read to, and the chain has one`, 'add an upstream or drop hedge');
    }
    const m = typeof c.interface === 'string' && Object.hasOwn(MODULES, c.interface) ? MODULES[c.interface as InterfaceKind] : null;
    if (m !== null && !m.archive) {
      if (Array.isArray(c.upstreams)) {
        c.upstreams.forEach((u, j) => {
          const path: YamlPath = [...base, 'upstreams', j];
          if (isObj(u) && u.maxLogRange !== undefined) report('key', [...path, 'maxLogRange'], `${where(path)}: 'maxLogRange' applies to upstreams of evm-jsonrpc chains only, not ${c.interface}`, 'drop it: it caps eth_getLogs ranges');
          if (!isObj(u) || u.archive !== true) return;
          const kinds = (Object.keys(MODULES) as InterfaceKind[]).filter((k) => MODULES[k].archive).join(', ');
          report('key', [...path, 'archive'], `${where(path)}: 'archive' applies to upstreams of ${kinds} chains only, not ${c.interface}`, 'drop it: archive routing is for EVM state older than pruneDepth');
        });
      }
      if (isObj(c.limits) && c.limits.maxLogRange !== undefined) {
        report('key', [...base, 'limits', 'maxLogRange'], `${where(base)}: 'limits.maxLogRange' applies to evm-jsonrpc chains only, not ${c.interface}`, 'drop it: it caps eth_getLogs ranges');
      }
      return;
    }
    if (c.interface !== 'evm-jsonrpc') return;
    logRangeProblems(c, base);
    if (count === 1 && c.broadcast === 'all') {
      report('value', [...base, 'broadcast'], `${where(base)}: broadcast 'all' needs more than one upstream, and the chain has one`, 'add an upstream or drop broadcast');
    }
    if (!isObj(c.quorum)) return;
    const q = c.quorum;
    if (typeof q.of === 'number' && Number.isInteger(q.of) && count >= 1 && q.of > count) {
      report('value', [...base, 'quorum', 'of'], `${where([...base, 'quorum', 'of'])}: asks ${q.of} upstreams, and the chain has ${count}`, 'add upstreams or lower quorum.of');
    }
    if (!Array.isArray(q.methods)) return;
    // The allowlist, when it resolves; an unknown methodSet is reported above.
    const named = typeof c.methods === 'string' ? methodSets[c.methods] : c.methods;
    const allowed = Array.isArray(named) ? named.filter((m): m is string => typeof m === 'string') : null;
    const source = typeof c.methods === 'string' ? `methodSets.${c.methods}` : 'methods';
    q.methods.forEach((name, k) => {
      if (typeof name !== 'string') return;
      const path: YamlPath = [...base, 'quorum', 'methods', k];
      const why = NOT_COMPARABLE.get(name);
      if (why === 'write') {
        report('value', path, `${where(path)}: '${name}' is a write; quorum compares reads only`, 'drop it from quorum.methods; broadcast decides where a transaction goes');
      } else if (why === 'node') {
        report('value', path, `${where(path)}: '${name}' answers about one node, so two upstreams never agree on it`, 'drop it from quorum.methods');
      } else if (allowed !== null && !allowed.includes(name)) {
        report('value', path, `${where(path)}: '${name}' is not a method the chain allows`, didYouMean(name, allowed) ?? `add it to ${source} or drop it from quorum.methods`);
      }
    });
  }

  // eth_getLogs ranges (issue 39): a cap on a chain whose allowlist has no eth_getLogs does nothing.
  function logRangeProblems(c: Obj, base: YamlPath): void {
    const named = typeof c.methods === 'string' ? methodSets[c.methods] : c.methods;
    if (!Array.isArray(named) || named.includes('eth_getLogs')) return;
    const source = typeof c.methods === 'string' ? `methodSets.${c.methods}` : 'methods';
    const why = (at: YamlPath, field: string) =>
      report('key', [...at, ...field.split('.')], `${where(at)}: '${field}' caps eth_getLogs ranges, and the chain does not allow eth_getLogs`, `add eth_getLogs to ${source} or drop ${field}`);
    if (isObj(c.limits) && c.limits.maxLogRange !== undefined) why(base, 'limits.maxLogRange');
    if (Array.isArray(c.upstreams)) c.upstreams.forEach((u, j) => isObj(u) && u.maxLogRange !== undefined && why([...base, 'upstreams', j], 'maxLogRange'));
  }

  function checkUpstream(path: YamlPath, u: unknown, kind: unknown): void {
    const urlPath: YamlPath = isObj(u) ? [...path, 'url'] : path;
    if (isObj(u) && u.ws !== undefined) checkSocket([...path, 'ws'], u.ws, kind);
    if (isObj(u) && isObj(u.headers)) {
      const seen = new Map<string, string>();
      for (const h of Object.keys(u.headers)) {
        checkTemplate([...path, 'headers', h], u.headers[h]);
        const other = seen.get(h.toLowerCase());
        if (other !== undefined) report('key', [...path, 'headers', h], `${where(path)}: header '${h}' is given twice (also as '${other}'; header names ignore case)`);
        else seen.set(h.toLowerCase(), h);
      }
    }
    const t = checkTemplate(urlPath, isObj(u) ? u.url : u);
    const resolved = t && templateDefaultValue(t);
    if (resolved === null || resolved === undefined) return; // ${VAR} without a default: checked when the server starts
    // Written out in full: WHATWG URL would accept 'http:host' and fill in the slashes.
    let ok = false;
    if (/^https?:\/\//i.test(resolved)) {
      try {
        ok = new URL(resolved).hostname !== '';
      } catch {
        ok = false;
      }
    }
    // A provider's URL holds its key (https://mainnet.infura.io/v3/KEY): never echoed, at most its scheme named, as for ws.
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(resolved)?.[1]?.toLowerCase(); // not 'localhost' of localhost:8546
    const is = scheme === undefined || scheme === 'http' || scheme === 'https' ? '' : ` (it is ${scheme}:)`;
    if (!ok) report('value', urlPath, `${where(path)}: upstream is not an absolute http: or https: URL${is}; the URL is not shown, it may hold a key`, 'write http://host:port/path or https://...');
  }

  /**
   * An upstream's `ws`: only on a kind whose upstreams have sockets, and an absolute ws: or wss: URL. A provider's
   * socket URL holds its key (wss://mainnet.infura.io/ws/v3/KEY), so a bad one is never echoed: the position says
   * which, and at most its scheme is named.
   */
  function checkSocket(path: YamlPath, ws: unknown, kind: unknown): void {
    const m = typeof kind === 'string' && Object.hasOwn(MODULES, kind) ? MODULES[kind as InterfaceKind] : null;
    if (m !== null && !socketKind(m)) {
      const kinds = (Object.keys(MODULES) as InterfaceKind[]).filter((k) => socketKind(MODULES[k])).join(', ');
      report('key', path, `${where(path.slice(0, -1))}: 'ws' applies to upstreams of ${kinds} chains only, not ${kind}`, 'drop it: its upstreams have no socket the gateway uses');
      return;
    }
    const t = checkTemplate(path, ws);
    const resolved = t && templateDefaultValue(t);
    if (resolved === null || resolved === undefined) return; // ${VAR} without a default: checked when the server starts
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(resolved)?.[1]?.toLowerCase();
    let ok = false;
    if (/^wss?:\/\//i.test(resolved)) {
      try {
        ok = new URL(resolved).hostname !== '';
      } catch {
        ok = false;
      }
    }
    const is = scheme === undefined || scheme === 'ws' || scheme === 'wss' ? '' : ` (it is ${scheme}:)`;
    if (!ok) report('value', path, `${where(path.slice(0, -1))}: ws is not an absolute ws: or wss: URL${is}; the URL is not shown, it may hold a key`, 'write ws://host:port/path or wss://host/path');
  }
}
