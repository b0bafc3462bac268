// Misses sent together (cache.batch): the calls that miss in one turn of the
// event loop go to the node as one JSON-RPC batch, and each client still gets
// exactly what it would have got had its call gone alone.
//
// The calls are written to the gateway pipelined, in one TCP write, so that
// they all arrive in one turn of its event loop. Against a real anvil (whose
// state nothing changes during a case, so anvil's own answer is the truth),
// and against two stand-in nodes: one that takes no batches, one that leaves
// an item out, answers out of order and answers one call with an error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, newKey, pipelinedRequests, until, type PipelinedAnswer, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordedRequest, type RecordingProxy } from '../support/recording-proxy.ts';
import { createSafeServer, listen, parseJson, record } from '../support/http.ts';
import type { Server } from 'node:http';

const KEY = newKey();
const BATCH = 8;

let anvil: Anvil;
let proxy: RecordingProxy;
let rig: Gateway;
let gw: RunningGateway;
let accounts: string[] = [];

/** What a stand-in node received: each HTTP request's parsed body. */
interface StandIn {
  server: Server;
  url: string;
  bodies: unknown[];
}
let noBatch: StandIn;
let partial: StandIn;
let failing: StandIn;
let limited: StandIn;
/** A chain with two nodes (a pool: calls it sends to the same nodes go together): one refuses batches (takes the head poll's two calls), one takes them. */
let mixedNo: StandIn;
let mixedYes: StandIn;
/** Batches the rate-limited stand-in still answers with a 429. */
let limitedBatches = 0;

interface Call {
  method: string;
  params: unknown[];
}

/** A stand-in's answer to one call: eth_getBalance answers the address's last four hex digits; 0x...ee is refused. */
function standInAnswer(item: { id?: unknown; method?: string; params?: unknown[] }): Record<string, unknown> {
  const addr = String(item.params?.[0] ?? '');
  if (addr.endsWith('ee')) return { jsonrpc: '2.0', id: item.id, error: { code: -32000, message: 'header not found' } };
  return { jsonrpc: '2.0', id: item.id, result: '0x' + addr.slice(-4) };
}

/** The gateway's own checks and head polls: block 16, chain id 1. */
function healthAnswer(d: Record<string, unknown>): Record<string, unknown> {
  const finalized = Array.isArray(d.params) && d.params[0] === 'finalized';
  const block = finalized ? { number: '0x8', hash: '0x' + '22'.repeat(32) } : { number: '0x10', hash: '0x' + '11'.repeat(32) };
  const result = d.method === 'eth_getBlockByNumber' ? block : d.method === 'eth_chainId' ? '0x1' : '0x10';
  return { jsonrpc: '2.0', id: d.id, result };
}

