// A key's policy (keys file: `allow`, `expires`, `jwt`): who may use the key,
// from where, for what. Each list is optional; an omitted or empty list allows
// everything. Lists of different types combine with AND, entries within one
// list with OR. Everything is compiled once, when the keys file is loaded, so
// a request pays a Set lookup or a short loop per list the key has, and
// nothing for a key without a policy (KeyEntry.policy is null then).
import { BlockList, isIP } from 'node:net';
import { createPublicKey, type KeyObject } from 'node:crypto';

/** Why a request or a call is refused by its key's policy (the `reason` clients see). */
export type PolicyReason = 'origin' | 'ip' | 'user_agent' | 'expired' | 'jwt' | 'method' | 'contract';

export interface JwtKey {
  readonly kid: string;
  readonly alg: 'RS256' | 'ES256';
  readonly key: KeyObject;
}

/** allow.ips: a BlockList, with the answers for addresses seen lately. */
export class IpMatcher {
  private readonly seen = new Map<string, boolean>();
  constructor(readonly list: BlockList) {}

  matches(address: string): boolean {
    let ok = this.seen.get(address);
    if (ok === undefined) {
      ok = ipAllowed(this.list, address);
      if (this.seen.size >= SEEN_MAX) this.seen.clear();
      this.seen.set(address, ok);
    }
    return ok;
  }
}

export interface KeyPolicy {
  readonly origins: OriginMatcher | null;
  readonly ips: IpMatcher | null;
  readonly userAgents: readonly string[] | null;
  /** JSON-RPC methods, or Rosetta/Blockbook endpoint names. */
  readonly methods: ReadonlySet<string> | null;
  /** Lower-case contract and account addresses, which the kind's guard compares the one a call names with (EVM: kinds/evm/contracts.ts). */
  readonly contracts: ReadonlySet<string> | null;
  /** Milliseconds since the epoch; null: never. */
  readonly expires: number | null;
  readonly jwt: readonly JwtKey[] | null;
  /** Some request-level check applies (origin, ip, user agent, expiry, JWT). */
  readonly request: boolean;
}

// ------------------------------------------------------------------ origins

/** An origin as browsers send it: scheme://host[:port], lower case, the scheme's default port left out. */
export interface Origin {
  readonly scheme: string;
  readonly host: string;
  readonly port: string;
}

const DEFAULT_PORT: Readonly<Record<string, string>> = { 'http:': '80', 'https:': '443' };

/** Answers kept per matcher (origins, addresses); cleared when full. */
const SEEN_MAX = 4096;

/** Parses an Origin header value or an allowlist entry (`*.` allowed in front of the host when `wildcard`). Null when it is not one. */
export function parseOrigin(s: string, wildcard = false): (Origin & { readonly wildcard: boolean }) | null {
  const star = wildcard && /^[a-z][a-z0-9+.-]*:\/\/\*\./i.test(s);
  const text = star ? s.replace('://*.', '://') : s;
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return null;
  }
  // Exactly scheme://host[:port]: no path, query, fragment or credentials.
  if (u.username !== '' || u.password !== '' || u.search !== '' || u.hash !== '' || (u.pathname !== '/' && u.pathname !== '')) return null;
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#]+\/?$/i.test(text)) return null;
  // A DNS name or an IP address: nothing else (URL would take `*acme.io` as a host).
  if (!/^([a-z0-9-]+(\.[a-z0-9-]+)*\.?|\[[0-9a-f:.]+\])$/i.test(u.hostname)) return null;
  const port = u.port === '' ? (DEFAULT_PORT[u.protocol] ?? '') : u.port;
  return { scheme: u.protocol, host: u.hostname.toLowerCase(), port, wildcard: star };
}

export class OriginMatcher {
  private readonly exact = new Set<string>();
  /** `https://*.example.com`: scheme, port, and the suffix `.example.com`. */
  private readonly wild: { scheme: string; suffix: string; port: string }[] = [];

  constructor(entries: readonly string[]) {
    for (const e of entries) {
      const o = parseOrigin(e, true);
      if (o === null) throw new Error(`not an origin: ${e}`);
      if (o.wildcard) this.wild.push({ scheme: o.scheme, suffix: `.${o.host}`, port: o.port });
      else this.exact.add(`${o.scheme}//${o.host}:${o.port}`);
    }
  }

  /** Answers for Origin values seen lately: a browser dapp sends the same one again and again. */
  private readonly seen = new Map<string, boolean>();

  matches(header: string): boolean {
    let ok = this.seen.get(header);
    if (ok === undefined) {
      ok = this.match(header);
      if (this.seen.size >= SEEN_MAX) this.seen.clear();
      this.seen.set(header, ok);
    }
    return ok;
  }

  private match(header: string): boolean {
    const o = parseOrigin(header);
    if (o === null) return false;
    if (this.exact.has(`${o.scheme}//${o.host}:${o.port}`)) return true;
    // Any subdomain, not the domain itself.
    for (const w of this.wild) if (o.scheme === w.scheme && o.port === w.port && o.host.length > w.suffix.length && o.host.endsWith(w.suffix)) return true;
    return false;
  }
}

// ------------------------------------------------------------------ addresses

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address it is; others unchanged. */
export function unmapped(address: string): string {
  if (address.length > 7 && address.slice(0, 7).toLowerCase() === '::ffff:' && isIP(address.slice(7)) === 4) return address.slice(7);
  return address;
}

