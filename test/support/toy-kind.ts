// A fourth interface kind that exists only in the tests (issue 45: "a fourth
// interface is one new folder"): a small JSON-RPC interface, `POST
// /<chain>[/<key>]` with one call per request and the methods `toy_*`, written
// against the same module contract as the three real kinds
// (runtime/kinds/interface.ts): its handler and guard, its envelope, its health
// probe, its cache's front (the cache core's document layer, with rules of its
// own), its own layer and its cache's layer (each marks what crosses it), its
// pool (the pool core's, routing a call that names a block to the upstreams
// that have it), and no socket. What it reads of
// a request's bytes it reads with runtime/jsonrpc/ (the nesting bound, the
// first byte, the answer's spans), which is the proof that JSON-RPC there is
// no EVM's. test/unit/runtime/kinds/toy-kind.test.ts serves it through the
// real server; the toy stand-in below is its node.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { envelope, failureNames, policyNames, RESETS_AT, type Failure } from '../../runtime/envelope.ts';
import { readBody, type BufferedResult, type Exchange, type RouteHandler } from '../../runtime/exchange.ts';
import { whenIdentified } from '../../runtime/admission/admission.ts';
import type { KeyEntry } from '../../runtime/keys/keys.ts';
import { withTransport, type Dispatch, type ForwardRequest, type ForwardTarget, type Verdict } from '../../runtime/dispatch.ts';
import type { UpstreamGroup } from '../../runtime/upstreams/upstream.ts';
import type { InterfaceKind, RouteSpec } from '../../runtime/types.ts';
import { pathKeyOf, splitQuery } from '../../runtime/url.ts';
import { firstByte, LBRACKET, MAX_REQUEST_DEPTH, nestsDeeper } from '../../runtime/jsonrpc/scan.ts';
import { answerOf } from '../../runtime/jsonrpc/answer.ts';
import { forwardRequest, NO_KEYS } from '../../runtime/kinds/common.ts';
import { DocCall } from '../../runtime/kinds/doc-call.ts';
import type { InterfaceModule, RouteServices } from '../../runtime/kinds/interface.ts';
import { DocLayer, type DocRules } from '../../runtime/cache/doc.ts';
import { docPool } from '../../runtime/pool/doc-pool.ts';

/** The toy's kind, as a route names it. */
export const TOY = 'toy';

/**
 * Its methods: the head (number and hash), its node's version (kept by the
 * cache until the head moves), a block by number (routed by the pool to an
 * upstream that has it), and an echo of its params.
 */
export const TOY_METHODS = ['toy_head', 'toy_version', 'toy_getBlock', 'toy_echo'] as const;
const METHODS: ReadonlySet<string> = new Set(TOY_METHODS);

/** Its error catalogue: a JSON-RPC error code and an HTTP status per name. */
const ERRORS = {
  GW_AUTH_KEY_MISSING: [-32001, 401],
  GW_AUTH_KEY_INVALID: [-32001, 401],
  GW_AUTH_KEY_FORBIDDEN: [-32003, 403],
  GW_AUTH_KEY_CONFLICT: [-32001, 400],
  GW_AUTH_KEY_STORE_UNAVAILABLE: [-32603, 503],
  GW_TOY_RATE_LIMITED: [-32005, 429],
  GW_TOY_QUOTA_EXCEEDED: [-32005, 429],
  GW_TOY_UPSTREAM_UNAVAILABLE: [-32603, 502],
  GW_TOY_UPSTREAM_TIMEOUT: [-32603, 504],
  GW_TOY_NO_HEALTHY_UPSTREAM: [-32603, 503],
  GW_TOY_UPSTREAM_THROTTLED: [-32005, 503],
  GW_TOY_BODY_TOO_LARGE: [-32600, 413],
  GW_TOY_BODY_TIMEOUT: [-32600, 408],
  GW_TOY_MALFORMED_HTTP: [-32600, 400],
  GW_TOY_EXPECTATION_FAILED: [-32600, 417],
  GW_TOY_INTERNAL: [-32603, 500],
  GW_TOY_POLICY: [-32003, 403],
  GW_TOY_NOT_FOUND: [-32601, 404],
  GW_TOY_METHOD_NOT_ALLOWED: [-32600, 405],
  GW_TOY_INVALID_REQUEST: [-32600, 400],
  GW_TOY_METHOD_NOT_FOUND: [-32601, 200],
} as const;
type ToyError = keyof typeof ERRORS;

