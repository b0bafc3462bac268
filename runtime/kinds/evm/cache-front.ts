// The EVM cache's rules over the core (core.ts): which calls take part and in
// which scope (policy.ts), the answer cut around its id so a hit needs no
// parse, and eth_blockNumber's floor (chain-view.ts).
//  - only a single call with an id, of a method the policy lists, whose
//    answer is a result that is not null (never an error, never null);
//  - where the manifest names a chainId, eth_chainId and net_version are
//    answered from it and never reach a node;
//  - an answer addressed by block number is kept forever only once that block
//    is at or below the finalized block (the lowest the usable upstreams
//    report; unknown means nothing is final);
//  - an answer addressed by hash (a block, a transaction, a receipt) is kept
//    forever only once its block is final and its hash is the canonical one
//    at that number (a poll asks an upstream at the head); a transaction not
//    yet in a block is never kept;
//  - eth_getLogs is kept by the cache's layer below the ranges layer
//    (evm-logs.ts), chunk by chunk; here its answer only says X-Cache as its
//    chunks went.
import { Call } from './call.ts';
import type { Located } from './methods.ts';
import type { ClientTarget } from '../../exchange.ts';
import { hasDuplicateKeys, MAX_ANSWER_DEPTH, quantity } from '../../jsonrpc/scan.ts';
import { answerOf } from '../../jsonrpc/answer.ts';
import { forwardAs, NOTHING, type Cancelable, type ForwardRequest, type ForwardResult } from '../../dispatch.ts';
import type { EvmRouteSpec } from '../../types.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import { sendLogs } from './cache-logs.ts';
import { failFlight, tagFlight, X_CACHE, X_CACHE_LOG, type FlightMember } from '../../cache/common.ts';
import type { CacheCore, Flight, FlightLanding } from '../../cache/core.ts';
import { serveBatch } from './cache-batch.ts';
import type { EvmFlight } from './cache-types.ts';
import { isCacheable, scopeOf } from './cache-policy.ts';

const NULL = Buffer.from('null');

export class EvmFront implements FlightLanding<EvmFlight> {
  /** eth_chainId and net_version's results, where the manifest names the chain id. */
  private readonly constants: ReadonlyMap<string, string> | null;
  /** What every key of the chain starts with: the store holds every chain's entries. */
  private readonly keyPrefix: string;
  /** Whether the chain allows eth_getLogs: then the cache's layer below the ranges keeps its final chunks (evm-logs.ts). */
  private readonly logs: boolean;

  constructor(
    readonly route: EvmRouteSpec,
    readonly core: CacheCore,
  ) {
    const id = route.chainId;
    this.constants = id === undefined ? null : new Map([['eth_chainId', `"0x${id.toString(16)}"`], ['net_version', `"${id}"`]]);
    this.keyPrefix = `${route.listener}/${route.path} `;
    this.logs = route.methods.has('eth_getLogs');
  }

  /**
   * The cache's front, a layer at the top of the chain (under admission's
   * admit step; chains.ts): a call or batch the cache takes, by the guard's
   * Calls the route's request carries, is answered, joined to a flight or
   * sent as one; the rest goes on down the layers as it came.
   */
  readonly front = (x: ClientTarget, request: ForwardRequest): Cancelable => {
    const { one, batch } = request.calls;
    if (one instanceof Call) {
      // A read the policy lists, with an id (a notification has no answer to keep).
      if (isCacheable(one.method) && !one.write && one.idFrom >= 0 && this.take(x, one, request)) return NOTHING;
      // eth_getLogs: its answer says X-Cache as the cache's layer below the ranges did with its chunks.
      if (this.logs && one.method === 'eth_getLogs') return sendLogs(x, this.core.dispatch, request);
    } else if (batch !== undefined && batch.some((c) => isCacheable(c.method)) && serveBatch(this, x, batch, request)) return NOTHING;
    return this.core.dispatch(x, request);
  };

