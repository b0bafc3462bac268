// Explorer API, Blockbook-style: `GET /<chain>[/<key>]/v2/<endpoint>/...` to
// the upstream's `/api/v2/...`. Blockbook's answers pass through unchanged,
// its own errors included.
import { envelope, failureNames, policyNames, RESETS_AT, type Failure } from '../../envelope.ts';
import { BLOCKBOOK_ERRORS, blockbookErrorJson, type BlockbookErrorName } from './errors.ts';
import { readBody, type BufferedResult, type Exchange, type RouteHandler } from '../../exchange.ts';
import { BLOCKBOOK_ENDPOINTS, checkBlockbook, STATUS, type BlockbookParamsCheck } from './guard.ts';
import { whenIdentified } from '../../admission/admission.ts';
import type { KeyEntry } from '../../keys/keys.ts';
import type { BlockbookRouteSpec } from '../../types.ts';
import { splitQuery } from '../../url.ts';
import type { RequestHeader } from '../../request-headers.ts';
import type { DocCall } from '../doc-call.ts';
import { DocLayer } from '../../cache/doc.ts';
import { BLOCKBOOK_RULES } from '../../cache/doc-rules.ts';
import { BLOCKBOOK_BLOCKS, docPool } from '../../pool/doc-pool.ts';
import { DOC_KIND, type InterfaceModule, type RouteServices } from '../interface.ts';
import { blockbookRequest } from './request.ts';
import { blockbookSocket, LOCAL_METHODS } from './socket.ts';
import { blockbookHeadSocket } from './socket-upstream.ts';
import { UPSTREAM_METHODS } from './socket-relay.ts';

const NAMES: Readonly<Record<Failure, BlockbookErrorName>> = failureNames('GW_BB', {
  ...policyNames('GW_KEY_POLICY', 'GW_KEY_JWT'),
  'bad-response': 'GW_BB_UPSTREAM_UNAVAILABLE',
  'not-found': 'GW_BB_NOT_FOUND',
  'method-not-allowed': 'GW_BB_METHOD_NOT_ALLOWED',
});

/** Request headers passed on to Blockbook; everything else (cookies, the key) stays here. */
const PASS = ['accept', 'accept-encoding', 'accept-language', 'user-agent', 'if-none-match', 'if-modified-since', 'content-type'] as const satisfies readonly RequestHeader[];
const ALLOW = ['allow', 'GET, OPTIONS'];
const CLOSE = ['connection', 'close'];

/** What goes upstream: the path below the base, the query without the key, a sendtx body, and the guard's call (kinds/doc-call.ts). */
interface Call {
  readonly path: string;
  readonly query: string;
  readonly body: Buffer | null;
  readonly doc: DocCall;
}

class BlockbookRoute implements RouteHandler {
  /** null with validate: off. */
  private readonly check: BlockbookParamsCheck | null;

  constructor(
    private readonly route: BlockbookRouteSpec,
    private readonly s: RouteServices,
  ) {
    this.check = route.validate ? { endpoints: s.validators.blockbook } : null;
  }

  handle(x: Exchange, rest: string, query: string): void {
    // `/<chain>/v2/...` or `/<chain>/<key>/v2/...`: a segment is a key only there.
    let pathKey: string | null = null;
    let after: string;
    if (rest.startsWith('/v2/')) after = rest.slice(4);
    else {
      const end = rest.indexOf('/', 1);
      if (end === -1 || !rest.startsWith('/v2/', end)) return x.fail('not-found');
      pathKey = rest.slice(1, end);
      if (pathKey === '') return x.fail('not-found');
      after = rest.slice(end + 4);
    }
    const method = x.req.method ?? 'GET';
    if (method !== 'GET' && method !== 'POST') return x.fail('method-not-allowed', ALLOW);
    const sq = splitQuery(query);
    const d = checkBlockbook(method, after, sq.rest, this.route.sendtx, this.route.limits.maxPageSize, this.check);
    if (d.kind === 'error') return x.send(BLOCKBOOK_ERRORS[d.name].status, blockbookErrorJson(d.name), d.name === 'GW_BB_METHOD_NOT_ALLOWED' ? ALLOW : undefined);
    if (d.kind === 'invalid') {
      x.label = 'invalid';
      return x.send(BLOCKBOOK_ERRORS.GW_BB_INVALID_PARAM.status, JSON.stringify({ error: d.message, parameter: d.parameter }));
    }
    x.label = d.endpoint;
    whenIdentified(x, this.s.admission.identify(x, this.route, pathKey, sq.keys, d.endpoint), this.keyed, { path: d.path, query: sq.rest, body: null, doc: d.call });
  }

