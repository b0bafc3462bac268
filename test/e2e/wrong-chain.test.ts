// The wrong-chain guard (issue 24) against running processes: among each
// chain's upstreams, one that serves another chain (a real anvil of another
// chain id, a Rosetta stand-in of another network, a Blockbook stand-in of
// another coin). None of the clients' requests reach it; /readyz and /metrics
// say wrong_chain; the error log line names chain and upstream, not the URL;
// it is checked again every round and comes back once it serves the chain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, newKey, rawRequest, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { close, listen } from '../support/http.ts';
import { createServer } from 'node:http';

const KEY = newKey();
const N = 20;

let good: Anvil;
let polygon: Anvil;
let pGood: RecordingProxy;
let pWrong: RecordingProxy;
let bbGood: BlockbookStub;
let bbWrong: BlockbookStub;
let rGood: RosettaStub;
let rWrong: RosettaStub;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  // bsc's chain id on one node, Polygon's on the other: the operator's mistake the issue names.
  [good, polygon] = await Promise.all([startAnvil({ chainId: 56 }), startAnvil({ chainId: 137 })]);
  [pGood, pWrong, bbGood, bbWrong, rGood, rWrong] = await Promise.all([
    startRecordingProxy(good.url),
    startRecordingProxy(polygon.url),
    startBlockbookStub({ coin: 'Bitcoin' }),
    startBlockbookStub({ coin: 'Litecoin' }),
    startRosettaStub({ network: 'preprod' }),
    startRosettaStub({ network: 'preview' }),
  ]);
  // The wrong upstreams weigh most: were they usable, they would take most requests.
  rig = await gateway({
    name: 'wrong-chain',
    chains: [
      { path: 'bsc', interface: 'evm-jsonrpc', chainId: 56, methods: ['eth_chainId', 'eth_blockNumber'], upstreams: ['${GOOD_URL}', { url: '${WRONG_URL}', weight: 10 }] },
      { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${R_GOOD}', { url: '${R_WRONG}', weight: 10 }] },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', coin: 'Bitcoin', upstreams: ['${BB_GOOD}', { url: '${BB_WRONG}', weight: 10 }] },
    ],
    header: { health: { intervalMs: 200, timeoutMs: 1000 } },
    keys: [{ id: 'ops', key: KEY }],
    standIns: { good, polygon, GOOD_URL: pGood, WRONG_URL: pWrong, R_GOOD: rGood, R_WRONG: rWrong, BB_GOOD: bbGood, BB_WRONG: bbWrong },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

type Ready = { status: string; chains: Record<string, { state: string; upstreams: { name: string; state: string }[] }> };
const readyz = async (): Promise<Ready> => (await rawRequest(gw.url('admin', '/readyz'))).json() as Ready;
const stateOf = async (chain: string, upstream: string): Promise<string | undefined> => (await readyz()).chains[chain]!.upstreams.find((u) => u.name === upstream)?.state;
const WRONG = [
  ['bsc', 'bsc#1'],
  ['cardano-preprod', 'cardano-preprod#1'],
  ['bitcoin', 'bitcoin#1'],
] as const;

describe('the wrong-chain guard', () => {
  it('marks an anvil of another chain id, a Rosetta node of another network and a Blockbook of another coin wrong_chain on /readyz, the others up', async () => {
    for (const [chain, name] of WRONG) await until(async () => (await stateOf(chain, name)) === 'wrong_chain', `${name} wrong_chain`);
    const r = await readyz();
    expect(r.status).toBe('ready');
    for (const chain of ['bsc', 'cardano-preprod', 'bitcoin']) {
      expect(r.chains[chain]!.state).toBe('up');
      expect(r.chains[chain]!.upstreams.find((u) => u.name === `${chain}#0`)!.state).toBe('up');
    }
  });

  it('sends none of the clients\' requests to them', async () => {
    pGood.clear();
    pWrong.clear();
    bbGood.clear();
    bbWrong.clear();
    rGood.clear();
    rWrong.clear();
    for (let i = 0; i < N; i++) {
      const evm = await rawRequest(gw.url('rpc', '/bsc'), { body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'eth_chainId', params: [] }), headers: { 'x-api-key': KEY } });
      expect(evm.status).toBe(200);
      expect(evm.json().result).toBe('0x38'); // 56, never Polygon's 0x89
      const ros = await rawRequest(gw.url('rpc', '/cardano-preprod/network/status'), { body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' } }), headers: { 'x-api-key': KEY } });
      expect(ros.status).toBe(200);
      const bb = await rawRequest(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: { 'x-api-key': KEY } });
      expect(bb.status).toBe(200);
    }
    expect(pGood.requests).toHaveLength(N);
    expect(rGood.requests).toHaveLength(N);
    expect(bbGood.requests).toHaveLength(N);
    expect(pWrong.requests).toHaveLength(0);
    expect(rWrong.requests).toHaveLength(0);
    expect(bbWrong.requests).toHaveLength(0);
  });

  it('shows them on /metrics: the wrong_chain state series is 1 and the upstream is not up', async () => {
    for (const [chain, name] of WRONG) {
      expect(await metricValue(gw, 'gateway_upstream_state', `{chain="${chain}",upstream="${name}",state="wrong_chain"}`)).toBe(1);
      expect(await metricValue(gw, 'gateway_upstream_state', `{chain="${chain}",upstream="${name}",state="up"}`)).toBe(0);
      expect(await metricValue(gw, 'gateway_upstream_up', `{chain="${chain}",upstream="${name}"}`)).toBe(0);
      expect(await metricValue(gw, 'gateway_upstream_state', `{chain="${chain}",upstream="${chain}#0",state="up"}`)).toBe(1);
    }
  });

  it('shows them on the status page\'s data (/status.json), from the same state the health checks keep', async () => {
    const status = (await rawRequest(gw.url('admin', '/status.json'))).json() as { chains: { path: string; upstreams: { name: string; state: string }[] }[] };
    for (const [chain, name] of WRONG) {
      const row = status.chains.find((c) => c.path === chain)!;
      expect(row.upstreams.find((u) => u.name === name)!.state).toBe('wrong_chain');
      expect(row.upstreams.find((u) => u.name === `${chain}#0`)!.state).toBe('up');
    }
  });

  it('checks them again every round and logs each once, as an error naming chain and upstream but not the URL', async () => {
    const before = pWrong.healthChecks.length;
    await until(async () => pWrong.healthChecks.length >= before + 3, 'three more health rounds on the wrong node');
    const lines = gw.lines.filter((l) => l.includes('"upstream_wrong_chain"'));
    expect(lines).toHaveLength(3);
    for (const [chain, name] of WRONG) {
      const line = lines.find((l) => (JSON.parse(l) as { upstream: string }).upstream === name)!;
      expect(JSON.parse(line)).toMatchObject({ level: 'error', event: 'upstream_wrong_chain', chain, upstream: name });
    }
    expect(JSON.parse(lines.find((l) => l.includes('"bsc#1"'))!).serves).toBe('chainId 137');
    for (const url of [pWrong.url, rWrong.url, bbWrong.url]) {
      const port = new URL(url).port;
      for (const l of lines) expect(l).not.toContain(port);
    }
  });

  it('takes an upstream back once a round finds it serving the chain', async () => {
    const r = await polygon.rpc('anvil_setChainId', [56]);
    expect(r.error).toBeUndefined();
    await until(async () => (await stateOf('bsc', 'bsc#1')) === 'up', 'bsc#1 back up');
    expect(await metricValue(gw, 'gateway_upstream_state', '{chain="bsc",upstream="bsc#1",state="wrong_chain"}')).toBe(0);
    pWrong.clear();
    for (let i = 0; i < N; i++) {
      // Not eth_blockNumber: a chain of several upstreams answers it from the served tip, asking no node.
      const evm = await rawRequest(gw.url('rpc', '/bsc'), { body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'eth_chainId', params: [] }), headers: { 'x-api-key': KEY } });
      expect(evm.status).toBe(200);
    }
    expect(pWrong.requests.length).toBeGreaterThan(0);
  });
});