  /**
   * One call: from memory (a hit), joined to a flight, or sent as a new one.
   * False when the cache does not take it. The request that goes upstream is
   * the route's own (`request`, whose call it is), or, for a call of a client
   * batch (`together`: the batch's, the client), one of its own with the
   * batch's transport.
   */
  take(m: FlightMember, call: Call, request: ForwardRequest, together: object | null = null): boolean {
    // The key is the call as sent with its id cut out (the guard has checked the body: one object, this one method):
    // where its Call has the id (found once, and kept for the layers below).
    const idStart = call.idFrom;
    if (idStart < 0) return false;
    const idEnd = call.idTo;
    const method = call.method;
    const b = typeof call.body === 'string' ? Buffer.from(call.body) : call.body;
    const core = this.core;
    const constant = this.constants?.get(method);
    if (constant !== undefined) {
      core.stats.hits++;
      hit(m);
      m.send(200, `{"jsonrpc":"2.0","id":${b.toString('utf8', idStart, idEnd)},"result":${constant}}`);
      return true;
    }
    const key = this.keyPrefix + b.toString('latin1', 0, idStart) + '\u0000' + b.toString('latin1', idEnd);
    const e = core.hit(key);
    if (e !== undefined) {
      core.stats.hits++;
      hit(m);
      const n = e.number >= 0 ? core.view.blockNumber(e.number) : -1;
      m.send(200, n === -1 ? withId(e.prefix, b, idStart, idEnd, e.suffix) : numberAnswer(b.toString('utf8', idStart, idEnd), n));
      return true;
    }
    // The client's id as it sent it (a long number keeps all its digits).
    const idJson = b.toString('utf8', idStart, idEnd);
    const joined = core.joinable(key);
    if (joined !== undefined) {
      joined.join(m, idJson);
      return true;
    }
    // Params that name a key twice may mean another block to the node than to JSON.parse: forwarded, never kept
    // or coalesced. Only a chain with validate: off sends them as they came; where params are checked, the guard
    // has already re-serialized them.
    let params: unknown;
    // Checked by the guard: by position (or none), and read there.
    if (this.route.validate) params = call.params;
    else {
      const doc = call.doc as { params?: unknown } | undefined;
      if (doc === undefined || hasDuplicateKeys(b, doc)) return false;
      params = doc.params;
    }
    const scope = scopeOf(method, params);
    if (scope === null) return false;
    // The layers below (a pool) read the same Call from the request.
    const sent = together === null ? request : forwardAs(request, { one: call, together }, call.body, { emptyOk: false });
    const f = core.open<EvmFlight>(key, { method, scope }, this, sent);
    f.join(m, idJson);
    // An answer that may be final may be in Redis already: asked first, then the node.
    const mayLast = scope.kind === 'forever' || scope.kind === 'hash' || (scope.kind === 'block' && core.view.isFinal(scope.number));
    const shared = mayLast ? core.sharedGet(key) : null;
    // Misses of one turn bound for the same upstreams go together below (cache.batch: jsonrpc/forward-batch.ts).
    if (shared === null) f.send();
    else void shared.then((parts) => (parts === null ? f.send() : this.fromShared(f, parts[0], parts[1])), (err: unknown) => f.crashed(err));
    return true;
  }

  /** Answered from Redis: kept in memory for good (only final answers are ever put there), and every client waiting gets it as a hit. */
  private fromShared(f: Flight<EvmFlight>, prefix: Buffer, suffix: Buffer): void {
    const core = this.core;
    core.close(f as Flight<unknown>);
    core.keepForever(f.key, prefix, suffix, -1, null);
    core.stats.hits += f.members.length;
    core.stats.sharedHits++;
    f.members.forEach((m, i) => {
      m.later(() => {
        hit(m);
        m.send(200, Buffer.concat([prefix, Buffer.from(f.ids[i]!), suffix]));
      });
    });
  }

