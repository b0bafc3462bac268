// A node that refused batches is asked with one again once it comes back from
// down: a node restarted may have been upgraded or reconfigured. A stand-in
// that refuses batches (one error object for any array, as such nodes do),
// then fails its health checks until the gateway takes it out, then comes back
// taking batches; cache misses sent in one turn show which it is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from 'node:http';
import { metricValue, newKey, pipelinedRequests, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { createSafeServer, isHealthCheck, listen, parseJson, record } from '../support/http.ts';

const KEY = newKey();
type Mode = 'refuses' | 'down' | 'takes';
let mode: Mode = 'refuses';
/** Bodies of the requests that came from clients' misses (not the gateway's own checks and polls). */
const misses: unknown[] = [];
let node: Server;
let rig: Gateway;
let gw: RunningGateway;

type Call = { id?: unknown; method?: string; params?: unknown[] };
function answer(d: Call): unknown {
  if (d.method === 'eth_chainId') return { jsonrpc: '2.0', id: d.id, result: '0x1' };
  if (d.method === 'eth_getBlockByNumber') return { jsonrpc: '2.0', id: d.id, result: { number: '0x10', hash: '0x' + '11'.repeat(32) } };
  // eth_getBalance: the address's last four hex digits.
  return { jsonrpc: '2.0', id: d.id, result: '0x' + String(d.params?.[0] ?? '').slice(-4) };
}

beforeAll(async () => {
  node = createSafeServer(async (req, res) => {
    const r = await record(req);
    const doc = parseJson(r.body) as Call | Call[];
    if (!isHealthCheck(r)) misses.push(doc);
    let status = 200;
    let out: unknown;
    if (mode === 'down') {
      status = 503;
      out = { error: 'restarting' };
    } else if (Array.isArray(doc)) out = mode === 'takes' ? doc.map(answer) : { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batch requests are not supported' } };
    else out = answer(doc);
    const text = JSON.stringify(out);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  });
  const url = await listen(node);
  rig = await gateway({
    name: 'cache-batch-again',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${NODE_URL}'] }],
    header: { cache: { maxBytes: 1048576, headPollMs: 100, batch: 10 }, health: { intervalMs: 100, timeoutMs: 1000 } },
    keys: [{ id: 'again', key: KEY }],
    standIns: { node },
    env: { NODE_URL: url },
  });
  gw = rig.gw;
  await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')) === 16, 'the gateway knows the head');
}, 60_000);

afterAll(() => rig?.close());

/** Three different misses in one write, so they reach the gateway in one turn; the bodies the node got for them. */
async function threeMisses(round: number): Promise<unknown[]> {
  const calls = [1, 2, 3].map((i) => {
    const n = String(round * 10 + i).padStart(4, '0');
    return `{"jsonrpc":"2.0","id":${i},"method":"eth_getBalance","params":["0x${'ab'.repeat(18)}${n}","latest"]}`;
  });
  const from = misses.length;
  const answers = await pipelinedRequests(gw.ports.rpc!, '/ethereum', KEY, calls);
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
  answers.forEach((a, i) => expect(JSON.parse(a.text)).toEqual({ jsonrpc: '2.0', id: i + 1, result: '0x' + String(round * 10 + i + 1).padStart(4, '0') }));
  return misses.slice(from);
}

const up = () => metricValue(gw, 'gateway_upstream_up', '{chain="ethereum",upstream="ethereum#0"}');

describe('cache: batches of misses to a node back from down', () => {
  it('a node that refused batches gets calls one by one; once it has been down and is back, batches again', async () => {
    // The health check's own batch has taught the gateway already: the misses go one by one, none as a batch.
    const before = await threeMisses(1);
    expect(before).toHaveLength(3);
    expect(before.every((b) => !Array.isArray(b))).toBe(true);

    mode = 'down';
    await until(async () => (await up()) === 0, 'the gateway takes the node out');
    mode = 'takes';
    await until(async () => (await up()) === 1, 'the node is back');
    const after = await threeMisses(2);
    expect(after).toHaveLength(1);
    expect(Array.isArray(after[0]) && after[0].length).toBe(3);
  });
});
