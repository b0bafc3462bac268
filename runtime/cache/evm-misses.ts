// The misses of one turn of the event loop, sent upstream together as one
// batch (cache.batch): the first miss's own request with the batch as its
// body, through the same forwarding as any call.
import { MAX_ANSWER_DEPTH, splitBatchAnswer } from '../json-scan.ts';
import type { ForwardResult, HeldTarget } from '../proxy.ts';
import { UpstreamGroup, type Upstream } from '../upstreams/upstream.ts';
import { failFlight, X_CACHE, X_CACHE_LOG } from './common.ts';
import type { Flight } from './core.ts';
import { CLOSE, COMMA, OPEN, type EvmCache, type EvmFlight, type MissSink } from './evm-types.ts';

/**
 * The misses of one turn of the event loop, sent as batches of up to
 * `cache.batch` to the chain's upstreams that take batches (Upstream.takesBatches,
 * learned by a batch of misses or a poll; an upstream back from down is asked
 * again); each alone with `batch: 1`, or when none takes batches.
 */
export class MissQueue implements MissSink {
  private queued: Flight<EvmFlight>[] = [];
  private flushing = false;
  /** While a client's batch is taken apart: its misses, sent together after. */
  private gathering: Flight<EvmFlight>[] | null = null;
  private takers: UpstreamGroup | null;

  constructor(
    private readonly cache: Pick<EvmCache, 'core'>,
    private readonly max: number,
  ) {
    this.takers = cache.core.group;
  }

  add(f: Flight<EvmFlight>): void {
    if (this.gathering !== null) return void this.gathering.push(f);
    if (!this.batching) return f.send();
    this.queued.push(f);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(this.flush);
  }

  gather(): void {
    this.gathering = [];
  }

  release(): void {
    const gathered = this.gathering ?? [];
    this.gathering = null;
    if (this.batching) for (const f of gathered) this.add(f);
    else this.together(gathered);
  }

  private get batching(): boolean {
    return this.max > 1 && this.batchTakers() !== null;
  }

  private readonly flush = (): void => {
    this.flushing = false;
    const all = this.queued;
    this.queued = [];
    for (let i = 0; i < all.length; i += this.max) this.together(all.slice(i, i + this.max));
  };

  private together(flights: Flight<EvmFlight>[]): void {
    const g = this.batchTakers();
    // Whether an upstream is usable now is the dispatch's to say, at the one instant it picks: judged here too, a
    // throttle's cooldown could end between the two looks, and the calls would go alone to a node that takes batches.
    if (flights.length > 1 && g !== null) new MissBatch(this.cache, flights, g, this).start();
    else for (const f of flights) f.send();
  }

  /** The chain's upstreams that take batches, null when none does. Each change is logged once. */
  private batchTakers(): UpstreamGroup | null {
    const all = this.cache.core.group.all;
    const g = this.takers;
    let n = 0;
    for (const u of all) if (u.takesBatches) n++;
    // The same upstreams as last time: the group holds only those that took batches when it was made.
    if (g === null ? n === 0 : n === g.all.length && g.all.every((u) => u.takesBatches)) return g;
    const had = new Set(g?.all);
    this.takers = n === 0 ? null : n === all.length ? this.cache.core.group : new UpstreamGroup(all.filter((u) => u.takesBatches));
    const log = this.cache.core.log;
    const chain = this.cache.core.path;
    for (const u of all) {
      if (!u.takesBatches && had.has(u)) {
        const msg = n === 0 ? 'upstream takes no batches: cache misses now go one by one' : "upstream takes no batches: batches of cache misses now go to the chain's other upstreams";
        log.warn({ event: 'upstream_refused_batch', chain, upstream: u.name }, msg);
      } else if (u.takesBatches && !had.has(u)) {
        log.info({ event: 'upstream_batches_again', chain, upstream: u.name }, 'upstream back from down: batches of cache misses go to it again');
      }
    }
    return this.takers;
  }

  refused(u: Upstream): void {
    u.takesBatches = false;
    this.batchTakers();
  }
}

/** Several misses in one upstream request: each flight gets its own item of the answer, as if it had gone alone. */
class MissBatch implements HeldTarget {
  constructor(
    private readonly cache: Pick<EvmCache, 'core'>,
    private readonly flights: readonly Flight<EvmFlight>[],
    private readonly group: UpstreamGroup,
    private readonly queue: MissQueue,
  ) {}

  start(): void {
    const parts: Buffer[] = [OPEN];
    this.flights.forEach((f, i) => {
      if (i > 0) parts.push(COMMA);
      const d = f.data;
      parts.push(d.body.subarray(0, d.idStart), Buffer.from(String(i)), d.body.subarray(d.idEnd));
    });
    parts.push(CLOSE);
    const core = this.cache.core;
    core.stats.batches++;
    core.stats.batched += this.flights.length;
    // The first miss's request with the batch as its body: not that miss's Call any more.
    core.send(this, { ...this.flights[0]!.request, body: Buffer.concat(parts), call: undefined }, this.group);
  }

  forwarded(r: ForwardResult): void {
    const flights = this.flights;
    const core = this.cache.core;
    if (r.kind !== 'buffered') {
      for (const f of flights) core.close(f as Flight<unknown>);
      // One failure, logged once, for every client waiting on the batch.
      const members = flights.flatMap((f) => f.members);
      flights.forEach((f) => f.members.forEach((m, i) => ((m.cacheTag = i === 0 ? X_CACHE.miss : X_CACHE.coalesced), (m.cacheLog = i === 0 ? X_CACHE_LOG.miss : X_CACHE_LOG.coalesced))));
      return failFlight(core.log, r, members);
    }
    if (r.status >= 500) {
      // The node failed (after the retries): every call in the batch fails as a lone call's bad answer would, logged once.
      core.log.warn({ event: 'upstream_bad_response', chain: core.path, upstream: r.upstream.name, status: r.status, reqId: flights[0]!.firstId }, 'upstream failed a batch of cache misses');
      for (const f of flights) f.badResponse(r.upstream);
      return;
    }
    const items = r.status === 200 ? splitBatchAnswer(r.body, MAX_ANSWER_DEPTH) : null;
    // Not a batch answer (a node that takes no batches answers one error, or a 4xx): each goes alone, and so do later
    // misses. (A 429 never comes here: it is a throttle, a failed attempt: proxy.ts, throttle.ts.)
    if (items === null) {
      this.queue.refused(r.upstream);
      for (const f of flights) f.send();
      return;
    }
    const got = new Array<Buffer | undefined>(flights.length);
    for (const it of items) {
      const i = it.id === null ? -1 : Number(it.id);
      if (Number.isInteger(i) && i >= 0 && i < got.length && got[i] === undefined) got[i] = r.body.subarray(it.start, it.end);
    }
    flights.forEach((f, i) => {
      const item = got[i];
      // An item the node left out: that call goes alone.
      if (item === undefined) f.send();
      else f.forwarded({ kind: 'buffered', upstream: r.upstream, status: 200, headers: r.headers, body: item });
    });
  }
}
