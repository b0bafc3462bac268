// The normalized gateway model: every default filled, every shorthand in its
// canonical form, every name resolved. Plain JSON data, deep-frozen, so a JSON
// snapshot of it is a test. emit/ reads only this.
import type { CacheSpec, InterfaceKind, Limits, Template, UpstreamSpec, WebSocketSpec } from '../runtime/types.ts';
import type { ChainSettings } from '../runtime/chain-types.gen.ts';

/** Generated code hands these to the runtime as they are. */
export type UpstreamModel = UpstreamSpec;

/** A chain: what the build reshapes, and its settings as the schema lists them for its kind (chain-types.gen.ts). */
export interface ChainModel extends ChainSettings {
  readonly path: string;
  readonly interface: InterfaceKind;
  readonly listener: string;
  /** YAML path of the entry, e.g. `chains[3]`. */
  readonly source: string;
  readonly limits: Limits;
  /** Parameters are checked against the interface's spec (validate: params). */
  readonly validate: boolean;
  readonly upstreams: readonly UpstreamModel[];
  /** Sorted, deduplicated allowlist (evm-jsonrpc only). */
  readonly methods?: readonly string[];
  /** Where the allowlist came from: `methodSets.evm` or `chains[3].methods`. */
  readonly methodsSource?: string;
  /** With a top-level cache block: answers of this chain are cached and coalesced (unless cache: off). */
  readonly cache?: boolean;
  /** With `cache` (evm-jsonrpc, rosetta): null to ask the node for its finalized block, else the depth below the head that counts as final. */
  readonly finality?: number | null;
}

export interface ListenerModel {
  readonly name: string;
  readonly host: Template;
  readonly port: Template;
  /** Chain paths served here, sorted by code unit. */
  readonly chains: readonly string[];
}

export interface GatewayModel {
  readonly version: 1;
  /** The manifest path as given to the CLI, relative to the working directory. */
  readonly source: string;
  /** SHA-256 (hex) of the manifest's bytes: which manifest a server file was built from (admin /status.json). */
  readonly manifestSha256: string;
  /** A keys file's path or a redis:// key store, with ${VAR} parts resolved at start. */
  readonly keysFile: Template;
  readonly listeners: readonly ListenerModel[];
  /** Sorted by path. */
  readonly chains: readonly ChainModel[];
  readonly corsOrigins: readonly string[];
  readonly admin: { readonly host: Template; readonly port: Template } | null;
  readonly health: { readonly intervalMs: number; readonly timeoutMs: number };
  readonly rateLimit: { readonly limit: number; readonly windowMs: number } | null;
  readonly drainTimeoutMs: number;
  readonly cache: CacheSpec | null;
  /** Proxies whose X-Forwarded-For is believed, for keys' allow.ips (addresses or CIDR blocks). */
  readonly trustedProxies?: readonly string[];
  /** The aud a key's JWT must name. */
  readonly jwtAudience?: string;
  /** With keys in Redis: how many keys the LRU keeps, and for how long. */
  readonly keyCache?: { readonly size: number; readonly ttlMs: number };
  /** Credits per method or endpoint name (others cost 1). */
  readonly credits?: Readonly<Record<string, number>>;
  /** WebSocket limits, with a websocket block or a chain with websocket: true. */
  readonly websocket?: WebSocketSpec;
}