async function startStandIn(batch: (items: { id?: unknown; method?: string; params?: unknown[] }[]) => unknown, batchStatus: number | (() => number) = 200, ownBatchesToo = false): Promise<StandIn> {
  const bodies: unknown[] = [];
  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const doc = parseJson(r.body) as Record<string, unknown> | Record<string, unknown>[];
    // The gateway's head polls carry its health User-Agent: answered, not recorded.
    const health = String(r.headers['user-agent'] ?? '').startsWith('chain-gateway-health');
    if (!health) bodies.push(doc);
    let answer: unknown;
    let status = 200;
    if (health) answer = Array.isArray(doc) ? (ownBatchesToo ? batch(doc) : doc.map(healthAnswer)) : healthAnswer(doc);
    else if (Array.isArray(doc)) {
      status = typeof batchStatus === 'number' ? batchStatus : batchStatus();
      answer = status === 200 ? batch(doc as { id?: unknown; method?: string; params?: unknown[] }[]) : { jsonrpc: '2.0', id: null, error: { code: -32005, message: 'rate limited' } };
    } else answer = standInAnswer(doc);
    const text = JSON.stringify(answer);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  });
  return { server, url: await listen(server), bodies };
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1 });
  proxy = await startRecordingProxy(anvil.url);
  accounts = (await anvil.rpc('eth_accounts')).result as string[];
  await anvil.mine(3);
  // Takes no batches: one error object for any array, as such nodes do.
  // The gateway's own batches too: its head poll asks latest and finalized apart.
  noBatch = await startStandIn(() => ({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batch requests are not supported' } }), 200, true);
  // Answers a batch in reverse order and leaves its last item out.
  partial = await startStandIn((items) => items.slice(0, -1).map(standInAnswer).reverse());
  // Fails every batch with a 503 (a node overloaded), answers single calls.
  failing = await startStandIn(() => ({ error: 'overloaded' }), 503);
  // Rate-limits batches with a 429 (a JSON-RPC error) while limitedBatches > 0, then takes them.
  limited = await startStandIn((items) => items.map(standInAnswer), () => (limitedBatches-- > 0 ? 429 : 200));
  // Takes the head poll's batch of two, refuses larger ones (as a provider with a small batch limit does).
  mixedNo = await startStandIn(() => ({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batch too large' } }));
  mixedYes = await startStandIn((items) => items.map(standInAnswer));
  rig = await gateway({
    name: 'cache-batch',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
      evmChain('nobatch', ['NOBATCH_URL']),
      evmChain('partial', ['PARTIAL_URL']),
      evmChain('failing', ['FAILING_URL']),
      evmChain('limited', ['LIMITED_URL']),
      evmChain('mixed', ['MIXED_NO_URL', 'MIXED_YES_URL']),
    ],
    header: { cache: { maxBytes: 8388608, headPollMs: 200, batch: BATCH }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'batch', key: KEY }],
    standIns: { anvil, ETH_URL: proxy, NOBATCH_URL: noBatch, PARTIAL_URL: partial, FAILING_URL: failing, LIMITED_URL: limited, MIXED_NO_URL: mixedNo, MIXED_YES_URL: mixedYes },
  });
  gw = rig.gw;
  // Entries are kept only once the gateway knows the head.
  await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')) >= 3, 'the gateway knows anvil\'s head');
  await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="partial"}')) === 16, 'the gateway knows the stand-in\'s head');
}, 60_000);

afterAll(() => rig?.close());

/** Pipelined to the gateway's rpc listener with the test's key (harness.ts). */
function pipelined(path: string, bodies: readonly string[]): Promise<PipelinedAnswer[]> {
  return pipelinedRequests(gw.ports.rpc!, path, KEY, bodies);
}

/** The JSON-RPC calls in recorded request bodies, batches flattened. */
function callsIn(bodies: readonly unknown[]): Record<string, unknown>[] {
  return bodies.flatMap((b) => (Array.isArray(b) ? b : [b])) as Record<string, unknown>[];
}

function clientRequests(since: number): RecordedRequest[] {
  return proxy.requests.slice(since);
}

