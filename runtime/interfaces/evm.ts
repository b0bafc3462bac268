// EVM JSON-RPC: `POST /<chain>[/<key>]`, the allowlist guard, and the
// answers the gateway rewrites (a batch with refused items, a node's error).
// Hot path: no closure but the body reader's.
import { envelope, policyNames, RESETS_AT, type Failure } from '../envelope.ts';
import { RPC_ERRORS, rpcErrorJson, type RpcErrorName } from '../errors/evm-jsonrpc.ts';
import { readBody, type BufferedResult, type Exchange, type RouteHandler } from '../exchange.ts';
import { evmParamsCheck, scannedParamsValid, type EvmParamsCheck } from '../guards/evm-params.ts';
import { checkEvmBody, checkEvmBodyGeneral, mergeBatch, type BatchMerge, type CallCheck, type EvmDecision } from '../guards/evm.ts';
import { allowedFor, callRefusal, checksParams, type KeyPolicy } from '../key-policy.ts';
import { scanPlainRpc } from '../guards/evm-fast.ts';
import { add as addUsage } from '../usage.ts';
import { whenIdentified } from '../admission.ts';
import type { KeyEntry } from '../keys.ts';
import type { Verdict } from '../proxy.ts';
import type { EvmRouteSpec } from '../types.ts';
import type { Upstream } from '../upstream.ts';
import { splitQuery } from '../url.ts';
import { forwardRequest, isHtml, MAX_MERGE_BYTES, MAX_REWRITE_BYTES, NO_KEYS } from './common.ts';
import { CachedBatch, EvmCache } from '../cache/evm-cache.ts';
import type { InterfaceModule, RouteServices } from './interface.ts';

const NAMES: Readonly<Record<Failure, RpcErrorName>> = {
  'auth-missing': 'GW_AUTH_KEY_MISSING',
  'auth-invalid': 'GW_AUTH_KEY_INVALID',
  'auth-forbidden': 'GW_AUTH_KEY_FORBIDDEN',
  'auth-conflict': 'GW_AUTH_KEY_CONFLICT',
  'key-store-unavailable': 'GW_AUTH_KEY_STORE_UNAVAILABLE',
  ...policyNames('GW_KEY_POLICY', 'GW_KEY_JWT'),
  'rate-limited': 'GW_RPC_RATE_LIMITED',
  'quota-exceeded': 'GW_RPC_QUOTA_EXCEEDED',
  unavailable: 'GW_RPC_UPSTREAM_UNAVAILABLE',
  timeout: 'GW_RPC_UPSTREAM_TIMEOUT',
  'no-upstream': 'GW_RPC_NO_HEALTHY_UPSTREAM',
  'bad-response': 'GW_RPC_UPSTREAM_BAD_RESPONSE',
  'not-found': 'GW_RPC_NOT_FOUND',
  'method-not-allowed': 'GW_RPC_HTTP_METHOD_NOT_ALLOWED',
  'body-too-large': 'GW_RPC_BODY_TOO_LARGE',
  'malformed-http': 'GW_RPC_MALFORMED_HTTP',
  'expectation-failed': 'GW_RPC_EXPECTATION_FAILED',
  internal: 'GW_RPC_INTERNAL',
};

type Forwarded = Extract<EvmDecision, { kind: 'forward' }>;

const ALLOW = ['allow', 'POST, OPTIONS'];
const CLOSE = ['connection', 'close'];
const JSON_HEADERS = ['content-type', 'application/json', 'x-request-id'];

class EvmRoute implements RouteHandler {
  /** null unless the manifest has a cache block and the chain does not turn it off. */
  private readonly cache: EvmCache | null;
  /** null with validate: off. */
  private readonly params: EvmParamsCheck | null;

  constructor(
    private readonly route: EvmRouteSpec,
    private readonly s: RouteServices,
  ) {
    this.params = route.validate ? evmParamsCheck(route.methods, route.limits, s.validators) : null;
    this.cache = s.cache !== null && route.cache === true ? new EvmCache(route, s.group, s.cache.store, s.cache.spec, s.log, s.circuitOpen, s.cache.shared) : null;
    if (this.cache !== null) s.metrics.cache(this.cache.stats);
  }

  start(): void {
    this.cache?.start();
  }

  stop(): void {
    this.cache?.stop();
  }

  handle(x: Exchange, rest: string, query: string): void {
    // `/<chain>`, `/<chain>/` or `/<chain>/<key>[/]`: nothing else.
    let pathKey: string | null = null;
    if (rest.length > 1) {
      const end = rest.indexOf('/', 1);
      if (end === -1) pathKey = rest.slice(1);
      else if (end === rest.length - 1) pathKey = rest.slice(1, end);
      else return x.fail('not-found');
    }
    if (x.req.method !== 'POST') return x.fail('method-not-allowed', ALLOW);
    whenIdentified(x, this.s.admission.identify(x, this.route, pathKey, query === '' ? NO_KEYS : splitQuery(query).keys), this.keyed, null);
  }

