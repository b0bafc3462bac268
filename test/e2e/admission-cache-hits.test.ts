// Admission's admit step is the top layer of every chain, over the cache's
// front (issue 37, "admission, then cache"): an answer the cache gives with no
// upstream request (eth_chainId from the manifest's chainId, a client batch of
// such calls) is rate limited in credits, carries the X-RateLimit headers, and
// is counted as used per method, as any call is; a key without limits gets no
// such header.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from 'node:http';
import { metricValue, newKey, rawRequest, sha256, until, type RawResponse, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { createSafeServer, isHealthCheck, listen, parseJson, record } from '../support/http.ts';

const K = { limited: newKey(), free: newKey() };
const hex = (n: number) => '0x' + n.toString(16);
const block = (n: number) => ({ number: hex(n), hash: '0x' + n.toString(16).padStart(64, '0') });
/** Calls from clients (not the gateway's polls) that reached the stand-in. */
let clientCalls = 0;
let node: Server;
let rig: Gateway;
let gw: RunningGateway;

function answer(d: { id?: unknown; method?: string; params?: unknown[] }): unknown {
  if (d.method === 'eth_chainId') return { jsonrpc: '2.0', id: d.id, result: '0x1' };
  return { jsonrpc: '2.0', id: d.id, result: block(100) };
}

beforeAll(async () => {
  node = createSafeServer(async (req, res) => {
    const r = await record(req);
    const doc = parseJson(r.body) as Record<string, unknown> | Record<string, unknown>[];
    if (!isHealthCheck(r)) clientCalls++;
    const text = JSON.stringify(Array.isArray(doc) ? doc.map(answer) : answer(doc));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  });
  const url = await listen(node);
  rig = await gateway({
    name: 'admission-cache-hits',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${NODE_URL}'] }],
    header: { credits: { eth_chainId: 2 }, cache: { maxBytes: 1048576, headPollMs: 100 }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: `keys:
  - { id: limited, sha256: "${sha256(K.limited)}", rateLimit: 6/min }
  - { id: free, sha256: "${sha256(K.free)}" }
`,
    standIns: { node },
    env: { NODE_URL: url },
  });
  gw = rig.gw;
  await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')) === 100, 'the gateway knows the head');
}, 60_000);

afterAll(() => rig?.close());

const RPC = (method: string, id = 1) => ({ jsonrpc: '2.0', id, method, params: [] });
const post = (key: string, body: unknown): Promise<RawResponse> => rawRequest(gw.url('rpc', '/ethereum'), { body: JSON.stringify(body), headers: { 'x-api-key': key } });

describe('admission over the cache', () => {
  it('a hit costs its credits and carries the X-RateLimit headers; once the limit is spent a hit is refused with 429 and Retry-After', async () => {
    const before = clientCalls;
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await post(K.limited, RPC('eth_chainId', i));
      expect(r.status).toBe(200);
      expect(r.headers['x-cache']).toBe('HIT');
      expect(r.headers['x-credits-used']).toBe('2');
      expect(r.json()).toEqual({ jsonrpc: '2.0', id: i, result: '0x1' });
      remaining.push(String(r.headers['x-ratelimit-remaining']));
    }
    expect(remaining).toEqual(['4', '2', '0']);
    const refused = await post(K.limited, RPC('eth_chainId', 9));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['x-ratelimit-remaining']).toBe('0');
    expect((refused.json() as { error: { code: number } }).error.code).toBe(-32005);
    // Every answer came from the gateway: none reached the node.
    expect(clientCalls).toBe(before);
  });

  it("a key without limits gets no X-RateLimit headers on a hit, and every hit is counted as used per method, a batch's each", async () => {
    const single = await post(K.free, RPC('eth_chainId'));
    expect(single.headers['x-cache']).toBe('HIT');
    expect(single.headers['x-ratelimit-limit']).toBeUndefined();
    expect(single.headers['x-credits-used']).toBeUndefined();
    const batch = await post(K.free, [RPC('eth_chainId', 1), RPC('net_version', 2)]);
    expect(batch.headers['x-cache']).toBe('HIT');
    expect(batch.json()).toEqual([
      { jsonrpc: '2.0', id: 1, result: '0x1' },
      { jsonrpc: '2.0', id: 2, result: '1' },
    ]);
    const today = new Date().toISOString().slice(0, 10);
    const u = (await rawRequest(gw.url('admin', '/usage?key=free'))).json() as { days: unknown[] };
    expect(u.days).toEqual([
      { day: today, chain: 'ethereum', method: 'eth_chainId', calls: 2, credits: 4 },
      { day: today, chain: 'ethereum', method: 'net_version', calls: 1, credits: 1 },
    ]);
  });
});
