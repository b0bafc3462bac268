// eth_getLogs ranges (issue 39): the split, the merge, and what each
// provider's refusal says (runtime/kinds/evm/log-ranges.ts, runtime/kinds/evm/log-codec.ts, runtime/kinds/evm/log-range-errors.ts).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LogRanges, wantsLogRanges } from '../../../../../runtime/kinds/evm/log-ranges.ts';
import { mergeLogs, splitRange, trimLogs } from '../../../../../runtime/kinds/evm/log-codec.ts';
import type { EvmRouteSpec, UpstreamSpec } from '../../../../../runtime/types.ts';
import type { Dispatch, ForwardRequest, ForwardResult, HeldRequest, HeldTarget, Transport } from '../../../../../runtime/dispatch.ts';
import type { Logger } from '../../../../../runtime/observe/log.ts';
import { ChainView } from '../../../../../runtime/upstreams/chain-view.ts';
import { Upstream, UpstreamGroup } from '../../../../../runtime/upstreams/upstream.ts';
import { rangeComplaint } from '../../../../../runtime/kinds/evm/log-range-errors.ts';
import { Call } from '../../../../../runtime/kinds/evm/call.ts';
import { refusal, type CapText } from '../../../../support/range-capped-node.ts';

/** A held request's transport for `body`, as a pool's or the cache's layer sends it. */
function heldTransport(body: Buffer | string): Transport & { readonly hold: true } {
  return { method: 'POST', path: () => '/', headers: [], body, idempotent: true, retries: 0, maxBuffer: 1 << 20, deadline: performance.now() + 5000, emptyOk: false, classify: () => 'buffer', hold: true };
}

describe('splitRange', () => {
  it('covers the range exactly, in order, each chunk at most the width', () => {
    for (const [from, to, w] of [
      [0, 299, 50],
      [10, 10, 50],
      [5, 104, 100],
      [5, 105, 100],
      [1, 1000, 7],
      [3, 9, 1],
    ] as const) {
      const chunks = splitRange(from, to, w);
      expect(chunks[0]!.from).toBe(from);
      expect(chunks.at(-1)!.to).toBe(to);
      for (let i = 0; i < chunks.length; i++) {
        const c = chunks[i]!;
        expect(c.to - c.from + 1).toBeLessThanOrEqual(w);
        expect(c.to).toBeGreaterThanOrEqual(c.from);
        if (i > 0) expect(c.from).toBe(chunks[i - 1]!.to + 1);
      }
      expect(chunks.length).toBe(Math.ceil((to - from + 1) / w));
    }
  });

  it('keeps the range whole with no cap', () => {
    expect(splitRange(4, 900, Infinity)).toEqual([{ from: 4, to: 900 }]);
  });

  it('aligned (a cached chain): every chunk but the first starts at a multiple of the width, so overlapping ranges share chunks', () => {
    expect(splitRange(120, 299, 50, true)).toEqual([
      { from: 120, to: 149 },
      { from: 150, to: 199 },
      { from: 200, to: 249 },
      { from: 250, to: 299 },
    ]);
    expect(splitRange(100, 201, 50, true)).toEqual([
      { from: 100, to: 149 },
      { from: 150, to: 199 },
      { from: 200, to: 201 },
    ]);
    for (const [from, to, w] of [
      [0, 299, 50],
      [7, 7, 3],
      [5, 1000, 7],
      [49, 51, 50],
    ] as const) {
      const chunks = splitRange(from, to, w, true);
      expect(chunks[0]!.from).toBe(from);
      expect(chunks.at(-1)!.to).toBe(to);
      chunks.forEach((c, i) => {
        expect(c.to - c.from + 1).toBeLessThanOrEqual(w);
        expect(Math.floor(c.from / w)).toBe(Math.floor(c.to / w));
        if (i > 0) expect(c.from).toBe(chunks[i - 1]!.to + 1);
        if (i > 0) expect(c.from % w).toBe(0);
      });
    }
  });
});

describe('trimLogs', () => {
  it("keeps the logs whose blockNumber is within the range, with their bytes; null for a log without one", () => {
    const r = Buffer.from('[{"blockNumber":"0x9","logIndex":"0x0"}, {"blockNumber":"0xa","logIndex":"0x0"},{"blockNumber":"0xb", "logIndex":"0x1"},{"blockNumber":"0xc"}]');
    expect(trimLogs(r, 10, 11)?.toString()).toBe('[{"blockNumber":"0xa","logIndex":"0x0"},{"blockNumber":"0xb", "logIndex":"0x1"}]');
    expect(trimLogs(r, 20, 30)?.toString()).toBe('[]');
    expect(trimLogs(Buffer.from('[ ]'), 1, 2)?.toString()).toBe('[]');
    expect(trimLogs(Buffer.from('[{"logIndex":"0x0"}]'), 1, 2)).toBeNull();
  });
});

