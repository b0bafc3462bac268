// Upstream handling against running processes (issue 6): weighted selection,
// failover with real anvil nodes killed and restarted mid-load, fallbacks,
// lag, slow and garbage upstreams, circuit breaking, write safety, provider
// headers; and clients that disconnect mid-answer (the undici pipe pitfall).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, request as httpRequest, type Server, type ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { newKey, rawRequest, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';

const KEY = newKey();
const TOKEN = `provider-secret-${newKey()}`;
const CALL = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });

let a: Anvil; // primary, weight 2
let b: Anvil; // primary, weight 1
let c: Anvil; // fallback
let d: Anvil; // lagging
let pa: RecordingProxy;
let pb: RecordingProxy;
let pc: RecordingProxy;
let pd: RecordingProxy;
let bigRequests = 0;
let hangupHits = 0;
/** failchain's upstream: calls it got; whether a failed call makes it stop answering health checks; checks it holds. */
let failCalls = 0;
let failHoldsChecks = false;
let failChecksHeld = false;
const failHeldChecks: ServerResponse[] = [];
let rig: Gateway;
let gw: RunningGateway;
/** Resolvers for the holding upstream's next held request and its next dropped one. */
const held: (() => void)[] = [];
const dropped: (() => void)[] = [];
const servers: Server[] = [];
/** idlechain's upstream: calls waiting for their pair, when each connection last answered, close waiters. */
const pairWaiting: (() => void)[] = [];
const idleSockets = new Map<import('node:net').Socket, number>();
const socketClosed: ((s: import('node:net').Socket) => void)[] = [];

