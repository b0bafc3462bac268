// The cache's rules for Rosetta and Blockbook, over the core (core.ts). Such
// an answer has no id: it is kept as the bytes the upstream sent, with the
// headers that describe them, and given to a client as the route would give
// an upstream's answer (streamed as it came, or rewritten by the route).
//  - only a 200 answer, and only what the interface says is worth keeping
//    (DocRules.keep): bound to the head, or in a block;
//  - in a block: forever once the block is final (the chain's finality depth
//    below the head) and, when the call named it by hash only, once its hash
//    is the canonical one at that number (as an upstream at the head answered
//    for that number); bound to the head before that.
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { ClientTarget } from '../exchange.ts';
import { NOTHING, type Cancelable, type ForwardRequest, type ForwardResult, type Transport } from '../dispatch.ts';
import { DocCall } from '../kinds/doc-call.ts';
import { failFlight, tagFlight, X_CACHE, X_CACHE_LOG } from './common.ts';
import type { CacheCore, Flight, FlightLanding } from './core.ts';

/** What may be kept of an answer: bound to the head, or in block `number` (named by number, or by hash only). */
export type Keep = { readonly kind: 'head' } | { readonly kind: 'block'; readonly number: number; readonly hash: string; readonly byNumber: boolean };

/** An interface's rules, as data the core applies. */
export interface DocRules {
  /** What makes two reads identical (everything that reaches the upstream), or null when the read does not take part. */
  key(x: ClientTarget, t: Transport, doc: DocCall): string | null;
  /** Could the answer be kept forever (so worth asking the shared tier first)? */
  mayLast(endpoint: string): boolean;
  /** What may be kept of a 200 answer (the interface's own description of it); null: nothing. */
  keep(endpoint: string, sent: string, body: Buffer, headers: IncomingHttpHeaders): Keep | null;
}

interface DocFlight {
  readonly endpoint: string;
  readonly sent: string;
}

/** Headers kept with an entry: those that describe its bytes. */
const KEPT_HEADERS = ['content-type', 'content-encoding', 'etag', 'last-modified', 'vary'];
const EMPTY = Buffer.alloc(0);

export class DocLayer implements FlightLanding<DocFlight> {
  constructor(
    private readonly core: CacheCore,
    private readonly rules: DocRules,
  ) {}

  /**
   * The cache's front, a layer at the top of the chain (under admission's
   * admit step; chains.ts): a read the rules take, by the guard's
   * DocCall the route's request carries, is answered from memory, joins one
   * in flight, or goes as a flight; the rest goes on down the layers.
   */
  readonly front = (x: ClientTarget, request: ForwardRequest): Cancelable => {
    const core = this.core;
    const doc = request.calls.one;
    const k = doc instanceof DocCall ? this.rules.key(x, request.transport, doc) : null;
    if (k === null || !(doc instanceof DocCall)) return core.dispatch(x, request);
    const endpoint = doc.endpoint;
    const key = `${core.path} ${k}`;
    const e = core.hit(key);
    if (e !== undefined) {
      core.stats.hits++;
      x.cacheTag = X_CACHE.hit;
      x.cacheLog = X_CACHE_LOG.hit;
      deliver(x, request, 200, e.headers ?? {}, e.prefix, null);
      return NOTHING;
    }
    const joined = core.joinable(key);
    if (joined !== undefined) {
      joined.join(x, '');
      return NOTHING;
    }
    const body = request.transport.body;
    const sent = typeof body === 'string' ? body : '';
    const f = core.open<DocFlight>(key, { endpoint, sent }, this, request);
    f.join(x, '');
    const shared = this.rules.mayLast(endpoint) ? core.sharedGet(key) : null;
    if (shared === null) {
      f.send();
      return NOTHING;
    }
    // Maybe final: another replica may have kept it in Redis.
    void shared.then((parts) => {
      try {
        if (parts === null) return f.send();
        const headers = JSON.parse(parts[0].toString('utf8')) as Record<string, string>;
        core.close(f as Flight<unknown>);
        core.keepForever(key, parts[1], EMPTY, -1, null, headers);
        core.stats.hits += f.members.length;
        core.stats.sharedHits++;
        for (const m of f.members) {
          m.cacheTag = X_CACHE.hit;
          m.cacheLog = X_CACHE_LOG.hit;
          m.later(() => deliver(m as ClientTarget, request, 200, headers, parts[1], null));
        }
      } catch (err) {
        f.crashed(err);
      }
    }, (err: unknown) => f.crashed(err));
    return NOTHING;
  };

  landed(f: Flight<DocFlight>, r: ForwardResult): void {
    const core = this.core;
    core.close(f as Flight<unknown>);
    tagFlight(f.members);
    if (r.kind !== 'buffered') return failFlight(core.log, r, f.members);
    for (const m of f.members) {
      m.upstream = r.upstream;
      const x = m as ClientTarget;
      x.later(() => deliver(x, f.request, r.status, r.headers, r.body, r));
    }
    core.stats.misses++;
    core.stats.coalesced += f.members.length - 1;
    if (r.status !== 200 || !core.trusted(f as Flight<unknown>, r.upstream) || !core.current(f as Flight<unknown>, r.upstream)) return;
    const keep = this.rules.keep(f.data.endpoint, f.data.sent, r.body, r.headers);
    if (keep === null) return;
    const kept: Record<string, string> = {};
    for (const name of KEPT_HEADERS) {
      const v = r.headers[name];
      if (typeof v === 'string') kept[name] = v;
    }
    const view = core.view;
    if (keep.kind === 'block' && view.isFinal(keep.number)) {
      if (keep.byNumber) view.learnCanonical(keep.number, keep.hash);
      if (view.canonicalHash(keep.number) === keep.hash) return core.keepForever(f.key, r.body, EMPTY, -1, r.upstream, kept);
    }
    core.keepForHead(f.key, r.body, EMPTY, -1, kept);
  }
}

/** An answer as the route would give it without the cache: streamed as it came where the route would stream it, else to the client as an answer held whole (its route rewrites it). */
function deliver(x: ClientTarget, request: ForwardRequest, status: number, headers: IncomingHttpHeaders, body: Buffer, r: Extract<ForwardResult, { kind: 'buffered' }> | null): void {
  if (request.transport.classify(status, headers) === 'stream') return x.passOn(status, headers, body);
  x.forwarded(r ?? { kind: 'buffered', status, headers, body, upstream: x.upstream! });
}