  private readonly keyed = (x: Exchange, key: KeyEntry): void => {
    readBody(x, this.route.limits.maxBodyBytes, (buf) => this.body(x, key, buf));
  };

  private body(x: Exchange, key: KeyEntry, buf: Buffer | null): void {
    if (buf === null) return x.fail('body-too-large', CLOSE);
    const p = key.policy;
    // The key's own batch limit, where it is the tighter one (one null test for a key without).
    const chainMax = this.route.limits.maxBatchSize;
    const max = key.maxBatchSize !== null && key.maxBatchSize < chainMax ? key.maxBatchSize : chainMax;
    const d =
      p !== null && (p.methods !== null || p.contracts !== null)
        ? this.checkWithPolicy(buf, p, max)
        : checkEvmBody(buf, this.route.methods, max, this.params);
    x.label = d.label;
    if (d.kind === 'reply') {
      // Only a batch over the limit is answered with more calls than the limit: refused as the chain's
      // limit refuses one, with the key's limit named.
      if (max !== chainMax && d.count > max) return x.send(RPC_ERRORS.GW_RPC_BATCH_TOO_LARGE.status, rpcErrorJson('GW_RPC_BATCH_TOO_LARGE', 'null', `{"reason":"key","maxBatchSize":${max}}`));
      return x.send(d.status, d.body);
    }
    const cost = this.s.credits;
    this.s.admission.admit(x, key, cost === null ? d.count : d.methods === null ? cost(d.label) : sumCredits(d.methods, cost), this.forward, d);
  }

  /**
   * A key with its own methods or contracts list. The fast path, with the
   * chain's allowlist narrowed to the key's methods, takes a body whose every
   * call is allowed and none has parameters the contracts list checks; any
   * other body goes the general path, where each call is also checked against
   * the key's lists and refused in place with the reason, and what goes
   * upstream is the canonical call that was checked.
   */
  private checkWithPolicy(buf: Buffer, p: KeyPolicy, max: number): EvmDecision {
    const fast = scanPlainRpc(buf, allowedFor(p, this.route.methods), max);
    if (
      fast !== null &&
      fast.kind === 'forward' &&
      (p.contracts === null || !(fast.methods === null ? checksParams(fast.label) : fast.methods.some(checksParams))) &&
      (this.params === null || scannedParamsValid(buf, this.params, fast.label, fast.methods))
    )
      return fast;
    return checkEvmBodyGeneral(buf, this.route.methods, max, callCheck(p), this.params);
  }

  private readonly forward = (x: Exchange, d: Forwarded): void => {
    // Admitted: counted as used, per method.
    const cost = this.s.credits;
    const bucket = this.s.usage.bucket(x.key!.id, this.route.path);
    if (d.methods === null) addUsage(bucket, d.label, 1, cost === null ? 1 : cost(d.label));
    else for (const m of d.methods) addUsage(bucket, m, 1, cost === null ? 1 : cost(m));
    const merge = d.merge;
    if (this.cache !== null && this.fromCache(this.cache, x, d)) return;
    x.plan = merge;
    x.forwardTo(
      this.s.group,
      forwardRequest(
        this.route,
        'POST',
        rpcPath,
        // undici adds content-length from the body.
        JSON_HEADERS.concat(x.id),
        d.body,
        d.idempotent,
        merge === null ? classify : classifyMerged,
        merge === null ? MAX_REWRITE_BYTES : MAX_MERGE_BYTES,
        !d.answered,
      ),
    );
  };

  /** On a chain with a cache: true when the cache answers (or will answer) the call or batch. Kept apart: a chain without it runs none of this. */
  private fromCache(cache: EvmCache, x: Exchange, d: Forwarded): boolean {
    const merge = d.merge;
    // A single call with an id may be answered from memory or join one in flight.
    if (d.methods === null) return merge === null && d.answered && d.idempotent && cache.serve(x, d.label, d.body, d.idStart, d.idEnd);
    // A batch: its calls the cache takes, each so; the others upstream together.
    const batch = cache.serveBatch(x, d.body, d.methods, merge);
    if (batch === null) return false;
    x.plan = batch;
    if (batch.rest !== null) x.forwardTo(this.s.group, forwardRequest(this.route, 'POST', rpcPath, JSON_HEADERS.concat(x.id), batch.rest, d.idempotent, classifyMerged, MAX_MERGE_BYTES, !batch.restAnswered));
    batch.sent();
    return true;
  }

