// Issue 39, throttling: upstreams that refuse calls over their plan as
// Infura, Alchemy and QuickNode do (test/support/throttle-standin.ts, in front
// of anvil, the Blockbook stand-in or the Rosetta stand-in). Each chain of one
// gateway is a pool of such stand-ins, or one of them alone. The tests steer
// which client request a stand-in throttles and how, count what reached each
// one (and when: the stand-ins stamp arrivals with Date.now(), the clock the
// gateway's cooldowns run on), and read /status.json and /metrics. No test
// waits for a time to pass: each waits (until) for a request to reach a node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { chromium } from 'playwright-core';
import type { Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { newKey, postJson, until, upstreamStatus, type JsonAnswer, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { PROVIDER, startThrottleStandin, type Throttle, type ThrottleArrival, type ThrottleStandin } from '../support/throttle-standin.ts';
import { fetchSeries } from '../support/metrics-text.ts';
import { COOLDOWN_MAX_MS } from '../../runtime/upstreams/throttle.ts';

const KEY = newKey();
const MNEMONIC = 'test test test test test test test test test test test junk';
const dev = (i: number) => mnemonicToAccount(MNEMONIC, { addressIndex: i });
const ADDR = dev(0).address;
const TO = '0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6';

let anvil: Anvil;
let bb1: BlockbookStub;
let bb2: BlockbookStub;
let ro1: RosettaStub;
let ro2: RosettaStub;
let up: Gateway;
let gw: RunningGateway;

/** The stand-ins, by the env name the manifest gives their URL. */
const S: Record<string, ThrottleStandin> = {};
const EVM_NAMES = ['FORMS_T', 'FORMS_H', 'COOL_T', 'COOL_H', 'AFTER_T', 'AFTER_H', 'DOUBLE_T', 'DOUBLE_H', 'ALL_1', 'ALL_2', 'SINGLE', 'W1', 'W2', 'W3', 'X1', 'X2'];

const CHAINS: readonly Chain[] = [
  evmChain('forms', ['FORMS_T', 'FORMS_H']),
  evmChain('cool', ['COOL_T', 'COOL_H']),
  evmChain('after', ['AFTER_T', 'AFTER_H']),
  evmChain('allthrottled', ['ALL_1', 'ALL_2']),
  evmChain('single', ['SINGLE']),
  // weighted: the throttling node gets every other read once its cooldown is over, not a score's few probes.
  evmChain('double', ['DOUBLE_T', 'DOUBLE_H'], { selection: 'weighted' }),
  evmChain('writes', ['W1', 'W2', 'W3'], { broadcast: 'one' }),
  evmChain('writes2', ['X1', 'X2'], { broadcast: 'one' }),
  { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB1}/api', '${BB2}/api'] },
  { path: 'bitcoin-one', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB3}/api'] },
  // Hedged: its reads go through the pool's flow (pool/flow.ts), not straight to one node.
  { path: 'bitcoin-hedged', interface: 'blockbook', listener: 'explorer', hedge: { afterMs: 5000 }, upstreams: ['${BB4}/api', '${BB5}/api'] },
  { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${RO1}', '${RO2}'] },
];

beforeAll(async () => {
  anvil = await startAnvil();
  [bb1, bb2] = await Promise.all([startBlockbookStub(), startBlockbookStub()]);
  [ro1, ro2] = await Promise.all([startRosettaStub({ network: 'preprod' }), startRosettaStub({ network: 'preprod' })]);
  const evm = await Promise.all(EVM_NAMES.map(() => startThrottleStandin(anvil.url)));
  EVM_NAMES.forEach((n, i) => (S[n] = evm[i]!));
  [S.BB1, S.BB2, S.BB3, S.BB4, S.BB5, S.RO1, S.RO2] = await Promise.all([startThrottleStandin(bb1.url), startThrottleStandin(bb2.url), startThrottleStandin(bb1.url), startThrottleStandin(bb1.url), startThrottleStandin(bb2.url), startThrottleStandin(ro1.url), startThrottleStandin(ro2.url)]);
  up = await gateway({ name: 'issue-39-throttle', chains: CHAINS, keys: [{ id: 'throttle', key: KEY }], standIns: { anvil, bb1, bb2, ro1, ro2, ...S } });
  gw = up.gw;
}, 60_000);

afterAll(() => up?.close());

// ---------------------------------------------------------------- helpers

type Answer = JsonAnswer;

let nextId = 1;
const post = (url: string, body: string): Promise<Answer> => postJson(url, KEY, body);
const rpc = (chain: string, method: string, params: unknown[] = []): Promise<Answer> => post(gw.url('rpc', `/${chain}`), JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }));

/** anvil's own balance of ADDR: what every answer through the gateway must be. */
async function anvilBalance(): Promise<string> {
  return (await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result as string;
}

/** A read that must be the node's real answer (never a throttle). */
async function realRead(chain: string): Promise<void> {
  const a = await rpc(chain, 'eth_getBalance', [ADDR, 'latest']);
  expect(a.status, a.text).toBe(200);
  expect(a.json.result, a.text).toBe(await anvilBalance());
}

const upstream = (name: string) => upstreamStatus(gw, name);

const throttledMetric = (chain: string, name: string): Promise<number> => fetchSeries(gw.url('admin', '/metrics'), 'gateway_upstream_throttled_total', { chain, upstream: name });

/** Throttles the next eth_getBalance that reaches `s` with `form` (made at its arrival), then passes the rest on. */
function throttleNext(s: ThrottleStandin, form: (a: ThrottleArrival) => Throttle): void {
  let done = false;
  s.throttle = (a) => {
    if (done || a.rpcMethod !== 'eth_getBalance') return undefined;
    done = true;
    return form(a);
  };
}

/** Sends reads to `chain` (each must be the real answer) until `s` has had `n` client requests. */
async function readUntilArrivals(chain: string, s: ThrottleStandin, n: number, what: string, ms = 30_000): Promise<void> {
  await until(
    async () => {
      await realRead(chain);
      return s.arrivals.length >= n;
    },
    what,
    ms,
  );
}

const getBalances = (s: ThrottleStandin) => s.arrivals.filter((a) => a.rpcMethod === 'eth_getBalance').length;

describe('every chain serves', () => {
  it('each chain answers before the tests steer its nodes', async () => {
    for (const chain of ['forms', 'cool', 'after', 'double', 'allthrottled', 'single', 'writes', 'writes2']) {
      await until(async () => (await rpc(chain, 'eth_getBalance', [ADDR, 'latest'])).status === 200, `${chain} serving`);
    }
    await until(async () => (await request(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: { 'x-api-key': KEY } })).statusCode === 200, 'bitcoin serving');
    await until(async () => (await post(gw.url('rpc', '/cardano-preprod/network/status'), JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' } }))).status === 200, 'cardano-preprod serving');
    for (const s of Object.values(S)) s.arrivals.length = 0;
  }, 60_000);
});

describe('each throttle form is a throttle: the client gets the other upstream\'s answer', () => {
  const T = () => S.FORMS_T!;
  const FORMS: readonly [string, (a: ThrottleArrival) => Throttle][] = [
    ['HTTP 429 with Retry-After in seconds (Infura\'s body)', () => ({ ...PROVIDER.infura429, retryAfter: '1' })],
    ['HTTP 429 with Retry-After as an HTTP date', (a) => ({ ...PROVIDER.infura429, retryAfter: new Date(a.at + 2000).toUTCString() })],
    ['HTTP 429 without Retry-After (Alchemy\'s body)', () => PROVIDER.alchemy429],
    ['HTTP 429 with a plain-text body (a load balancer)', () => ({ status: 429, body: 'Too Many Requests' })],
    ['-32005 in a 200 (Infura "project ID request rate exceeded")', () => ({ error: PROVIDER.infuraRate })],
    ['code 429 in a 200 (Alchemy)', () => ({ error: { code: 429, message: PROVIDER.alchemy429.error.message } })],
    ['Infura\'s sentence with another code', () => ({ error: { code: -32000, message: 'daily request count exceeded, request rate limited' } })],
    ['Alchemy\'s sentence with another code', () => ({ error: { code: -32000, message: PROVIDER.alchemy429.error.message } })],
    ['Alchemy\'s older sentence ("throughput limit")', () => ({ error: PROVIDER.alchemyThroughput })],
    ['QuickNode -32007 "request limit reached"', () => ({ error: PROVIDER.quicknode })],
  ];

  for (const [name, form] of FORMS) {
    it(name, async () => {
      const t = T();
      const before = t.throttledCount();
      const total = (await upstream('forms#0')).throttledTotal;
      throttleNext(t, form);
      // Every read is anvil's answer, the one the throttling node refused included.
      await until(
        async () => {
          await realRead('forms');
          return t.throttledCount() > before;
        },
        'the throttling node asked',
        30_000,
      );
      expect(t.throttledCount()).toBe(before + 1);
      expect((await upstream('forms#0')).throttledTotal).toBe(total + 1);
      expect(await throttledMetric('forms', 'forms#0')).toBe(total + 1);
      // Back in traffic once its cooldown is over; its answer ends the run of throttles.
      const n = t.arrivals.length;
      await readUntilArrivals('forms', t, n + 1, 'the throttled node asked again after its cooldown');
      expect(t.arrivals[n]!.throttled).toBe(false);
      expect((await upstream('forms#0')).throttleRun).toBe(0);
    }, 60_000);
  }

  it('a -32005 that names a result limit (Infura\'s log range) is the node\'s answer, not a throttle', async () => {
    const t = T();
    const total = (await upstream('forms#0')).throttledTotal;
    const range = { code: -32005, message: 'query returned more than 10000 results' };
    t.throttle = (a) => (a.rpcMethod === 'eth_getBalance' ? { error: range } : undefined);
    let seen: Answer | null = null;
    await until(
      async () => {
        const a = await rpc('forms', 'eth_getBalance', [ADDR, 'latest']);
        if (a.json?.error !== undefined) seen = a;
        return seen !== null;
      },
      'the node with the range limit asked',
    );
    expect(seen!.json.error).toEqual(range);
    expect((await upstream('forms#0')).throttledTotal).toBe(total);
    t.throttle = () => undefined;
  });
});

describe('the throttled upstream takes no traffic during its Retry-After, and takes it again after', () => {
  it('Retry-After: 30 (seconds): the node is asked nothing more while the other answers every read; status.json shows until when', async () => {
    const t = S.COOL_T!;
    const h = S.COOL_H!;
    throttleNext(t, () => ({ ...PROVIDER.infura429, retryAfter: '30' }));
    await readUntilArrivals('cool', t, 1, 'the throttling node asked');
    const at = t.arrivals[0]!.at;
    const u = await upstream('cool#0');
    expect(u.throttledUntil).not.toBeNull();
    expect(u.throttledUntil!).toBeGreaterThanOrEqual(at + 30_000);
    const before = getBalances(h);
    for (let i = 0; i < 10; i++) await realRead('cool');
    expect(t.arrivals).toHaveLength(1);
    expect(getBalances(h)).toBe(before + 10);
  });

  it('Retry-After: 2 (seconds): the next request the node gets comes at least 2 s after the throttle', async () => {
    const t = S.AFTER_T!;
    throttleNext(t, () => ({ ...PROVIDER.alchemy429, retryAfter: '2' }));
    await readUntilArrivals('after', t, 1, 'the throttling node asked');
    await readUntilArrivals('after', t, 2, 'the node asked again after its Retry-After');
    expect(t.arrivals[1]!.throttled).toBe(false);
    expect(t.arrivals[1]!.at - t.arrivals[0]!.at).toBeGreaterThanOrEqual(2000);
  }, 60_000);

  it('Retry-After as an HTTP date: the next request the node gets comes at or after that date', async () => {
    const t = S.AFTER_T!;
    let date = '';
    throttleNext(t, (a) => ({ ...PROVIDER.infura429, retryAfter: (date = new Date(a.at + 3000).toUTCString()) }));
    const n = t.arrivals.length;
    await readUntilArrivals('after', t, n + 1, 'the throttling node asked');
    expect(t.arrivals[n]!.throttled).toBe(true);
    await readUntilArrivals('after', t, n + 2, 'the node asked again after the date');
    expect(t.arrivals[n + 1]!.throttled).toBe(false);
    expect(t.arrivals[n + 1]!.at).toBeGreaterThanOrEqual(Date.parse(date));
  }, 60_000);
});

describe('without Retry-After: a cooldown of 1 s that doubles with each throttle in a row, reset by an answer', () => {
  it('1 s, 2 s, 4 s between the requests the node gets while it throttles them all (its polls too); its answer starts the run again', async () => {
    const t = S.DOUBLE_T!;
    t.throttle = (a) => (a.rpcMethod === 'eth_getBalance' ? PROVIDER.alchemy429 : undefined);
    // Reads at a block both nodes have (the node's head as its last poll said): while its polls are throttled, its
    // head is not current and it takes no call at the tip.
    const { head } = (await upstream('double#0')) as unknown as { head: number };
    const block = `0x${head.toString(16)}`;
    const balance = (await anvil.rpc('eth_getBalance', [ADDR, block])).result;
    const readAtUntil = (n: number, what: string) =>
      until(
        async () => {
          const a = await rpc('double', 'eth_getBalance', [ADDR, block]);
          expect(a.status, a.text).toBe(200);
          expect(a.json.result, a.text).toBe(balance);
          return t.arrivals.length >= n;
        },
        what,
        30_000,
      );
    // Over its plan, the provider throttles the gateway's polls too: a poll it answered would end the run as a call's answer does.
    t.throttlePoll = () => PROVIDER.alchemy429;
    for (let k = 1; k <= 3; k++) {
      await readAtUntil(k, `throttle ${k}`);
      expect(t.arrivals[k - 1]!.throttled).toBe(true);
      // Each call's throttle is one more in the run, and so is each throttled poll between them.
      const run = (await upstream('double#0')).throttleRun;
      expect(run).toBeGreaterThanOrEqual(k);
      expect(run).toBeLessThanOrEqual(k + t.polls.filter((p) => p.throttled).length);
      if (k > 1) expect(t.arrivals[k - 1]!.at - t.arrivals[k - 2]!.at).toBeGreaterThanOrEqual(1000 * 2 ** (k - 2));
    }
    // The fourth comes after at least 4 s; this time the node answers, and the run is over.
    t.throttle = () => undefined;
    t.throttlePoll = () => undefined;
    // Each poll the node throttled in the run doubled the cooldown too (a poll may reach it first when a cooldown
    // ends): the run may be longer than three, so the wait is the longest cooldown (COOLDOWN_MAX_MS) and some.
    await readUntilArrivals('double', t, 4, 'the node asked after its third cooldown', COOLDOWN_MAX_MS + 15_000);
    expect(t.arrivals[3]!.at - t.arrivals[2]!.at).toBeGreaterThanOrEqual(4000);
    expect(t.arrivals[3]!.throttled).toBe(false);
    expect((await upstream('double#0')).throttleRun).toBe(0);
    // A throttle after the answer is the first of a new run: 1 s again.
    throttleNext(t, () => PROVIDER.alchemy429);
    const n = t.arrivals.length;
    await readUntilArrivals('double', t, n + 1, 'a new throttle');
    expect(t.arrivals[n]!.throttled).toBe(true);
    expect((await upstream('double#0')).throttleRun).toBe(1);
    expect(await throttledMetric('double', 'double#0')).toBe(t.throttledCount() + t.polls.filter((p) => p.throttled).length);
  }, 180_000);
});

describe('Blockbook: an {"error": ...} answer with a provider\'s throttle sentence is a throttle', () => {
  it.each([
    ['bitcoin', 'BB1'],
    ['bitcoin-hedged', 'BB4'],
  ])('%s: a 500 {"error":"daily request count exceeded, request rate limited"}: the client gets the other node\'s block, the node is out for its cooldown', async (chain, node) => {
    await until(async () => (await request(gw.url('explorer', `/${chain}/v2/block/1`), { headers: { 'x-api-key': KEY } })).statusCode === 200, `${chain} serving`);
    const total = (await upstream(`${chain}#0`)).throttledTotal;
    let first = true;
    S[node]!.throttle = () => (first ? ((first = false), { status: 500, body: '{"error":"daily request count exceeded, request rate limited"}' }) : undefined);
    await until(
      async () => {
        const r = await request(gw.url('explorer', `/${chain}/v2/block/1`), { headers: { 'x-api-key': KEY } });
        const text = await r.body.text();
        expect(r.statusCode, text).toBe(200);
        expect(JSON.parse(text).height).toBe(1);
        return !first;
      },
      'the first Blockbook node asked',
    );
    expect((await upstream(`${chain}#0`)).throttledTotal).toBe(total + 1);
    S[node]!.throttle = () => undefined;
  });

  it("Blockbook's own errors that say nothing of a limit pass on as they came", async () => {
    S.BB1!.throttle = () => undefined;
    const r = await request(gw.url('explorer', '/bitcoin/v2/block/999999'), { headers: { 'x-api-key': KEY } });
    const own = await request(`${S.BB2!.url}/api/v2/block/999999`);
    expect(r.statusCode).toBe(own.statusCode);
    expect(await r.body.text()).toBe(await own.body.text());
  });
});

describe('Blockbook, a chain of one upstream: its 429 with an {"error": ...} body is a throttle', () => {
  it('a 429 {"error":"...rate limit exceeded"}: the client gets 429 {"error":"Every upstream throttled"} with Retry-After, nothing reaches the node during its cooldown, then it answers again; its other errors pass on unchanged', async () => {
    const get = async (id: string) => {
      const r = await request(gw.url('explorer', `/bitcoin-one/v2/block/${id}`), { headers: { 'x-api-key': KEY } });
      return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
    };
    const bb = S.BB3!;
    // Blockbook's own error that says nothing of a limit: as the node gave it (status and body), not a throttle.
    const own = await request(`${bb.url}/api/v2/block/999999`);
    const ownText = await own.body.text();
    const notFound = await get('999999');
    expect(notFound.status).toBe(own.statusCode);
    expect(notFound.text).toBe(ownText);
    expect(bb.throttledCount()).toBe(0);
    let first = true;
    bb.throttle = () => (first ? ((first = false), { status: 429, body: '{"error":"Too many requests, rate limit exceeded"}', retryAfter: '3' }) : undefined);
    const a = await get('1');
    expect(a.status, a.text).toBe(429);
    expect(JSON.parse(a.text)).toEqual({ error: 'Every upstream throttled' });
    expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(bb.throttledCount()).toBe(1);
    // In its cooldown (its Retry-After: 3 s): answered by the gateway, the node not asked.
    const asked = bb.arrivals.length;
    const b = await get('1');
    expect(b.status, b.text).toBe(429);
    expect(bb.arrivals.length).toBe(asked);
    // And back after it, with the node's own block.
    await until(async () => (await get('1')).status === 200, 'the node back after its cooldown');
    expect(JSON.parse((await get('1')).text).height).toBe(1);
  });
});

describe('every upstream throttled: HTTP 429 with Retry-After, in each interface\'s envelope', () => {
  it('EVM pool: -32005 "every upstream throttled", Retry-After the soonest; the next call reaches no node', async () => {
    S.ALL_1!.throttle = () => ({ ...PROVIDER.infura429, retryAfter: '30' });
    S.ALL_2!.throttle = () => ({ ...PROVIDER.alchemy429, retryAfter: '20' });
    const a = await rpc('allthrottled', 'eth_getBalance', [ADDR, 'latest']);
    expect(a.status, a.text).toBe(429);
    expect(a.json.error).toEqual({ code: -32005, message: 'Limit exceeded: every upstream throttled' });
    const after = Number(a.headers['retry-after']);
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(20);
    expect(S.ALL_1!.arrivals.length + S.ALL_2!.arrivals.length).toBe(2);
    // Out of traffic: answered at once, no node asked, eth_blockNumber too (no usable upstream, no served tip).
    for (const method of ['eth_getBalance', 'eth_blockNumber']) {
      const b = await rpc('allthrottled', method, method === 'eth_getBalance' ? [ADDR, 'latest'] : []);
      expect(b.status, b.text).toBe(429);
      expect(b.json.error.code).toBe(-32005);
      expect(Number(b.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect(S.ALL_1!.arrivals.length + S.ALL_2!.arrivals.length).toBe(2);
    expect(await throttledMetric('allthrottled', 'allthrottled#0')).toBe(1);
    expect(await throttledMetric('allthrottled', 'allthrottled#1')).toBe(1);
    const [u0, u1] = [await upstream('allthrottled#0'), await upstream('allthrottled#1')];
    const at0 = S.ALL_1!.arrivals[0]!.at;
    const at1 = S.ALL_2!.arrivals[0]!.at;
    expect(u0.throttledUntil!).toBeGreaterThanOrEqual(at0 + 30_000);
    expect(u1.throttledUntil!).toBeGreaterThanOrEqual(at1 + 20_000);
  });

  it('EVM, one upstream: its 429 starts the cooldown too; until it ends the client gets the 429 without the node being asked', async () => {
    const s = S.SINGLE!;
    s.throttle = (a) => (a.rpcMethod === 'eth_getBalance' ? { ...PROVIDER.infura429, retryAfter: '120' } : undefined);
    for (let i = 0; i < 3; i++) {
      const a = await rpc('single', 'eth_getBalance', [ADDR, 'latest']);
      expect(a.status, a.text).toBe(429);
      expect(a.json.error).toEqual({ code: -32005, message: 'Limit exceeded: every upstream throttled' });
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(a.headers['retry-after'])).toBeLessThanOrEqual(120);
    }
    expect(s.arrivals).toHaveLength(1);
    expect((await upstream('single#0')).throttledUntil!).toBeGreaterThanOrEqual(s.arrivals[0]!.at + 120_000);
  });

  it('the status page (Chromium) shows until when a throttled upstream takes no traffic, and not for one that is not throttled', async () => {
    const until0 = (await upstream('single#0')).throttledUntil!;
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
    try {
      const page = await browser.newPage();
      await page.goto(gw.url('admin', '/'));
      const cell = (name: string) => page.locator(`tr[data-upstream="${name}"] [data-field="throttledUntil"]`);
      await cell('single#0').waitFor();
      const shown = await cell('single#0').textContent();
      const time = await page.evaluate((t) => new Date(t).toLocaleTimeString(), until0);
      expect(shown).toBe(`throttled until ${time}`);
      expect(await cell('forms#1').count()).toBe(0);
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('Blockbook: the other node answers while one throttles; with both throttled, 429 {"error":"Every upstream throttled"}', async () => {
    const get = async () => {
      const r = await request(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: { 'x-api-key': KEY } });
      return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
    };
    const tooMany = { status: 429, body: '{"error":"Too many requests"}', retryAfter: '30' };
    const before = S.BB1!.throttledCount() + S.BB2!.throttledCount();
    let first = true;
    S.BB1!.throttle = () => (first ? ((first = false), tooMany) : undefined);
    await until(
      async () => {
        const a = await get();
        expect(a.status, a.text).toBe(200);
        expect(JSON.parse(a.text).height).toBe(1);
        return !first;
      },
      'the first Blockbook node asked',
    );
    S.BB2!.throttle = () => tooMany;
    const a = await get();
    expect(a.status, a.text).toBe(429);
    expect(JSON.parse(a.text)).toEqual({ error: 'Every upstream throttled' });
    expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(S.BB1!.throttledCount() + S.BB2!.throttledCount()).toBe(before + 2);
  });

  it('Rosetta: HTTP 500, error 6034 retriable, with Retry-After', async () => {
    const statusOf = () => post(gw.url('rpc', '/cardano-preprod/network/status'), JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' } }));
    S.RO1!.throttle = () => ({ status: 429, body: 'Too Many Requests', retryAfter: '30' });
    S.RO2!.throttle = () => ({ status: 429, body: 'Too Many Requests' });
    const a = await statusOf();
    expect(a.status, a.text).toBe(500);
    expect(a.json).toEqual({ code: 6034, message: 'Every upstream throttled', retriable: true });
    expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(S.RO1!.throttledCount() + S.RO2!.throttledCount()).toBe(2);
    const b = await statusOf();
    expect(b.json.code).toBe(6034);
    expect(S.RO1!.arrivals.length + S.RO2!.arrivals.length).toBe(2);
  });
});

describe('a throttled write goes to another upstream once', () => {
  const signed = (account: number): Promise<Hex> =>
    dev(account).signTransaction({ chainId: 31337, type: 'eip1559', nonce: 0, to: TO, value: 1n, gas: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
  const writes = (names: readonly string[]) => names.reduce((n, s) => n + S[s]!.arrivals.filter((a) => a.rpcMethod === 'eth_sendRawTransaction').length, 0);

  it('refused by the first node, sent by the second: the client gets the hash, and the transaction is on the chain', async () => {
    let first = true;
    const refuseFirst = (a: ThrottleArrival): Throttle | undefined => (a.rpcMethod === 'eth_sendRawTransaction' && first ? ((first = false), PROVIDER.alchemy429) : undefined);
    S.X1!.throttle = refuseFirst;
    S.X2!.throttle = refuseFirst;
    const raw = await signed(2);
    const a = await rpc('writes2', 'eth_sendRawTransaction', [raw]);
    expect(a.status, a.text).toBe(200);
    expect(a.json.result, a.text).toMatch(/^0x[0-9a-f]{64}$/);
    expect(writes(['X1', 'X2'])).toBe(2);
    expect(S.X1!.throttledCount() + S.X2!.throttledCount()).toBe(1);
    expect((await anvil.rpc('eth_getTransactionByHash', [a.json.result])).result).not.toBeNull();
  });

  it('refused by every node: sent twice at most, and the client gets 429', async () => {
    for (const s of ['W1', 'W2', 'W3']) S[s]!.throttle = (a) => (a.rpcMethod === 'eth_sendRawTransaction' ? PROVIDER.alchemy429 : undefined);
    const raw = await signed(3);
    const a = await rpc('writes', 'eth_sendRawTransaction', [raw]);
    expect(a.status, a.text).toBe(429);
    expect(a.json.error.code).toBe(-32005);
    expect(writes(['W1', 'W2', 'W3'])).toBe(2);
    const hash = (await anvil.rpc('eth_sendRawTransaction', [raw])).result as string; // anvil never had it
    expect(hash).toMatch(/^0x[0-9a-f]{64}$/);
  });
});

describe('the client never sees a throttle while another upstream can answer', () => {
  it('calls at once and batches, with one node throttling every call: every answer is the node\'s real one', async () => {
    const t = S.FORMS_T!;
    await until(async () => (await upstream('forms#0')).throttledUntil === null, 'forms#0 out of its cooldown');
    t.throttle = (a) => (a.rpcMethod !== undefined || Array.isArray(a.json) ? PROVIDER.infura429 : undefined);
    const balance = await anvilBalance();
    const singles = Array.from({ length: 20 }, () => rpc('forms', 'eth_getBalance', [ADDR, 'latest']));
    const batch = post(
      gw.url('rpc', '/forms'),
      JSON.stringify([1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [ADDR, 'latest'] }))),
    );
    for (const a of await Promise.all(singles)) {
      expect(a.status, a.text).toBe(200);
      expect(a.json.result, a.text).toBe(balance);
    }
    const b = await batch;
    expect(b.status, b.text).toBe(200);
    expect((b.json as { id: number; result: string }[]).map((x) => [x.id, x.result])).toEqual([
      [1, balance],
      [2, balance],
      [3, balance],
    ]);
    expect(t.throttledCount()).toBeGreaterThan(0);
    t.throttle = () => undefined;
  });
});
