// What a pool's flow (pool/flow.ts) asks of an EVM call and its answer: its
// method's traits (a read may be hedged and asked again), whether a body is a
// JSON-RPC answer to one call, whether it says the upstream throttled it, and
// whether a read's answer may be one node's and not the chain's (a null about
// data it has not seen yet, state it pruned, a block it does not have).
import { answerOf } from '../../jsonrpc/answer.ts';
import type { Call as SeamCall } from '../../dispatch.ts';
import type { CallRules } from '../../pool/flow.ts';
import { answerThrottled } from '../../upstreams/throttle.ts';
import { Call } from './call.ts';
import { BEYOND_HEAD, isStateGone, says, UNKNOWN_BLOCK } from './state-errors.ts';

export const EVM_CALL_RULES: CallRules = {
  read: (call) => call instanceof Call && call.traits.read,
  isAnswer(body: Buffer): boolean {
    const spans = answerOf(body).spans;
    return spans !== null && (spans.resultStart !== -1 || spans.hasError);
  },
  throttled: answerThrottled,
  judge,
};

/** ok, or why the 200 answer `body` to the read `c` may be this node's and not the chain's; `final`: the block it names is final. */
function judge(c: SeamCall, body: Buffer, final: boolean): 'ok' | 'empty' | 'state' {
  if (!(c instanceof Call)) return 'ok';
  const spans = answerOf(body).spans;
  if (spans === null) return 'ok';
  const traits = c.traits;
  if (spans.hasError) {
    const message = errorMessage(body);
    // A block asked by hash that this node does not have; a range beyond its head.
    if (c.block !== null && typeof c.block === 'object' && says(UNKNOWN_BLOCK, message)) return 'state';
    if (c.at >= 0 && says(BEYOND_HEAD, message)) return 'state';
    return traits.state || c.at >= 0 || (c.block !== null && typeof c.block === 'object') ? (isStateGone(message) ? 'state' : 'ok') : 'ok';
  }
  // A null about finalized data is final.
  if (spans.resultStart === -1 || final) return 'ok';
  const result = body.toString('latin1', spans.resultStart, spans.resultEnd);
  if (traits.mayBeEmpty === 'null') return result === 'null' ? 'empty' : 'ok';
  if (traits.mayBeEmpty === 'count') return result === 'null' || result === '"0x0"' ? 'empty' : 'ok';
  return 'ok';
}

/** The message of a JSON-RPC answer's error ('' none). */
function errorMessage(body: Buffer): string {
  try {
    const doc = JSON.parse(body.toString('utf8')) as { error?: { message?: unknown } };
    return typeof doc?.error?.message === 'string' ? doc.error.message : '';
  } catch {
    return '';
  }
}