describe('cache.batch: misses of one turn go to the node together', () => {
  it('sends distinct misses as batches of at most cache.batch calls; each client gets anvil\'s own answer with its own id', { timeout: 60_000 }, async () => {
    const calls: Call[] = [
      ...accounts.slice(0, 6).map((a) => ({ method: 'eth_getBalance', params: [a, 'latest'] })),
      ...accounts.slice(0, 4).map((a) => ({ method: 'eth_getTransactionCount', params: [a, 'latest'] })),
      { method: 'eth_getBlockByNumber', params: ['0x1', false] },
      { method: 'eth_getCode', params: [accounts[0], 'latest'] },
    ];
    // Ids of every kind, one of them shared by two clients, one past 2^53.
    const ids = ['1', '"a"', '7', '7', '123456789012345678901234567890', '"x\\"y"', '0', '-3', '"b"', '"é"', '11', '12'];
    const bodies = calls.map((c, i) => `{"jsonrpc":"2.0","id":${ids[i]},"method":"${c.method}","params":${JSON.stringify(c.params)}}`);
    const truth = await Promise.all(calls.map((c) => anvil.rpc(c.method, c.params)));
    const since = proxy.requests.length;
    const batchesBefore = await metricValue(gw, 'gateway_cache_batches_total', '{chain="ethereum"}');
    const batchedBefore = await metricValue(gw, 'gateway_cache_batched_total', '{chain="ethereum"}');

    const answers = await pipelined('/ethereum', bodies);

    answers.forEach((a, i) => {
      expect(a.status).toBe(200);
      expect(a.xCache).toBe('MISS');
      // The client's id exactly as written, and anvil's result.
      expect(a.text).toContain(`"id":${ids[i]},`);
      expect(JSON.parse(a.text)).toEqual({ jsonrpc: '2.0', id: JSON.parse(ids[i]!), result: truth[i]!.result });
    });
    const sent = clientRequests(since);
    const calledUpstream = callsIn(sent.map((r) => r.json));
    // Every call reached anvil once, as the client wrote it but for its id.
    expect(calledUpstream).toHaveLength(calls.length);
    expect(calledUpstream.map((c) => `${String(c.method)} ${JSON.stringify(c.params)}`).sort()).toEqual(calls.map((c) => `${c.method} ${JSON.stringify(c.params)}`).sort());
    const batches = sent.filter((r) => Array.isArray(r.json));
    expect(batches.length).toBeGreaterThan(0);
    for (const b of batches) {
      const items = b.json as Record<string, unknown>[];
      expect(items.length).toBeGreaterThan(1);
      expect(items.length).toBeLessThanOrEqual(BATCH);
      // The batch's own ids: each call's place in it.
      expect(items.map((c) => c.id)).toEqual(items.map((_, i) => i));
    }
    const inBatches = batches.reduce((n, b) => n + (b.json as unknown[]).length, 0);
    expect(await metricValue(gw, 'gateway_cache_batches_total', '{chain="ethereum"}')).toBe(batchesBefore + batches.length);
    expect(await metricValue(gw, 'gateway_cache_batched_total', '{chain="ethereum"}')).toBe(batchedBefore + inBatches);
    // Twelve calls at once, at most eight per batch: fewer requests than calls.
    expect(sent.length).toBeLessThan(calls.length);
    console.log(`cache.batch: ${calls.length} misses reached anvil in ${sent.length} requests (${batches.map((b) => (b.json as unknown[]).length).join(' + ')} in batches)`);

    // Kept as if each had gone alone: the same calls again are hits, and nothing reaches anvil.
    const again = proxy.requests.length;
    const hits = await pipelined('/ethereum', bodies);
    hits.forEach((a, i) => {
      expect(a.xCache).toBe('HIT');
      expect(JSON.parse(a.text)).toEqual(JSON.parse(answers[i]!.text));
    });
    expect(proxy.requests.length).toBe(again);
  });

  it('identical calls in one turn go once: the others join it (COALESCED)', { timeout: 30_000 }, async () => {
    const a = accounts[7]!;
    const bodies = [1, 2, 3].map((id) => `{"jsonrpc":"2.0","id":${id},"method":"eth_getBalance","params":["${a}","0x2"]}`);
    bodies.push(`{"jsonrpc":"2.0","id":4,"method":"eth_getTransactionCount","params":["${a}","0x2"]}`);
    const since = proxy.requests.length;
    const answers = await pipelined('/ethereum', bodies);
    expect(answers.map((x) => x.xCache)).toEqual(['MISS', 'COALESCED', 'COALESCED', 'MISS']);
    const balance = (await anvil.rpc('eth_getBalance', [a, '0x2'])).result;
    answers.slice(0, 3).forEach((x, i) => expect(JSON.parse(x.text)).toEqual({ jsonrpc: '2.0', id: i + 1, result: balance }));
    expect(callsIn(clientRequests(since).map((r) => r.json))).toHaveLength(2);
  });

  it('an item the node leaves out goes again alone; answers are matched by id, not by place; an error item reaches its client and is not kept', { timeout: 30_000 }, async () => {
    const addrs = ['0x' + '01'.repeat(20), '0x' + '02'.repeat(20), '0x' + 'ee'.repeat(20), '0x' + '04'.repeat(20)];
    const bodies = addrs.map((a, i) => `{"jsonrpc":"2.0","id":"c${i}","method":"eth_getBalance","params":["${a}","latest"]}`);
    const before = partial.bodies.length;
    const answers = await pipelined('/partial', bodies);
    answers.forEach((x, i) => {
      expect(x.status).toBe(200);
      expect(x.xCache).toBe('MISS');
      expect(JSON.parse(x.text)).toEqual(standInAnswer({ id: `c${i}`, params: [addrs[i]] }));
    });
    const got = partial.bodies.slice(before);
    const batches = got.filter(Array.isArray) as unknown[][];
    expect(batches.length).toBeGreaterThan(0);
    // The last call of each batch was left out and went again on its own.
    const singles = got.filter((b) => !Array.isArray(b)) as { params: string[] }[];
    expect(singles.map((s) => s.params[0]).sort()).toEqual(batches.map((b) => (b.at(-1) as { params: string[] }).params[0]).sort());
    expect(callsIn(got)).toHaveLength(addrs.length + singles.length);

    // The error was not kept; the results were.
    const again = await pipelined('/partial', bodies);
    expect(again.map((x) => x.xCache)).toEqual(['HIT', 'HIT', 'MISS', 'HIT']);
    expect(JSON.parse(again[2]!.text)).toEqual(standInAnswer({ id: 'c2', params: [addrs[2]] }));
  });

  it('a node that takes no batches: the head poll asks latest and finalized apart, and the cache knows both', { timeout: 30_000 }, async () => {
    await until(
      async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="nobatch"}')) === 16 && (await metricValue(gw, 'gateway_cache_finalized_block', '{chain="nobatch"}')) === 8,
      'the head (16) and finalized block (8) of a node that takes no batches',
    );
  });

  it('a node that takes no batches, as its head poll showed: no batch of misses is ever sent to it, the calls go alone, logged once', { timeout: 30_000 }, async () => {
    const call = (n: number) => `{"jsonrpc":"2.0","id":${n},"method":"eth_getBalance","params":["0x${String(n).padStart(2, '0').repeat(20)}","latest"]}`;
    const refused = gw.nextLog((e) => e.event === 'upstream_refused_batch' && e.chain === 'nobatch');
    const before = noBatch.bodies.length;
    const answers = await pipelined('/nobatch', [1, 2, 3, 4, 5].map(call));
    answers.forEach((x, i) => {
      expect(x.status).toBe(200);
      expect(x.xCache).toBe('MISS');
      expect(JSON.parse(x.text)).toEqual(standInAnswer({ id: i + 1, params: [`0x${String(i + 1).padStart(2, '0').repeat(20)}`] }));
    });
    expect(await refused).toMatchObject({ chain: 'nobatch', level: 'warn' });
    // The head poll had learned it (its own batch got one object): the five calls went alone, none in a batch.
    const got = noBatch.bodies.slice(before);
    expect(got).toHaveLength(5);
    expect(got.some(Array.isArray)).toBe(false);
    const later = await pipelined('/nobatch', [6, 7, 8].map(call));
    for (const x of later) expect(x.status).toBe(200);
    expect(noBatch.bodies.slice(before + 5).some(Array.isArray)).toBe(false);
    expect(gw.lines.filter((l) => l.includes('"upstream_refused_batch"') && l.includes('"nobatch"'))).toHaveLength(1);
  });

  it('a batch that fails fails every call in it, in the JSON-RPC envelope, logged once; the chain goes on batching', { timeout: 30_000 }, async () => {
    const bodies = [1, 2, 3].map((n) => `{"jsonrpc":"2.0","id":${n},"method":"eth_getBalance","params":["0x${String(n).padStart(2, '0').repeat(20)}","latest"]}`);
    const before = failing.bodies.length;
    const answers = await pipelined('/failing', bodies);
    const got = failing.bodies.slice(before);
    // Sent as one batch, retried once (a 5xx to a read), never split into single calls.
    expect(got.length).toBeGreaterThan(0);
    expect(got.every(Array.isArray)).toBe(true);
    expect(new Set(answers.map((a) => a.status)).size).toBe(1);
    expect(answers[0]!.status).toBe(502);
    for (const a of answers) {
      const doc = JSON.parse(a.text) as { jsonrpc: string; error?: { code: number } };
      expect(doc.jsonrpc).toBe('2.0');
      expect(doc.error?.code).toBe(-32053);
      expect(a.xCache).toBe('MISS');
    }
    const failures = gw.lines.filter((l) => /"upstream_(failed|bad_response)"/.test(l) && l.includes('"failing'));
    expect(failures).toHaveLength(1);
    expect(gw.lines.some((l) => l.includes('"upstream_refused_batch"') && l.includes('"failing"'))).toBe(false);
  });

  it('a batch the node rate-limits (429): the node is throttled (issue 39), nothing more goes to it during its cooldown, and the chain goes on batching', { timeout: 30_000 }, async () => {
    await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="limited"}')) === 16, "the gateway knows the limited stand-in's head");
    const call = (n: number) => `{"jsonrpc":"2.0","id":${n},"method":"eth_getBalance","params":["0x${String(n).padStart(2, '0').repeat(20)}","latest"]}`;
    limitedBatches = 1;
    const before = limited.bodies.length;
    const answers = await pipelined('/limited', [1, 2, 3].map(call));
    // Its only upstream throttled: every upstream throttled (docs/upstreams.md: "Throttling").
    for (const x of answers) {
      expect(x.status, x.text).toBe(429);
      expect(JSON.parse(x.text).error.code).toBe(-32005);
    }
    // The batch only: a node that said "too many requests" is not sent its calls alone at once.
    expect(limited.bodies.slice(before)).toHaveLength(1);
    expect(Array.isArray(limited.bodies[before])).toBe(true);
    // Not taken for a node that refuses batches: once its cooldown is over, the next misses go together again.
    // The bodies of the try that was answered whole: a try whose turn the cooldown's end fell inside sent only its
    // later calls (its first got the 429), and is not the one this judges.
    let mid = 0;
    await until(async () => {
      mid = limited.bodies.length;
      return (await pipelined('/limited', [4, 5, 6].map(call))).every((x) => x.status === 200);
    }, 'the node back after its cooldown');
    expect(limited.bodies.slice(mid)).toHaveLength(1);
    expect(Array.isArray(limited.bodies[mid])).toBe(true);
    expect(gw.lines.some((l) => l.includes('"upstream_refused_batch"') && l.includes('"limited"'))).toBe(false);
  });

  it('two nodes (a pool), one of which refuses batches: the calls the pool sends to the same nodes go as one batch; the refusal is learned once, its calls go again alone, and later batches go to the other node', { timeout: 30_000 }, async () => {
    await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="mixed"}')) === 16, "the gateway knows the mixed chain's head");
    let n = 100;
    const round = () => [0, 1, 2].map(() => n++).map((k) => `{"jsonrpc":"2.0","id":${k},"method":"eth_getBalance","params":["0x${String(k).padStart(4, '0').repeat(10)}","latest"]}`);
    const check = (answers: PipelinedAnswer[], bodies: string[]) =>
      answers.forEach((x, i) => {
        expect(x.status).toBe(200);
        const call = JSON.parse(bodies[i]!) as { id: number; params: string[] };
        expect(JSON.parse(x.text)).toEqual(standInAnswer({ id: call.id, params: call.params }));
      });
    const noBefore = mixedNo.bodies.length;
    const yesBefore = mixedYes.bodies.length;
    const batchesBefore = await metricValue(gw, 'gateway_cache_batches_total', '{chain="mixed"}');
    for (let i = 0; i < 6; i++) {
      const bodies = round();
      check(await pipelined('/mixed', bodies), bodies);
    }
    // Each round's three calls, bound for either node (both at the head), went to one of them as one batch
    // (runtime/jsonrpc/forward-batch.ts, under the pool).
    expect(await metricValue(gw, 'gateway_cache_batches_total', '{chain="mixed"}')).toBeGreaterThan(batchesBefore);
    const toNo = mixedNo.bodies.slice(noBefore);
    const toYes = mixedYes.bodies.slice(yesBefore);
    expect(toYes.some(Array.isArray)).toBe(true);
    // The node with a small batch limit refused at most one batch: learned once, logged once; it got only lone calls after.
    const refusedBatches = toNo.filter(Array.isArray) as unknown[][];
    expect(refusedBatches.length).toBeLessThanOrEqual(1);
    if (refusedBatches.length === 1) expect(toNo.slice(toNo.indexOf(refusedBatches[0]!) + 1).some(Array.isArray)).toBe(false);
    expect(gw.lines.filter((l) => l.includes('"upstream_refused_batch"') && l.includes('"chain":"mixed"'))).toHaveLength(refusedBatches.length);
    // Every call reached a node once, and again alone for each the refused batch held: fewer requests than calls.
    expect(callsIn([...toNo, ...toYes])).toHaveLength(18 + refusedBatches.reduce((k, b) => k + b.length, 0));
    expect(toNo.length + toYes.length).toBeLessThan(18);
  });
});
