// A Blockbook or Rosetta pool (pool/doc-pool.ts) routes by the call its
// guard decided (issue 37: the request's DocCall, kinds/doc-call.ts), never by
// reading the request's path or body again. The dispatch below the pool is a
// stand-in that records each request and answers at once.
import { describe, expect, it } from 'vitest';
import { ChainView } from '../../../../runtime/upstreams/chain-view.ts';
import type { PollReport } from '../../../../runtime/upstreams/upstream-view.ts';
import { docPool, BLOCKBOOK_BLOCKS, ROSETTA_BLOCKS } from '../../../../runtime/pool/doc-pool.ts';
import type { Attempt, Dispatch, ForwardRequest, ForwardResult, ForwardTarget, HeldRequest, HeldTarget } from '../../../../runtime/dispatch.ts';
import { DocCall } from '../../../../runtime/kinds/doc-call.ts';
import type { RouteSpec, UpstreamSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';

const ROUTE = { path: 'bitcoin', interface: 'blockbook', maxLag: 10, hedge: null, limits: { timeoutMs: 1000 } } as unknown as RouteSpec;

function upstream(name: string): Upstream {
  const spec = { name, url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000, archive: false } as unknown as UpstreamSpec;
  const u = new Upstream(spec, ROUTE);
  u.state = 'up';
  return u;
}

const report = (number: number): PollReport => ({ identity: '', own: true, genesis: '', number, hash: '', finalized: -1, safe: -1, canonical: [] });

/** A pool of `a` at 100 and `b` at 103 over a stand-in dispatch: each request goes to the first upstream its `accept` takes. */
function poolOf(blocks = BLOCKBOOK_BLOCKS) {
  const ups = [upstream('a'), upstream('b')];
  const group = new UpstreamGroup(ups);
  const view = new ChainView(ups, 'all');
  view.report(ups[0]!.view, report(100));
  view.report(ups[1]!.view, report(103));
  const sent: ForwardRequest[] = [];
  const next = ((target: HeldTarget, request: ForwardRequest) => {
    sent.push(request);
    const t = request.transport;
    const u = ups.find((o) => !t.skip?.has(o) && (t.accept?.(o) ?? true)) ?? null;
    const r: ForwardResult = u === null ? { kind: 'failed', fail: 'no-upstream', upstream: null } : { kind: 'buffered', upstream: u, status: 200, headers: {}, body: Buffer.from('{}') };
    setImmediate(() => target.forwarded(r));
    return { upstream: u, cancel: () => undefined };
  }) as Dispatch<ForwardTarget, Attempt>;
  const { dispatch } = docPool(ROUTE, group, view, next, blocks);
  const send = (path: string, doc: DocCall, body: string | null = null): Promise<string> =>
    new Promise((resolve) => {
      const request: HeldRequest = {
        calls: { one: doc },
        transport: {
          method: body === null ? 'GET' : 'POST',
          path: (u) => u.basePath + path,
          headers: [],
          body,
          idempotent: true,
          retries: 1,
          maxBuffer: 1 << 20,
          deadline: performance.now() + 1000,
          emptyOk: false,
          classify: () => 'buffer',
          hold: true,
        },
      };
      dispatch({ forwarded: (r: ForwardResult) => resolve(r.upstream?.name ?? 'none') }, request);
    });
  return { send, sent, ups };
}

describe("doc pool: routes by its guard's call (issue 37)", () => {
  it('a call naming block 101 goes only to the upstream at 103, whatever its path says', async () => {
    const { send, sent, ups } = poolOf();
    expect(await send('/v2/tx/ab', new DocCall('tx', 101, true))).toBe('b');
    expect(sent[0]!.transport.accept?.(ups[0]!)).toBe(false);
    expect(sent[0]!.transport.accept?.(ups[1]!)).toBe(true);
  });

  it('a path that names a block with a call that names none (the guard decides): no routing by block', async () => {
    const { send, sent } = poolOf();
    expect(await send('/v2/block/101', new DocCall('block', null, true))).toBe('a');
    expect(sent[0]!.transport.accept).toBeUndefined();
  });

  it('a lookup by hash alone is held, to be asked again of another upstream on "Block not found"', async () => {
    const { send, sent } = poolOf();
    await send('/v2/tx/ab', new DocCall('block', { hash: 'ab'.repeat(32) }, true));
    expect(sent[0]!.transport.hold).toBe(true);
    expect(sent[0]!.transport.skip).toBeDefined();
  });

  it("Rosetta: a body naming block_identifier.index 101 is not read: the call's block is", async () => {
    const { send, sent } = poolOf(ROSETTA_BLOCKS);
    expect(await send('/block', new DocCall('block', null, true), '{"block_identifier":{"index":101}}')).toBe('a');
    expect(sent[0]!.transport.accept).toBeUndefined();
    expect(await send('/block', new DocCall('block', 101, true), '{}')).toBe('b');
  });
});
