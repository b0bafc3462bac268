// Forward's retries (runtime/upstreams/forward.ts), through its public surface: real
// Upstreams (undici Pools) in front of local node:http servers that fail in
// chosen ways, and a stand-in client response. What is asserted is which
// upstreams got the request and what the outcome was.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { ForwardResult, Transport } from '../../../../runtime/dispatch.ts';
import { Forward } from '../../../../runtime/upstreams/forward.ts';
import type { RouteSpec } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup } from '../../../../runtime/upstreams/upstream.ts';

type Behaviour = 'ok' | '500' | 'hangup' | 'hold';

interface Node {
  readonly url: string;
  calls: number;
}

const servers: Server[] = [];
const nodes = new Map<Behaviour, Node>();
/** Nothing listens on port 1: connecting is refused, so the node surely never got the request. */
const REFUSED: Node = { url: 'http://127.0.0.1:1', calls: 0 };

beforeAll(async () => {
  for (const b of ['ok', '500', 'hangup', 'hold'] as const) {
    const node: Node = { url: '', calls: 0 };
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume().on('end', () => {
        node.calls++;
        if (b === 'ok') res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
        else if (b === '500') res.writeHead(500, { 'content-type': 'application/json' }).end('{"oops":true}');
        else if (b === 'hangup') req.socket.destroy(); // got the request, never answers
        // 'hold': no answer at all; the upstream timeout ends it
      });
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    servers.push(server);
    nodes.set(b, Object.assign(node, { url: `http://127.0.0.1:${(server.address() as { port: number }).port}` }));
  }
});
afterAll(async () => {
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((ok) => s.close(ok))));
});

const groups: UpstreamGroup[] = [];
afterEach(async () => {
  await Promise.all(groups.splice(0).map((g) => g.close()));
  for (const n of [...nodes.values(), REFUSED]) n.calls = 0;
});

/** A chain whose upstreams are these nodes, in order, equal weights (so the first is tried first). */
function chain(list: Node[], timeoutMs = 2000): UpstreamGroup {
  const route = { path: 'c', limits: { timeoutMs } } as RouteSpec;
  const g = new UpstreamGroup(
    list.map((n, i) => new Upstream({ name: `c#${i}`, url: { parts: [n.url] }, weight: 1, role: 'primary', archive: false, connections: 4, idleTimeoutMs: 1000, headers: {} }, route)),
  );
  groups.push(g);
  return g;
}
const node = (b: Behaviour) => nodes.get(b)!;

interface Outcome {
  /** The result kind, the upstream that gave it, and its status or failure. */
  readonly result: string;
  readonly body: string;
}

/** Forwards one request and resolves with its outcome, the way the server reads it. */
function forward(g: UpstreamGroup, opts: { idempotent: boolean; retries: number }): Promise<Outcome> {
  return new Promise((done) => {
    const chunks: Buffer[] = [];
    // Just what Forward uses of a ServerResponse.
    const res = {
      destroyed: false,
      headersSent: false,
      write: (c: Buffer) => (chunks.push(Buffer.from(c)), true),
      end: () => undefined,
      once: () => res,
      destroy: () => void (res.destroyed = true),
    };
    const req: Transport = {
      method: 'POST',
      path: () => '/',
      headers: ['content-type', 'application/json'],
      body: '{}',
      idempotent: opts.idempotent,
      retries: opts.retries,
      maxBuffer: 1 << 20,
      deadline: performance.now() + 5000,
      emptyOk: false,
      classify: (status) => (status >= 500 ? 'bad' : 'stream'),
    };
    const target = {
      res: res as unknown as ServerResponse,
      streamHead: () => void (res.headersSent = true),
      forwarded: (r: ForwardResult) => {
        const where = r.upstream?.name ?? 'none';
        const result =
          r.kind === 'streamed' || r.kind === 'buffered' ? `${r.kind} ${r.status} from ${where}` : r.kind === 'failed' ? `failed ${r.fail} at ${where}` : `aborted at ${where}`;
        done({ result, body: r.kind === 'buffered' ? r.body.toString() : Buffer.concat(chunks).toString() });
      },
    };
    new Forward(g, req, target).start();
  });
}
const calls = (...list: Node[]) => list.map((n) => n.calls);

describe('Forward: reads', () => {
  it('retries a 5xx once on another upstream and streams that one’s answer', async () => {
    const g = chain([node('500'), node('ok')]);
    expect(await forward(g, { idempotent: true, retries: 1 })).toEqual({ result: 'streamed 200 from c#1', body: '{"ok":true}' });
    expect(calls(node('500'), node('ok'))).toEqual([1, 1]);
  });

  it('with retries: 0, the 5xx is the outcome and no other upstream is asked', async () => {
    const g = chain([node('500'), node('ok')]);
    expect(await forward(g, { idempotent: true, retries: 0 })).toEqual({ result: 'buffered 500 from c#0', body: '{"oops":true}' });
    expect(calls(node('500'), node('ok'))).toEqual([1, 0]);
  });

  it('makes at most `retries` retries, each on an upstream not yet tried', async () => {
    const five = node('500');
    const g = chain([five, five, five, node('ok')]);
    expect((await forward(g, { idempotent: true, retries: 2 })).result).toBe('buffered 500 from c#2');
    expect(calls(five, node('ok'))).toEqual([3, 0]);
  });

  it('never sends a request twice to one upstream, retries to spare or not', async () => {
    const g = chain([node('500'), node('hangup')]);
    expect((await forward(g, { idempotent: true, retries: 5 })).result).toBe('failed unavailable at c#1');
    expect(calls(node('500'), node('hangup'))).toEqual([1, 1]);
  });

  it('retries after a refused connection and after a timeout', async () => {
    expect((await forward(chain([REFUSED, node('ok')]), { idempotent: true, retries: 1 })).result).toBe('streamed 200 from c#1');
    expect((await forward(chain([node('hold'), node('ok')], 300), { idempotent: true, retries: 1 })).result).toBe('streamed 200 from c#1');
    expect(calls(node('hold'), node('ok'))).toEqual([1, 2]);
  });

  it('reports the last failure when every try failed', async () => {
    expect((await forward(chain([REFUSED, node('hold')], 300), { idempotent: true, retries: 1 })).result).toBe('failed timeout at c#1');
  });
});

