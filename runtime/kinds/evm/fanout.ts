// Calls a pool sends to several upstreams at once: a transaction broadcast to
// every usable upstream (the client gets the first success), and a read asked
// of a quorum of upstreams able to serve its block (served only when they agree).
import { answerOf } from '../../jsonrpc/answer.ts';
import { held, JSON_HEADERS, NOTHING, type Attempt, type Cancelable, type Dispatch, type ForwardRequest, type ForwardResult, type ForwardTarget, type HeldTarget } from '../../dispatch.ts';
import type { Logger } from '../../observe/log.ts';
import type { Upstream, UpstreamGroup } from '../../upstreams/upstream.ts';
import { answerSaysStateGone } from './state-errors.ts';
import type { PoolStats } from '../../pool/stats.ts';
import { MAX_HELD } from '../../upstreams/forward.ts';

type Buffered = Extract<ForwardResult, { kind: 'buffered' }>;

/** Sends `request` to each of `upstreams` once (no retry: a write may have run), and calls `each` with every outcome. */
class Fan implements Cancelable {
  private readonly forwards: Attempt[] = [];
  /** Every upstream's outcome goes to `each`, held whole. */
  private readonly target: HeldTarget;
  private cancelled = false;

  constructor(
    private readonly upstreams: readonly Upstream[],
    private readonly next: Dispatch<ForwardTarget, Attempt>,
    private readonly group: UpstreamGroup,
    private readonly request: ForwardRequest,
    each: (r: ForwardResult) => void,
  ) {
    this.target = { forwarded: each };
  }

  private forward(u: Upstream): Attempt {
    // A provider's throttle in a 200 (-32005, "rate limit"...) is no answer: the route's request judges it (throttle.ts).
    const one = held(this.request, { retries: 0, maxBuffer: Math.max(this.request.transport.maxBuffer, MAX_HELD), accept: (o) => o === u });
    return this.next(this.target, one, this.group);
  }

  start(): void {
    for (const u of this.upstreams) this.forwards.push(this.forward(u));
  }

  /** Sends the request to one more upstream, now (unless the client went away). */
  add(u: Upstream): void {
    if (this.cancelled) return;
    this.forwards.push(this.forward(u));
  }

  cancel(): void {
    this.cancelled = true;
    for (const f of this.forwards) f.cancel();
  }
}

/**
 * eth_sendRawTransaction to every usable upstream: the client gets the first
 * success. Once one has succeeded, what the others answer ("already known",
 * "nonce too low": the same transaction arriving twice) is not passed on:
 * it counts as the success it is. Without a success the client gets the first
 * node's answer. The others are never cancelled (every node should have the
 * transaction), and none is sent twice: no retry after a 5xx.
 */
export function broadcast(next: Dispatch<ForwardTarget, Attempt>, request: ForwardRequest, group: UpstreamGroup, upstreams: readonly Upstream[], stats: PoolStats, deliver: (r: ForwardResult) => void): Cancelable {
  stats.broadcasts++;
  let answered = false;
  let left = upstreams.length;
  let first: ForwardResult | null = null;
  const fan = new Fan(upstreams, next, group, request, (r) => {
    left--;
    if (answered) return;
    if (r.kind === 'buffered' && r.status === 200 && isResult(r.body)) {
      answered = true;
      return deliver(r);
    }
    // A JSON-RPC answer beats a failure as what the client sees if none succeeds.
    if (first === null || (first.kind !== 'buffered' && r.kind === 'buffered')) first = r;
    if (left === 0) {
      answered = true;
      deliver(first);
    }
  });
  fan.start();
  // The client going away does not call a broadcast back.
  return NOTHING;
}

/**
 * A read asked of `upstreams` (a quorum of them able to serve its block):
 * equal results are served; different ones get -32603 with data.reason
 * "upstreams disagree", and the log and a metric name both upstreams. A node's
 * "state is gone" is no vote: it says what that node lacks, not what the chain
 * holds; the next of `spare` (other upstreams able to serve the block, archive
 * ones first) is asked in its place, while there is one.
 */
export function quorum(
  next: Dispatch<ForwardTarget, Attempt>,
  request: ForwardRequest,
  group: UpstreamGroup,
  upstreams: readonly Upstream[],
  spare: readonly Upstream[],
  stats: PoolStats,
  log: Logger,
  chain: string,
  idJson: string,
  deliver: (r: ForwardResult) => void,
): Cancelable {
  const got: Buffered[] = [];
  let left = upstreams.length;
  let over = false;
  let spareAt = 0;
  /** A voter throttled the call (the last such outcome), and whether any vote is missing for another reason. */
  let throttle: ForwardResult | null = null;
  let lost = false;
  const fan = new Fan(upstreams, next, group, request, (r) => {
    left--;
    if (over) return;
    if (r.kind === 'buffered' && r.status === 200) {
      if (!answerSaysStateGone(r.body)) got.push(r);
      else if (spareAt < spare.length) {
        left++;
        return fan.add(spare[spareAt++]!);
      } else lost = true;
    } else if (r.kind === 'failed' && r.fail === 'throttled') throttle = r;
    else lost = true;
    if (left > 0) return;
    over = true;
    if (got.length < upstreams.length) {
      stats.quorum.short++;
      // Short only because voters throttled it: "every upstream throttled", with their Retry-After (throttle.ts).
      if (throttle !== null && !lost) return deliver(throttle);
      const failed = r.kind === 'buffered' ? null : r;
      return failed !== null && got.length === 0 ? deliver(failed) : deliver(disagreement(got[0] ?? r, idJson, 'too few upstreams answered'));
    }
    const results = got.map((g) => resultOf(g.body));
    if (results.every((x) => x !== null && x === results[0])) {
      stats.quorum.agree++;
      return deliver(got[0]!);
    }
    stats.quorum.disagree++;
    log.warn({ event: 'upstreams_disagree', chain, upstreams: got.map((g) => g.upstream.name) }, 'upstreams of a quorum gave different answers');
    deliver(disagreement(got[0]!, idJson, 'upstreams disagree'));
  });
  fan.start();
  return fan;
}

/** The answer's result (or error) as canonical JSON text, to compare; null when it is not a JSON-RPC answer. */
function resultOf(body: Buffer): string | null {
  try {
    const doc = JSON.parse(body.toString('utf8')) as { result?: unknown; error?: unknown };
    return JSON.stringify('error' in doc ? { error: doc.error } : { result: doc.result ?? null });
  } catch {
    return null;
  }
}

function isResult(body: Buffer): boolean {
  const spans = answerOf(body).spans;
  return spans !== null && !spans.hasError && spans.resultStart !== -1;
}

/** The gateway's own -32603 answer, as a node's answer would come (so the route passes it on). */
function disagreement(like: ForwardResult, idJson: string, reason: string): Buffered {
  const body = Buffer.from(`{"jsonrpc":"2.0","id":${idJson},"error":{"code":-32603,"message":"Internal error","data":{"reason":${JSON.stringify(reason)}}}}`);
  return { kind: 'buffered', upstream: like.upstream!, status: 200, headers: JSON_HEADERS, body };
}