  /** An answer the gateway holds: a batch to merge, or a node's error passed on. */
  rewrite(x: Exchange, r: BufferedResult): void {
    if (x.plan instanceof CachedBatch) {
      // The calls of a batch the cache did not take: their answers join the others'.
      if (r.status >= 200 && r.status < 300) return x.plan.restAnswer(r.body);
      this.s.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: x.id }, 'upstream answer is not JSON-RPC');
      return x.fail('bad-response');
    }
    const merge = x.plan as BatchMerge | null;
    if (merge !== null && r.status >= 200 && r.status < 300) {
      const merged = mergeBatch(merge, r.body);
      // Nothing to answer (only notifications): no body, as JSON-RPC requires.
      if (merged !== null) return x.send(merged.length === 2 ? 204 : 200, merged);
    } else if (merge === null && isJsonRpcAnswer(r.body)) {
      // The node's own JSON-RPC error, with its status: passed on unchanged.
      return x.send(r.status, r.body);
    }
    this.s.log.warn({ event: 'upstream_bad_response', upstream: r.upstream.name, status: r.status, reqId: x.id }, 'upstream answer is not JSON-RPC');
    x.fail('bad-response');
  }
}

function sumCredits(methods: readonly string[], cost: (name: string) => number): number {
  let n = 0;
  for (const m of methods) n += cost(m);
  return n;
}

/** The key's per-call check, made once per policy. */
const CALL_CHECKS = new WeakMap<KeyPolicy, CallCheck>();
const METHOD_DATA = '{"reason":"method"}';
const CONTRACT_DATA = '{"reason":"contract"}';
function callCheck(p: KeyPolicy): CallCheck {
  let c = CALL_CHECKS.get(p);
  if (c === undefined) {
    c = (method, params, idJson) => {
      const why = callRefusal(p, method, params);
      return why === null ? null : rpcErrorJson('GW_KEY_CALL_POLICY', idJson, why === 'method' ? METHOD_DATA : CONTRACT_DATA);
    };
    CALL_CHECKS.set(p, c);
  }
  return c;
}

function rpcPath(u: Upstream): string {
  return u.rpcPath;
}

function classify(status: number, h: Record<string, string | string[] | undefined>): Verdict {
  if (status >= 500 || isHtml(h)) return 'bad';
  // A 204 (a notification's answer) streams too: Forward fails an empty answer to a call.
  return status === 200 || status === 204 ? 'stream' : 'buffer';
}

function classifyMerged(status: number, h: Record<string, string | string[] | undefined>): Verdict {
  return status >= 500 || isHtml(h) ? 'bad' : 'buffer';
}

function isJsonRpcAnswer(body: Buffer): boolean {
  try {
    const v = JSON.parse(body.toString('utf8')) as unknown;
    const one = (x: unknown) => x !== null && typeof x === 'object' && (x as { jsonrpc?: unknown }).jsonrpc === '2.0';
    return Array.isArray(v) ? v.every(one) : one(v);
  } catch {
    return false;
  }
}

const HEALTH_BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
/**
 * With a chainId in the manifest, the probe is one batch of eth_chainId and
 * eth_blockNumber rather than a second call each round: still one request
 * per upstream per round, and both answers come from the same node at the
 * same moment (two calls through a provider's load balancer could each land
 * on a different node). An upstream that answers the batch with one object (it
 * takes no batches) is asked the two apart, from then on (health.ts).
 */
const CHAIN_ID_BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';
const HEALTH_BATCH = '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]}]';

/** The batch answer's item with this id (answers may come in any order). */
function item(doc: unknown[], id: number): Record<string, any> | undefined {
  for (const x of doc) if (x !== null && typeof x === 'object' && (x as { id?: unknown }).id === id) return x as Record<string, any>;
  return undefined;
}

export const evm: InterfaceModule<'evm-jsonrpc'> = {
  envelope: envelope(NAMES, (n, reason) => ({
    status: RPC_ERRORS[n].status,
    body: rpcErrorJson(n, 'null', reason === undefined ? undefined : reason === 'quota' ? `{"reason":"quota","resetsAt":"${RESETS_AT}"}` : `{"reason":"${reason}"}`),
  })),
  handler: (route, services) => new EvmRoute(route, services),
  health: {
    request: (route, u) => ({ path: u.rpcPath, method: 'POST', body: route.chainId === undefined ? HEALTH_BODY : HEALTH_BATCH }),
    head(doc) {
      // A batch (with a chainId): the eth_blockNumber item; no such item, not serving.
      const one = Array.isArray(doc) ? item(doc, 2) : doc;
      if (one === undefined || 'error' in one) return null; // the node refuses eth_blockNumber: not serving
      const result: unknown = one.result;
      return typeof result === 'string' ? Number.parseInt(result, 16) : undefined;
    },
    identity(route) {
      const want = route.chainId;
      if (want === undefined) return null;
      return {
        check(doc) {
          // The batch's eth_chainId item, or eth_chainId's own answer (asked apart).
          const result: unknown = Array.isArray(doc) ? item(doc, 1)?.result : doc.id === 1 ? doc.result : undefined;
          if (typeof result !== 'string' || !/^0x[0-9a-fA-F]+$/.test(result)) return false;
          const id = Number.parseInt(result, 16);
          return id === want || `chainId ${id}`;
        },
      };
    },
    apart: (route, u) =>
      route.chainId === undefined
        ? null
        : { head: { path: u.rpcPath, method: 'POST', body: HEALTH_BODY }, identity: { path: u.rpcPath, method: 'POST', body: CHAIN_ID_BODY } },
  },
};
