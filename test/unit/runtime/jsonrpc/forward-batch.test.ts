// The forward layer's batches (runtime/jsonrpc/forward-batch.ts) without HTTP: the
// dispatch below is a fake that records each request and is told its outcome
// by the test. Which held calls go together (the same set of upstreams, the
// same client batch with cache.batch 1), what each call gets of the batch's
// answer, and what goes again alone. The e2e proof is
// test/e2e/issue-37-forward-batch.test.ts.
import { describe, expect, it, vi } from 'vitest';
import { ForwardBatches } from '../../../../runtime/jsonrpc/forward-batch.ts';
import type { Attempt, Dispatch, ForwardRequest, ForwardResult, ForwardTarget, HeldRequest, HeldTarget, Transport } from '../../../../runtime/dispatch.ts';
import { Call } from '../../../../runtime/kinds/evm/call.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import type { EvmRouteSpec, UpstreamSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';

const ROUTE = { path: 'eth', interface: 'evm-jsonrpc', maxLag: 10, limits: { timeoutMs: 1000 } } as unknown as EvmRouteSpec;

function upstream(name: string): Upstream {
  const spec = { name, url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000, archive: false } as unknown as UpstreamSpec;
  const u = new Upstream(spec, ROUTE);
  u.state = 'up';
  return u;
}

interface Sent {
  readonly target: HeldTarget;
  readonly request: ForwardRequest;
}

function setup(max: number) {
  const ups = [upstream('a'), upstream('b')];
  const group = new UpstreamGroup(ups);
  const sent: Sent[] = [];
  const next = ((target: HeldTarget, request: ForwardRequest): Attempt => {
    sent.push({ target, request });
    return { upstream: ups[0]!, cancel: () => undefined };
  }) as Dispatch<ForwardTarget, Attempt>;
  const log = { warn: vi.fn(), info: vi.fn() } as unknown as Logger & { warn: ReturnType<typeof vi.fn> };
  const layer = new ForwardBatches(next, group, max, log, 'eth');
  return { ups, group, sent, layer, log };
}

/** A held call with its Call, as the layers above send one (`together`: the client batch it is of). */
function call(id: string, addr: string, extra: Partial<Transport> = {}, together?: object): HeldRequest {
  const body = Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":"eth_getBalance","params":["${addr}","0x1"]}`);
  return {
    calls: { one: new Call(body, 'eth_getBalance'), together },
    transport: { method: 'POST', path: () => '/', headers: [], body, idempotent: true, retries: 1, maxBuffer: 1 << 20, deadline: performance.now() + 1000, emptyOk: false, classify: () => 'buffer', ...extra, hold: true },
  };
}

