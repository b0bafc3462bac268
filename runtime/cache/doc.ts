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
import type { Exchange } from '../exchange.ts';
import type { ForwardRequest, ForwardResult } from '../proxy.ts';
import { failFlight, tagFlight, X_CACHE, X_CACHE_LOG } from './common.ts';
import type { CacheCore, Flight, FlightLanding } from './core.ts';

/** What may be kept of an answer: bound to the head, or in block `number` (named by number, or by hash only). */
export type Keep = { readonly kind: 'head' } | { readonly kind: 'block'; readonly number: number; readonly hash: string; readonly byNumber: boolean };

/** An interface's rules, as data the core applies. */
export interface DocRules {
  /** What makes two reads identical (everything that reaches the upstream), or null when the read does not take part. */
  key(x: Exchange, request: ForwardRequest, call: string): string | null;
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

  /** The chain's forwarder: a read the rules take is answered from memory, joins one in flight, or goes as a flight. */
  readonly forward = (x: Exchange, request: ForwardRequest, call: string): void => {
    const core = this.core;
    const k = this.rules.key(x, request, call);
    if (k === null) return x.forwardWith(core.dispatch, request);
    const key = `${core.path} ${k}`;
    const e = core.hit(key);
    if (e !== undefined) {
      core.stats.hits++;
      x.cacheTag = X_CACHE.hit;
      x.cacheLog = X_CACHE_LOG.hit;
      return deliver(x, request, 200, e.headers ?? {}, e.prefix, null);
    }
    const joined = core.joinable(key);
    if (joined !== undefined) return joined.join(x, '');
    const sent = typeof request.body === 'string' ? request.body : '';
    const f = core.open<DocFlight>(key, { endpoint: x.label, sent }, this, request);
    f.join(x, '');
    const shared = this.rules.mayLast(x.label) ? core.sharedGet(key) : null;
    if (shared === null) return f.send();
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
          m.later(() => deliver(m as Exchange, request, 200, headers, parts[1], null));
        }
      } catch (err) {
        f.crashed(err);
      }
    }, (err: unknown) => f.crashed(err));
  };

  landed(f: Flight<DocFlight>, r: ForwardResult): void {
    const core = this.core;
    core.close(f as Flight<unknown>);
    tagFlight(f.members);
    if (r.kind !== 'buffered') return failFlight(core.log, r, f.members);
    for (const m of f.members) {
      m.upstream = r.upstream;
      const x = m as Exchange;
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

/** An answer as the route would give it without the cache: streamed as it came where the route would stream it, else rewritten by the route. */
function deliver(x: Exchange, request: ForwardRequest, status: number, headers: IncomingHttpHeaders, body: Buffer, r: Extract<ForwardResult, { kind: 'buffered' }> | null): void {
  if (request.classify(status, headers) === 'stream') return x.passOn(status, headers, body);
  x.handler!.rewrite(x, r ?? { kind: 'buffered', status, headers, body, upstream: x.upstream! });
}
