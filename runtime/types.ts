// The shapes that generated code hands to the runtime. The generator's
// normalized model (generator/model.ts) is plain JSON data; the emitter turns it
// into these objects, with lookup tables (Map, Set) built once at module load.
import type { ValidatorTables } from './validators.ts';

export type InterfaceKind = 'blockbook' | 'evm-jsonrpc' | 'rosetta';
export type RosettaNetwork = 'mainnet' | 'preprod' | 'preview';
export type UpstreamRole = 'primary' | 'fallback';
/** all: the highest block every usable upstream has (proxyd's common block); majority: the highest more than half have. */
export type ServedTip = 'all' | 'majority';
/** all: a transaction goes to every usable upstream; one: to a single upstream. */
export type BroadcastMode = 'all' | 'one';

/** Hedged reads: after `afterMs` without an answer, the read also goes to a second upstream. */
export interface HedgeSpec {
  /** Milliseconds, or 'p95': the chain's own 95th-percentile answer time. */
  readonly afterMs: number | 'p95';
}

/** Calls of `methods` are asked of `of` upstreams at the served tip; only equal answers are served. */
export interface QuorumSpec {
  /** Sorted, deduplicated; every one a read the chain allows. */
  readonly methods: readonly string[];
  /** At least 2, at most the chain's number of upstreams. */
  readonly of: number;
}

/**
 * A manifest string that may hold `${VAR}` or `${VAR:-default}`. It is kept as
 * parts and resolved when the server starts, never when it is built.
 */
export type TemplatePart = string | { readonly env: string; readonly default?: string };
export interface Template {
  readonly parts: readonly TemplatePart[];
}

export interface Limits {
  readonly maxBodyBytes: number;
  readonly maxBatchSize: number;
  readonly timeoutMs: number;
  readonly maxPageSize: number;
  /** With validate: params, the deepest nesting, longest array and longest string (in hex bytes) of a request's parameters. */
  readonly maxParamsDepth: number;
  readonly maxArrayItems: number;
  readonly maxHexBytes: number;
  /** Most blocks one eth_getLogs call may span (EVM); absent: no limit. */
  readonly maxLogRange?: number;
}

export interface UpstreamSpec {
  /** Stable name for logs, metrics and /readyz: `<chain>#<index>`. Never the URL. */
  readonly name: string;
  readonly url: Template;
  readonly weight: number;
  readonly role: UpstreamRole;
  /** Keeps all historical state: calls for state older than the route's pruneDepth go here (evm-jsonrpc; always false elsewhere). */
  readonly archive: boolean;
  /** Most blocks it takes in one eth_getLogs call: wider client ranges are split (log-ranges.ts; evm-jsonrpc). Absent: none known. */
  readonly maxLogRange?: number;
  /** Most requests a second it is sent, polls included (the manifest's rateLimit; upstream-budget.ts). Absent: no budget. */
  readonly rateLimit?: number;
  /** Keep-alive pool size. */
  readonly connections: number;
  /** How long an unused connection stays open (undici's keepAliveTimeout). */
  readonly idleTimeoutMs: number;
  /** Header name (lower case) to value template, sent with every request to it. */
  readonly headers: Readonly<Record<string, Template>>;
}

/** What every chain has, whatever its interface. */
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
  readonly maxLag: number;
  readonly retries: number;
  /** How the served tip is computed (manifest default: all). */
  readonly servedTip: ServedTip;
  /** null: reads are not hedged. */
  readonly hedge: HedgeSpec | null;
  /** weighted: plain weighted round-robin among the upstreams; absent: by score (upstream-score.ts). */
  readonly selection?: 'weighted';
}

export interface EvmRouteSpec extends RouteBase {
  readonly interface: 'evm-jsonrpc';

  readonly chainId?: number;
  /** The allowlist, one Set lookup per call. */
  readonly methods: ReadonlySet<string>;
  /** Answers are cached and coalesced (only with a top-level cache block). */
  readonly cache?: boolean;
  /** With `cache`: null asks the node for its finalized block; N counts N blocks below the head as final (never above the node's own finalized or safe block). */
  readonly finality?: number | null;
  /** latest, safe and finalized in params are replaced by the block numbers served. */
  readonly rewriteTags: boolean;
  /** Blocks behind the head after which state is old and goes to archive upstreams. */
  readonly pruneDepth: number;
  /** Where eth_sendRawTransaction goes (filled in: all with more than one upstream, else one). */
  readonly broadcast: BroadcastMode;
  /** null: no method is compared across upstreams. */
  readonly quorum: QuorumSpec | null;
  /** Also takes WebSocket upgrades on its path (absent: it does not). */
  readonly websocket?: true;
}

export interface RosettaRouteSpec extends RouteBase {
  readonly interface: 'rosetta';
  readonly network: RosettaNetwork;
  /** Blocks and transactions are cached, reads coalesced (only with a top-level cache block). */
  readonly cache?: boolean;
  /** With `cache`: blocks this far below the head are final. */
  readonly finality?: number;
}

export interface BlockbookRouteSpec extends RouteBase {
  readonly interface: 'blockbook';
  readonly sendtx: boolean;
  /** The coin the upstreams' /api/status must report (blockbook.coin); unchecked when absent. */
  readonly coin?: string;
  /** Blocks and confirmed transactions are cached until the next block, reads coalesced (only with a top-level cache block). */
  readonly cache?: boolean;
}

/** A chain as the generated tables describe it: one type per interface. */
export type RouteSpec = EvmRouteSpec | RosettaRouteSpec | BlockbookRouteSpec;
export type RouteOf<K extends InterfaceKind> = Extract<RouteSpec, { readonly interface: K }>;

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