function serve(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  servers.push(server);
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` })));
}

/** A poll (eth_chainId and eth_blockNumber, alone or as a batch) answered as a node of chain 1 at block `head` answers it. */
function pollAnswer(body: string, head: string): string {
  const doc = JSON.parse(body) as { id?: unknown; method?: unknown } | { id?: unknown; method?: unknown }[];
  const one = (c: { id?: unknown; method?: unknown }) => ({ jsonrpc: '2.0', id: c.id, result: c.method === 'eth_chainId' ? '0x1' : head });
  return JSON.stringify(Array.isArray(doc) ? doc.map(one) : one(doc));
}

beforeAll(async () => {
  [a, b, c, d] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 1 }), startAnvil({ chainId: 1 }), startAnvil({ chainId: 1 })]);
  // a, b and c are 20 blocks ahead of d: d lags.
  await Promise.all([a.mine(20), b.mine(20), c.mine(20)]);
  [pa, pb, pc, pd] = await Promise.all([startRecordingProxy(a.url), startRecordingProxy(b.url), startRecordingProxy(c.url), startRecordingProxy(d.url)]);
  // Healthy to health checks (eth_blockNumber), 3 s late with every real answer.
  const s1 = await serve((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c)).on('end', () => {
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      if (body.includes('eth_blockNumber')) res.writeHead(200, { 'content-type': 'application/json' }).end(pollAnswer(body, '0x1'));
      else setTimeout(answer, 3000).unref();
    });
  });
  // Slow like s1: slowchain's second upstream.
  const s1b = await serve((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c)).on('end', () => {
      if (body.includes('eth_blockNumber')) res.writeHead(200, { 'content-type': 'application/json' }).end(pollAnswer(body, '0x1'));
      else setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x1"}'), 3000).unref();
    });
  });
  const s2 = await serve((req, res) => req.resume().on('end', () => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>502 Bad Gateway</html>')));
  // Passes health checks (eth_blockNumber), fails every real request. Once
  // `failHoldsChecks` is set, a failed call also makes it hold health checks
  // unanswered, until the test lets them through again.
  const s3 = await serve((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c)).on('end', () => {
      if (body.includes('eth_blockNumber')) {
        if (failChecksHeld) return void failHeldChecks.push(res);
        return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x10"}');
      }
      failCalls++;
      if (failHoldsChecks) failChecksHeld = true;
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"oops":true}');
    });
  });
  // ~4 MB, in small pieces: a client can go away in the middle.
  const s4 = await serve((req, res) => {
    if (!String(req.headers['user-agent']).startsWith('chain-gateway-health')) bigRequests++;
    req.resume().on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      let sent = 0;
      const piece = Buffer.alloc(64 * 1024, 0x20);
      const pump = () => {
        while (sent < 64) {
          sent++;
          if (!res.write(piece)) return void res.once('drain', pump);
        }
        res.end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      };
      res.write('');
      pump();
    });
  });
  // Passes health checks; takes any other request, then drops the connection without answering.
  const s5 = await serve((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c)).on('end', () => {
      if (body.includes('eth_blockNumber')) return void res.writeHead(200, { 'content-type': 'application/json' }).end(pollAnswer(body, '0x10'));
      hangupHits++;
      req.socket.destroy();
    });
  });
  // Answers with end-to-end headers, hop-by-hop ones, and ones a gateway must not pass on.
  const s6 = await serve((req, res) =>
    req.resume().on('end', () => {
      res.writeHead(200, [
        'content-type', 'application/json',
        'server', 'Geth/v1.14.0-stable/linux-amd64',
        'date', 'Fri, 01 Jan 1999 00:00:00 GMT',
        'keep-alive', 'timeout=5',
        'x-request-id', 'upstream-own-id',
        'access-control-allow-origin', '*',
        'x-node-region', 'eu-1',
        'set-cookie', 'a=1',
        'set-cookie', 'b=2',
      ]);
      res.end('{"jsonrpc":"2.0","id":1,"result":"0x7"}');
    }),
  );
  // Passes health checks; holds every other request without an answer, and
  // reports it (on `held`), then reports when the gateway gives up on it (on `dropped`).
  const s7 = await serve((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c)).on('end', () => {
      if (body.includes('eth_blockNumber')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x10"}');
      if (body.includes('"answer-now"')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":"answer-now","result":"0x1"}');
      res.on('close', () => dropped.shift()?.());
      held.shift()?.();
    });
  });
  // Answers two calls together, once both are in (so the gateway needs two
  // connections), and records when each connection last answered and when it closed.
  // No Keep-Alive hint (keepAliveTimeout 0), so the gateway's own idle timeout decides.
  const s8 = await serve((req, res) => {
    req.resume().on('end', () => {
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      if (req.headers['user-agent']?.startsWith('chain-gateway-health')) return answer();
      pairWaiting.push(() => {
        // Taken before the answer leaves: the gateway's idle timer can only start later.
        idleSockets.set(req.socket, performance.now());
        answer();
      });
      if (pairWaiting.length === 2) for (const go of pairWaiting.splice(0)) go();
    });
  });
  s8.server.keepAliveTimeout = 0;
  s8.server.on('connection', (socket) => socket.on('close', () => socketClosed.shift()?.(socket)));
  rig = await gateway({
    name: 'upstreams',
    chains: [
      {
        path: 'ethereum',
        interface: 'evm-jsonrpc',
        chainId: 1,
        maxLag: 5,
        retries: 1,
        upstreams: [{ url: '${A_URL}', weight: 2, headers: { Authorization: 'Bearer ${TOKEN}' } }, '${B_URL}', { url: '${C_URL}', role: 'fallback' }, '${D_URL}'],
      },
      // Pools of a toy node that answers eth_blockNumber alone: rewriteTags off, or the polls for the tags' blocks would find no head.
      { path: 'slowchain', interface: 'evm-jsonrpc', maxLag: 1000000, rewriteTags: false, upstreams: [s1.url, s1b.url] },
      { path: 'garbagechain', interface: 'evm-jsonrpc', maxLag: 1000000, rewriteTags: false, upstreams: [{ url: s2.url, weight: 100 }, '${B_URL}'] },
      { path: 'failchain', interface: 'evm-jsonrpc', retries: 0, upstreams: [s3.url] },
      { path: 'bigchain', interface: 'evm-jsonrpc', upstreams: [{ url: s4.url, connections: 2 }] },
      { path: 'headerchain', interface: 'evm-jsonrpc', upstreams: [s6.url] },
      { path: 'holdchain', interface: 'evm-jsonrpc', retries: 0, limits: { timeoutMs: 600000 }, upstreams: [{ url: s7.url, connections: 2 }] },
      { path: 'idlechain', interface: 'evm-jsonrpc', upstreams: [{ url: s8.url, idleTimeoutMs: 1000 }] },
      { path: 'hangchain', interface: 'evm-jsonrpc', maxLag: 1000000, rewriteTags: false, broadcast: 'one', upstreams: [{ url: s5.url, weight: 100 }, '${B_URL}'] },
    ],
    header: { limits: { timeoutMs: 800 }, health: { intervalMs: 150, timeoutMs: 500 } },
    keys: [{ id: 'ops', key: KEY }],
    standIns: { servers, A_URL: pa, B_URL: pb, C_URL: pc, D_URL: pd, anvils: [a, b, c, d] },
    env: { TOKEN },
  });
  gw = rig.gw;
  // Ready once the health checks have seen a, b and c (d lags, so it stays out).
  await until((ups) => ups.slice(0, 3).every((u) => u.state === 'up') && ups[3]!.state === 'down');
}, 90_000);

afterAll(() => rig?.close());

const send = (path: string, body = CALL) => rawRequest(gw.url('rpc', path), { body, headers: { 'x-api-key': KEY } });
const clearAll = () => [pa, pb, pc, pd].forEach((p) => p.clear());

/** Waits until /readyz shows `pred` for a chain's upstreams (health checks run every 150 ms). */
async function until(pred: (ups: { name: string; state: string; head: number | null }[]) => boolean, chain = 'ethereum'): Promise<void> {
  const deadline = Date.now() + 4_000;
  for (;;) {
    const ups = (await rawRequest(gw.url('rpc', '/readyz'))).json().chains[chain].upstreams;
    if (pred(ups)) return;
    if (Date.now() > deadline) throw new Error(`readyz never matched for ${chain}: ${JSON.stringify(ups)}`);
    await new Promise((r) => setTimeout(r, 25)); // poll interval, not a readiness guess
  }
}

/** Waits until `cond()` holds (a load running beside the test makes progress); fails after 10 s. */
async function progress(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`no progress within 10 s: ${what}`);
    await new Promise((r) => setTimeout(r, 5)); // poll interval, not a readiness guess
  }
}

describe('selection and health', () => {
  it('spreads traffic by weight among healthy primaries, never to the fallback or the lagging node', async () => {
    clearAll();
    for (let i = 0; i < 90; i++) expect((await send('/ethereum')).status).toBe(200);
    expect(pa.requests.length).toBe(60);
    expect(pb.requests.length).toBe(30);
    expect(pc.requests.length).toBe(0);
    expect(pd.requests.length).toBe(0);
  });

  it('reports each upstream with state and head in /readyz, by name, never by URL or credential', async () => {
    const r = await rawRequest(gw.url('rpc', '/readyz'));
    const ups = r.json().chains.ethereum.upstreams;
    expect(ups.map((u: { name: string }) => u.name)).toEqual(['ethereum#0', 'ethereum#1', 'ethereum#2', 'ethereum#3']);
    expect(ups[0].head).toBe(20);
    expect(ups[3]).toMatchObject({ state: 'down', head: 0 });
    for (const secret of [pa.url, pb.url, TOKEN, '127.0.0.1']) expect(r.text).not.toContain(secret);
  });

  it('sends the upstream’s own headers with requests and health checks, and never logs them', async () => {
    clearAll();
    // Until both a (weight 2) and b (weight 1) have had calls: a handful at most.
    for (let i = 0; i < 10 && (pa.requests.length === 0 || pb.requests.length === 0); i++) expect((await send('/ethereum')).status).toBe(200);
    expect(pa.requests.length).toBeGreaterThan(0);
    expect(pb.requests.length).toBeGreaterThan(0);
    const auth = (r: { headers: Record<string, unknown> }) => r.headers.authorization;
    expect(new Set(pa.requests.map(auth))).toEqual(new Set([`Bearer ${TOKEN}`]));
    expect(new Set(pb.requests.map(auth))).toEqual(new Set([undefined]));
    // Health checks: a's carry the header, the others' do not.
    expect(pa.healthChecks.length).toBeGreaterThan(0);
    expect(new Set(pa.healthChecks.map(auth))).toEqual(new Set([`Bearer ${TOKEN}`]));
    for (const p of [pb, pc, pd]) {
      expect(p.healthChecks.length).toBeGreaterThan(0);
      expect(new Set(p.healthChecks.map(auth))).toEqual(new Set([undefined]));
    }
    const logs = gw.lines.join('\n');
    expect(logs).not.toContain(TOKEN);
    expect(logs).not.toContain(KEY);
  });

  it('takes a lagging node back once it has caught up', { timeout: 30_000 }, async () => {
    await d.mine(20);
    await until((ups) => ups[3]!.state === 'up');
  });
});

describe('failover', () => {
  it('loses no read while a primary is killed and restarted mid-load', { timeout: 60_000 }, async () => {
    await until((ups) => ups[0]!.state === 'up' && ups[1]!.state === 'up');
    clearAll();
    const port = a.port;
    let failures = 0;
    let done = 0;
    let stop = false;
    // The load runs until the node is back and serving again, so it spans the kill and the restart.
    const worker = async () => {
      while (!stop) {
        const r = await send('/ethereum');
        if (r.status !== 200 || r.json().result !== '0x1') failures++;
        done++;
      }
    };
    const load = Promise.all(Array.from({ length: 8 }, worker));
    let doneAtKill = 0;
    let doneAtRestart = 0;
    let toDeadNode = 0;
    try {
      await progress('the load is answered, a included', () => done >= 16 && pa.requests.length > 0);
      doneAtKill = done;
      const seenAtKill = pa.requests.length;
      await a.stop(); // killed mid-load: every worker has a read in flight
      await until((ups) => ups[0]!.state === 'down');
      // Reads that reached a's proxy from the kill until a was taken out (three
      // failed reads, or two failed checks with the load running meanwhile).
      toDeadNode = pa.requests.length - seenAtKill;
      a = await startAnvil({ chainId: 1, port }); // restarted on the same port
      await a.mine(21);
      await until((ups) => ups[0]!.state === 'up');
      doneAtRestart = done;
      const seenAtRestart = pa.requests.length;
      await progress('a serves the load again', () => pa.requests.length > seenAtRestart);
    } finally {
      stop = true;
      await load;
    }
    expect(doneAtKill).toBeGreaterThanOrEqual(16);
    expect(toDeadNode, 'reads sent to a after the kill').toBeGreaterThan(0);
    expect(doneAtRestart - doneAtKill, 'reads answered while a was down').toBeGreaterThan(0);
    expect(failures).toBe(0);
    expect(pb.requests.length).toBeGreaterThan(0);
  });

  it('sends traffic to the fallback only when no primary is healthy', { timeout: 60_000 }, async () => {
    await Promise.all([a.stop(), b.stop(), d.stop()]);
    await until((ups) => ups[0]!.state === 'down' && ups[1]!.state === 'down' && ups[3]!.state === 'down');
    clearAll();
    for (let i = 0; i < 5; i++) expect((await send('/ethereum')).json().result).toBe('0x1');
    expect(pc.requests.length).toBe(5);
    // Everything down: an immediate 503 in the JSON-RPC envelope, not a timeout.
    await c.stop();
    await until((ups) => ups.every((u) => u.state === 'down'));
    clearAll();
    const r = await send('/ethereum');
    expect(r.status).toBe(503);
    expect(r.json().error.code).toBe(-32052);
    // Not after a timeout: no upstream was even tried (the proxies in front of the nodes are up and record).
    for (const p of [pa, pb, pc, pd]) expect(p.requests).toHaveLength(0);
    const ready = await rawRequest(gw.url('rpc', '/readyz'));
    expect(ready.status).toBe(503);
    // Bring them back for the tests below.
    const again = (n: Anvil) => startAnvil({ chainId: 1, port: n.port });
    [a, b, c, d] = await Promise.all([again(a), again(b), again(c), again(d)]);
    await Promise.all([a, b, c, d].map((n) => n.mine(25)));
    await until((ups) => ups.every((u) => u.state === 'up'));
  });
});

describe('bad upstreams', () => {
  it('a read whose upstreams give no answer within timeoutMs gets the timeout (504) at that one deadline: a retry on the other upstream does not run past it', async () => {
    await until((ups) => ups.every((u) => u.state === 'up'), 'slowchain');
    // Both answer in 3 s, the call's timeoutMs is 800. Before one deadline per call, the retry on the other got
    // 800 ms more: the client waited 1.6 s or more. The bound is twice the deadline, far above the deadline's own.
    const began = performance.now();
    const r = await send('/slowchain');
    const took = performance.now() - began;
    expect(r.status, r.text).toBe(504);
    expect(r.json().error.code).toBe(-32051);
    expect(took).toBeLessThan(1600);
    // The log line comes on the gateway's stdout, which the test may not have read yet when the answer is in.
    await gw.waitForLog((e) => e.event === 'upstream_failed' && String(e.upstream).startsWith('slowchain#') && e.fail === 'timeout');
  });

  it('treats an HTML answer as a failure and retries the read elsewhere', async () => {
    await until((ups) => ups[1]!.state === 'up', 'garbagechain');
    pb.clear();
    const r = await send('/garbagechain');
    expect(r.json()).toEqual({ jsonrpc: '2.0', id: 1, result: '0x1' });
    expect(pb.requests).toHaveLength(1);
  });

  it('takes an upstream out after a run of failures, without waiting for a health check, and keeps requests off it until a check passes (circuit breaker)', async () => {
    // failchain's upstream passes health checks but fails every request.
    await until((ups) => ups[0]!.state === 'up', 'failchain');
    failCalls = 0;
    // From the first failed call on, its health checks get no answer: no check
    // can bring it back, and none can take it out sooner than two check timeouts (2 x 500 ms).
    failHoldsChecks = true;
    try {
      const opened = gw.nextLog((e) => e.event === 'upstream_circuit_open' && e.upstream === 'failchain#0');
      for (let i = 0; i < 3; i++) {
        const r = await send('/failchain');
        expect(r.status).toBe(502);
        expect(r.text).not.toContain('oops');
      }
      await opened;
      expect(failCalls).toBe(3);
      // Later requests stay off it: answered at once, and the upstream sees none.
      for (let i = 0; i < 5; i++) {
        const r = await send('/failchain');
        expect(r.status).toBe(503);
        expect(r.json().error.code).toBe(-32052);
      }
      expect(failCalls).toBe(3);
    } finally {
      failHoldsChecks = false;
      failChecksHeld = false;
      for (const res of failHeldChecks.splice(0)) if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x10"}');
    }
    // A passing check brings it back on trial: the next call reaches it, and its failure takes it out at once.
    await until((ups) => ups[0]!.state === 'up', 'failchain');
    const again = gw.nextLog((e) => e.event === 'upstream_circuit_open' && e.upstream === 'failchain#0');
    expect((await send('/failchain')).status).toBe(502);
    expect(failCalls).toBe(4);
    await again;
  });

  it('never sends eth_sendRawTransaction to a second node once the first may have received it (broadcast: one)', async () => {
    await until((ups) => ups.every((u) => u.state === 'up'), 'hangchain');
    pb.clear();
    hangupHits = 0;
    const tx = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'eth_sendRawTransaction', params: ['0x02f86c'] });
    const r = await send('/hangchain', tx);
    expect(r.status).toBe(502);
    expect(hangupHits).toBe(1);
    expect(pb.methodsSeen()).not.toContain('eth_sendRawTransaction');
    // A read on the same chain is retried on the healthy node.
    const read = await send('/hangchain');
    expect(read.status).toBe(200);
  });
});

describe('answer headers', () => {
  it('passes end-to-end headers on, repeated ones included, and keeps hop-by-hop ones, CORS, server and date to itself', async () => {
    const r = await send('/headerchain');
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ jsonrpc: '2.0', id: 1, result: '0x7' });
    expect(r.headers['x-node-region']).toBe('eu-1');
    expect(r.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers.server).toBeUndefined();
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
    expect(String(r.headers['keep-alive'])).not.toBe('timeout=5');
    expect(r.headers['x-request-id']).not.toBe('upstream-own-id');
    expect(String(r.headers['x-request-id'])).toMatch(/^[0-9a-f-]{36}$/);
    // The gateway's own date, not the node's.
    expect(r.headers.date).not.toBe('Fri, 01 Jan 1999 00:00:00 GMT');
    expect(Date.parse(String(r.headers.date))).toBeGreaterThan(Date.parse('2020-01-01T00:00:00Z'));
  });
});

describe('upstream connections', () => {
  it('are closed after the upstream’s idleTimeoutMs unused, not before', { timeout: 20_000 }, async () => {
    const closed = new Promise<import('node:net').Socket>((ok) => socketClosed.push(ok));
    const [r1, r2] = await Promise.all([send('/idlechain'), send('/idlechain')]);
    expect([r1.status, r2.status]).toEqual([200, 200]);
    // Health checks keep one connection busy every 150 ms; the other one idles.
    const socket = await closed;
    // The connection that closed is one that answered a call (not a health check's).
    expect(idleSockets.has(socket)).toBe(true);
    // Not before: a lower bound on the monotonic clock, which the gateway's own
    // timer (started after the answer left, counted in whole ms) cannot beat.
    expect(performance.now() - idleSockets.get(socket)!).toBeGreaterThanOrEqual(999);
    // Not the 55 s default: the close came within this test's 20 s timeout.
  });
});

describe('clients that disconnect mid-answer', () => {
  it('release the upstream connection: a pool of 2 survives 12 aborted 4 MB answers', async () => {
    const before = bigRequests;
    for (let i = 0; i < 12; i++) {
      await new Promise<void>((done) => {
        const req = httpRequest(gw.url('rpc', '/bigchain'), { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, agent: false }, (res) => {
          res.once('data', () => {
            req.destroy();
            done();
          });
        });
        req.on('error', () => undefined);
        req.end(CALL);
      });
    }
    // With a leak the pool would be stuck after two aborts and this would time out (504).
    const r = await rawRequest(gw.url('rpc', '/bigchain'), { body: CALL, headers: { 'x-api-key': KEY } });
    expect(r.status).toBe(200);
    expect(r.text.length).toBeGreaterThan(4 * 1024 * 1024);
    expect(bigRequests - before).toBe(13);
  });

  it('abort the upstream request when the client leaves before the answer’s head: a pool of 2 survives 6 of them', async () => {
    for (let i = 0; i < 6; i++) {
      const isHeld = new Promise<void>((ok) => held.push(ok));
      const isDropped = new Promise<void>((ok) => dropped.push(ok));
      const logged = gw.nextLog((e) => e.msg === 'request' && e.chain === 'holdchain');
      const req = httpRequest(gw.url('rpc', '/holdchain'), { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, agent: false });
      req.on('error', () => undefined);
      req.end(CALL);
      await isHeld; // the upstream has the request and no answer has started
      req.destroy();
      await isDropped; // the gateway has let go of the upstream request (its timeout is 10 minutes: only the abort can do this)
      const line = await logged;
      expect(line.status).toBe(0); // 0: the client went away
      expect(line.method).toBe('eth_chainId');
    }
    // Had the aborted requests kept their connections, this one would wait for a free one and time out (504).
    const r = await rawRequest(gw.url('rpc', '/holdchain'), {
      body: JSON.stringify({ jsonrpc: '2.0', id: 'answer-now', method: 'eth_chainId', params: [] }),
      headers: { 'x-api-key': KEY },
    });
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ jsonrpc: '2.0', id: 'answer-now', result: '0x1' });
  });
});
