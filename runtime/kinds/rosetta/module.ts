// Cardano Rosetta: `POST /<chain>/<endpoint>`, the network check, and the
// answers the gateway rewrites (errors, always HTTP 500; /network/options,
// which lists the gateway's own errors too).
import { envelope, failureNames, policyNames, RESETS_AT, type Failure } from '../../envelope.ts';
import { GATEWAY_ROSETTA_ALLOW_ERRORS, rosettaErrorJson, type RosettaErrorName } from './errors.ts';
import { readBody, type BufferedResult, type Exchange, type RouteHandler } from '../../exchange.ts';
import { checkRosettaBody, isBlockId, isRosettaError, ROSETTA_ENDPOINTS, type RosettaBodyCheck, type RosettaDecision } from './guard.ts';
import { whenIdentified } from '../../admission/admission.ts';
import { MAX_ANSWER_DEPTH, nestsDeeper } from '../../jsonrpc/scan.ts';
import type { Verdict } from '../../dispatch.ts';
import type { RosettaRouteSpec } from '../../types.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import { splitQuery } from '../../url.ts';
import { forwardRequest, isHtml, NO_KEYS } from '../common.ts';
import { DocLayer } from '../../cache/doc.ts';
import { ROSETTA_RULES } from '../../cache/doc-rules.ts';
import { docPool, ROSETTA_BLOCKS } from '../../pool/doc-pool.ts';
import { DOC_KIND, type InterfaceModule, type RouteServices } from '../interface.ts';

const NAMES: Readonly<Record<Failure, RosettaErrorName>> = failureNames('GW_ROSETTA', {
  ...policyNames('GW_KEY_POLICY', 'GW_KEY_POLICY'),
  'bad-response': 'GW_ROSETTA_UPSTREAM_BAD_RESPONSE',
  'not-found': 'GW_ROSETTA_UNKNOWN_ENDPOINT',
  'method-not-allowed': 'GW_ROSETTA_METHOD_NOT_ALLOWED',
});

const OPTIONS = 'network/options';
/** The guard's decision on a request that goes on: its body and its call (kinds/doc-call.ts). */
type Forwarded = Extract<RosettaDecision, { kind: 'forward' }>;
const ALLOW = ['allow', 'POST, OPTIONS'];
const CLOSE = ['connection', 'close'];

/** Per endpoint, its path on an upstream: made once, not per request. */
const PATHS: ReadonlyMap<string, (u: Upstream) => string> = new Map(
  [...ROSETTA_ENDPOINTS.keys()].map((endpoint) => [endpoint, (u: Upstream) => `${u.basePath}/${endpoint}`]),
);

class RosettaRoute implements RouteHandler {
  /** null with validate: off. */
  private readonly check: RosettaBodyCheck | null;

  constructor(
    private readonly route: RosettaRouteSpec,
    private readonly s: RouteServices,
  ) {
    this.check = route.validate ? { endpoints: new Map(Object.entries(s.validators.rosetta)), limits: route.limits } : null;
  }

  handle(x: Exchange, rest: string, query: string): void {
    // Rosetta takes the key in the header or the query only: a key-shaped
    // segment here is just an unknown endpoint.
    const endpoint = rest.length > 1 ? rest.slice(1) : '';
    if (!ROSETTA_ENDPOINTS.has(endpoint)) return x.fail('not-found');
    x.label = endpoint;
    if (x.req.method !== 'POST') return x.fail('method-not-allowed', ALLOW);
    whenIdentified(x, this.s.admission.identify(x, this.route, null, query === '' ? NO_KEYS : splitQuery(query).keys, endpoint), this.keyed, null);
  }

  private readonly keyed = (x: Exchange): void => {
    readBody(x, this.route.limits, (buf) => this.body(x, buf));
  };

  private body(x: Exchange, buf: Buffer | null): void {
    if (buf === null) return x.fail('body-too-large', CLOSE);
    const d = checkRosettaBody(buf, x.label, this.route.network, this.check);
    if (d.kind === 'reply') return x.send(500, d.body);
    this.forward(x, d);
  }

  /** On to the chain's layers, from their top: admission's admit step (JWT, rate limit, quota, usage count). */
  private forward(x: Exchange, d: Forwarded): void {
    const endpoint = x.label;
    const headers = ['content-type', 'application/json', 'x-request-id', x.id];
    const accept = x.req.headers.accept;
    if (accept) headers.push('accept', accept);
    const request = forwardRequest(this.route, {
      method: 'POST',
      path: PATHS.get(endpoint)!,
      headers,
      body: d.body,
      idempotent: d.call.read,
      classify: endpoint === OPTIONS ? classifyOptions : classify,
      calls: { one: d.call },
    });
    x.forwardWith(this.s.dispatch, request);
  }

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

const LIST_BODY = '{"metadata":{}}';

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
  ...DOC_KIND,
  handler: (route, services) => new RosettaRoute(route, services),
  cacheFront: (_route, core) => new DocLayer(core, ROSETTA_RULES).front,
  pool: (route, group, view, _log, next) => docPool(route, group, view, next, ROSETTA_BLOCKS),
  creditNames: [...ROSETTA_ENDPOINTS.keys()],
  /**
   * /network/list and /network/status, sent together every poll: Rosetta has
   * no batch, and a node of another network answers /network/status for ours
   * with an error that looks like any broken node's (4002), while a node that
   * ignores the identifier would pass it. The status names the head and the
   * genesis block; blocks `finality` below the head are final.
   */
  probe: {
    names: () => true,
    requests: (route, u) => [
      { path: `${u.basePath}/network/list`, method: 'POST', body: LIST_BODY },
      { path: `${u.basePath}/network/status`, method: 'POST', body: statusBody(route) },
    ],
    read(route, [list, status]) {
      const ids: unknown = list?.network_identifiers;
      if (!Array.isArray(ids)) return 'the answer does not say which chain it serves';
      const served = ids.filter((n): n is { blockchain: string; network: string } => typeof n?.blockchain === 'string' && typeof n?.network === 'string');
      const own = served.some((n) => n.blockchain === 'cardano' && n.network === route.network);
      const identity = own ? `cardano/${route.network}` : `networks ${served.map((n) => `${n.blockchain}/${n.network}`).join(', ') || 'none'}`;
      const none = { identity, own, genesis: '', number: Number.NaN, hash: '', finalized: -1, safe: -1, canonical: [] };
      if (!own) return none;
      if (status === null || status === undefined) return 'no proper answer';
      const head: unknown = status.current_block_identifier;
      const genesis: unknown = status.genesis_block_identifier;
      const g = isBlockId(genesis) ? genesis.hash : '';
      if (!isBlockId(head)) return { ...none, genesis: g };
      const depth = route.finality;
      return { ...none, genesis: g, number: head.index, hash: head.hash, finalized: depth === undefined ? -1 : Math.max(-1, head.index - depth), finalizedByDepth: depth !== undefined };
    },
  },
};
