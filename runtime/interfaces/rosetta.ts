// Cardano Rosetta: `POST /<chain>/<endpoint>`, the network check, and the
// answers the gateway rewrites (errors, always HTTP 500; /network/options,
// which lists the gateway's own errors too).
import { envelope, policyNames, RESETS_AT, type Failure } from '../envelope.ts';
import { GATEWAY_ROSETTA_ALLOW_ERRORS, rosettaErrorJson, type RosettaErrorName } from '../errors/rosetta.ts';
import { readBody, type BufferedResult, type Exchange, type RouteHandler } from '../exchange.ts';
import { checkRosettaBody, isRosettaError, ROSETTA_ENDPOINTS, type RosettaBodyCheck } from '../guards/rosetta.ts';
import { whenIdentified } from '../admission.ts';
import { MAX_ANSWER_DEPTH, nestsDeeper } from '../json-scan.ts';
import type { KeyEntry } from '../keys.ts';
import type { Verdict } from '../proxy.ts';
import type { RosettaRouteSpec } from '../types.ts';
import type { Upstream } from '../upstream.ts';
import { splitQuery } from '../url.ts';
import { forwardRequest, isHtml, NO_KEYS } from './common.ts';
import type { InterfaceModule, RouteServices } from './interface.ts';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import { DocCache, type Keep } from '../cache/doc-cache.ts';
import type { HeadProbe } from '../cache/head.ts';

const NAMES: Readonly<Record<Failure, RosettaErrorName>> = {
  'auth-missing': 'GW_AUTH_KEY_MISSING',
  'auth-invalid': 'GW_AUTH_KEY_INVALID',
  'auth-forbidden': 'GW_AUTH_KEY_FORBIDDEN',
  'auth-conflict': 'GW_AUTH_KEY_CONFLICT',
  'key-store-unavailable': 'GW_AUTH_KEY_STORE_UNAVAILABLE',
  ...policyNames('GW_KEY_POLICY', 'GW_KEY_POLICY'),
  'rate-limited': 'GW_ROSETTA_RATE_LIMITED',
  'quota-exceeded': 'GW_ROSETTA_QUOTA_EXCEEDED',
  unavailable: 'GW_ROSETTA_UPSTREAM_UNAVAILABLE',
  timeout: 'GW_ROSETTA_UPSTREAM_TIMEOUT',
  'no-upstream': 'GW_ROSETTA_NO_HEALTHY_UPSTREAM',
  'bad-response': 'GW_ROSETTA_UPSTREAM_BAD_RESPONSE',
  'not-found': 'GW_ROSETTA_UNKNOWN_ENDPOINT',
  'method-not-allowed': 'GW_ROSETTA_METHOD_NOT_ALLOWED',
  'body-too-large': 'GW_ROSETTA_BODY_TOO_LARGE',
  'malformed-http': 'GW_ROSETTA_MALFORMED_HTTP',
  'expectation-failed': 'GW_ROSETTA_EXPECTATION_FAILED',
  internal: 'GW_ROSETTA_INTERNAL',
};

const OPTIONS = 'network/options';
const ALLOW = ['allow', 'POST, OPTIONS'];
const CLOSE = ['connection', 'close'];

/** Per endpoint, its path on an upstream: made once, not per request. */
const PATHS: ReadonlyMap<string, (u: Upstream) => string> = new Map(
  [...ROSETTA_ENDPOINTS.keys()].map((endpoint) => [endpoint, (u: Upstream) => `${u.basePath}/${endpoint}`]),
);

/** A read the cache takes: its endpoint and body (as forwarded). */
interface Call {
  readonly endpoint: string;
  readonly body: string;
}

class RosettaRoute implements RouteHandler {
  /** null unless the manifest has a cache block and the chain does not turn it off. */
  private readonly cache: DocCache | null;

  /** null with validate: off. */
  private readonly check: RosettaBodyCheck | null;

  constructor(
    private readonly route: RosettaRouteSpec,
    private readonly s: RouteServices,
  ) {
    this.check = route.validate ? { endpoints: new Map(Object.entries(s.validators.rosetta)), limits: route.limits } : null;
    this.cache =
      s.cache !== null && route.cache === true
        ? new DocCache(route, s.group, s.cache.store, s.cache.spec.headPollMs, probe(route), { keep, mayLast, deliver: this.deliver }, s.log, s.circuitOpen, s.cache.shared, `rosetta ${route.network}`)
        : null;
    if (this.cache !== null) s.metrics.cache(this.cache.stats);
  }

  start(): void {
    this.cache?.start();
  }

