// EVM JSON-RPC: `POST /<chain>[/<key>]`, the allowlist guard, and the
// answers the gateway rewrites (a batch with refused items, a node's error).
// Hot path: no closure but the body reader's.
import { RPC_ERRORS, rpcErrorJson } from './errors.ts';
import { readBody, type BufferedResult, type Exchange, type RouteHandler } from '../../exchange.ts';
import { evmParamsCheck, scannedParamsValid, type EvmParamsCheck } from './params.ts';
import { checkEvmBody, checkEvmBodyGeneral, type CallCheck, type EvmDecision } from './guard.ts';
import { callsOf } from './decision.ts';
import { failedAnswer, mergeBatch, mergeItems } from '../../jsonrpc/batch-merge.ts';
import { allowedFor, type KeyPolicy } from '../../keys/key-policy.ts';
import { callRefusal } from './contracts.ts';
import { CONTRACT_METHODS, METHOD_TRAITS } from './methods.ts';
import { scanPlainRpc } from './guard-fast.ts';
import { whenIdentified } from '../../admission/admission.ts';
import type { KeyEntry } from '../../keys/keys.ts';
import type { ForwardRequest, Verdict } from '../../dispatch.ts';
import type { EvmRouteSpec } from '../../types.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import { pathKeyOf, splitQuery } from '../../url.ts';
import { quantity } from '../../jsonrpc/scan.ts';
import { forwardRequest, isHtml, MAX_MERGE_BYTES, MAX_REWRITE_BYTES, NO_KEYS } from '../common.ts';
import { LogRanges, wantsLogRanges } from './log-ranges.ts';
import { LogsLayer } from './cache-logs.ts';
import type { InterfaceModule, RouteServices } from '../interface.ts';
import { EvmFront } from './cache-front.ts';
import { Pool } from './pool.ts';
import { answerThrottled } from '../../upstreams/throttle.ts';
import { evmSocket } from './socket.ts';
import { chainIdentity, evmHeadSocket } from './head-socket.ts';
import { EVM_ENVELOPE } from './envelope.ts';

type Forwarded = Extract<EvmDecision, { kind: 'forward' }>;

const ALLOW = ['allow', 'POST, OPTIONS'];
const CLOSE = ['connection', 'close'];

class EvmRoute implements RouteHandler {
  /** null with validate: off. */
  private readonly params: EvmParamsCheck | null;

  constructor(
    private readonly route: EvmRouteSpec,
    private readonly s: RouteServices,
  ) {
    this.params = route.validate ? evmParamsCheck(route.methods, route.limits, s.validators) : null;
  }

  handle(x: Exchange, rest: string, query: string): void {
    // `/<chain>`, `/<chain>/` or `/<chain>/<key>[/]`: nothing else.
    const pathKey = pathKeyOf(rest);
    if (pathKey === undefined) return x.fail('not-found');
    if (x.req.method !== 'POST') return x.fail('method-not-allowed', ALLOW);
    whenIdentified(x, this.s.admission.identify(x, this.route, pathKey, query === '' ? NO_KEYS : splitQuery(query).keys, null), this.keyed, null);
  }

