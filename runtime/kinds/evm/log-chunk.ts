// One chunk of an eth_getLogs range and where its outcome goes
// (kinds/evm/log-range-call.ts sends the chunks): a held chunk's ChunkTarget, a
// whole range's JudgedStream on a chain of one upstream; and sendOwn, how the
// layer hands on an answer it made.
import type { IncomingHttpHeaders } from 'node:http';
import { deliver, JSON_HEADERS, streams, type CacheSays, type Cancelable, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldTarget, type Sink } from '../../dispatch.ts';
import { errorOf } from './log-codec.ts';
import { rangeComplaint, type RangeComplaint } from './log-range-errors.ts';
import { mayBeError } from '../../upstreams/throttle.ts';
import type { Upstream } from '../../upstreams/upstream.ts';

/** A streamed whole range's answer is held to be judged while it is this short: every refusal in kinds/evm/log-range-errors.ts's table is under 600 bytes. */
const MAX_JUDGED = 1024;

/**
 * An answer this layer made (a merged range, its own error), handed on as the
 * sender asked (dispatch.ts `deliver`), the cache's part told first; one held
 * past the sender's maxBuffer fails as too large.
 */
export function sendOwn(target: HeldTarget, request: ForwardRequest, u: Upstream, body: Buffer, cache?: CacheSays): void {
  const r: Extract<ForwardResult, { kind: 'buffered' }> = { kind: 'buffered', upstream: u, status: 200, headers: JSON_HEADERS, body };
  if (!streams(request) && body.length > request.transport.maxBuffer) return target.forwarded({ kind: 'failed', fail: 'bad-response', upstream: u });
  if (cache !== undefined) target.cacheSaid?.(cache);
  deliver(target, request, r);
}

export interface Chunk {
  readonly from: number;
  readonly to: number;
  /** The whole range, within every cap: the client's call goes as it came (its tags as the pool's rewriteTags says). */
  readonly whole?: boolean;
  /** Upstreams that failed it. */
  readonly tried: Set<Upstream>;
}

/** What a chunk's outcome is told to: its range's call (RangeCall). */
export interface ChunkOwner {
  done(t: ChunkTarget, r: ForwardResult): void;
  passed(t: JudgedStream, r: ForwardResult): void;
  refused(t: JudgedStream, u: Upstream, error: Record<string, unknown>, complaint: RangeComplaint): void;
}

/** Where one chunk's outcome goes. */
export class ChunkTarget implements HeldTarget {
  running: Cancelable | null = null;
  finished = false;
  /** How the cache's layer took part in the chunk's answer (none: it did not). */
  said: CacheSays | null = null;

  constructor(
    private readonly call: ChunkOwner,
    readonly chunk: Chunk,
  ) {}

  cacheSaid(c: CacheSays): void {
    this.said = c;
  }

  forwarded(r: ForwardResult): void {
    this.finished = true;
    this.call.done(this, r);
  }
}

/**
 * A whole range on a chain of one upstream, streamed to its client as any
 * call there is. Only an answer short enough to be an error is held (nothing
 * written yet) until it is whole: a refusal of the range (kinds/evm/log-range-errors.ts)
 * never reaches the client, and the range is split instead; anything else goes
 * on as it came, head first.
 */
export class JudgedStream implements ForwardTarget {
  running: Cancelable | null = null;
  finished = false;
  readonly res: Sink;
  private head: { status: number; headers: IncomingHttpHeaders; u: Upstream } | null = null;
  /** What came while it may still be a refusal; null once it is passed on. */
  private held: Buffer[] | null = [];
  private size = 0;
  private refusal: { u: Upstream; error: Record<string, unknown>; complaint: RangeComplaint } | null = null;

  constructor(
    private readonly call: ChunkOwner,
    readonly chunk: Chunk,
    private readonly out: ForwardTarget,
  ) {
    const res = out.res;
    // Forward writes here what it would write to the client's response.
    this.res = {
      get destroyed() {
        return res.destroyed;
      },
      get headersSent() {
        return res.headersSent;
      },
      write: (b: Buffer) => this.write(b),
      end: () => this.end(),
      once: (event: string, f: () => void) => res.once(event, f),
      destroy: (e?: Error) => res.destroy(e),
    } as unknown as Sink;
  }

  streamHead(status: number, headers: IncomingHttpHeaders, u: Upstream): void {
    this.head = { status, headers, u };
  }

  private write(b: Buffer): boolean {
    const held = this.held;
    if (held !== null) {
      if (this.head?.status === 200 && this.size + b.length <= MAX_JUDGED && (this.size > 0 || mayBeError(b))) {
        held.push(b);
        this.size += b.length;
        return true;
      }
      this.pass();
    }
    return this.out.res.write(b);
  }

  /** Not a refusal: the head and what was held go to the client. */
  private pass(): void {
    const held = this.held!;
    this.held = null;
    const h = this.head!;
    this.out.streamHead(h.status, h.headers, h.u);
    for (const b of held) this.out.res.write(b);
  }

  private end(): void {
    if (this.held !== null && this.size > 0) {
      const error = errorOf(Buffer.concat(this.held, this.size));
      const complaint = error === null ? null : rangeComplaint(error);
      if (error !== null && complaint !== null && this.chunk.to > this.chunk.from) {
        this.held = null;
        this.refusal = { u: this.head!.u, error, complaint };
        return;
      }
    }
    if (this.held !== null) this.pass();
    this.out.res.end();
  }

  forwarded(r: ForwardResult): void {
    this.finished = true;
    const f = this.refusal;
    if (f !== null && r.kind === 'streamed') return this.call.refused(this, f.u, f.error, f.complaint);
    this.call.passed(this, r);
  }
}
