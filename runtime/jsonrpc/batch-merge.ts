// A client batch's answer put back together: the node's answers matched to the
// calls forwarded, the gateway's own answers (refusals, cache hits) in their
// places. Below the guard that plans the merge and the layers that send the
// forwarded calls (kinds/evm/module.ts, kinds/evm/cache-batch.ts).
import type { BatchMerge, EvmForward } from '../kinds/evm/decision.ts';
import { COMMA, CLOSE, MAX_ANSWER_DEPTH, nestsDeeper, OPEN, skipWs } from './scan.ts';
import { splitBatchAnswer } from './answer.ts';

/**
 * Rebuilds a batch answer: the node's answers matched to forwarded ids, the
 * gateway's own errors in their request positions. Null if the node's answer
 * is not an answer to exactly the calls forwarded: not a JSON-RPC batch
 * answer, an id missing, or an id that was never sent. The node's items are
 * copied as bytes, never parsed whole (see jsonrpc/scan.ts).
 */
export function mergeBatch(merge: BatchMerge, upstreamBody: Buffer | string): Buffer | null {
  const body = typeof upstreamBody === 'string' ? Buffer.from(upstreamBody) : upstreamBody;
  const expected = new Map<string, number>();
  for (const slot of merge.slots) if (slot !== null && 'forwardedId' in slot) expected.set(slot.forwardedId, (expected.get(slot.forwardedId) ?? 0) + 1);
  const parts: Buffer[] = [];
  const own = (s: string | Buffer) => parts.push(typeof s === 'string' ? Buffer.from(s) : s);
  // Only notifications went to the node: it answers with no body.
  if (expected.size === 0 && skipWs(body, 0) === body.length) {
    for (const slot of merge.slots) if (slot !== null && 'ready' in slot) own(slot.ready);
    return joinArray(parts);
  }
  const items = splitBatchAnswer(body, MAX_ANSWER_DEPTH);
  if (items === null) return wholeBatchError(merge, body);
  const byId = new Map<string, AnswerSpan[]>();
  for (const it of items) {
    if (it.id === null || (expected.get(it.id) ?? 0) === 0) return null;
    expected.set(it.id, expected.get(it.id)! - 1);
    const list = byId.get(it.id);
    if (list) list.push(it);
    else byId.set(it.id, [it]);
  }
  for (const left of expected.values()) if (left !== 0) return null;
  for (const slot of merge.slots) {
    if (slot === null) continue;
    if ('ready' in slot) own(slot.ready);
    else {
      const it = byId.get(slot.forwardedId)!.shift()!;
      parts.push(body.subarray(it.start, it.end));
    }
  }
  return joinArray(parts);
}

/**
 * A batch answer of the answers to its forwarded calls given one by one, in
 * their order (each its own item with its call's id, or a merged one's parts:
 * a batch split below, pool/batch.ts), the gateway's own answers in their
 * places. Nothing is scanned: the slots say where each goes. Null if there
 * are not as many answers as forwarded calls.
 */
export function mergeItems(merge: BatchMerge, items: readonly (Buffer | readonly Buffer[])[]): Buffer | null {
  const out: Buffer[] = [OPEN];
  let k = 0;
  for (const slot of merge.slots) {
    if (slot === null) continue;
    if (out.length > 1) out.push(COMMA);
    if ('ready' in slot) out.push(typeof slot.ready === 'string' ? Buffer.from(slot.ready) : slot.ready);
    else {
      const it = items[k++];
      if (it === undefined) return null;
      if (Buffer.isBuffer(it)) out.push(it);
      else out.push(...(it as readonly Buffer[]));
    }
  }
  if (k !== items.length) return null;
  out.push(CLOSE);
  return Buffer.concat(out);
}

interface AnswerSpan {
  readonly start: number;
  readonly end: number;
}


function joinArray(parts: readonly Buffer[]): Buffer {
  const out: Buffer[] = [OPEN];
  parts.forEach((p, i) => (i === 0 ? out.push(p) : out.push(COMMA, p)));
  out.push(CLOSE);
  return Buffer.concat(out);
}

/**
 * The node refused the whole (forwarded) batch with one error object: each
 * forwarded call gets that error under its own id.
 */
function wholeBatchError(merge: BatchMerge, body: Buffer): Buffer | null {
  if (body.length > 65536 || nestsDeeper(body, MAX_ANSWER_DEPTH)) return null;
  let answer: unknown;
  try {
    answer = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer) || !('error' in answer)) return null;
  const err = (answer as { error: unknown }).error;
  if (err === null || typeof err !== 'object') return null;
  const errJson = JSON.stringify(err);
  const parts: Buffer[] = [];
  for (const slot of merge.slots) {
    if (slot === null) continue;
    parts.push('ready' in slot ? (typeof slot.ready === 'string' ? Buffer.from(slot.ready) : slot.ready) : Buffer.from(`{"jsonrpc":"2.0","id":${slot.forwardedId},"error":${errJson}}`));
  }
  return joinArray(parts);
}

/**
 * The gateway's own error (`error`: made once, with id null) as the answer to
 * the calls the guard let through (JSON-RPC 2.0 allows id null only where the
 * id could not be read): a single call's with its id; a batch's as one error
 * per call with an id, each with its own, in the client's order, with the
 * answers the guard made (refused calls) in their places. A batch of
 * notifications only has no call to answer: the error as it is.
 */
export function failedAnswer(d: EvmForward, error: string): string {
  if (d.call !== null) return rpcErrorWithId(error, d.call.idJson);
  const parts: string[] = [];
  if (d.merge !== null) {
    for (const slot of d.merge.slots) {
      if (slot === null) continue;
      parts.push('ready' in slot ? slot.ready.toString() : rpcErrorWithId(error, slot.forwardedId));
    }
  } else {
    // The guard's Calls: a call without an id (a notification) has no slot.
    for (const c of d.calls!) if (!c.notification) parts.push(rpcErrorWithId(error, c.idJson));
  }
  return parts.length === 0 ? error : `[${parts.join(',')}]`;
}

const NULL_ID_HEAD = '{"jsonrpc":"2.0","id":null';

/** A JSON-RPC error object the gateway made with id null (its interface's envelope), given the id `idJson` (JSON text) instead. */
export function rpcErrorWithId(nullIdJson: string, idJson: string): string {
  return `{"jsonrpc":"2.0","id":${idJson}${nullIdJson.slice(NULL_ID_HEAD.length)}`;
}
