// rewriteTags on a pool without the cache: `safe` and `finalized` reach the
// nodes as the block numbers the gateway serves, as `latest` does, so every
// node of the pool answers about the same block. The pool is a healthy node
// and a laggard 80 blocks behind (test/support/pool-standins.ts) in front of
// one anvil, so the two report different safe and finalized blocks; each
// records what reached it, and the tests read those records.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startPoolStandin, type PoolStandin } from '../support/pool-standins.ts';

const KEY = newKey();
/** Deeper than anvil's safe (32) and finalized (64) blocks below its head: the laggard's are its head, lower than anvil's. */
const LAG = 80;
let anvil: Anvil;
let healthy: PoolStandin;
let laggard: PoolStandin;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  await anvil.mine(200);
  [healthy, laggard] = await Promise.all([startPoolStandin(anvil.url, { role: 'healthy' }), startPoolStandin(anvil.url, { role: 'laggard', lag: LAG })]);
  rig = await gateway({
    name: 'pool-tags',
    chains: [
      // The laggard is further behind than anvil's finalized block (64 deep) and stays in the pool.
      evmChain('tags', ['HEALTHY', 'LAGGARD'], { rewriteTags: true, maxLag: 100 }),
    ],
    header: { admin: null },
    keys: [{ id: 'tags', key: KEY }],
    standIns: { anvil, HEALTHY: healthy, LAGGARD: laggard },
  });
  gw = rig.gw;
}, 40_000);

afterAll(() => rig?.close());

let nextId = 1;
async function result(method: string, params: unknown[]): Promise<any> {
  const r = await request(gw.url('rpc', '/tags'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const doc = JSON.parse(await r.body.text()) as { result?: unknown; error?: unknown };
  expect(doc.error, `${method} ${JSON.stringify(params)}`).toBeUndefined();
  return doc.result;
}

/** The block parameter of every client call of `method` that reached either node since `from` (per node). */
function reached(method: string, from: { healthy: number; laggard: number }): unknown[] {
  const calls = [...healthy.requests.slice(from.healthy), ...laggard.requests.slice(from.laggard)];
  return calls.flatMap((c) => {
    const j = c.json as { method?: unknown; params?: unknown[] };
    return j?.method === method ? [j.params?.[0]] : [];
  });
}

/** What a node says its `tag` block is, asked directly. */
async function nodeBlock(node: PoolStandin, tag: string): Promise<number> {
  const r = await request(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: [tag, false] }) });
  const doc = (await r.body.json()) as { result: { number: string } };
  return Number.parseInt(doc.result.number, 16);
}

describe('rewriteTags on a pool without the cache', () => {
  for (const tag of ['finalized', 'safe'] as const) {
    it(`sends ${tag} to the nodes as the number the gateway serves: the lowest of the nodes', the same whichever node answers`, async () => {
      const [own, behind] = [await nodeBlock(healthy, tag), await nodeBlock(laggard, tag)];
      expect(behind, 'the laggard reports a lower block than the healthy node').toBeLessThan(own);
      const lowest = behind;
      expect(lowest).toBeGreaterThan(0);
      // The polls report each node's tag blocks: wait until a call goes out with a number.
      await until(async () => {
        const from = { healthy: healthy.requests.length, laggard: laggard.requests.length };
        await result('eth_getBlockByNumber', [tag, false]);
        return reached('eth_getBlockByNumber', from).every((p) => typeof p === 'string' && p.startsWith('0x'));
      }, `${tag} rewritten to a number`);
      const from = { healthy: healthy.requests.length, laggard: laggard.requests.length };
      const numbers = new Set<string>();
      for (let i = 0; i < 12; i++) numbers.add((await result('eth_getBlockByNumber', [tag, false])).number);
      const sent = reached('eth_getBlockByNumber', from);
      expect(sent).toHaveLength(12);
      expect(new Set(sent), 'what reached the nodes').toEqual(new Set([`0x${lowest.toString(16)}`]));
      expect(numbers, 'what the clients got').toEqual(new Set([`0x${lowest.toString(16)}`]));
      // Both nodes were asked: the answers agree whichever one answered.
      expect(healthy.requests.slice(from.healthy).length).toBeGreaterThan(0);
      expect(laggard.requests.slice(from.laggard).length).toBeGreaterThan(0);
    }, 20_000);
  }
});