  stop(): void {
    this.cache?.stop();
  }

  handle(x: Exchange, rest: string, query: string): void {
    // Rosetta takes the key in the header or the query only: a key-shaped
    // segment here is just an unknown endpoint.
    const endpoint = rest.length > 1 ? rest.slice(1) : '';
    if (!ROSETTA_ENDPOINTS.has(endpoint)) return x.fail('not-found');
    x.label = endpoint;
    if (x.req.method !== 'POST') return x.fail('method-not-allowed', ALLOW);
    whenIdentified(x, this.s.admission.identify(x, this.route, null, query === '' ? NO_KEYS : splitQuery(query).keys), this.keyed, null);
  }

  private readonly keyed = (x: Exchange, key: KeyEntry): void => {
    readBody(x, this.route.limits.maxBodyBytes, (buf) => this.body(x, key, buf));
  };

  private body(x: Exchange, key: KeyEntry, buf: Buffer | null): void {
    if (buf === null) return x.fail('body-too-large', CLOSE);
    const d = checkRosettaBody(buf, x.label, this.route.network, this.check);
    if (d.kind === 'reply') return x.send(500, d.body);
    this.s.admission.admit(x, key, this.s.credits === null ? 1 : this.s.credits(x.label), this.forward, d.body);
  }

  private readonly forward = (x: Exchange, body: string): void => {
    const endpoint = x.label;
    this.s.usage.record(x.key!.id, this.route.path, endpoint, 1, this.s.credits === null ? 1 : this.s.credits(endpoint));
    const headers = ['content-type', 'application/json', 'x-request-id', x.id];
    const accept = x.req.headers.accept;
    if (accept) headers.push('accept', accept);
    const idempotent = ROSETTA_ENDPOINTS.get(endpoint)!.idempotent;
    const request = forwardRequest(this.route, 'POST', PATHS.get(endpoint)!, headers, body, idempotent, endpoint === OPTIONS ? classifyOptions : classify);
    // A read (never construction/submit) may be answered from memory or join an identical one in flight.
    if (this.cache !== null && idempotent) return this.cache.serve(x, `${endpoint}\n${accept ?? ''}\n${body}`, request, { endpoint, body } satisfies Call);
    x.forwardTo(this.s.group, request);
  };

  /** A coalesced answer, or one from memory: a 200 passes on as it came; the rest as rewrite says. */
  private readonly deliver = (x: Exchange, status: number, headers: IncomingHttpHeaders, body: Buffer, u: Upstream | null): void => {
    if (status === 200 && x.label !== OPTIONS) return x.passOn(status, headers, body);
    this.rewrite(x, { kind: 'buffered', status, headers, body, upstream: u! });
  };

  rewrite(x: Exchange, r: BufferedResult): void {
    const isOptions = x.label === OPTIONS;
    const text = r.body.toString('utf8');
    let doc: unknown;
    try {
      // Re-serializing /network/options recurses: bound its depth first.
      doc = isOptions && nestsDeeper(r.body, MAX_ANSWER_DEPTH) ? undefined : JSON.parse(text);
    } catch {
      doc = undefined;
    }
    if (r.status === 200 && isOptions && doc !== null && typeof doc === 'object') {
      const allow = (doc as { allow?: { errors?: unknown } }).allow;
      if (allow && Array.isArray(allow.errors)) {
        const have = new Set(allow.errors.map((e: { code?: unknown }) => e?.code));
        for (const e of GATEWAY_ROSETTA_ALLOW_ERRORS) if (!have.has(e.code)) allow.errors.push({ ...e });
        return x.send(200, JSON.stringify(doc));
      }
    }
    // Newer servers send non-retriable errors with 400: the body stays, the status is 500.
    if (r.status !== 200 && isRosettaError(doc)) return x.send(500, text);
    this.s.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: x.id }, 'upstream answer is not Rosetta');
    x.send(500, rosettaErrorJson('GW_ROSETTA_UPSTREAM_BAD_RESPONSE', { upstream_status: r.status }));
  }
}

/**
 * What the cache keeps of a Rosetta answer: a block (/block) and a
 * transaction in a block (/block/transaction), forever once the block is
 * final and, named by hash only, once its hash is known canonical; until the
 * head moves before that. /block with no identifier is the tip: until the
 * head moves. Nothing else is kept (balances, coins, the mempool and the
 * network's status follow the head or the mempool; only coalesced).
 */
