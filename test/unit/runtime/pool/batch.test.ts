// A batch at a pool's entry (runtime/pool/batch.ts) without HTTP: the calls
// it is split into, and the answer merged from theirs. The pool's single-call
// way is a fake Dispatch that records each call and answers it when the test
// says so.
import { describe, expect, it } from 'vitest';
import type { Calls, Cancelable, Dispatch, ForwardRequest, ForwardResult, ForwardTarget, HeldTarget, ItemsTaker, Sink, Verdict } from '../../../../runtime/dispatch.ts';
import { Call } from '../../../../runtime/kinds/evm/call.ts';
import { splitBatchAnswer } from '../../../../runtime/jsonrpc/answer.ts';
import { MAX_ANSWER_DEPTH } from '../../../../runtime/jsonrpc/scan.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import { splitBatch, type PartsTaker } from '../../../../runtime/pool/batch.ts';
import { holdBytes, releaseHeld } from '../../../../runtime/upstreams/forward.ts';
import { EVM_ENVELOPE } from '../../../../runtime/kinds/evm/envelope.ts';
import type { Envelope } from '../../../../runtime/envelope.ts';
import type { Upstream } from '../../../../runtime/upstreams/upstream.ts';

const U = { name: 'eth#0', chain: 'eth' } as unknown as Upstream;
const LOG = { warn: () => undefined, info: () => undefined, error: () => undefined } as unknown as Logger;

interface Sent {
  readonly body: string;
  readonly emptyOk: boolean;
  readonly idempotent: boolean;
  readonly target: HeldTarget;
  cancelled: boolean;
}

function fake(): { single: Dispatch; sent: Sent[] } {
  const sent: Sent[] = [];
  const single: Dispatch = (target, request): Cancelable => {
    const t = request.transport;
    const s: Sent = { body: String(t.body), emptyOk: t.emptyOk, idempotent: t.idempotent, target, cancelled: false };
    sent.push(s);
    return { cancel: () => void (s.cancelled = true) };
  };
  return { single, sent };
}

/** A route's request of `body`, with a Call per call as the guard makes them (each its own bytes, read when asked). */
function request(body: string, classify: (s: number) => Verdict = () => 'buffer', idempotent = true): ForwardRequest {
  const b = Buffer.from(body);
  const items = splitBatchAnswer(b, MAX_ANSWER_DEPTH);
  const calls: Calls = items === null ? { one: Call.read(b)! } : { batch: items.map((it) => Call.read(b.subarray(it.start, it.end))!) };
  return { calls, transport: { method: 'POST', path: () => '/', headers: [], body: b, idempotent, retries: 1, maxBuffer: 1 << 20, deadline: performance.now() + 1000, emptyOk: false, classify } };
}

/** A target that keeps its outcome, and what was streamed to it. */
function client(): { target: ForwardTarget; outcome: ForwardResult[]; streamed: { status: number; body: string }[] } {
  const outcome: ForwardResult[] = [];
  const streamed: { status: number; body: string }[] = [];
  let status = 0;
  /** What was written before the end. */
  const written: Buffer[] = [];
  const res = {
    destroyed: false,
    headersSent: false,
    write: (b: Buffer) => written.push(b) > 0,
    end: (b?: Buffer) => void streamed.push({ status, body: Buffer.concat(b === undefined ? written : [...written, b]).toString() }),
    once: () => res,
    destroy: () => res,
  } as unknown as Sink;
  return { target: { res, streamHead: (s) => void (status = s), forwarded: (r) => void outcome.push(r) }, outcome, streamed };
}

const answer = (body: string): ForwardResult => ({ kind: 'buffered', upstream: U, status: 200, headers: {}, body: Buffer.from(body) });
const bodyOf = (r: ForwardResult | undefined): string => (r?.kind === 'buffered' ? r.body.toString() : `(${r?.kind})`);

