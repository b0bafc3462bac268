// Answers for the `finalized` and `safe` tags are keyed by the block they
// resolve to (issue 20): they go when that block moves, even while the head
// stands still (on Ethereum a checkpoint can be finalized in a slot without a
// block). A stand-in node whose head, finalized and safe blocks the test moves
// one at a time; the gateway's head polls are told apart by their User-Agent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from 'node:http';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { createSafeServer, isHealthCheck, listen, parseJson, record } from '../support/http.ts';

const KEY = newKey();
const hex = (n: number) => '0x' + n.toString(16);
/** A block as the stand-in describes it: its number, and a hash that says which number it is. */
const block = (n: number) => ({ number: hex(n), hash: '0x' + n.toString(16).padStart(64, '0') });

/** What the stand-in reports; the test moves these. */
const tip = { latest: 100, finalized: 80, safe: 90 };
/** Head polls answered since the start, and the last of them that asked for the safe block. */
let polls = 0;
let pollsAskingSafe = 0;
/** Calls from clients (not the gateway's own) that reached the stand-in. */
const clientCalls: string[] = [];
let node: Server;
let rig: Gateway;
let gw: RunningGateway;

function answer(d: { id?: unknown; method?: string; params?: unknown[] }): unknown {
  if (d.method === 'eth_chainId') return { jsonrpc: '2.0', id: d.id, result: '0x1' };
  const at = d.params?.[0];
  const n = at === 'latest' ? tip.latest : at === 'finalized' ? tip.finalized : at === 'safe' ? tip.safe : typeof at === 'string' ? Number.parseInt(at, 16) : -1;
  return { jsonrpc: '2.0', id: d.id, result: n >= 0 && n <= tip.latest ? block(n) : null };
}

beforeAll(async () => {
  node = createSafeServer(async (req, res) => {
    const r = await record(req);
    const doc = parseJson(r.body) as Record<string, unknown> | Record<string, unknown>[];
    const items = Array.isArray(doc) ? doc : [doc];
    if (isHealthCheck(r)) {
      if (items.some((d) => d.method === 'eth_getBlockByNumber')) {
        polls++;
        if (items.some((d) => (d.params as unknown[])?.[0] === 'safe')) pollsAskingSafe = polls;
      }
    } else for (const d of items) clientCalls.push(`${String(d.method)} ${JSON.stringify(d.params)}`);
    const text = JSON.stringify(Array.isArray(doc) ? items.map(answer) : answer(doc));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  });
  const url = await listen(node);
  rig = await gateway({
    name: 'cache-tags',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${NODE_URL}'] }],
    header: { health: { intervalMs: 60000, timeoutMs: 1000 }, cache: { maxBytes: 1048576, headPollMs: 100 } },
    keys: [{ id: 'tags', key: KEY }],
    standIns: { node },
    env: { NODE_URL: url },
  });
  gw = rig.gw;
  await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')) === tip.latest, 'the gateway knows the head');
}, 60_000);

afterAll(() => rig?.close());

async function byTag(tag: string): Promise<{ xCache: string | null; number: string }> {
  const res = await fetch(gw.url('rpc', '/ethereum'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: [tag, false] }),
  });
  const body = (await res.json()) as { result: { number: string } };
  return { xCache: res.headers.get('x-cache'), number: body.result.number };
}

/**
 * Moves what the stand-in reports, then waits until the gateway has settled a
 * poll that saw it: polls never overlap, so once a poll that began after the
 * change has been answered and the next one has arrived, the gateway has read it.
 */
async function move(change: Partial<typeof tip>): Promise<void> {
  Object.assign(tip, change);
  const from = polls;
  await until(async () => polls >= from + 2, 'two head polls after the change');
}

describe('cache: the finalized and safe tags', () => {
  it('an answer for `finalized` or `safe` goes when that block moves, though the head stays; the head poll asks for both', async () => {
    expect(pollsAskingSafe).toBeGreaterThan(0); // the poll asks for `safe` too
    expect(await byTag('finalized')).toEqual({ xCache: 'MISS', number: hex(80) });
    expect(await byTag('finalized')).toEqual({ xCache: 'HIT', number: hex(80) });
    expect(await byTag('safe')).toEqual({ xCache: 'MISS', number: hex(90) });
    expect(await byTag('safe')).toEqual({ xCache: 'HIT', number: hex(90) });
    expect(await byTag('latest')).toEqual({ xCache: 'MISS', number: hex(100) });

    const changes = await metricValue(gw, 'gateway_cache_head_changes_total', '{chain="ethereum"}');
    await move({ finalized: 85 });
    expect(await metricValue(gw, 'gateway_cache_finalized_block', '{chain="ethereum"}')).toBe(85);
    expect(await byTag('finalized')).toEqual({ xCache: 'MISS', number: hex(85) });
    expect(await byTag('finalized')).toEqual({ xCache: 'HIT', number: hex(85) });

    await move({ safe: 95 });
    expect(await byTag('safe')).toEqual({ xCache: 'MISS', number: hex(95) });
    expect(await byTag('safe')).toEqual({ xCache: 'HIT', number: hex(95) });
    // Neither was a new head: the head did not move, and it is counted as not moving.
    expect(await metricValue(gw, 'gateway_cache_head_changes_total', '{chain="ethereum"}')).toBe(changes);
    expect(await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')).toBe(100);

    // A head that moves takes them all, as before.
    await move({ latest: 101 });
    expect(await byTag('latest')).toEqual({ xCache: 'MISS', number: hex(101) });
    expect(await byTag('safe')).toEqual({ xCache: 'MISS', number: hex(95) });
    expect(clientCalls.filter((c) => c.includes('"safe"'))).toHaveLength(3);
    expect(clientCalls.filter((c) => c.includes('"finalized"'))).toHaveLength(2);
  });
});