function keep(call: unknown, body: Buffer): Keep | null {
  const { endpoint, body: sent } = call as Call;
  if (endpoint !== 'block' && endpoint !== 'block/transaction') return null;
  let req: { block_identifier?: { index?: unknown; hash?: unknown }; transaction_identifier?: { hash?: unknown } };
  let ans: { block?: { block_identifier?: unknown } | null; transaction?: { transaction_identifier?: { hash?: unknown } } | null };
  try {
    req = JSON.parse(sent) as typeof req;
    ans = JSON.parse(body.toString('utf8')) as typeof ans;
  } catch {
    return null;
  }
  if (endpoint === 'block') {
    const id = ans?.block?.block_identifier;
    if (!isBlockId(id)) return null; // no block in the answer: nothing to keep
    const want = req.block_identifier ?? {};
    if ((want.index !== undefined && want.index !== id.index) || (want.hash !== undefined && want.hash !== id.hash)) return null;
    if (want.index === undefined && want.hash === undefined) return KEEP_HEAD;
    return { kind: 'block', number: id.index, hash: id.hash, byNumber: want.index !== undefined };
  }
  const want = req.block_identifier;
  const tx = req.transaction_identifier?.hash;
  if (!isBlockId(want) || typeof tx !== 'string' || ans?.transaction?.transaction_identifier?.hash !== tx) return null;
  return { kind: 'block', number: want.index, hash: want.hash, byNumber: false };
}
const KEEP_HEAD: Keep = { kind: 'head' };

/** A block or a transaction in one may be final: worth asking the shared tier. */
function mayLast(call: unknown): boolean {
  const { endpoint } = call as Call;
  return endpoint === 'block' || endpoint === 'block/transaction';
}

function isBlockId(v: unknown): v is { index: number; hash: string } {
  const b = v as { index?: unknown; hash?: unknown } | null | undefined;
  return typeof b?.index === 'number' && Number.isSafeInteger(b.index) && b.index >= 0 && typeof b.hash === 'string' && b.hash !== '';
}

/** The head as /network/status reports it; blocks `finality` below it are final. */
function probe(route: RosettaRouteSpec): HeadProbe {
  const body = statusBody(route);
  const depth = route.finality ?? Number.MAX_SAFE_INTEGER;
  return {
    request: (u) => ({ path: `${u.basePath}/network/status`, method: 'POST', body }),
    read(doc) {
      const id = (doc as { current_block_identifier?: unknown } | null)?.current_block_identifier;
      return isBlockId(id) ? { number: id.index, hash: id.hash, finalized: id.index - depth } : null;
    },
  };
}

function statusBody(route: RosettaRouteSpec): string {
  return JSON.stringify({ network_identifier: { blockchain: 'cardano', network: route.network }, metadata: {} });
}

/** Only a plain 200 streams; errors are rewritten. */
function classify(status: number, h: Record<string, string | string[] | undefined>): Verdict {
  return status > 500 || isHtml(h) ? 'bad' : status === 200 ? 'stream' : 'buffer';
}

/** /network/options is always rewritten. */
function classifyOptions(status: number, h: Record<string, string | string[] | undefined>): Verdict {
  return status > 500 || isHtml(h) ? 'bad' : 'buffer';
}

export const rosetta: InterfaceModule<'rosetta'> = {
  envelope: envelope(NAMES, (n, reason) => ({ status: 500, body: rosettaErrorJson(n, reason === undefined ? undefined : reason === 'quota' ? { reason, resetsAt: RESETS_AT } : { reason }) })),
  handler: (route, services) => new RosettaRoute(route, services),
  health: {
    request: (route, u) => ({ path: `${u.basePath}/network/status`, method: 'POST', body: statusBody(route) }),
    head: (doc) => doc.current_block_identifier?.index,
    /**
     * /network/list, sent alongside /network/status every round: Rosetta has
     * no batch, and a node of another network answers /network/status for
     * ours with an error that looks like any broken node's (4002), while a
     * node that ignores the identifier would pass it. One small POST more
     * per Rosetta upstream per interval, off the request path.
     */
    identity(route) {
      const body = '{"metadata":{}}';
      return {
        request: (u) => ({ path: `${u.basePath}/network/list`, method: 'POST', body }),
        check(doc) {
          const ids: unknown = doc.network_identifiers;
          if (!Array.isArray(ids)) return false;
          const served = ids.filter((n): n is { blockchain: string; network: string } => typeof n?.blockchain === 'string' && typeof n?.network === 'string');
          if (served.some((n) => n.blockchain === 'cardano' && n.network === route.network)) return true;
          return `networks ${served.map((n) => `${n.blockchain}/${n.network}`).join(', ') || 'none'}`;
        },
      };
    },
  },
};