describe('Forward: writes', () => {
  it('go to another upstream only when the first surely never got them (connection refused)', async () => {
    expect((await forward(chain([REFUSED, node('ok')]), { idempotent: false, retries: 1 })).result).toBe('streamed 200 from c#1');
    expect(calls(node('ok'))).toEqual([1]);
  });

  it('are not retried after a 5xx, a hang-up or a timeout: the node may have executed them', async () => {
    const ok = node('ok');
    expect((await forward(chain([node('500'), ok]), { idempotent: false, retries: 1 })).result).toBe('buffered 500 from c#0');
    expect((await forward(chain([node('hangup'), ok]), { idempotent: false, retries: 1 })).result).toBe('failed unavailable at c#0');
    expect((await forward(chain([node('hold'), ok], 300), { idempotent: false, retries: 1 })).result).toBe('failed timeout at c#0');
    expect(calls(node('500'), node('hangup'), node('hold'), ok)).toEqual([1, 1, 1, 0]);
  });
});

describe('Forward: circuit breaker', () => {
  it('three failed requests in a row take the upstream out (its group listener is told), and the next finds no upstream without trying', async () => {
    const g = chain([node('500')]);
    const opened: string[] = [];
    g.onCircuitOpen((u) => opened.push(u.name));
    for (let i = 0; i < 3; i++) expect((await forward(g, { idempotent: true, retries: 1 })).result).toBe('buffered 500 from c#0');
    expect(opened).toEqual(['c#0']);
    expect((await forward(g, { idempotent: true, retries: 1 })).result).toBe('failed no-upstream at none');
    expect(calls(node('500'))).toEqual([3]);
  });
});

describe('Forward: per-upstream tally (gateway_upstream_request* metrics, status page)', () => {
  const tally = (u: Upstream) => [u.tally.ok, u.tally.failed, u.tally.buckets.reduce((a, b) => a + b, 0)];

  it('counts each attempt once, on the upstream that got it, as ok or failed, with its latency in the histogram', async () => {
    const g = chain([node('500'), REFUSED, node('hold'), node('ok')], 300);
    expect((await forward(g, { idempotent: true, retries: 3 })).result).toBe('streamed 200 from c#3');
    expect(g.all.map(tally)).toEqual([
      [0, 1, 1],
      [0, 1, 1],
      [0, 1, 1],
      [1, 0, 1],
    ]);
    // The held attempt lasted at least its 300 ms timeout: it is in no bucket up to 0.25 s.
    const held = g.all[2]!.tally;
    expect(held.sum).toBeGreaterThanOrEqual(0.29);
    expect(held.buckets.slice(0, 8).every((n) => n === 0)).toBe(true);
  });

  it('a 5xx that is the outcome (no retry left) counts as failed', async () => {
    const g = chain([node('500'), node('ok')]);
    await forward(g, { idempotent: true, retries: 0 });
    expect(g.all.map(tally)).toEqual([
      [0, 1, 1],
      [0, 0, 0],
    ]);
  });
});

describe('Forward: held mode (hold: true)', () => {
  /** A held request: its target has nothing to stream into, only `forwarded`. */
  function held(g: UpstreamGroup, retries: number): Promise<ForwardResult> {
    return new Promise((forwarded) => {
      const req: Transport & { readonly hold: true } = {
        method: 'POST',
        path: () => '/',
        headers: ['content-type', 'application/json'],
        body: '{}',
        idempotent: true,
        retries,
        maxBuffer: 1 << 20,
        deadline: performance.now() + 5000,
        emptyOk: false,
        classify: (status) => (status >= 500 ? 'bad' : 'stream'),
        hold: true,
      };
      new Forward(g, req, { forwarded }).start();
    });
  }

  it('holds an answer whole that classify would stream, for a target with no client response', async () => {
    const r = await held(chain([node('ok')]), 0);
    expect(r.kind === 'buffered' ? `${r.status} ${r.body.toString()}` : r.kind).toBe('200 {"ok":true}');
  });

  it('retries and fails as a streamed request does, with no client response to look at', async () => {
    const r = await held(chain([node('500'), node('ok')]), 1);
    expect(r.kind === 'buffered' ? `${r.status} from ${r.upstream.name}` : r.kind).toBe('200 from c#1');
    const f = await held(chain([node('hangup')]), 0);
    expect(f.kind === 'failed' ? f.fail : f.kind).toBe('unavailable');
  });
});
