// The cache on Rosetta and Blockbook chains (issue 20): what is kept, until
// when, and that identical reads in flight share one upstream call while
// writes never do. The stand-ins record every request, so each X-Cache value
// is checked against what reached the upstream. Their chains move when a test
// says so (setBlockIndex, setBestHeight); a test waits for the gateway to see
// the new head by its own gauge, gateway_cache_head_block.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { rosettaBlockHash, rosettaTxHash, startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { isHealthCheck, listen, readAll } from '../support/http.ts';

const KEY = newKey();
/** Blocks this far below the tip are final on the Rosetta chain. */
const DEPTH = 10;

let rosetta: RosettaStub;
let bb: BlockbookStub;
let holder: Server;
let rig: Gateway;
let gw: RunningGateway;
/** Requests the holding proxy keeps back until a test lets them go, and how many of them it saw. */
const held: Array<() => void> = [];
let heldSeen = 0;

/**
 * A proxy in front of the Rosetta stand-in that holds back /account/balance
 * and /construction/submit calls (not the gateway's health checks) until
 * released: so a test knows every client call is inside the gateway before
 * the upstream answers.
 */
function holdingProxy(target: string): Server {
  const to = new URL(target);
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    void readAll(req).then((body) => {
      const go = () => {
        const up = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        });
        up.on('error', () => res.destroy());
        up.end(body);
      };
      const hold = !isHealthCheck({ headers: req.headers }) && (req.url === '/account/balance' || req.url === '/construction/submit');
      if (!hold) return go();
      heldSeen++;
      held.push(go);
    });
  });
}

beforeAll(async () => {
  rosetta = await startRosettaStub({ network: 'preprod', blockIndex: 100 });
  bb = await startBlockbookStub({ bestHeight: 500 });
  holder = holdingProxy(rosetta.url);
  const holderUrl = await listen(holder);
  rig = await gateway({
    name: 'cache-docs',
    chains: [
      { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', finality: { depth: DEPTH }, upstreams: ['${ROSETTA_URL}'] },
      { path: 'cardano-held', interface: 'rosetta', network: 'preprod', upstreams: ['${HELD_URL}'] },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', sendtx: true, upstreams: ['${BB_URL}'] },
      { path: 'bitcoin-nocache', interface: 'blockbook', listener: 'explorer', cache: 'off', upstreams: ['${BB_URL}'] },
    ],
    header: { cache: { headPollMs: 100 }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'docs', key: KEY }],
    standIns: { ROSETTA_URL: rosetta, BB_URL: bb, holder },
    env: { HELD_URL: holderUrl },
  });
  gw = rig.gw;
  await sees('cardano-preprod', 100);
  await sees('bitcoin', 500);
}, 60_000);

afterAll(() => rig?.close());

// ------------------------------------------------------------------ talking

const metric = (name: string, labels: string): Promise<number> => metricValue(gw, name, labels);

/** Waits until the gateway's cache knows `chain`'s head is `n`. */
async function sees(chain: string, n: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  while ((await metric('gateway_cache_head_block', `{chain="${chain}"}`)) !== n) {
    if (Date.now() > deadline) throw new Error(`the gateway did not see ${chain} at ${n} within 15 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Answer {
  status: number;
  xCache: string;
  body: any;
}

const NETWORK = { blockchain: 'cardano', network: 'preprod' };

async function viaRosetta(endpoint: string, body: Record<string, unknown>, chain = 'cardano-preprod'): Promise<Answer> {
  const res = await fetch(gw.url('rpc', `/${chain}/${endpoint}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ network_identifier: NETWORK, ...body }),
  });
  return { status: res.status, xCache: res.headers.get('x-cache') ?? '', body: await res.json() };
}

async function viaBlockbook(path: string, headers: Record<string, string> = {}, chain = 'bitcoin'): Promise<Answer & { headers: Headers }> {
  const res = await fetch(gw.url('explorer', `/${chain}/v2/${path}`), { headers: { 'x-api-key': KEY, ...headers } });
  const text = await res.text();
  return { status: res.status, xCache: res.headers.get('x-cache') ?? '', body: text === '' ? null : JSON.parse(text), headers: res.headers };
}

/** Calls of `endpoint` that reached the Rosetta stand-in since `from`. */
const rosettaCalls = (from: number, endpoint: string): number => rosetta.requests.slice(from).filter((r) => r.path === `/${endpoint}`).length;
const bbCalls = (from: number): number => bb.requests.length - from;

async function moveRosetta(to: number): Promise<void> {
  rosetta.setBlockIndex(to);
  await sees('cardano-preprod', to);
}

// ------------------------------------------------------------------ Rosetta