describe('the wrong-chain guard from the first request on', () => {
  it('listens only once the first round has checked every upstream: a request sent the moment it listens never reaches one of another chain', { timeout: 30_000 }, async () => {
    // A node of Polygon (137) that takes 300 ms to answer the gateway's checks and records every other request.
    const seen: string[] = [];
    let checksAnswered = 0;
    const slow = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const health = String(req.headers['user-agent'] ?? '').startsWith('chain-gateway-health');
        if (!health) seen.push(text);
        const doc = JSON.parse(text) as { id?: unknown; method?: string } | { id?: unknown; method?: string }[];
        const answer = (d: { id?: unknown; method?: string }) => ({ jsonrpc: '2.0', id: d.id, result: d.method === 'eth_chainId' ? '0x89' : '0x10' });
        const body = JSON.stringify(Array.isArray(doc) ? doc.map(answer) : answer(doc));
        setTimeout(() => {
          if (health) checksAnswered++;
          res.writeHead(200, { 'content-type': 'application/json' }).end(body);
        }, health ? 300 : 0);
      });
    });
    const slowUrl = await listen(slow);
    const { gw: g } = await gateway({
      name: 'wrong-chain-first',
      chains: [{ path: 'bsc', interface: 'evm-jsonrpc', chainId: 56, methods: ['eth_chainId', 'eth_blockNumber'], upstreams: ['${WRONG_URL}'] }],
      header: { admin: null, health: { intervalMs: 60000, timeoutMs: 2000 } },
      keys: [{ id: 'first', key: KEY }],
      env: { WRONG_URL: slowUrl },
    });
    try {
      // startGateway resolves on the 'started' line, written once the listeners are bound: the node had answered its check by then.
      expect(checksAnswered).toBeGreaterThan(0);
      const r = await rawRequest(g.url('rpc', '/bsc'), { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }), headers: { 'x-api-key': KEY } });
      expect(r.status).toBe(503);
      expect(r.json().error.code).toBe(-32052);
      expect(seen).toEqual([]);
    } finally {
      await g.stop();
      await close(slow);
    }
  });
});