describe('mergeLogs', () => {
  it("concatenates the chunks' logs in order, under the client's id bytes, skipping empty chunks", () => {
    const a = Buffer.from('[{"blockNumber":"0x1","logIndex":"0x0"},{"blockNumber":"0x1","logIndex":"0x1"}]');
    const empty = Buffer.from('[ ]');
    const b = Buffer.from('[\n  {"blockNumber":"0x3","logIndex":"0x0"}\n]');
    const merged = mergeLogs('123456789012345678901234567890', [a, empty, b]).toString();
    expect(merged).toBe(
      '{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":[{"blockNumber":"0x1","logIndex":"0x0"},{"blockNumber":"0x1","logIndex":"0x1"},{"blockNumber":"0x3","logIndex":"0x0"}]}',
    );
    expect(JSON.parse(merged).result.map((l: { blockNumber: string }) => l.blockNumber)).toEqual(['0x1', '0x1', '0x3']);
  });

  it('answers an empty list when no chunk has logs', () => {
    expect(mergeLogs('"x"', [Buffer.from('[]'), Buffer.from('[]')]).toString()).toBe('{"jsonrpc":"2.0","id":"x","result":[]}');
  });
});

describe('rangeComplaint: the providers\' texts', () => {
  it('reads the cap each block-range refusal names', () => {
    const cases: [CapText, number][] = [
      ['publicnode', 50000],
      ['infura-range', 10000],
      ['alchemy', 10],
      ['quicknode', 10000],
      ['reth', 100000],
    ];
    for (const [text, k] of cases) expect(rangeComplaint(refusal(text, 100, 200_099, k)), text).toMatchObject({ kind: 'limit', blocks: k });
  });

  it('reads the texts as quoted in their sources', () => {
    expect(rangeComplaint({ message: 'exceed maximum block range: 5000' })).toMatchObject({ kind: 'limit', blocks: 5000 });
    expect(rangeComplaint({ message: 'range 25887126 - 25897126 exceeds limit of 10000' })).toMatchObject({ kind: 'limit', blocks: 10000 });
    expect(rangeComplaint({ message: 'eth_getLogs is limited to a 10,000 range' })).toMatchObject({ kind: 'limit', blocks: 10000 });
    expect(rangeComplaint({ message: 'eth_getLogs is limited to a 5 range' })).toMatchObject({ kind: 'limit', blocks: 5 });
    expect(rangeComplaint({ message: 'eth_getLogs is limited to 0 - 50 blocks range' })).toMatchObject({ kind: 'limit', blocks: 50 });
    expect(rangeComplaint({ message: 'ranges over 10000 blocks are not supported on freetier' })).toMatchObject({ kind: 'limit', blocks: 10000 });
    expect(rangeComplaint({ message: 'block range is too wide (maximum 10)' })).toMatchObject({ kind: 'limit', blocks: 10 });
    expect(rangeComplaint({ message: 'invalid params', data: { payload: 'range 9009594 is bigger than range limit 2000' } })).toMatchObject({ kind: 'limit', blocks: 2000 });
    // Alchemy's response-size text names a 2K block range too, but it is about this range's logs (issue 43 rule 2):
    // results are matched before caps, and the range it suggests is what splits.
    expect(
      rangeComplaint({
        message:
          'Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [0xc5dc00, 0xc614a7]',
      }),
    ).toEqual({ kind: 'results', suggested: 0xc614a7 - 0xc5dc00 + 1 });
    // No number: half the range asked is taken (kinds/evm/log-ranges.ts).
    expect(rangeComplaint({ message: 'block range too large' })).toEqual({ kind: 'limit', blocks: null, suggested: null });
    expect(rangeComplaint({ message: 'block range is bigger than maxBlockRange' })).toEqual({ kind: 'limit', blocks: null, suggested: null });
    expect(rangeComplaint({ message: 'query exceeds max block range' })).toEqual({ kind: 'limit', blocks: null, suggested: null });
  });

  it('tells too many results (split by the suggestion, not kept) from a cap', () => {
    expect(rangeComplaint(refusal('infura-results', 0xbde5f8, 0x102dbcc + 500, 0x102dbcc - 0xbde5f8 + 1))).toEqual({ kind: 'results', suggested: 0x102dbcc - 0xbde5f8 + 1 });
    expect(rangeComplaint({ message: 'query returned more than 10000 results' })).toEqual({ kind: 'results', suggested: null });
    expect(rangeComplaint({ message: 'query exceeds max results 20000, retry with the range 3600741-3620740' })).toEqual({ kind: 'results', suggested: 20000 });
  });

  it('says nothing of other errors', () => {
    for (const message of ['header not found', 'invalid block range params', 'block range extends beyond current head block', 'rate limit exceeded', 'execution reverted']) {
      expect(rangeComplaint({ message }), message).toBeNull();
    }
  });
});