describe('cache: Rosetta', () => {
  it('a final block by index is kept forever; by hash only once its hash is known canonical', async () => {
    const tip = rosetta.blockIndex;
    const final = tip - DEPTH - 5;
    const byHash = { block_identifier: { hash: rosettaBlockHash(final) } };
    const from = rosetta.requests.length;
    // By hash first: the gateway does not know the canonical hash at that index yet.
    const a = await viaRosetta('block', byHash);
    expect(a.status).toBe(200);
    expect(a.body.block.block_identifier).toEqual({ index: final, hash: rosettaBlockHash(final) });
    expect(a.xCache).toBe('MISS');
    expect((await viaRosetta('block', byHash)).xCache).toBe('HIT');
    await moveRosetta(tip + 1);
    expect((await viaRosetta('block', byHash)).xCache, 'by hash, canonical hash unknown: bound to the head').toBe('MISS');
    // By index: kept forever, and teaches the canonical hash.
    const byIndex = { block_identifier: { index: final } };
    expect((await viaRosetta('block', byIndex)).xCache).toBe('MISS');
    const tx = { block_identifier: { index: final, hash: rosettaBlockHash(final) }, transaction_identifier: { hash: rosettaTxHash(final) } };
    const t = await viaRosetta('block/transaction', tx);
    expect(t.status).toBe(200);
    expect(t.body.transaction.transaction_identifier.hash).toBe(rosettaTxHash(final));
    await moveRosetta(tip + 2);
    expect((await viaRosetta('block', byHash)).xCache, 'by hash: its own entry went with the head, the next one is kept forever').toBe('MISS');
    await moveRosetta(tip + 3);
    const before = rosetta.requests.length;
    for (const [endpoint, body] of [['block', byIndex], ['block', byHash], ['block/transaction', tx]] as const) {
      const g = await viaRosetta(endpoint, body);
      expect(g.xCache, `${endpoint} ${JSON.stringify(body)} past two head changes`).toBe('HIT');
      expect(g.status).toBe(200);
    }
    expect(rosetta.requests.length - before).toBe(0);
    expect(rosettaCalls(from, 'block')).toBe(4);
    expect(rosettaCalls(from, 'block/transaction')).toBe(1);
  });

  it('the tip, and a block above finality, are kept only until the head moves', async () => {
    const tip = rosetta.blockIndex;
    const recent = { block_identifier: { index: tip - 2 } };
    const t1 = await viaRosetta('block', { block_identifier: {} });
    expect(t1.body.block.block_identifier.index).toBe(tip);
    await viaRosetta('block', recent);
    expect((await viaRosetta('block', { block_identifier: {} })).xCache).toBe('HIT');
    expect((await viaRosetta('block', recent)).xCache).toBe('HIT');
    await moveRosetta(tip + 1);
    const t2 = await viaRosetta('block', { block_identifier: {} });
    expect(t2.xCache).toBe('MISS');
    expect(t2.body.block.block_identifier.index, 'the new tip, not the cached one').toBe(tip + 1);
    expect((await viaRosetta('block', recent)).xCache).toBe('MISS');
  });

  it('errors are never kept, and other reads are never kept (only coalesced)', async () => {
    const from = rosetta.requests.length;
    const unknown = { block_identifier: { index: rosetta.blockIndex + 50 } };
    for (let i = 0; i < 2; i++) {
      const g = await viaRosetta('block', unknown);
      expect(g.status).toBe(500);
      expect(g.body.code).toBe(4001);
      expect(g.xCache).toBe('MISS');
    }
    for (let i = 0; i < 2; i++) expect((await viaRosetta('network/status', {})).xCache).toBe('MISS');
    expect(rosettaCalls(from, 'block')).toBe(2);
    expect(rosettaCalls(from, 'network/status')).toBe(2);
  });

  it('identical reads in flight share one upstream call; construction/submit is never shared', { timeout: 30_000 }, async () => {
    const balance = { account_identifier: { address: 'addr_test1vpfwv0ezc5g8a4mkku8hhy3y3vp92t7s3ul8g778g5yegsgalc6gc' } };
    const from = rosetta.requests.length;
    const coalescedBefore = await metric('gateway_cache_coalesced_total', '{chain="cardano-held"}');
    const pending = Array.from({ length: 6 }, () => viaRosetta('account/balance', balance, 'cardano-held'));
    await until(async () => heldSeen === 1 && (await metric('gateway_inflight_requests', '')) >= 6, 'six balance calls in the gateway, one upstream');
    held.shift()!();
    const answers = await Promise.all(pending);
    expect(answers.map((a) => a.xCache).sort()).toEqual(['COALESCED', 'COALESCED', 'COALESCED', 'COALESCED', 'COALESCED', 'MISS']);
    expect(await metric('gateway_cache_coalesced_total', '{chain="cardano-held"}'), 'the metric counts them too').toBe(coalescedBefore + 5);
    for (const a of answers) expect(a).toMatchObject({ status: 200, body: answers[0]!.body });
    expect(rosettaCalls(from, 'account/balance')).toBe(1);

    // Three identical submits: three upstream calls, each its own answer.
    const signed = { signed_transaction: '84a400818258200000000000000000000000000000000000000000000000000000000000000000000181825839' };
    const subs = Array.from({ length: 3 }, () => viaRosetta('construction/submit', signed, 'cardano-held'));
    await until(async () => heldSeen === 4, 'three submits upstream');
    while (held.length > 0) held.shift()!();
    const sent = await Promise.all(subs);
    expect(sent.map((s) => s.xCache)).toEqual(['BYPASS', 'BYPASS', 'BYPASS']);
    expect(rosettaCalls(from, 'construction/submit')).toBe(3);
  });
});