/** A JSON-RPC error object, the toy's envelope for every refusal. */
function errorJson(name: ToyError, id = 'null', data?: string): string {
  return `{"jsonrpc":"2.0","id":${id},"error":{"code":${ERRORS[name][0]},"message":"${name}"${data === undefined ? '' : `,"data":${data}`}}}`;
}

const NAMES: Readonly<Record<Failure, ToyError>> = failureNames('GW_TOY', {
  ...policyNames('GW_TOY_POLICY', 'GW_TOY_POLICY'),
  'bad-response': 'GW_TOY_UPSTREAM_UNAVAILABLE',
  'not-found': 'GW_TOY_NOT_FOUND',
  'method-not-allowed': 'GW_TOY_METHOD_NOT_ALLOWED',
});

const ALLOW = ['allow', 'POST, OPTIONS'];
const CLOSE = ['connection', 'close'];

/** The one call a request holds, as the guard read it (JSON.parse once, after the scan's nesting bound). */
type Guarded = { readonly kind: 'call'; readonly method: string; readonly id: string; readonly doc: DocCall } | { readonly kind: 'reply'; readonly status: number; readonly body: string };

/** The toy's guard: one JSON-RPC 2.0 call of a toy_ method, nested no deeper than the bound; a batch is refused. */
export function guard(body: Buffer): Guarded {
  const refuse = (name: ToyError, id = 'null', data?: string): Guarded => ({ kind: 'reply', status: ERRORS[name][1], body: errorJson(name, id, data) });
  if (firstByte(body) === LBRACKET) return refuse('GW_TOY_INVALID_REQUEST', 'null', '{"reason":"batch"}');
  if (nestsDeeper(body, MAX_REQUEST_DEPTH)) return refuse('GW_TOY_INVALID_REQUEST');
  let call: { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
  try {
    call = JSON.parse(body.toString('utf8')) as typeof call;
  } catch {
    return refuse('GW_TOY_INVALID_REQUEST');
  }
  if (call === null || typeof call !== 'object' || call.jsonrpc !== '2.0' || typeof call.method !== 'string') return refuse('GW_TOY_INVALID_REQUEST');
  const id = typeof call.id === 'number' || typeof call.id === 'string' ? JSON.stringify(call.id) : 'null';
  if (!METHODS.has(call.method)) return refuse('GW_TOY_METHOD_NOT_FOUND', id);
  // The block a call names, which the pool routes by: toy_getBlock's params[0].
  const n = call.method === 'toy_getBlock' && Array.isArray(call.params) ? call.params[0] : undefined;
  const block = typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : null;
  return { kind: 'call', method: call.method, id, doc: new DocCall(call.method, block, true) };
}

class ToyRoute implements RouteHandler {
  constructor(
    private readonly route: RouteSpec,
    private readonly s: RouteServices,
  ) {}

  handle(x: Exchange, rest: string, query: string): void {
    const pathKey = pathKeyOf(rest);
    if (pathKey === undefined) return x.fail('not-found');
    if (x.req.method !== 'POST') return x.fail('method-not-allowed', ALLOW);
    // Its key's methods are checked call by call (null): the method is in the body.
    whenIdentified(x, this.s.admission.identify(x, this.route, pathKey, query === '' ? NO_KEYS : splitQuery(query).keys, null), this.keyed, null);
  }

  private readonly keyed = (x: Exchange, key: KeyEntry): void => {
    readBody(x, this.route.limits, (buf) => this.body(x, key, buf));
  };

  private body(x: Exchange, key: KeyEntry, buf: Buffer | null): void {
    if (buf === null) return x.fail('body-too-large', CLOSE);
    const d = guard(buf);
    if (d.kind === 'reply') {
      x.label = 'invalid';
      return x.send(d.status, d.body);
    }
    x.label = d.method;
    const methods = key.policy?.methods ?? null;
    if (methods !== null && !methods.has(d.method)) return x.send(ERRORS.GW_TOY_POLICY[1], errorJson('GW_TOY_POLICY', d.id, '{"reason":"method"}'));
    // On to the chain's layers, from their top: admission's admit step (JWT, rate limit, quota in credits, usage).
    const request = forwardRequest(this.route, {
      method: 'POST',
      path: (u) => u.rpcPath,
      headers: ['content-type', 'application/json', 'x-request-id', x.id],
      body: buf,
      idempotent: d.doc.read,
      classify,
      calls: { one: d.doc },
    });
    x.forwardWith(this.s.dispatch, request);
  }

  /** An answer held whole (a 4xx): passed on where it is a JSON-RPC answer (one scan), else the gateway's bad-response. */
  rewrite(x: Exchange, r: BufferedResult): void {
    if (answerOf(r.body).spans !== null) return x.passOn(r.status, r.headers, r.body);
    x.fail('bad-response');
  }
}

function classify(status: number): Verdict {
  return status >= 500 ? 'bad' : status === 200 ? 'stream' : 'buffer';
}

/** Its cache's rules: toy_version is kept until the head moves, keyed by the whole call (its id is in the answer). */
const RULES: DocRules = {
  key: (_x, request, doc) => (doc.endpoint === 'toy_version' ? (request.body as Buffer).toString('latin1') : null),
  mayLast: () => false,
  keep: (endpoint) => (endpoint === 'toy_version' ? { kind: 'head' } : null),
};

/** A layer that passes every request on with `x-toy-layer: <name>` added. */
function marking(name: string, next: Dispatch): Dispatch {
  return ((target: ForwardTarget, request: ForwardRequest, group?: UpstreamGroup) =>
    next(target, withTransport(request, { headers: [...request.transport.headers, 'x-toy-layer', name] }), group)) as Dispatch;
}

/** The call a poll sends. */
const HEAD_CALL = '{"jsonrpc":"2.0","id":1,"method":"toy_head","params":[]}';

/**
 * The toy module. Typed over every kind's route (`RouteSpec`): the toy reads
 * only what every route has, as a kind the schema does not know could.
 */
export const toy: InterfaceModule<InterfaceKind> = {
  envelope: envelope(NAMES, (n, reason) => ({
    status: ERRORS[n][1],
    body: errorJson(n, 'null', reason === undefined ? undefined : reason === 'quota' ? `{"reason":"quota","resetsAt":"${RESETS_AT}"}` : `{"reason":"${reason}"}`),
  })),
  answersStrays: true,
  batchesCalls: false,
  handler: (route, services) => new ToyRoute(route, services),
  cacheFront: (_route, core) => new DocLayer(core, RULES).front,
  // Its cache's layer and its own layer only mark what crosses them (the header `x-toy-layer`), so that the node
  // shows where chains.ts put them: own over the cache's layer, both over the pool.
  cacheLayer: (_route, _core, next) => marking('cache', next),
  pool: (route, group, view, _log, next) => docPool(route, group, view, next, { notFound: () => false, head: null }),
  poolHeads: () => false,
  followsHeads: () => false,
  own: (_route, _group, _view, next) => marking('own', next),
  creditNames: [...TOY_METHODS],
  archive: false,
  socket: null,
  probe: {
    names: () => false,
    requests: (_route, u) => [{ path: u.rpcPath, method: 'POST', body: HEAD_CALL }],
    read(_route, [a]) {
      const head = a?.result as { number?: unknown; hash?: unknown } | undefined;
      if (head === undefined || typeof head.number !== 'number' || typeof head.hash !== 'string') return 'the answer reports no head';
      return { identity: '', own: true, genesis: '', number: head.number, hash: head.hash, finalized: -1, safe: -1, canonical: [] };
    },
  },
};

// ------------------------------------------------------------------ its node

/** A toy node on 127.0.0.1: its head, and every call it was sent (polls apart). */
export interface ToyNode {
  readonly url: string;
  /** The calls clients sent through the gateway (toy_head polls are counted in `polls`), with the layers they crossed (x-toy-layer). */
  readonly calls: { readonly method: string; readonly params: unknown; readonly layers: string | undefined }[];
  polls: number;
  close(): Promise<void>;
}

/** A toy node whose head is `head`: toy_getBlock answers blocks up to it (null above), toy_version names the node. */
export async function startToyNode(name: string, head: number): Promise<ToyNode> {
  const calls: { method: string; params: unknown; layers: string | undefined }[] = [];
  const node = {
    url: '',
    calls,
    polls: 0,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const call = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: unknown; method: string; params: unknown[] };
      if (call.method === 'toy_head') node.polls++;
      else calls.push({ method: call.method, params: call.params, layers: req.headers['x-toy-layer'] as string | undefined });
      const result =
        call.method === 'toy_head'
          ? { number: head, hash: `0x${head.toString(16).padStart(64, '0')}` }
          : call.method === 'toy_version'
            ? `toy/${name}`
            : call.method === 'toy_getBlock'
              ? (call.params[0] as number) <= head
                ? { number: call.params[0], node: name }
                : null
              : call.params;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result }));
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  node.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return node;
}
