// The shapes that generated code hands to the runtime. The generator's
// normalized model (generator/model.ts) is plain JSON data; the emitter turns it
// into these objects, with lookup tables (Map, Set) built once at module load.
// A chain's settings (what the manifest sets and the runtime reads as set,
// defaults filled) and InterfaceKind are generated from the schema
// (chain-types.gen.ts, `npm run gen:types`); what the build reshapes is here.
import type { ValidatorTables } from './config/validators.ts';
import type { BlockbookSettings, ChainSettings, EvmJsonrpcSettings, InterfaceKind, LimitsSpec, RosettaSettings, UpstreamSettings, WebsocketSpec } from './chain-types.gen.ts';

export type { HedgeSpec, InterfaceKind, QuorumSpec } from './chain-types.gen.ts';

export type RosettaNetwork = RosettaSettings['network'];
export type UpstreamRole = UpstreamSettings['role'];
/** all: the highest block every usable upstream has (proxyd's common block); majority: the highest more than half have. */
export type ServedTip = ChainSettings['servedTip'];
/** all: a transaction goes to every usable upstream; one: to a single upstream. */
export type BroadcastMode = EvmJsonrpcSettings['broadcast'];

/**
 * A manifest string that may hold `${VAR}` or `${VAR:-default}`. It is kept as
 * parts and resolved when the server starts, never when it is built.
 */
export type TemplatePart = string | { readonly env: string; readonly default?: string };
export interface Template {
  readonly parts: readonly TemplatePart[];
}

/** A chain's request limits (generated from the schema's limits: a new limit is a new field here). */
export type Limits = LimitsSpec;

export interface UpstreamSpec extends UpstreamSettings {
  /** Stable name for logs, metrics and /readyz: `<chain>#<index>`. Never the URL. */
  readonly name: string;
  readonly url: Template;
  /** Its WebSocket endpoint, where the manifest names one (upstreams/head-sockets.ts); absent: the kind's default, if it has one. */
  readonly ws?: Template;
  /** Most requests a second it is sent, polls included (the manifest's rateLimit, "N/s" or "N/min", as a number; upstream-budget.ts). Absent: no budget. */
  readonly rateLimit?: number;
  /** Header name (lower case) to value template, sent with every request to it. */
  readonly headers: Readonly<Record<string, Template>>;
}

/** What every chain has, whatever its interface, besides its settings (maxLag, retries, servedTip, hedge, ...). */
interface RouteBase {
  /** The first path segment. */
  readonly path: string;
  readonly listener: string;
  /** Where it came from in the manifest, for messages: `chains[3]`. */
  readonly source: string;
  readonly limits: Limits;
  /** Parameters are checked at the edge against the interface's spec (the manifest's validate: params). */
  readonly validate: boolean;
  readonly upstreams: readonly UpstreamSpec[];
}

export interface EvmRouteSpec extends RouteBase, EvmJsonrpcSettings {
  readonly interface: 'evm-jsonrpc';
  /** The allowlist, one Set lookup per call. */
  readonly methods: ReadonlySet<string>;
  /** Answers are cached and coalesced (only with a top-level cache block). */
  readonly cache?: boolean;
  /** With `cache`: null asks the node for its finalized block; N counts N blocks below the head as final (never above the node's own finalized or safe block). */
  readonly finality?: number | null;
}

export interface RosettaRouteSpec extends RouteBase, RosettaSettings {
  readonly interface: 'rosetta';
  /** Blocks and transactions are cached, reads coalesced (only with a top-level cache block). */
  readonly cache?: boolean;
  /** With `cache`: blocks this far below the head are final. */
  readonly finality?: number;
}

/** A Blockbook chain's `websocket` on, as the build fills it: its subscribeAddresses bounds. */
export type BlockbookSocketSpec = Required<WebsocketSpec>;

export interface BlockbookRouteSpec extends RouteBase, Omit<BlockbookSettings, 'websocket'> {
  readonly interface: 'blockbook';
  /** Off, or on with its bounds (the manifest's `true` is on with the defaults). */
  readonly websocket: false | BlockbookSocketSpec;
  /** Blocks and confirmed transactions are cached until the next block, reads coalesced (only with a top-level cache block). */
  readonly cache?: boolean;
}

/** Each interface kind's chain type (the compiler asks for a kind the schema adds). A function generic in the kind (`RouteOf<K>`) keeps a route and its module's kind together without casts. */
export interface RouteKinds {
  readonly blockbook: BlockbookRouteSpec;
  readonly 'evm-jsonrpc': EvmRouteSpec;
  readonly rosetta: RosettaRouteSpec;
}
/** A chain as the generated tables describe it: one type per interface. */
export type RouteSpec = RouteKinds[InterfaceKind];
export type RouteOf<K extends InterfaceKind> = RouteKinds[K];

export interface ListenerSpec {
  readonly name: string;
  readonly host: Template;
  readonly port: Template;
  /** First path segment to route, precomputed per listener. */
  readonly routes: ReadonlyMap<string, RouteSpec>;
}

export interface RateLimitSpec {
  readonly limit: number;
  readonly windowMs: number;
}

export interface GatewaySpec {
  /** Manifest path relative to where the build ran, for the startup log. */
  readonly source: string;
  /** SHA-256 (hex) of the manifest's bytes (admin /status.json). */
  readonly manifestSha256: string;
  /** A keys file's path or a redis:// key store, with ${VAR} parts resolved at start. */
  readonly keysFile: Template;
  readonly listeners: readonly ListenerSpec[];
  readonly corsOrigins: readonly string[];
  readonly admin: { readonly host: Template; readonly port: Template } | null;
  readonly health: { readonly intervalMs: number; readonly timeoutMs: number };
  readonly rateLimit: RateLimitSpec | null;
  readonly drainTimeoutMs: number;
  readonly cache: CacheSpec | null;
  /** Request validators compiled from the specs for what the chains validate (generator/validators.ts). */
  readonly validators: ValidatorTables;
  /** Proxies whose X-Forwarded-For is believed, for keys' allow.ips (addresses or CIDR blocks). */
  readonly trustedProxies?: readonly string[];
  /** The aud a key's JWT must name. */
  readonly jwtAudience?: string;
  /** With keys in Redis: how many keys the LRU keeps, and for how long. */
  readonly keyCache?: { readonly size: number; readonly ttlMs: number };
  /** Credits per method or endpoint name (others cost 1). */
  readonly credits?: Readonly<Record<string, number>>;
  /** WebSocket limits (present when a chain has websocket: true, or the manifest a websocket block). */
  readonly websocket?: WebSocketSpec;
}

/** The manifest's websocket block, every default filled. */
export interface WebSocketSpec {
  /** Sockets one key may hold at once (per process). */
  readonly maxConnectionsPerKey: number;
  readonly maxSubscriptionsPerConnection: number;
  /** Messages one socket may have under way; past it the socket is not read until answers come back. */
  readonly maxInflightPerConnection: number;
  /** Unsent bytes a socket may hold before it is closed as slow. */
  readonly maxBufferedBytes: number;
  readonly pingIntervalMs: number;
}

export interface CacheSpec {
  /** Bytes all cached answers may take together. */
  readonly maxBytes: number;
  /** How often each upstream's head and finalized block are polled. */
  readonly headPollMs: number;
  /** EVM misses of one event-loop turn sent upstream as one batch of at most this many calls (1: each alone). */
  readonly batch: number;
  /** Final answers are also kept in Redis (REDIS_URL), shared by every replica. */
  readonly redis: boolean;
}
