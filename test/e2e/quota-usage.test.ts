// Credits, quotas, the X-RateLimit headers and usage (issue 21), end to end:
// a manifest with `credits`, keys with rate limits and quotas, real anvil and
// the stand-ins; quotas shared by two gateway processes on a real Redis and
// surviving a restart; a Redis outage failing open from the last count; usage
// from the admin listener and `gateway usage`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKey, rawRequest, sha256, type RawResponse, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startStandIns, THREE_CHAINS, type StandIns } from './three-chains.ts';
import { runCli } from '../support/cli.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const K = { metered: newKey(), small: newKey(), free: newKey(), shared: newKey(), outage: newKey() };
const ADDR = '0x' + '11'.repeat(20);

let rig: Gateway<{ up: Promise<StandIns>; redis: Promise<RedisServer> }>;
let up: StandIns;
let redis: RedisServer;
let gw: RunningGateway;

beforeAll(async () => {
  rig = await gateway({
    name: 'quota-usage',
    chains: THREE_CHAINS,
    header: { credits: { eth_getBalance: 5, eth_call: 10, block: 3, address: 7 }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: `keys:
  - { id: metered, sha256: "${sha256(K.metered)}", rateLimit: 1000/min, quota: 100/day }
  - { id: small, sha256: "${sha256(K.small)}", quota: 20/day }
  - { id: free, sha256: "${sha256(K.free)}" }
  - { id: shared, sha256: "${sha256(K.shared)}", quota: 30/day }
  - { id: outage, sha256: "${sha256(K.outage)}", quota: 30/month }
`,
    standIns: { up: startStandIns(), redis: startRedis() },
  });
  ({ gw, standIns: { up, redis } } = rig);
}, 60_000);

afterAll(() => rig?.close());

function launch(env: Record<string, string>): Promise<RunningGateway> {
  return rig.start({ env });
}

const RPC = (method: string, params: unknown[] = [], id = 1) => ({ jsonrpc: '2.0', id, method, params });
const evm = (g: RunningGateway, key: string, body: unknown): Promise<RawResponse> => rawRequest(g.url('rpc', '/ethereum'), { body: JSON.stringify(body), headers: { 'x-api-key': key } });
const balance = (g: RunningGateway, key: string) => evm(g, key, RPC('eth_getBalance', [ADDR, 'latest']));

/** The next UTC midnight, as the quota's resetsAt says it. */
const nextMidnight = (): string => {
  const d = new Date();
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)).toISOString();
};

describe('credits and the X-RateLimit headers', () => {
  it('a call costs its method\'s credits, a batch the sum of its calls; the headers show the tighter limit', async () => {
    const one = await balance(gw, K.metered);
    expect(one.status).toBe(200);
    expect(one.headers['x-credits-used']).toBe('5');
    // 100/day left 95 is tighter than 1000/min left 995.
    expect(one.headers['x-ratelimit-limit']).toBe('100');
    expect(one.headers['x-ratelimit-remaining']).toBe('95');
    const reset = Number(one.headers['x-ratelimit-reset']);
    expect(reset).toBeGreaterThan(0);
    expect(reset).toBeLessThanOrEqual(86_400);
    const batch = await evm(gw, K.metered, [RPC('eth_getBalance', [ADDR, 'latest'], 1), RPC('eth_call', [{ to: ADDR, data: '0x' }, 'latest'], 2), RPC('eth_blockNumber', [], 3)]);
    expect(batch.status).toBe(200);
    expect(batch.headers['x-credits-used']).toBe('16');
    expect(batch.headers['x-ratelimit-remaining']).toBe('79');
    // Rosetta and Blockbook endpoints have their credits too.
    const r = await rawRequest(gw.url('rpc', '/cardano-preprod/block'), {
      body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' }, block_identifier: { index: 1 } }),
      headers: { 'x-api-key': K.metered },
    });
    expect(r.headers['x-credits-used']).toBe('3');
    const b = await rawRequest(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: { 'x-api-key': K.metered } });
    expect(b.headers['x-credits-used']).toBe('3');
    expect(b.headers['x-ratelimit-remaining']).toBe('73');
  });

  it('a browser dapp may read them: CORS exposes the limit headers', async () => {
    const r = await rawRequest(gw.url('rpc', '/ethereum'), { body: JSON.stringify(RPC('eth_chainId')), headers: { 'x-api-key': K.metered, origin: 'https://app.example' } });
    expect(r.headers['access-control-allow-origin']).toBe('*');
    const exposed = String(r.headers['access-control-expose-headers']).split(/,\s*/);
    for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-credits-used', 'retry-after', 'x-request-id']) expect(exposed, h).toContain(h);
  });

  it('a key without a rate limit or quota gets no such headers', async () => {
    const r = await balance(gw, K.free);
    expect(r.status).toBe(200);
    expect(r.headers['x-ratelimit-limit']).toBeUndefined();
    expect(r.headers['x-credits-used']).toBeUndefined();
  });
});