  /** A flight's answer: every client waiting gets it (MISS for the first, COALESCED for the others); kept if the rules allow. */
  landed(f: Flight<EvmFlight>, r: ForwardResult): void {
    const core = this.core;
    if (r.kind !== 'buffered') {
      core.close(f as Flight<unknown>);
      tagFlight(f.members);
      return failFlight(core.log, r, f.members);
    }
    const u = r.upstream;
    const body = r.body;
    const spans = answerOf(body).spansWithin(MAX_ANSWER_DEPTH);
    if (spans === null || spans.idStart === -1) {
      core.log.warn({ event: 'upstream_bad_response', chain: core.path, upstream: u.name, status: r.status, reqId: f.firstId }, 'upstream answer is not JSON-RPC');
      return f.badResponse(u);
    }
    const prefix = body.subarray(0, spans.idStart);
    const suffix = body.subarray(spans.idEnd);
    const result = spans.resultStart === -1 ? null : body.subarray(spans.resultStart, spans.resultEnd);
    const ok = r.status === 200 && !spans.hasError && result !== null && !result.equals(NULL);
    // eth_blockNumber: what this answer says, and what the clients get.
    let number = -1;
    let served = -1;
    if (ok && f.data.method === 'eth_blockNumber') {
      number = quantity(JSON.parse(result.toString('latin1')));
      served = number < 0 ? -1 : core.view.blockNumber(number);
    }
    tagFlight(f.members);
    f.members.forEach((m, i) => {
      m.upstream = u;
      const idJson = f.ids[i]!;
      if (served !== -1) m.send(200, numberAnswer(idJson, served));
      else m.send(r.status, Buffer.concat([prefix, Buffer.from(idJson), suffix]));
    });
    core.stats.misses++;
    core.stats.coalesced += f.members.length - 1;
    core.close(f as Flight<unknown>);
    if (ok && served === -1) this.keep(f, u, prefix, suffix, result, number);
  }

  /** Keeps an answer if the rules allow (`result`: the answer's result, not null). */
  private keep(f: Flight<EvmFlight>, u: Upstream, prefix: Buffer, suffix: Buffer, result: Buffer, number: number): void {
    const core = this.core;
    const view = core.view;
    const scope = f.data.scope;
    if (!core.trusted(f as Flight<unknown>, u)) return;
    if (scope.kind === 'forever') return core.keepForever(f.key, prefix, suffix, number, u);
    // Sent under another head, or answered by an upstream not at the head: not kept.
    if (!core.current(f as Flight<unknown>, u)) return;
    if (scope.kind === 'block' && view.isFinal(scope.number)) {
      // A final block by number: its hash is the canonical one, for answers by hash to check against.
      if (f.data.method === 'eth_getBlockByNumber') {
        const b = locate(result, 'block');
        if (b !== null && b.number === scope.number) view.learnCanonical(b.number, b.hash);
      }
      return core.keepForever(f.key, prefix, suffix, number, u);
    }
    let at: { number: number; hash: string } | null = null;
    if (scope.kind === 'hash') {
      at = locate(result, scope.located);
      // A transaction not in a block yet (pending) is never kept: the mempool changes without the head moving.
      if (scope.located === 'tx' && at === null) return;
      if (at !== null && view.isFinal(at.number) && view.canonicalHash(at.number) === at.hash) return core.keepForever(f.key, prefix, suffix, number, u);
    }
    const e = core.keepForHead(f.key, prefix, suffix, number);
    // By hash, in a final block whose canonical hash is not known yet: the next poll asks for it.
    if (e !== null && at !== null && view.isFinal(at.number)) core.awaitCanonical(f.key, at.number, at.hash);
  }
}

function hit(m: FlightMember): void {
  m.cacheTag = X_CACHE.hit;
  m.cacheLog = X_CACHE_LOG.hit;
}

/** The block an answer says it is in: a block's number and hash, a transaction's blockNumber and blockHash; null when it has none. */
function locate(result: Buffer, located: Located): { number: number; hash: string } | null {
  let r: { number?: unknown; hash?: unknown; blockNumber?: unknown; blockHash?: unknown };
  try {
    r = JSON.parse(result.toString('utf8')) as typeof r;
  } catch {
    return null;
  }
  if (r === null || typeof r !== 'object') return null;
  const number = quantity(located === 'block' ? r.number : r.blockNumber);
  const hash = located === 'block' ? r.hash : r.blockHash;
  return number >= 0 && typeof hash === 'string' ? { number, hash } : null;
}

/**
 * A kept answer with the client's id: its bytes as the request had them,
 * copied once into the answer (TypedArray#set and a loop for the id: a
 * third of Buffer#copy's time at these sizes, a fifth of Buffer.concat's).
 */
function withId(prefix: Buffer, request: Buffer, idStart: number, idEnd: number, suffix: Buffer): Buffer {
  const out = Buffer.allocUnsafe(prefix.length + (idEnd - idStart) + suffix.length);
  out.set(prefix, 0);
  let o = prefix.length;
  for (let i = idStart; i < idEnd; i++) out[o++] = request[i]!;
  out.set(suffix, o);
  return out;
}

function numberAnswer(idJson: string, n: number): string {
  return `{"jsonrpc":"2.0","id":${idJson},"result":"0x${n.toString(16)}"}`;
}