/** A BlockList of addresses and CIDR blocks, IPv4 and IPv6 (an IPv4 entry also matches its IPv4-mapped IPv6 form). */
export function ipList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const e of entries) {
    const slash = e.indexOf('/');
    const addr = unmapped(slash === -1 ? e : e.slice(0, slash));
    const family = isIP(addr);
    if (family === 0) throw new Error(`not an IP address or CIDR block: ${e}`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (slash === -1) {
      list.addAddress(addr, type);
      continue;
    }
    const bits = e.slice(slash + 1);
    const prefix = /^(0|[1-9][0-9]{0,2})$/.test(bits) ? Number(bits) : -1;
    if (prefix < 0 || prefix > (family === 4 ? 32 : 128)) throw new Error(`bad prefix length in ${e}`);
    list.addSubnet(addr, prefix, type);
  }
  return list;
}

/** Does `address` (a socket's peer or an X-Forwarded-For entry) match the list? */
export function ipAllowed(list: BlockList, address: string): boolean {
  const a = unmapped(address.trim());
  const family = isIP(a);
  if (family === 0) return false;
  return list.check(a, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * The client's address: the socket's peer; behind trusted proxies, the
 * rightmost X-Forwarded-For entry that is not one of them.
 */
export function clientAddress(peer: string, forwardedFor: string | string[] | undefined, trusted: BlockList | null): string {
  if (trusted === null || forwardedFor === undefined || !ipAllowed(trusted, peer)) return peer;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!.trim();
    if (hop === '') continue;
    if (!ipAllowed(trusted, hop)) return hop;
  }
  // Every hop is a trusted proxy: the leftmost is the closest thing to a client.
  return hops[0]!.trim() || peer;
}

// ------------------------------------------------------------------ the whole policy

export interface RawPolicy {
  readonly allow?: {
    readonly origins?: readonly string[];
    readonly ips?: readonly string[];
    readonly userAgents?: readonly string[];
    readonly methods?: readonly string[];
    readonly contracts?: readonly string[];
  };
  readonly expires?: string;
  readonly jwt?: { readonly keys: readonly { readonly kid: string; readonly alg: 'RS256' | 'ES256'; readonly pem: string }[] };
}

const nonEmpty = <T>(xs: readonly T[] | undefined): xs is readonly T[] => xs !== undefined && xs.length > 0;

/** Compiles a key's policy; null when it has none. Throws on an entry it cannot read (the keys file's checks come first). */
export function compilePolicy(raw: RawPolicy): KeyPolicy | null {
  const a = raw.allow ?? {};
  const origins = nonEmpty(a.origins) ? new OriginMatcher(a.origins) : null;
  const ips = nonEmpty(a.ips) ? new IpMatcher(ipList(a.ips)) : null;
  const userAgents = nonEmpty(a.userAgents) ? [...a.userAgents] : null;
  const methods = nonEmpty(a.methods) ? new Set(a.methods) : null;
  const contracts = nonEmpty(a.contracts) ? new Set(a.contracts.map((c) => c.toLowerCase())) : null;
  const expires = raw.expires === undefined ? null : Date.parse(raw.expires);
  if (expires !== null && Number.isNaN(expires)) throw new Error(`not a date: ${raw.expires}`);
  const jwt = raw.jwt === undefined ? null : raw.jwt.keys.map((k) => ({ kid: k.kid, alg: k.alg, key: createPublicKey(k.pem) }));
  const request = origins !== null || ips !== null || userAgents !== null || expires !== null || jwt !== null;
  if (!request && methods === null && contracts === null) return null;
  return { origins, ips, userAgents, methods, contracts, expires, jwt, request };
}

/** The request-level checks but the JWT (origin, ip, user agent, expiry): the first that fails, or null. `address` is asked for only when the key has an ips list. */
export function requestRefusal(p: KeyPolicy, headers: { origin?: string; 'user-agent'?: string }, address: () => string, now: number): PolicyReason | null {
  if (p.expires !== null && now >= p.expires) return 'expired';
  if (p.origins !== null && (headers.origin === undefined || !p.origins.matches(headers.origin))) return 'origin';
  if (p.ips !== null && !p.ips.matches(address())) return 'ip';
  if (p.userAgents !== null) {
    const ua = headers['user-agent'];
    if (ua === undefined || !p.userAgents.some((s) => ua.includes(s))) return 'user_agent';
  }
  return null;
}

const INTERSECTIONS = new WeakMap<KeyPolicy, WeakMap<ReadonlySet<string>, ReadonlySet<string>>>();

/** The chain's allowlist narrowed to the key's methods (made once per key and chain allowlist). */
export function allowedFor(p: KeyPolicy, chain: ReadonlySet<string>): ReadonlySet<string> {
  if (p.methods === null) return chain;
  let byChain = INTERSECTIONS.get(p);
  if (byChain === undefined) {
    byChain = new WeakMap();
    INTERSECTIONS.set(p, byChain);
  }
  let set = byChain.get(chain);
  if (set === undefined) {
    set = new Set([...chain].filter((m) => p.methods!.has(m)));
    byChain.set(chain, set);
  }
  return set;
}