  private readonly keyed = (x: Exchange, key: KeyEntry): void => {
    readBody(x, this.route.limits, (buf) => this.body(x, key, buf));
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
    // On to the chain's layers, from their top: admission's admit step (JWT, rate limit, quota, usage count).
    x.plan = d;
    x.forwardWith(this.s.dispatch, this.request(x, d));
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
      (p.contracts === null || !(fast.methods === null ? CONTRACT_METHODS.has(fast.label) : fast.methods.some(namesContract))) &&
      (this.params === null || scannedParamsValid(buf, this.params, fast.label, fast.methods, fast.call, fast.calls))
    )
      return fast;
    return checkEvmBodyGeneral(buf, this.route.methods, max, callCheck(p), this.params);
  }

  /** The request of a call or batch, with the guard's Calls (the layers read them; those at the top may answer with no upstream request). */
  private request(x: Exchange, d: Forwarded): ForwardRequest {
    const merge = d.merge;
    return forwardRequest(this.route, {
      method: 'POST',
      path: rpcPath,
      // undici adds content-length from the body.
      headers: ['content-type', 'application/json', 'x-request-id', x.id],
      body: d.body,
      idempotent: d.idempotent,
      classify: merge === null ? classify : classifyMerged,
      maxBuffer: merge === null ? MAX_REWRITE_BYTES : MAX_MERGE_BYTES,
      emptyOk: !d.answered,
      // A provider's throttle in a 200 (-32005, "rate limit"...), also where the answer streams (upstreams/forward.ts, throttle.ts).
      throttled: answerThrottled,
      calls: callsOf(d),
    });
  }

  /** An answer the gateway holds: a batch to merge, or a node's error passed on. */
  rewrite(x: Exchange, r: BufferedResult): void {
    const merge = (x.plan as Forwarded).merge;
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

  /** A batch the guard answered in part merges its split calls' answers in its own slots (pool/batch.ts, dispatch.ts ItemsTaker). */
  takesItems(x: Exchange): boolean {
    const d = x.plan as Forwarded | null;
    return d !== null && d.merge !== null;
  }

  takeItems(x: Exchange, items: readonly (Buffer | readonly Buffer[])[]): void {
    const merge = (x.plan as Forwarded).merge;
    const merged = merge === null ? null : mergeItems(merge, items);
    if (merged !== null) return x.send(200, merged);
    this.s.log.warn({ event: 'upstream_bad_response', upstream: x.upstream?.name, reqId: x.id }, 'upstream answer is not JSON-RPC');
    x.fail('bad-response');
  }

  /** The gateway's error as the answer to the calls it read (their ids); before the body is read, id null. */
  failed(x: Exchange, body: string): string {
    const d = x.plan as Forwarded | null;
    return d === null ? body : failedAnswer(d, body);
  }
}

const namesContract = (method: string): boolean => CONTRACT_METHODS.has(method);

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

/**
 * One poll of an EVM upstream, as one batch (one request per upstream per
 * round, every answer from the same node at the same moment: two calls
 * through a provider's load balancer could each land on another node):
 *  - eth_chainId where the manifest names one, where the chain needs heads
 *    (then its identity names what is kept forever), and in a pool (which
 *    takes its identity from most of its upstreams where the manifest names
 *    none);
 *  - for health alone, eth_blockNumber; where the chain needs heads, the
 *    latest block (number and hash), the finalized and safe ones, the
 *    genesis block's hash, and the final blocks whose canonical hash is
 *    asked for. With `finality: {depth}`, the finalized block is the lowest
 *    of the node's own, its safe block and head − depth.
 * A node that takes no batches gets the same calls one by one.
 */
const ID_CHAIN = 1;
const ID_HEAD = 2;
const ID_FINALIZED = 3;
const ID_SAFE = 4;
const ID_GENESIS = 5;
const ID_LOOKUP = 16;

function call(id: number, method: string, params: string): string {
  return `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":[${params}]}`;
}

/** Whether the poll asks eth_chainId (see above). */
function asksChain(route: EvmRouteSpec, heads: boolean): boolean {
  return route.chainId !== undefined || heads || route.upstreams.length > 1;
}

function pollCalls(route: EvmRouteSpec, heads: boolean, lookups: readonly number[]): string[] {
  const calls: string[] = [];
  if (asksChain(route, heads)) calls.push(call(ID_CHAIN, 'eth_chainId', ''));
  if (!heads) calls.push(call(ID_HEAD, 'eth_blockNumber', ''));
  else {
    calls.push(call(ID_HEAD, 'eth_getBlockByNumber', '"latest",false'));
    calls.push(call(ID_FINALIZED, 'eth_getBlockByNumber', '"finalized",false'), call(ID_SAFE, 'eth_getBlockByNumber', '"safe",false'));
    calls.push(call(ID_GENESIS, 'eth_getBlockByNumber', '"0x0",false'));
    lookups.forEach((n, i) => calls.push(call(ID_LOOKUP + i, 'eth_getBlockByNumber', `"0x${n.toString(16)}",false`)));
  }
  return calls;
}

/** The answer item with this id (answers may come in any order). */
function item(items: readonly unknown[], id: number): Record<string, any> | undefined {
  for (const x of items) if (x !== null && typeof x === 'object' && (x as { id?: unknown }).id === id) return x as Record<string, any>;
  return undefined;
}

function blockAt(items: readonly unknown[], id: number): { number: number; hash: string } | null {
  const b = item(items, id)?.result as { number?: unknown; hash?: unknown } | null | undefined;
  const n = quantity(b?.number);
  return n >= 0 && typeof b?.hash === 'string' ? { number: n, hash: b.hash } : null;
}

/**
 * The finalized block of a poll (-1 unknown): the node's own; with
 * `finality: {depth}`, the lowest of the node's own (where it has the tag),
 * head − depth, and the node's safe block (finalized is never above safe).
 */