function target(): HeldTarget & { got: ForwardResult[] } {
  const got: ForwardResult[] = [];
  return { got, forwarded: (r) => void got.push(r) };
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
const text = (r: ForwardResult | undefined): string => (r?.kind === 'buffered' ? r.body.toString() : `(${r?.kind})`);

describe('forward batches', () => {
  it('sends held reads bound for the same upstreams as one batch, each id its place; each call gets its own item with its own id, in whatever order the node answers', async () => {
    const { sent, layer, ups } = setup(8);
    const t1 = target();
    const t2 = target();
    layer.dispatch(t1, call('"x"', '0x01'));
    layer.dispatch(t2, call('7', '0x02'));
    expect(sent).toHaveLength(0);
    await turn();
    expect(sent).toHaveLength(1);
    const batch = JSON.parse(String(sent[0]!.request.transport.body)) as { id: number; params: string[] }[];
    expect(batch.map((c) => [c.id, c.params[0]])).toEqual([
      [0, '0x01'],
      [1, '0x02'],
    ]);
    sent[0]!.target.forwarded({ kind: 'buffered', upstream: ups[1]!, status: 200, headers: {}, body: Buffer.from('[{"jsonrpc":"2.0","id":1,"result":"0x2"},{"jsonrpc":"2.0","id":0,"result":"0x1"}]') });
    expect(text(t1.got[0])).toBe('{"jsonrpc":"2.0","id":"x","result":"0x1"}');
    expect(text(t2.got[0])).toBe('{"jsonrpc":"2.0","id":7,"result":"0x2"}');
  });

  it('calls the layers above send to different upstreams go apart; a write and a request not held pass at once', async () => {
    const { sent, layer, ups } = setup(8);
    layer.dispatch(target(), call('1', '0x01', { accept: (u) => u === ups[0] }));
    layer.dispatch(target(), call('2', '0x02', { accept: (u) => u === ups[1] }));
    layer.dispatch(target(), call('3', '0x03', { idempotent: false }));
    const four = call('4', '0x04');
    const { hold: _held, ...notHeld } = four.transport;
    layer.dispatch(target() as never, { calls: four.calls, transport: notHeld });
    expect(sent).toHaveLength(2);
    await turn();
    expect(sent).toHaveLength(4);
    expect(sent.every((s) => !String(s.request.transport.body).startsWith('['))).toBe(true);
  });

  it('with cache.batch 1, only the calls of one client batch go together', async () => {
    const { sent, layer } = setup(1);
    const batch = {};
    layer.dispatch(target(), call('1', '0x01'));
    expect(sent).toHaveLength(1);
    layer.dispatch(target(), call('2', '0x02', {}, batch));
    layer.dispatch(target(), call('3', '0x03', {}, batch));
    layer.dispatch(target(), call('4', '0x04', {}, {}));
    await turn();
    expect(sent.map((s) => String(s.request.transport.body).startsWith('['))).toEqual([false, true, false]);
  });

  it('a node that answers a batch with one object takes no more, logged once; each call goes again alone', async () => {
    const { sent, layer, ups, log } = setup(8);
    const t1 = target();
    layer.dispatch(t1, call('1', '0x01'));
    layer.dispatch(target(), call('2', '0x02'));
    await turn();
    sent[0]!.target.forwarded({ kind: 'buffered', upstream: ups[0]!, status: 200, headers: {}, body: Buffer.from('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}') });
    expect(ups[0]!.takesBatches).toBe(false);
    expect(sent.slice(1).map((s) => String(s.request.transport.body))).toEqual([String(call('1', '0x01').transport.body), String(call('2', '0x02').transport.body)]);
    expect(log.warn).toHaveBeenCalledTimes(1);
    expect(log.warn.mock.calls[0]![0]).toMatchObject({ event: 'upstream_refused_batch', upstream: 'a' });
    // The next batch goes to the other node only.
    layer.dispatch(target(), call('3', '0x03'));
    layer.dispatch(target(), call('4', '0x04'));
    await turn();
    expect(sent[3]!.request.transport.accept!(ups[0]!)).toBe(false);
    expect(sent[3]!.request.transport.accept!(ups[1]!)).toBe(true);
  });

  it('an item the node leaves out goes again alone; a failed batch fails each call, logged once; a cancelled call is not sent', async () => {
    const { sent, layer, ups, log } = setup(8);
    const [t1, t2, t3] = [target(), target(), target()];
    layer.dispatch(t1, call('1', '0x01'));
    layer.dispatch(t2, call('2', '0x02'));
    layer.dispatch(target(), call('9', '0x09')).cancel();
    await turn();
    expect(JSON.parse(String(sent[0]!.request.transport.body))).toHaveLength(2);
    sent[0]!.target.forwarded({ kind: 'buffered', upstream: ups[0]!, status: 200, headers: {}, body: Buffer.from('[{"jsonrpc":"2.0","id":0,"result":"0x1"}]') });
    expect(text(t1.got[0])).toBe('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
    expect(t2.got).toHaveLength(0);
    expect(String(sent[1]!.request.transport.body)).toBe(String(call('2', '0x02').transport.body));
    const t4 = target();
    layer.dispatch(t3, call('3', '0x03'));
    layer.dispatch(t4, call('4', '0x04'));
    await turn();
    sent[2]!.target.forwarded({ kind: 'buffered', upstream: ups[0]!, status: 503, headers: {}, body: Buffer.from('{"error":"overloaded"}') });
    expect(t3.got[0]).toMatchObject({ kind: 'failed', fail: 'bad-response', logged: true });
    expect(t4.got[0]).toMatchObject({ kind: 'failed', fail: 'bad-response', logged: true });
    expect(log.warn).toHaveBeenCalledTimes(1);
  });
});