describe('wantsLogRanges: who pays anything', () => {
  const up = (maxLogRange?: number): UpstreamSpec => ({ name: 'c#0', url: { parts: ['http://a'] }, weight: 1, role: 'primary', archive: false, connections: 1, idleTimeoutMs: 1000, headers: {}, ...(maxLogRange === undefined ? {} : { maxLogRange }) });
  const route = (methods: string[], upstreams: UpstreamSpec[], maxLogRange?: number): EvmRouteSpec =>
    ({ interface: 'evm-jsonrpc', methods: new Set(methods), upstreams, limits: maxLogRange === undefined ? {} : { maxLogRange } }) as unknown as EvmRouteSpec;

  it('no chain without eth_getLogs', () => {
    expect(wantsLogRanges(route(['eth_call'], [up(50), up()], 100))).toBe(false);
    expect(wantsLogRanges(route(['eth_call'], [up()]))).toBe(false);
  });

  it('every chain that allows eth_getLogs, a chain of one upstream without a cap too (issue 43 rule 10: its node may refuse a range)', () => {
    expect(wantsLogRanges(route(['eth_getLogs'], [up()]))).toBe(true);
    expect(wantsLogRanges(route(['eth_getLogs'], [up(50)]))).toBe(true);
    expect(wantsLogRanges(route(['eth_getLogs'], [up()], 100))).toBe(true);
    expect(wantsLogRanges(route(['eth_getLogs'], [up(), up()]))).toBe(true);
  });
});

describe('a cap learned from an error is not forever (issue 43 rule 2)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** One upstream that refuses more than 100 blocks, behind the layer (held answers: a pool's or a cache's way). */
  function node(): { ranges: LogRanges; seen: [number, number][] } {
    const spec = { name: 'c#0', url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000, archive: false } as unknown as UpstreamSpec;
    const route = { path: 'c', interface: 'evm-jsonrpc', methods: new Set(['eth_getLogs']), upstreams: [spec], limits: {}, maxLag: 10 } as unknown as EvmRouteSpec;
    const u = new Upstream(spec, route);
    u.state = 'up';
    const group = new UpstreamGroup([u]);
    const seen: [number, number][] = [];
    const inner = ((target: HeldTarget, request: ForwardRequest) => {
      const f = (JSON.parse(String(request.transport.body)) as { params: { fromBlock: string; toBlock: string }[] }).params[0]!;
      const [from, to] = [Number.parseInt(f.fromBlock, 16), Number.parseInt(f.toBlock, 16)];
      seen.push([from, to]);
      const answer = to - from + 1 > 100 ? '{"jsonrpc":"2.0","id":1,"error":{"code":-32701,"message":"exceed maximum block range: 100"}}' : '{"jsonrpc":"2.0","id":1,"result":[]}';
      queueMicrotask(() => target.forwarded({ kind: 'buffered', upstream: u, status: 200, headers: {}, body: Buffer.from(answer) }));
      return { cancel: () => undefined };
    }) as unknown as Dispatch;
    const ranges = new LogRanges(route, group, new ChainView(group.all), inner, { warn: () => undefined } as unknown as Logger);
    return { ranges, seen };
  }

  function range(ranges: LogRanges, from: number, to: number): Promise<ForwardResult> {
    const body = `{"jsonrpc":"2.0","id":7,"method":"eth_getLogs","params":[{"fromBlock":"0x${from.toString(16)}","toBlock":"0x${to.toString(16)}"}]}`;
    const request: HeldRequest = { calls: { one: new Call(body, 'eth_getLogs') }, transport: heldTransport(body) };
    return new Promise((resolve) => ranges.dispatch({ forwarded: resolve }, request));
  }

  it('keeps it for 10 minutes; then one range as wide as the rest allow tries the upstream again', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { ranges, seen } = node();
    const ok = (r: ForwardResult): string => (r.kind === 'buffered' ? r.body.toString() : r.kind);
    expect(ok(await range(ranges, 1000, 1299))).toBe('{"jsonrpc":"2.0","id":7,"result":[]}');
    // Refused whole, then split to the cap it named.
    expect(seen).toEqual([[1000, 1299], [1000, 1099], [1100, 1199], [1200, 1299]]);
    seen.length = 0;
    vi.advanceTimersByTime(10 * 60 * 1000 - 1);
    await range(ranges, 1000, 1299);
    expect(seen, 'within 10 minutes: split from the start').toEqual([[1000, 1099], [1100, 1199], [1200, 1299]]);
    seen.length = 0;
    vi.advanceTimersByTime(1);
    expect(ok(await range(ranges, 1000, 1299))).toBe('{"jsonrpc":"2.0","id":7,"result":[]}');
    expect(seen, 'after 10 minutes: the whole range once, refused, and the cap learned again').toEqual([[1000, 1299], [1000, 1099], [1100, 1199], [1200, 1299]]);
  });
});

