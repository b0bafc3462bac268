// A Blockbook or Rosetta pool's call whose answer it must see before the
// client does (doc-pool.ts): a lookup by block hash, asked again of another
// upstream when a node says it has no such block, and Rosetta's
// /network/status, whose head is made the served one. Each attempt goes
// through the dispatch below the pool (a Forward), held whole; the answer goes
// to the client as the route would have had it (streamed where the route
// streams, else to its rewrite: dispatch.ts's deliver).
import { deliver, held, type Attempt, type Cancelable, type Dispatch, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldRequest, type HeldTarget } from '../dispatch.ts';
import type { Upstream, UpstreamGroup } from '../upstreams/upstream.ts';
import type { PoolStats } from './stats.ts';
import { MAX_HELD } from '../upstreams/forward.ts';

export type Buffered = Extract<ForwardResult, { kind: 'buffered' }>;

/** What a held call does with an answer. */
export interface HeldRules {
  /** Upstreams a try again may go to, after `r` (null: the answer stands). */
  again(r: Buffered): ((u: Upstream) => boolean) | null;
  /** The body the client gets in place of a good answer's (null: as it came). */
  rewrite(r: Buffered): Buffer | null;
}

/** Tries again at most, per call. */
const MAX_RETRIES = 2;

export class HeldDoc implements Cancelable, HeldTarget {
  private forward: Attempt | null = null;
  private readonly tried = new Set<Upstream>();
  private retries = 0;
  private over = false;
  private readonly held: HeldRequest;

  constructor(
    private readonly next: Dispatch<ForwardTarget, Attempt>,
    private readonly target: HeldTarget,
    private readonly request: ForwardRequest,
    private readonly group: UpstreamGroup,
    private readonly accept: ((u: Upstream) => boolean) | undefined,
    private readonly rules: HeldRules,
    private readonly stats: PoolStats,
  ) {
    this.held = held(request, { maxBuffer: Math.max(request.transport.maxBuffer, MAX_HELD) });
  }

  start(accept = this.accept): void {
    this.forward = this.next(this, held(this.held, { accept, skip: this.tried }), this.group);
  }

  cancel(): void {
    this.over = true;
    this.forward?.cancel();
  }

  forwarded(r: ForwardResult): void {
    if (this.over) return;
    if (r.upstream !== null) this.tried.add(r.upstream);
    if (r.kind !== 'buffered') return this.finish(r);
    const again = this.retries < MAX_RETRIES ? this.rules.again(r) : null;
    if (again !== null && this.group.hasOther(r.upstream, this.tried, again)) {
      this.retries++;
      this.stats.retries.state++;
      return this.start(again);
    }
    const body = r.status === 200 ? this.rules.rewrite(r) : null;
    this.finish(body === null ? r : { ...r, body });
  }

  private finish(r: ForwardResult): void {
    this.over = true;
    deliver(this.target, this.request, r);
  }
}