function finalizedOf(route: EvmRouteSpec, head: number, own: number, safe: number): number {
  const depth = route.finality ?? null;
  if (depth === null) return own;
  let f = head - depth;
  if (own >= 0) f = Math.min(f, own);
  if (safe >= 0) f = Math.min(f, safe);
  return Math.max(-1, f);
}

export const evm: InterfaceModule<'evm-jsonrpc'> = {
  envelope: EVM_ENVELOPE,
  answersStrays: true,
  batchesCalls: true,
  handler: (route, services) => new EvmRoute(route, services),
  cacheFront: (route, core) => new EvmFront(route, core).front,
  // Below the ranges layer: its chunks in final blocks (kinds/evm/cache-logs.ts).
  cacheLayer: (route, core, next) => (route.methods.has('eth_getLogs') ? new LogsLayer(route, core, next).dispatch : next),
  pool: (route, group, view, log, next) => new Pool(route, group, view, log, next),
  // Tags are rewritten to the safe and finalized blocks the upstreams report.
  poolHeads: (route) => route.rewriteTags,
  followsHeads: (route) => route.websocket === true,
  // eth_getLogs ranges split above the cache's layer and the pool (or the one upstream), below the cache's front
  // (kinds/evm/log-ranges.ts), on every chain that allows eth_getLogs: any upstream, a lone one too, may refuse a range.
  own: (route, group, view, next, log, cached) => (wantsLogRanges(route) ? new LogRanges(route, group, view, next, log, cached).dispatch : next),
  // Every method the method table knows (the manifest checker's, generator/known-methods.ts: a test keeps them equal).
  creditNames: [...METHOD_TRAITS.keys()],
  archive: true,
  socket: evmSocket,
  probe: {
    names: (route) => route.chainId !== undefined,
    requests(route, u, heads, lookups) {
      const calls = pollCalls(route, heads, lookups);
      if (calls.length === 1) return [{ path: u.rpcPath, method: 'POST', body: calls[0]! }];
      if (!u.takesBatches) return calls.map((body) => ({ path: u.rpcPath, method: 'POST' as const, body }));
      return [{ path: u.rpcPath, method: 'POST', body: `[${calls.join(',')}]`, batch: true, calls: calls.length }];
    },
    read(route, answers, heads) {
      const items = answers.flatMap((a) => (a === null ? [] : Array.isArray(a) ? a : [a]));
      let identity = '';
      let own = true;
      const chain = asksChain(route, heads);
      if (chain) {
        const named = chainIdentity(item(items, ID_CHAIN)?.result);
        if (named !== null) {
          identity = named;
          own = route.chainId === undefined || named === `chainId ${route.chainId}`;
        } else if (route.chainId !== undefined) return 'the answer does not say which chain it serves';
      }
      const none = { identity, own, genesis: '', number: Number.NaN, hash: '', finalized: -1, safe: -1, canonical: [] };
      if (!own) return none;
      // A lone eth_blockNumber: its answer, whatever id it carries.
      const head = !chain ? (items[0] as Record<string, any> | undefined) : item(items, ID_HEAD);
      if (head === undefined || head === null || 'error' in head) return 'the answer reports no head'; // the node refuses the call: not serving
      if (!heads) {
        const n = quantity(head.result);
        return { ...none, number: n < 0 ? Number.NaN : n };
      }
      const latest = blockAt(items, ID_HEAD);
      // It answered, but with no block: up, with no head to judge lag or keep answers by.
      if (latest === null) return none;
      // A node without the safe tag answers it with an error: its safe block stays unknown.
      const safe = blockAt(items, ID_SAFE)?.number ?? -1;
      const finalized = finalizedOf(route, latest.number, blockAt(items, ID_FINALIZED)?.number ?? -1, safe);
      const canonical: (readonly [number, string])[] = [];
      for (const a of items) {
        const id = (a as { id?: unknown } | null)?.id;
        if (typeof id !== 'number' || id < ID_LOOKUP) continue;
        const b = blockAt(items, id);
        if (b !== null) canonical.push([b.number, b.hash]);
      }
      return {
        identity,
        own,
        genesis: blockAt(items, ID_GENESIS)?.hash ?? '',
        number: latest.number,
        hash: latest.hash,
        finalized,
        finalizedByDepth: finalized === latest.number - (route.finality ?? Number.NaN),
        safe,
        canonical,
      };
    },
    socket: evmHeadSocket,
  },
};