  private readonly keyed = (x: Exchange, _key: KeyEntry, c: Call): void => {
    if (x.req.method === 'POST') readBody(x, this.route.limits, (buf) => this.body(x, c, buf));
    else this.forward(x, c);
  };

  private body(x: Exchange, c: Call, buf: Buffer | null): void {
    if (buf === null) return x.fail('body-too-large', CLOSE);
    this.forward(x, { ...c, body: buf });
  }

  /** On to the chain's layers, from their top: admission's admit step (JWT, rate limit, quota, usage count). */
  private forward(x: Exchange, c: Call): void {
    const headers = ['x-request-id', x.id];
    for (const name of PASS) {
      const v = x.req.headers[name];
      if (typeof v === 'string') headers.push(name, v);
    }
    x.forwardWith(this.s.dispatch, blockbookRequest(this.route, c.query === '' ? c.path : `${c.path}?${c.query}`, c.doc, c.body, headers));
  }

  /** An answer held whole (Blockbook's own 4xx/500 error that is no throttle, a 502-504 with no peer to retry on): passed on unchanged. */
  rewrite(x: Exchange, r: BufferedResult): void {
    x.passOn(r.status, r.headers, r.body);
  }
}

export const blockbook: InterfaceModule<'blockbook'> = {
  envelope: envelope(NAMES, (n, reason) => ({ status: BLOCKBOOK_ERRORS[n].status, body: blockbookErrorJson(n, reason, reason === 'quota' ? RESETS_AT : undefined) })),
  ...DOC_KIND,
  // A chain with sockets follows its head, also with one upstream: subscribeNewBlock's feed comes from it.
  followsHeads: (route) => route.websocket !== false,
  socket: blockbookSocket,
  handler: (route, services) => new BlockbookRoute(route, services),
  cacheFront: (_route, core) => new DocLayer(core, BLOCKBOOK_RULES).front,
  pool: (route, group, view, _log, next) => docPool(route, group, view, next, BLOCKBOOK_BLOCKS),
  creditNames: [...BLOCKBOOK_ENDPOINTS.keys(), STATUS, 'sendtx', ...LOCAL_METHODS, ...UPSTREAM_METHODS],
  /** /status names the coin, the best height and, from its backend, that block's hash. Nothing of Blockbook's is final. */
  probe: {
    names: (route) => route.coin !== undefined,
    requests: (_route, u) => [{ path: `${u.basePath}/status`, method: 'GET' }],
    read(route, [doc]) {
      if (doc === null || doc === undefined) return 'no proper answer';
      const coin: unknown = doc.blockbook?.coin;
      const want = route.coin?.toLowerCase();
      if (want !== undefined && typeof coin !== 'string') return 'the answer does not say which chain it serves';
      const own = want === undefined || (coin as string).toLowerCase() === want;
      const identity = typeof coin === 'string' ? `coin ${coin}` : '';
      const none = { identity, own, genesis: '', number: Number.NaN, hash: '', finalized: -1, safe: -1, canonical: [] };
      if (!own) return none;
      const height: unknown = doc.blockbook?.bestHeight ?? doc.backend?.blocks;
      if (height === null) return 'the answer reports no head';
      const hash: unknown = doc.backend?.bestBlockHash;
      const number = typeof height === 'number' && Number.isSafeInteger(height) && height >= 0 ? height : Number.NaN;
      return { ...none, number, hash: typeof hash === 'string' ? hash : '' };
    },
    // Its heads are pushed on the upstream's socket (its `ws:`, else beside its base), which its WebSocket clients' subscriptions share.
    socket: blockbookHeadSocket,
  },
};