describe('a split range on an upstream with rateLimit is paced (issue 43 rule 3)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends each chunk when the bucket has room for it and one request more: other calls always find one', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const spec = { name: 'c#0', url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000, archive: false, maxLogRange: 10, rateLimit: 20 } as unknown as UpstreamSpec;
    const route = { path: 'c', interface: 'evm-jsonrpc', methods: new Set(['eth_getLogs']), upstreams: [spec], limits: {}, maxLag: 10 } as unknown as EvmRouteSpec;
    const u = new Upstream(spec, route);
    u.state = 'up';
    const budget = u.budget!;
    expect(budget.burst).toBe(3);
    const group = new UpstreamGroup([u]);
    /** Requests the bucket held when each chunk was sent (before it took its own). */
    const room: number[] = [];
    const inner = ((target: HeldTarget) => {
      room.push(budget.available());
      // What Forward's pick does: the request is taken from the budget.
      budget.spend();
      queueMicrotask(() => target.forwarded({ kind: 'buffered', upstream: u, status: 200, headers: {}, body: Buffer.from('{"jsonrpc":"2.0","id":1,"result":[]}') }));
      return { cancel: () => undefined };
    }) as unknown as Dispatch;
    const ranges = new LogRanges(route, group, new ChainView(group.all), inner, { warn: () => undefined } as unknown as Logger);
    const body = '{"jsonrpc":"2.0","id":7,"method":"eth_getLogs","params":[{"fromBlock":"0x0","toBlock":"0x63"}]}';
    const request: HeldRequest = { calls: { one: new Call(body, 'eth_getLogs') }, transport: heldTransport(body) };
    let result: ForwardResult | null = null;
    ranges.dispatch({ forwarded: (r) => (result = r) }, request);
    // Ten chunks at 20/s: about half a second of pacing.
    for (let i = 0; i < 100 && result === null; i++) await vi.advanceTimersByTimeAsync(50);
    expect(result).toMatchObject({ kind: 'buffered', body: Buffer.from('{"jsonrpc":"2.0","id":7,"result":[]}') });
    expect(room).toHaveLength(10);
    expect(Math.min(...room), 'a chunk never takes the last request the bucket holds').toBeGreaterThanOrEqual(2);
  });
});

describe('what the guard read decides which requests the layer takes (the hot path: no body scan)', () => {
  /** The layer over a dispatch that records each request it is given. */
  function layer(): { ranges: LogRanges; passed: ForwardRequest[] } {
    const spec = { name: 'c#0', url: { parts: ['http://127.0.0.1:9'] }, headers: {}, role: 'primary', weight: 1, connections: 1, idleTimeoutMs: 1000, archive: false } as unknown as UpstreamSpec;
    const route = { path: 'c', interface: 'evm-jsonrpc', methods: new Set(['eth_getLogs', 'eth_call', 'eth_chainId']), upstreams: [spec], limits: {}, maxLag: 10 } as unknown as EvmRouteSpec;
    const u = new Upstream(spec, route);
    u.state = 'up';
    const group = new UpstreamGroup([u]);
    const passed: ForwardRequest[] = [];
    const inner = ((_: HeldTarget, request: ForwardRequest) => {
      passed.push(request);
      return { cancel: () => undefined };
    }) as unknown as Dispatch;
    return { ranges: new LogRanges(route, group, new ChainView(group.all), inner, { warn: () => undefined } as unknown as Logger), passed };
  }

  /** A body whose bytes may not be searched: what the guard read of it must do. */
  function unscanned(text: string): Buffer {
    return Object.assign(Buffer.from(text), {
      includes: () => {
        throw new Error('the body was scanned');
      },
    });
  }


  it("a call the guard read as another method goes on as it came, though its bytes name eth_getLogs", () => {
    const { ranges, passed } = layer();
    const body = unscanned('{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x0000000000000000000000000000000000000001","data":"0x"},"latest"],"note":"eth_getLogs"}');
    const request: HeldRequest = { calls: { one: new Call(body, 'eth_call') }, transport: heldTransport(body) };
    ranges.dispatch({ forwarded: () => undefined }, request);
    expect(passed).toEqual([request]);
  });

  it('a batch whose methods, as the guard decided them, hold no eth_getLogs goes on whole', () => {
    const { ranges, passed } = layer();
    const texts = ['{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}', '{"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":["eth_getLogs"]}'];
    const body = unscanned(`[${texts.join(',')}]`);
    const calls = texts.map((t) => new Call(unscanned(t), 'eth_chainId'));
    const request: HeldRequest = { calls: { batch: calls }, transport: heldTransport(body) };
    ranges.dispatch({ forwarded: () => undefined }, request);
    expect(passed).toEqual([request]);
  });
});
