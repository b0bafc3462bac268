// Hostile input (issue 18): requests an attacker sends and answers a broken
// node gives, against the emitted server. Each misbehaving upstream is one
// chain on a programmable "rogue" server, so a test says exactly how the node
// misbehaves and sees what reached it; a real anvil answers notifications.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { newKey, rawRequest, type RawResponse, type RunningGateway } from './harness.ts';
import { gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { createServer, isHealthCheck, listen, readAll } from '../support/http.ts';
import { RPC_ERRORS } from '../../runtime/kinds/evm/errors.ts';
import { ROSETTA_ERRORS } from '../../runtime/kinds/rosetta/errors.ts';

const KEY = newKey();
const MiB = 1024 * 1024;

/** What the rogue does with a request that is not a health check. */
type Behaviour = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;
interface Received {
  readonly chain: string;
  readonly path: string;
  readonly body: string;
}

const behaviours = new Map<string, Behaviour>();
const received: Received[] = [];
let rogue: ReturnType<typeof createServer>;
let rogueUrl: string;
let anvil: Anvil;
let proxy: RecordingProxy;
let rig: Gateway;
let gw: RunningGateway;

/** The good answers a healthy node of each interface gives. */
function answerWell(chain: string, req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const json = (v: unknown) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(v));
  };
  if (chain.startsWith('e-')) {
    const doc = JSON.parse(body.toString()) as { id?: unknown } | { id?: unknown }[];
    const one = (c: { id?: unknown }) => ({ jsonrpc: '2.0', id: c.id, result: '0x10' });
    return json(Array.isArray(doc) ? doc.map(one) : one(doc));
  }
  if (chain.startsWith('r-')) {
    if (req.url!.endsWith('/network/list')) return json({ network_identifiers: [{ blockchain: 'cardano', network: 'preprod' }] });
    if (req.url!.endsWith('/network/status'))
      return json({ current_block_identifier: { index: 16, hash: 'h16' }, current_block_timestamp: 1, genesis_block_identifier: { index: 0, hash: 'h0' }, peers: [] });
    return json({ ok: true });
  }
  if (req.url!.endsWith('/status')) return json({ blockbook: { bestHeight: 16 }, backend: { blocks: 16 } });
  return json({ hash: 'h16', height: 16 });
}

const EVM_CHAINS = ['e-good', 'e-deep', 'e-slow', 'e-close', 'e-empty', 'e-foreign', 'e-big'];
const ROSETTA_CHAINS = ['r-good', 'r-deep', 'r-slow', 'r-close', 'r-big'];
const BLOCKBOOK_CHAINS = ['b-good', 'b-close'];