describe('the wrong-chain guard with nodes that take no batches', () => {
  it('asks eth_chainId and eth_blockNumber apart: the node of the chain is up, the one of another chain wrong_chain', { timeout: 30_000 }, async () => {
    /** A node that answers any batch with one error object, as nodes without batch support do; records what it got. */
    const node = async (chainId: string) => {
      const got: unknown[] = [];
      const server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const doc = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown; method?: string };
          got.push(doc);
          const answer = Array.isArray(doc)
            ? { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batch requests are not supported' } }
            : { jsonrpc: '2.0', id: doc.id, result: doc.method === 'eth_chainId' ? chainId : '0x10' };
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
        });
      });
      return { server, got, url: await listen(server) };
    };
    const [right, wrong] = await Promise.all([node('0x38'), node('0x89')]);
    const { gw: g } = await gateway({
      name: 'wrong-chain-nobatch',
      chains: [{ path: 'bsc', interface: 'evm-jsonrpc', chainId: 56, methods: ['eth_chainId', 'eth_blockNumber'], upstreams: ['${RIGHT_URL}', '${WRONG_URL}'] }],
      header: { health: { intervalMs: 200, timeoutMs: 1000 } },
      keys: [{ id: 'nobatch', key: KEY }],
      env: { RIGHT_URL: right.url, WRONG_URL: wrong.url },
    });
    try {
      const states = async () => {
        const r = (await rawRequest(g.url('admin', '/readyz'))).json() as Ready;
        return r.chains.bsc!.upstreams.map((u) => u.state);
      };
      // Known from the first round on (the gateway listens only after it).
      expect(await states()).toEqual(['up', 'wrong_chain']);
      // Later rounds ask apart at once: no more batches after the first.
      const batchesBefore = right.got.filter(Array.isArray).length;
      const asked = right.got.length;
      await until(async () => right.got.length >= asked + 4, 'two more rounds');
      expect(right.got.filter(Array.isArray).length).toBe(batchesBefore);
      expect(batchesBefore).toBe(1);
      expect(await states()).toEqual(['up', 'wrong_chain']);
      const wrongBefore = wrong.got.filter((d) => !Array.isArray(d) && (d as { id?: unknown }).id === 7).length;
      for (let i = 0; i < 5; i++) {
        const r = await rawRequest(g.url('rpc', '/bsc'), { body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] }), headers: { 'x-api-key': KEY } });
        expect(r.json().result).toBe('0x38');
      }
      expect(wrong.got.filter((d) => !Array.isArray(d) && (d as { id?: unknown }).id === 7).length).toBe(wrongBefore);
    } finally {
      await g.stop();
      await Promise.all([close(right.server), close(wrong.server)]);
    }
  });
});