// ------------------------------------------------------------------ Blockbook

describe('cache: Blockbook', () => {
  it('blocks and confirmed transactions are kept until the next block (their confirmations change with it)', async () => {
    const best = bb.bestHeight;
    const h = best - 3;
    const from = bb.requests.length;
    const b1 = await viaBlockbook(`block/${h}`);
    expect(b1.status).toBe(200);
    expect(b1.xCache).toBe('MISS');
    const b2 = await viaBlockbook(`block/${h}`);
    expect(b2.xCache).toBe('HIT');
    expect(b2.body).toEqual(b1.body);
    expect(b2.headers.get('content-type')).toBe(b1.headers.get('content-type'));
    const txid = bb.txids(h)[0]!;
    expect((await viaBlockbook(`tx/${txid}`)).xCache).toBe('MISS');
    expect((await viaBlockbook(`tx/${txid}`)).xCache).toBe('HIT');
    expect(bbCalls(from)).toBe(2);

    bb.setBestHeight(best + 1);
    await sees('bitcoin', best + 1);
    const b3 = await viaBlockbook(`block/${h}`);
    expect(b3.xCache).toBe('MISS');
    expect(b3.body.confirmations, 'the count the upstream gives now').toBe(b1.body.confirmations + 1);
    const t3 = await viaBlockbook(`tx/${txid}`);
    expect(t3.xCache).toBe('MISS');
    expect(t3.body.confirmations).toBe(best + 1 - h + 1);
  });

  it('never keeps or shares sendtx, an unconfirmed transaction, a conditional request, an error, or another read', async () => {
    const from = bb.requests.length;
    const hex = '0200000001' + 'ab'.repeat(40);
    const s1 = await viaBlockbook(`sendtx/${hex}`);
    const s2 = await viaBlockbook(`sendtx/${hex}`);
    expect([s1.xCache, s2.xCache]).toEqual(['BYPASS', 'BYPASS']);
    const txid = s1.body.result as string;
    expect(typeof txid).toBe('string');
    // In the mempool: confirmations 0.
    for (let i = 0; i < 2; i++) {
      const t = await viaBlockbook(`tx/${txid}`);
      expect(t.body.confirmations).toBe(0);
      expect(t.xCache).toBe('MISS');
    }
    const h = bb.bestHeight - 1;
    await viaBlockbook(`block/${h}`);
    expect((await viaBlockbook(`block/${h}`, { 'if-none-match': '"x"' })).xCache).toBe('BYPASS');
    for (let i = 0; i < 2; i++) {
      const e = await viaBlockbook('block/99999999');
      expect(e.status).toBe(400);
      expect(e.xCache).toBe('MISS');
    }
    for (let i = 0; i < 2; i++) expect((await viaBlockbook('address/bc1qexampleaddress0000000000000000000000')).xCache).toBe('MISS');
    // 2 sendtx, 2 tx, 1 block, 1 conditional block, 2 errors, 2 address reads.
    expect(bbCalls(from)).toBe(10);
  });

  it('a chain with cache: off sends every read upstream and says nothing of a cache', async () => {
    const from = bb.requests.length;
    const h = bb.bestHeight - 1;
    for (let i = 0; i < 2; i++) {
      const g = await viaBlockbook(`block/${h}`, {}, 'bitcoin-nocache');
      expect(g.status).toBe(200);
      expect(g.headers.get('x-cache')).toBeNull();
    }
    expect(bbCalls(from)).toBe(2);
  });

  it('/metrics counts each chain\'s own hits and misses, and a chain with cache: off has no cache series', async () => {
    const counts = async () => ({
      rosettaHits: await metric('gateway_cache_hits_total', '{chain="cardano-preprod"}'),
      rosettaMisses: await metric('gateway_cache_misses_total', '{chain="cardano-preprod"}'),
      bbHits: await metric('gateway_cache_hits_total', '{chain="bitcoin"}'),
      bbMisses: await metric('gateway_cache_misses_total', '{chain="bitcoin"}'),
    });
    const before = await counts();
    // Reads no other test makes: one miss, then two hits, on each chain.
    const index = { block_identifier: { index: rosetta.blockIndex - DEPTH - 40 } };
    for (let i = 0; i < 3; i++) await viaRosetta('block', index);
    for (let i = 0; i < 3; i++) await viaBlockbook(`block/${bb.bestHeight - 40}`);
    const after = await counts();
    expect({
      rosettaHits: after.rosettaHits - before.rosettaHits,
      rosettaMisses: after.rosettaMisses - before.rosettaMisses,
      bbHits: after.bbHits - before.bbHits,
      bbMisses: after.bbMisses - before.bbMisses,
    }).toEqual({ rosettaHits: 2, rosettaMisses: 1, bbHits: 2, bbMisses: 1 });
    const text = await (await fetch(gw.url('admin', '/metrics'))).text();
    expect(text).not.toMatch(/^gateway_cache_\w+\{chain="bitcoin-nocache"\}/m);
  });
});