beforeAll(async () => {
  rogue = createServer((req, res) => {
    void readAll(req).then((body) => {
      const chain = req.url!.split('/')[1]!;
      const b = behaviours.get(chain);
      if (isHealthCheck(req) || b === undefined) return answerWell(chain, req, res, body);
      received.push({ chain, path: req.url!, body: body.toString() });
      b(req, res, body);
    });
  });
  rogue.on('clientError', (_e, socket) => socket.destroy());
  rogueUrl = await listen(rogue);
  anvil = await startAnvil({ chainId: 1 });
  proxy = await startRecordingProxy(anvil.url);
  const methods = ['eth_chainId', 'eth_blockNumber'];
  const rogueChain = (path: string) => ({ path, retries: 0, upstreams: [`\${ROGUE}/${path}`] });
  const chains: Chain[] = [
    { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, methods, upstreams: ['${ETH_URL}'] },
    // e-deep forwards params nested up to the parser's own limit: its params go unchecked (validate: off).
    ...EVM_CHAINS.map((c): Chain => ({ ...rogueChain(c), interface: 'evm-jsonrpc', methods, limits: { timeoutMs: 2000 }, ...(c === 'e-deep' ? { validate: 'off' } : {}) })),
    ...ROSETTA_CHAINS.map((c): Chain => ({ ...rogueChain(c), interface: 'rosetta', network: 'preprod', limits: { timeoutMs: 2000 } })),
    ...BLOCKBOOK_CHAINS.map((c): Chain => ({ ...rogueChain(c), interface: 'blockbook', listener: 'explorer' })),
  ];
  rig = await gateway({
    name: 'hostile',
    chains,
    header: { admin: null, limits: { maxBodyBytes: 1048576, maxBatchSize: 20, timeoutMs: 5000, maxPageSize: 50 }, health: { intervalMs: 60000, timeoutMs: 1000 }, methodSets: null },
    keys: [{ id: 'hostile', key: KEY }],
    standIns: { anvil, rogue, ETH_URL: proxy },
    env: { ROGUE: rogueUrl },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

beforeEach(() => {
  behaviours.clear();
  received.length = 0;
  proxy?.clear();
});

const H = { 'x-api-key': KEY, 'content-type': 'application/json' };
const rpc = (chain: string, body: string | Buffer, headers: Record<string, string> = H) => rawRequest(gw.url('rpc', `/${chain}`), { body, headers });
const rosettaCall = (chain: string, endpoint: string, body: unknown) => rawRequest(gw.url('rpc', `/${chain}/${endpoint}`), { body: typeof body === 'string' ? body : JSON.stringify(body), headers: H });
const NI = { network_identifier: { blockchain: 'cardano', network: 'preprod' } };
const deep = (n: number, inner = '1') => '['.repeat(n) + inner + ']'.repeat(n);
const call = (id: unknown, method = 'eth_chainId') => ({ jsonrpc: '2.0', id, method, params: [] });

/** The gateway's error `name`; for a batch failed whole, one per call, each with its call's id (a call the guard refused keeps its own answer). */
function expectRpcError(r: RawResponse, name: keyof typeof RPC_ERRORS): void {
  expect(r.status, r.text).toBe(RPC_ERRORS[name].status);
  const j = r.json();
  const failed = (Array.isArray(j) ? j : [j]).filter((i: { error?: { code: number } }) => i.error?.code === RPC_ERRORS[name].code);
  expect(failed.length, r.text).toBeGreaterThan(0);
  for (const i of failed) expect(i.error.message).toBe(RPC_ERRORS[name].message);
  if (Array.isArray(j)) for (const i of j) expect(i.id, r.text).not.toBeNull();
  expect(r.headers['x-request-id']).toBeTruthy();
}
function expectRosettaError(r: RawResponse, name: keyof typeof ROSETTA_ERRORS): void {
  expect(r.status, r.text).toBe(500);
  expect(r.json()).toMatchObject(ROSETTA_ERRORS[name]);
  expect(r.headers['x-request-id']).toBeTruthy();
}

/** The gateway still serves: the process is up and a plain call is answered. */
async function stillServes(): Promise<void> {
  expect(gw.proc.exitCode).toBeNull();
  const r = await rpc('e-good', JSON.stringify(call(1)));
  expect(r.status).toBe(200);
  expect(r.json().result).toBe('0x10');
}

/** Peak resident memory of the gateway process so far, in bytes. */
function peakRss(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${gw.proc.pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** The access log's status for a request id (0 would mean no answer was ever finished). */
async function loggedStatus(reqId: string): Promise<number> {
  const line = await gw.waitForLog((e) => e.reqId === reqId && e.msg === 'request');
  return line.status as number;
}

describe('1. deep nesting in a request', () => {
  it('refuses a ~10 KB JSON-RPC body nested 5,000 deep (extra key or escape) with -32600, forwards nothing, and stays up', async () => {
    const inner = deep(5000);
    const bodies = [
      `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[${inner}],"x":1}`,
      `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[${inner}],"\\u0078":1}`,
      `{"jsonrpc":"2.0","id":1,"m\\u0065thod":"eth_chainId","params":[${inner}]}`,
      `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[${inner}]},{"jsonrpc":"2.0","id":2,"method":"eth_chainId","x":1}]`,
    ];
    behaviours.set('e-good', (_q, res) => res.end('{"jsonrpc":"2.0","id":1,"result":"0x1"}'));
    for (const body of bodies) {
      expect(body.length).toBeGreaterThan(10_000);
      const r = await rpc('e-good', body);
      expectRpcError(r, 'GW_RPC_TOO_DEEP');
      expect(r.json().id).toBe(null);
    }
    expect(received).toEqual([]);
    behaviours.clear();
    await stillServes();
  });

  it('forwards a body nested within the limit, re-serialized', async () => {
    const r = await rpc('e-deep', `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[${deep(100)}],"x":1}`);
    expect(r.status).toBe(200);
    expect(r.json().result).toBe('0x10');
  });

  it('refuses Rosetta metadata nested 5,000 deep with error 6017 (HTTP 500), forwards nothing, and stays up', async () => {
    behaviours.set('r-good', (_q, res) => res.end('{}'));
    const r = await rosettaCall('r-good', 'network/status', `{"network_identifier":{"blockchain":"cardano","network":"preprod"},"metadata":{"a":${deep(5000)}}}`);
    expectRosettaError(r, 'GW_ROSETTA_TOO_DEEP');
    expect(r.json().details).toEqual({ max_depth: 128 });
    expect(received).toEqual([]);
    await stillServes();
  });
});

describe('2. deeply nested upstream answers', () => {
  it('answers a batch with a refused item whose upstream answer nests 100,000 deep with -32053, and logs the status', async () => {
    behaviours.set('e-deep', (_q, res) => res.end(`[{"jsonrpc":"2.0","id":1,"result":${deep(100_000)}}]`));
    const r = await rpc('e-deep', JSON.stringify([call(1), call(2, 'eth_mining')]));
    expectRpcError(r, 'GW_RPC_UPSTREAM_BAD_RESPONSE');
    expect(received).toHaveLength(1);
    expect(await loggedStatus(r.headers['x-request-id'] as string)).toBe(502);
    await stillServes();
  });

  it('answers /network/options whose upstream answer nests 100,000 deep with 6033', async () => {
    behaviours.set('r-deep', (_q, res) => res.end(`{"version":{"rosetta_version":"1.4.13","node_version":"1"},"allow":{"errors":[],"x":${deep(100_000)}}}`));
    const r = await rosettaCall('r-deep', 'network/options', NI);
    expectRosettaError(r, 'GW_ROSETTA_UPSTREAM_BAD_RESPONSE');
    expect(await loggedStatus(r.headers['x-request-id'] as string)).toBe(500);
  });
});

describe('3. timeoutMs covers an answer the gateway rewrites', () => {
  /** Sends the head at once, then 1 KiB every 100 ms (10 KiB/s) for 20 s; records whether the gateway hung up first. */
  function trickle(cut: { early: boolean | null }, first: string, chunk: string): Behaviour {
    return (_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(first);
      let n = 0;
      const t = setInterval(() => {
        if (++n > 200) {
          clearInterval(t);
          res.end(']');
          return;
        }
        res.write(chunk);
      }, 100);
      res.on('close', () => {
        clearInterval(t);
        cut.early = !res.writableFinished;
      });
    };
  }

  it('ends a merged batch that trickles past timeoutMs with -32051, hanging up on the upstream', async () => {
    const cut = { early: null as boolean | null };
    behaviours.set('e-slow', trickle(cut, '[{"jsonrpc":"2.0","id":1,"result":"0x1"}', ` ${' '.repeat(1023)}`));
    const r = await rpc('e-slow', JSON.stringify([call(1), call(2, 'eth_mining')]));
    expectRpcError(r, 'GW_RPC_UPSTREAM_TIMEOUT');
    await expect.poll(() => cut.early, { timeout: 5000 }).toBe(true);
  });

  it('ends a /network/options answer that trickles past timeoutMs with 6031', async () => {
    const cut = { early: null as boolean | null };
    behaviours.set('r-slow', trickle(cut, '{"allow":{"errors":[', ' '.repeat(1024)));
    const r = await rosettaCall('r-slow', 'network/options', NI);
    expectRosettaError(r, 'GW_ROSETTA_UPSTREAM_TIMEOUT');
    await expect.poll(() => cut.early, { timeout: 5000 }).toBe(true);
  });
});

describe('4. an upstream that closes right after a 200 head', () => {
  const closeAfterHead: Behaviour = (_q, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
    res.flushHeaders();
    setImmediate(() => res.socket?.destroy());
  };
  const emptyAndClose: Behaviour = (_q, res) => {
    res.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
    res.end();
  };

  it('gets 502 in the JSON-RPC envelope, cut off or empty', async () => {
    behaviours.set('e-close', closeAfterHead);
    expectRpcError(await rpc('e-close', JSON.stringify(call(1))), 'GW_RPC_UPSTREAM_UNAVAILABLE');
    behaviours.set('e-empty', emptyAndClose);
    expectRpcError(await rpc('e-empty', JSON.stringify(call(1))), 'GW_RPC_UPSTREAM_BAD_RESPONSE');
    expect(received.map((r) => r.chain)).toEqual(['e-close', 'e-empty']);
  });

  it('gets a Rosetta Error with HTTP 500', async () => {
    behaviours.set('r-close', closeAfterHead);
    expectRosettaError(await rosettaCall('r-close', 'network/status', NI), 'GW_ROSETTA_UPSTREAM_UNAVAILABLE');
    behaviours.set('r-close', emptyAndClose);
    expectRosettaError(await rosettaCall('r-close', 'block', { ...NI, block_identifier: { index: 1 } }), 'GW_ROSETTA_UPSTREAM_BAD_RESPONSE');
  });

  it('gets 502 with a Blockbook error body', async () => {
    behaviours.set('b-close', closeAfterHead);
    const r = await rawRequest(gw.url('explorer', '/b-close/v2/block/1'), { headers: { 'x-api-key': KEY } });
    expect(r.status).toBe(502);
    expect(r.json()).toEqual({ error: 'Upstream unavailable' });
    behaviours.set('b-close', emptyAndClose);
    const e = await rawRequest(gw.url('explorer', '/b-close/v2/block/1'), { headers: { 'x-api-key': KEY } });
    expect(e.status).toBe(502);
    expect(e.json()).toEqual({ error: 'Upstream unavailable' });
  });
});

describe('5. ids in a merged batch answer', () => {
  it('treats an answer with a foreign id in place of one sent as a bad upstream answer', async () => {
    behaviours.set('e-foreign', (_q, res) =>
      res.end('[{"jsonrpc":"2.0","id":"b","result":"0x2"},{"jsonrpc":"2.0","id":"not-yours","result":"0x1"}]'),
    );
    const r = await rpc('e-foreign', JSON.stringify([call('a'), call('x', 'eth_mining'), call('b')]));
    expectRpcError(r, 'GW_RPC_UPSTREAM_BAD_RESPONSE');
    expect(r.text).not.toContain('not-yours');
    // The node got the two allowed calls, and only those.
    expect(JSON.parse(received[0]!.body).map((c: { id: string }) => c.id)).toEqual(['a', 'b']);
  });

  it('merges an answer that carries exactly the ids sent, in any order', async () => {
    behaviours.set('e-foreign', (_q, res) => res.end('[{"jsonrpc":"2.0","id":"b","result":"0x2"},{"jsonrpc":"2.0","id":"a","result":"0x1"}]'));
    const r = await rpc('e-foreign', JSON.stringify([call('a'), call('x', 'eth_mining'), call('b')]));
    expect(r.status).toBe(200);
    expect(r.json().map((x: { id: string }) => x.id)).toEqual(['a', 'x', 'b']);
  });
});

describe('6. memory of an answer being rewritten', () => {
  /** Sends `size` bytes of answer, ignoring a gateway that hangs up. */
  const big = (head: string, size: number, tail: string, status = 200): Behaviour => (_q, res) => {
    res.on('error', () => {});
    res.writeHead(status, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(MiB, 0x61);
    res.write(head);
    let left = size;
    const more = (): void => {
      while (left > 0) {
        left -= MiB;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end(tail);
    };
    more();
  };

  it('merges a 30 MiB batch answer with a bounded peak RSS, and refuses 50 MiB answers it would rewrite', async () => {
    const before = peakRss();
    behaviours.set('e-big', big('[{"jsonrpc":"2.0","id":1,"result":"', 30 * MiB, '"}]'));
    const r = await rpc('e-big', JSON.stringify([call(1), call(2, 'eth_mining')]));
    expect(r.status).toBe(200);
    expect(r.text.length).toBe(30 * MiB + '[{"jsonrpc":"2.0","id":1,"result":""},'.length + RPC_ERRORS.GW_RPC_METHOD_NOT_FOUND.message.length + '{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":""}}]'.length);
    const merged = peakRss() - before;

    behaviours.set('e-big', big('[{"jsonrpc":"2.0","id":1,"result":"', 50 * MiB, '"}]'));
    expectRpcError(await rpc('e-big', JSON.stringify([call(1), call(2, 'eth_mining')])), 'GW_RPC_UPSTREAM_BAD_RESPONSE');
    behaviours.set('r-big', big('{"code":5000,"message":"x","retriable":false,"details":{"x":"', 50 * MiB, '"}}', 500));
    expectRosettaError(await rosettaCall('r-big', 'network/status', NI), 'GW_ROSETTA_UPSTREAM_BAD_RESPONSE');
    behaviours.set('r-big', big('{"allow":{"errors":[],"x":"', 50 * MiB, '"}}'));
    expectRosettaError(await rosettaCall('r-big', 'network/options', NI), 'GW_ROSETTA_UPSTREAM_BAD_RESPONSE');
    const all = peakRss() - before;
    console.log(`peak RSS growth: 30 MiB merge ${(merged / MiB).toFixed(0)} MiB; with the three 50 MiB answers ${(all / MiB).toFixed(0)} MiB`);
    // Parsing the 30 MiB answer whole, as before, took 8-10x its size.
    expect(all).toBeLessThan(160 * MiB);
    await stillServes();
  }, 60_000);
});

/** One request over a raw socket, exactly as written; the answer's status, headers and body. */
function rawSocket(port: number, text: string): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write(text));
    const chunks: Buffer[] = [];
    s.on('data', (c) => chunks.push(c));
    s.on('error', reject);
    s.on('close', () => {
      const all = Buffer.concat(chunks).toString();
      const [head, ...rest] = all.split('\r\n\r\n');
      resolve({ status: Number(head!.split(' ')[1]), headers: head!.toLowerCase(), body: rest.join('\r\n\r\n') });
    });
  });
}

describe('7. Expect other than 100-continue', () => {
  const expectHeader = { ...H, expect: 'x-fancy' };

  it('gets 417 in the JSON-RPC envelope, with a request id', async () => {
    const r = await rpc('e-good', JSON.stringify(call(1)), expectHeader);
    expectRpcError(r, 'GW_RPC_EXPECTATION_FAILED');
  });

  it('gets a Rosetta Error with HTTP 500', async () => {
    const r = await rawRequest(gw.url('rpc', '/r-good/network/status'), { body: JSON.stringify(NI), headers: expectHeader });
    expectRosettaError(r, 'GW_ROSETTA_EXPECTATION_FAILED');
  });

  it('gets 417 with a Blockbook error body, and 100-continue still works', async () => {
    const r = await rawRequest(gw.url('explorer', '/b-good/v2/block/1'), { headers: { 'x-api-key': KEY, expect: 'x-fancy' } });
    expect(r.status).toBe(417);
    expect(r.json()).toEqual({ error: 'Unsupported Expect header' });
    expect(r.headers['x-request-id']).toBeTruthy();
    expect(received).toEqual([]);
    const body = JSON.stringify(call(1));
    const ok = await rawSocket(
      gw.ports.rpc!,
      `POST /e-good HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(ok.status).toBe(100);
    expect(ok.body).toContain('200 OK');
  });
});

describe('8. no Host header', () => {
  const post = (path: string, body: string) =>
    `POST ${path} HTTP/1.1\r\nX-API-Key: ${KEY}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

  it('gets 400 in the JSON-RPC envelope', async () => {
    const r = await rawSocket(gw.ports.rpc!, post('/e-good', JSON.stringify(call(1))));
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error).toEqual({ code: -32600, message: RPC_ERRORS.GW_RPC_MALFORMED_HTTP.message });
    expect(r.headers).toContain('x-request-id:');
  });

  it('gets a Rosetta Error with HTTP 500', async () => {
    const r = await rawSocket(gw.ports.rpc!, post('/r-good/network/status', JSON.stringify(NI)));
    expect(r.status).toBe(500);
    expect(JSON.parse(r.body)).toMatchObject(ROSETTA_ERRORS.GW_ROSETTA_MALFORMED_HTTP);
  });

  it('gets 400 with a Blockbook error body; HTTP/1.0, where Host is optional, is served', async () => {
    const r = await rawSocket(gw.ports.explorer!, `GET /b-good/v2/block/1 HTTP/1.1\r\nX-API-Key: ${KEY}\r\nConnection: close\r\n\r\n`);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toEqual({ error: 'Malformed HTTP request' });
    expect(received).toEqual([]);
    const old = await rawSocket(gw.ports.explorer!, `GET /b-good/v2/block/1 HTTP/1.0\r\nX-API-Key: ${KEY}\r\n\r\n`);
    expect(old.status).toBe(200);
    expect(JSON.parse(old.body)).toEqual({ hash: 'h16', height: 16 });
  });
});

describe('9. notifications to a real node (anvil)', () => {
  /** What anvil itself answers to the same body. */
  async function direct(body: string): Promise<RawResponse> {
    return rawRequest(anvil.url, { body });
  }
  const note = (method = 'eth_blockNumber') => ({ jsonrpc: '2.0', method, params: [] });

  it('passes the node answer to a notification, a batch of them and a mixed batch through, and keeps the upstream healthy', async () => {
    const single = JSON.stringify(note());
    const batch = JSON.stringify([note(), note('eth_chainId')]);
    const node1 = await direct(single);
    const nodeB = await direct(batch);
    expect(node1.status).toBeGreaterThanOrEqual(200);
    expect(node1.status).toBeLessThan(300);

    const r1 = await rpc('ethereum', single);
    expect([r1.status, r1.text]).toEqual([node1.status, node1.text]);
    expect(r1.headers['x-request-id']).toBeTruthy();
    const rB = await rpc('ethereum', batch);
    expect([rB.status, rB.text]).toEqual([nodeB.status, nodeB.text]);

    // Allowed notification + refused call + refused notification: only the notification reaches the node,
    // and the answer is the refused call's error alone.
    const mixed = await rpc('ethereum', JSON.stringify([note(), call(5, 'eth_mining'), note('eth_mining')]));
    expect(mixed.status).toBe(200);
    expect(mixed.json()).toEqual([{ jsonrpc: '2.0', id: 5, error: { code: -32601, message: 'Method not found' } }]);
    // Notifications of allowed methods only: an empty answer, as from the node.
    const onlyNotes = await rpc('ethereum', JSON.stringify([note(), note('eth_mining')]));
    expect(onlyNotes.status).toBe(204);
    expect(onlyNotes.text).toBe('');

    expect(proxy.methodsSeen()).toEqual(['eth_blockNumber', 'eth_blockNumber', 'eth_chainId', 'eth_blockNumber', 'eth_blockNumber']);
    // Five empty answers in a row did not count as failures: no breaker, no failed upstream.
    const trouble = gw.lines.filter((l) => /upstream_circuit_open|upstream_failed|upstream_bad_response/.test(l));
    expect(trouble.filter((l) => l.includes('"ethereum')).length).toBe(0);
    const ok = await rpc('ethereum', JSON.stringify(call(9)));
    expect(ok.json()).toEqual({ jsonrpc: '2.0', id: 9, result: '0x1' });
  });

  it('still fails an empty answer to a call that has an id', async () => {
    behaviours.set('e-empty', (_q, res) => {
      res.writeHead(204);
      res.end();
    });
    expectRpcError(await rpc('e-empty', JSON.stringify(call(1))), 'GW_RPC_UPSTREAM_BAD_RESPONSE');
  });
});