describe('quotas', () => {
  it('over quota: 429, Retry-After to the window\'s end, reason and resetsAt in each envelope, nothing forwarded', async () => {
    for (let i = 0; i < 4; i++) expect((await balance(gw, K.small)).status).toBe(200);
    const before = { evm: up.proxy.requests.length, bb: up.bb.requests.length, rosetta: up.rosetta.requests.length };
    const e = await balance(gw, K.small);
    expect(e.status).toBe(429);
    const resetsAt = nextMidnight();
    // The quota is taken once the body is read: the refusal carries the call's id (issue 43, rule 11).
    expect(e.json()).toEqual({ jsonrpc: '2.0', id: 1, error: { code: -32005, message: 'Limit exceeded: quota', data: { reason: 'quota', resetsAt } } });
    const retry = Number(e.headers['retry-after']);
    expect(Math.abs(retry - Math.ceil((Date.parse(resetsAt) - Date.now()) / 1000))).toBeLessThanOrEqual(2);
    expect(e.headers['x-ratelimit-remaining']).toBe('0');
    expect(e.headers['x-credits-used']).toBe('0');
    // A cheaper call does not fit either (20 of 20 used); nor on the other interfaces (one quota per key).
    expect((await evm(gw, K.small, RPC('eth_blockNumber'))).status).toBe(429);
    const b = await rawRequest(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: { 'x-api-key': K.small } });
    expect(b.status).toBe(429);
    expect(b.json()).toEqual({ error: 'Quota exceeded', reason: 'quota', resetsAt });
    const r = await rawRequest(gw.url('rpc', '/cardano-preprod/network/status'), {
      body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' } }),
      headers: { 'x-api-key': K.small },
    });
    expect(r.status).toBe(500);
    expect(r.json()).toEqual({ code: 6021, message: 'Quota exceeded', retriable: true, details: { reason: 'quota', resetsAt } });
    expect({ evm: up.proxy.requests.length, bb: up.bb.requests.length, rosetta: up.rosetta.requests.length }).toEqual(before);
  });

  it('shared by two gateway processes on Redis, and kept across a restart', { timeout: 60_000 }, async () => {
    let a = await launch({ REDIS_URL: redis.url });
    const b = await launch({ REDIS_URL: redis.url });
    try {
      // 30 credits: 6 balance calls across both.
      const statuses: number[] = [];
      for (let i = 0; i < 7; i++) statuses.push((await balance(i % 2 === 0 ? a : b, K.shared)).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429]);
      await a.stop();
      a = await launch({ REDIS_URL: redis.url });
      expect((await balance(a, K.shared)).status, 'still over quota after a restart').toBe(429);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('a Redis outage fails open: counting goes on in the process from the last count Redis gave, and it is logged', { timeout: 60_000 }, async () => {
    const gone = await startRedis();
    const g = await launch({ REDIS_URL: gone.url });
    try {
      for (let i = 0; i < 5; i++) expect((await balance(g, K.outage)).status).toBe(200); // 25 of 30 in Redis
      const down = g.waitForLog((e) => e.event === 'ratelimit_redis_down');
      await gone.stop();
      await down;
      // From 25: one more fits, the next does not.
      expect((await balance(g, K.outage)).status).toBe(200);
      const over = await balance(g, K.outage);
      expect(over.status).toBe(429);
      expect(over.json()).toMatchObject({ error: { data: { reason: 'quota' } } });
    } finally {
      await g.stop();
    }
  });
});

describe('usage', () => {
  it('per key, day, chain and method: calls and credits, from the admin listener and `gateway usage`', async () => {
    // A process of its own, so the counts are this test's.
    const g = await launch({});
    try {
      const today = new Date().toISOString().slice(0, 10);
      const q = await rawRequest(g.url('admin', `/usage?key=metered&from=${today}&to=${today}`));
      expect(q.status).toBe(200);
      // A fresh process: nothing counted yet for this key in it.
      expect(q.json()).toEqual({ key: 'metered', from: today, to: today, days: [], total: { calls: 0, credits: 0 } });
      await balance(g, K.metered);
      await evm(g, K.metered, [RPC('eth_getBalance', [ADDR, 'latest'], 1), RPC('eth_chainId', [], 2)]);
      await rawRequest(g.url('explorer', '/bitcoin/v2/address/bc1qexample'), { headers: { 'x-api-key': K.metered } });
      const u = (await rawRequest(g.url('admin', `/usage?key=metered`))).json() as { days: unknown[]; total: unknown };
      expect(u.days).toEqual([
        { day: today, chain: 'bitcoin', method: 'address', calls: 1, credits: 7 },
        { day: today, chain: 'ethereum', method: 'eth_chainId', calls: 1, credits: 1 },
        { day: today, chain: 'ethereum', method: 'eth_getBalance', calls: 2, credits: 10 },
      ]);
      expect(u.total).toEqual({ calls: 4, credits: 18 });
      const cli = await runCli(['usage', '--key', 'metered', '--admin', g.url('admin', '/')]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.stdout).toContain(`usage of key 'metered', ${today} to ${today} (UTC)`);
      expect(cli.stdout).toMatch(new RegExp(`${today}\\s+ethereum\\s+eth_getBalance\\s+2\\s+10`));
      expect(cli.stdout).toMatch(/total\s+4\s+18/);
      expect((await rawRequest(g.url('admin', '/usage'))).status).toBe(400);
      expect((await rawRequest(g.url('admin', '/usage?key=metered&from=2026-02-30'))).status).toBe(400);
    } finally {
      await g.stop();
    }
  });

  it('with Redis: counted by every replica into one place, read by `gateway usage --redis`', { timeout: 60_000 }, async () => {
    const a = await launch({ REDIS_URL: redis.url });
    const b = await launch({ REDIS_URL: redis.url });
    try {
      const today = new Date().toISOString().slice(0, 10);
      await balance(a, K.free);
      await balance(b, K.free);
      await evm(b, K.free, RPC('eth_blockNumber'));
      // Each replica sends its counts once a second: wait until Redis has them all.
      const deadline = Date.now() + 15_000;
      let rows: { chain: string; method: string; calls: number; credits: number }[] = [];
      while (Date.now() < deadline) {
        rows = ((await rawRequest(a.url('admin', '/usage?key=free'))).json() as { days: typeof rows }).days;
        if (rows.reduce((n, r) => n + r.calls, 0) >= 3) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(rows.map((r) => [r.method, r.calls, r.credits])).toEqual([
        ['eth_blockNumber', 1, 1],
        ['eth_getBalance', 2, 10],
      ]);
      const cli = await runCli(['usage', '--key', 'free', '--redis', redis.url, '--from', today]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.stdout).toMatch(/total\s+3\s+11/);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});