describe('a batch at the pool', () => {
  it('is not split when it is a single call, empty, or notifications only: the pool sends it as it is', () => {
    const { single, sent } = fake();
    for (const body of ['{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}', '[]', ' [{"jsonrpc":"2.0","method":"eth_chainId"}]']) {
      expect(splitBatch(single, EVM_ENVELOPE, LOG, 'eth', client().target, request(body)), body).toBeNull();
    }
    expect(sent).toHaveLength(0);
  });

  it('sends each call alone, as its own text; merges the answers in the client order with its id bytes, whatever order and id the answers came in', () => {
    const { single, sent } = fake();
    const c = client();
    const calls = ['{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"eth_getBalance","params":["0xab","latest"]}', '{ "id" : "x\\"y", "jsonrpc":"2.0","method":"eth_chainId"}'];
    expect(splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request(` [${calls.join(' ,\n')}] `))).not.toBeNull();
    expect(sent.map((s) => s.body)).toEqual(calls);
    expect(sent.map((s) => s.emptyOk)).toEqual([false, false]);
    sent[1]!.target.forwarded(answer('{"jsonrpc":"2.0","id":"x\\"y","result":"0x1"}'));
    expect(c.outcome).toHaveLength(0);
    // The node read the long id as a float and wrote it back so: the client gets its own digits.
    sent[0]!.target.forwarded(answer('{"jsonrpc":"2.0","id":1.2345678901234568e+29,"result":"0x10"}'));
    expect(c.outcome).toHaveLength(1);
    expect(bodyOf(c.outcome[0])).toBe('[{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":"0x10"},{"jsonrpc":"2.0","id":"x\\"y","result":"0x1"}]');
  });

  it('a failed call gets the error a lone call gets for that failure in its slot, under its id; the others are answered', () => {
    const { single, sent } = fake();
    const c = client();
    const ids = ['1', '2', '3', '4', '5', '6'];
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request(`[${ids.map((id) => `{"jsonrpc":"2.0","id":${id},"method":"eth_chainId"}`).join(',')}]`));
    sent[0]!.target.forwarded({ kind: 'failed', fail: 'no-upstream', upstream: null });
    sent[1]!.target.forwarded({ kind: 'failed', fail: 'timeout', upstream: U });
    sent[2]!.target.forwarded({ kind: 'failed', fail: 'unavailable', upstream: U });
    sent[3]!.target.forwarded({ kind: 'buffered', upstream: U, status: 502, headers: {}, body: Buffer.from('<html>bad gateway</html>') });
    sent[4]!.target.forwarded({ kind: 'aborted', upstream: U });
    sent[5]!.target.forwarded(answer('{"jsonrpc":"2.0","id":6,"result":"0x1"}'));
    const items = JSON.parse(bodyOf(c.outcome[0])) as { id: number; error?: { code: number; message: string }; result?: string }[];
    expect(items.map((i) => i.id)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(items.map((i) => i.error?.code ?? i.result)).toEqual([-32052, -32051, -32050, -32053, -32050, '0x1']);
    expect(items[0]!.error).toEqual({ code: -32052, message: 'No healthy upstream' });
  });

  it("a failed call's slot is the chain's interface's own failure with the call's id: the envelope it is given, no EVM default (issue 45)", () => {
    const { single, sent } = fake();
    const c = client();
    const toy: Envelope = { ...EVM_ENVELOPE, timeout: { status: 504, body: '{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"toy timeout"}}' } };
    splitBatch(single, toy, LOG, 'eth', c.target, request('[{"jsonrpc":"2.0","id":"a","method":"eth_call"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]'));
    sent[0]!.target.forwarded({ kind: 'failed', fail: 'timeout', upstream: U });
    sent[1]!.target.forwarded(answer('{"jsonrpc":"2.0","id":2,"result":"0x1"}'));
    expect(bodyOf(c.outcome[0])).toBe('[{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"toy timeout"}},{"jsonrpc":"2.0","id":2,"result":"0x1"}]');
  });

  it('a deep answer (a call trace) is a call\'s answer in a batch, as it is alone (pool/flow.ts): not refused for its depth', () => {
    const { single, sent } = fake();
    const c = client();
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request('[{"jsonrpc":"2.0","id":1,"method":"eth_call"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]'));
    const deep = `${'['.repeat(600)}${']'.repeat(600)}`;
    sent[0]!.target.forwarded(answer(`{"jsonrpc":"2.0","id":1,"result":${deep}}`));
    sent[1]!.target.forwarded(answer('{"jsonrpc":"2.0","id":2,"result":"0x1"}'));
    expect(bodyOf(c.outcome[0])).toBe(`[{"jsonrpc":"2.0","id":1,"result":${deep}},{"jsonrpc":"2.0","id":2,"result":"0x1"}]`);
  });

  it('a node error answer is the call\'s answer, not a failure', () => {
    const { single, sent } = fake();
    const c = client();
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request('[{"jsonrpc":"2.0","id":1,"method":"eth_call"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]'));
    sent[0]!.target.forwarded(answer('{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted"}}'));
    sent[1]!.target.forwarded({ kind: 'failed', fail: 'timeout', upstream: U });
    expect(bodyOf(c.outcome[0])).toBe('[{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted"}},{"jsonrpc":"2.0","id":2,"error":{"code":-32051,"message":"Upstream timeout"}}]');
  });

  it('every call failed: the batch fails as one call does, with the first call\'s failure', () => {
    const { single, sent } = fake();
    const c = client();
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]'));
    sent[1]!.target.forwarded({ kind: 'failed', fail: 'timeout', upstream: U });
    sent[0]!.target.forwarded({ kind: 'failed', fail: 'no-upstream', upstream: null });
    expect(c.outcome).toEqual([{ kind: 'failed', fail: 'no-upstream', upstream: null }]);
  });

  it('a notification goes alone too (an empty answer is fine), has no slot, and the batch waits for it', () => {
    const { single, sent } = fake();
    const c = client();
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request('[{"jsonrpc":"2.0","method":"eth_sendRawTransaction","params":["0x00"]},{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}]'));
    expect(sent.map((s) => s.emptyOk)).toEqual([true, false]);
    sent[1]!.target.forwarded(answer('{"jsonrpc":"2.0","id":7,"result":"0x1"}'));
    expect(c.outcome).toHaveLength(0);
    sent[0]!.target.forwarded({ kind: 'buffered', upstream: U, status: 200, headers: {}, body: Buffer.alloc(0) });
    expect(bodyOf(c.outcome[0])).toBe('[{"jsonrpc":"2.0","id":7,"result":"0x1"}]');
  });

  it("each call is sent again after a 5xx or a timeout as its own read or write says, not as the batch's whole (issue 45)", () => {
    const { single, sent } = fake();
    // A batch with a write is no idempotent request as a whole: its read is one all the same.
    const writes = '[{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x00"]},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]';
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', client().target, request(writes, () => 'buffer', false));
    expect(sent.map((s) => s.idempotent)).toEqual([false, true]);
  });

  it("an answer the route would stream is written to the client from the calls' answers; the calls are held (never streamed)", () => {
    const { single, sent } = fake();
    const c = client();
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}]', (s) => (s === 200 ? 'stream' : 'buffer')));
    expect(sent).toHaveLength(1);
    sent[0]!.target.forwarded(answer('{"jsonrpc":"2.0","id":1,"result":"0x1"}'));
    expect(c.streamed).toEqual([{ status: 200, body: '[{"jsonrpc":"2.0","id":1,"result":"0x1"}]' }]);
    expect(c.outcome).toEqual([{ kind: 'streamed', upstream: U, status: 200 }]);
  });

  // Issue 45, "batches are split once": the rest of a client batch the cache's front split comes here as the guard's
  // Calls, and its answers go back to the front's plan in their slots, not joined into a batch body it splits again.
  it("a target that keeps a larger batch's plan (ItemsTaker) gets each call's answer in its slot as it is, a failure as its error and a merged range as its parts, with the bytes held; no joined body, and none past the rest's maxBuffer", () => {
    const { single, sent } = fake();
    const took: { items: readonly (Buffer | readonly Buffer[])[]; held: number }[] = [];
    const outcome: ForwardResult[] = [];
    const plan: HeldTarget & ItemsTaker = { takesItems: true, forwarded: (r) => void outcome.push(r), takeItems: (_u, items, held) => void took.push({ items, held }) };
    // The rest as the front sends it: its Calls, no body of its own.
    const r = request('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","id":"b","method":"eth_getLogs","params":[{}]},{"jsonrpc":"2.0","id":3,"method":"eth_chainId"}]');
    splitBatch(single, EVM_ENVELOPE, LOG, 'eth', plan, { calls: r.calls, transport: { ...r.transport, body: null, hold: true } });
    expect(sent).toHaveLength(4);
    const one = answer('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
    sent[0]!.target.forwarded(one);
    sent[1]!.target.forwarded({ kind: 'buffered', upstream: U, status: 200, headers: {}, body: Buffer.alloc(0) });
    const parts = [Buffer.from('{"jsonrpc":"2.0","id":"b","result":['), Buffer.from(']}')];
    expect(holdBytes(7)).toBe(true);
    (sent[2]!.target as HeldTarget & PartsTaker).takeParts(U, parts, 7);
    sent[3]!.target.forwarded({ kind: 'failed', fail: 'timeout', upstream: U });
    expect(outcome).toEqual([]);
    expect(took).toHaveLength(1);
    const [t] = took;
    expect(t!.items.map((it) => (Buffer.isBuffer(it) ? it.toString() : it.map(String)))).toEqual([
      '{"jsonrpc":"2.0","id":1,"result":"0x1"}',
      ['{"jsonrpc":"2.0","id":"b","result":[', ']}'],
      '{"jsonrpc":"2.0","id":3,"error":{"code":-32051,"message":"Upstream timeout"}}',
    ]);
    // The answer item is the upstream's buffer itself (its id already the call's), the parts the range's own.
    expect(t!.items[0]).toBe((one as { body: Buffer }).body);
    expect(t!.items[1]).toBe(parts);
    expect(t!.held).toBe(7 + (one as { body: Buffer }).body.length);
    releaseHeld(t!.held);

    // Past the rest's maxBuffer (both answers fit, the brackets and the comma do not), it fails as a joined answer that large does.
    const small = fake();
    const a = '{"jsonrpc":"2.0","id":1,"result":"0x1"}';
    const two = request('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]');
    splitBatch(small.single, EVM_ENVELOPE, LOG, 'eth', plan, { calls: two.calls, transport: { ...two.transport, body: null, hold: true, maxBuffer: 2 * a.length + 2 } });
    small.sent[0]!.target.forwarded(answer(a));
    small.sent[1]!.target.forwarded(answer(a.replace('"id":1', '"id":2')));
    expect(took).toHaveLength(1);
    expect(outcome).toEqual([{ kind: 'failed', fail: 'bad-response', upstream: U }]);
  });

  it('cancelling the batch cancels every call under way, and nothing is answered after', () => {
    const { single, sent } = fake();
    const c = client();
    const b = splitBatch(single, EVM_ENVELOPE, LOG, 'eth', c.target, request('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]'))!;
    b.cancel();
    expect(sent.map((s) => s.cancelled)).toEqual([true, true]);
    sent[0]!.target.forwarded(answer('{"jsonrpc":"2.0","id":1,"result":"0x1"}'));
    sent[1]!.target.forwarded(answer('{"jsonrpc":"2.0","id":2,"result":"0x1"}'));
    expect(c.outcome).toHaveLength(0);
  });
});
