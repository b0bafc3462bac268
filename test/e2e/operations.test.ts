// Operations (issue 6): rate limits per key (in memory, and shared through a
// real Redis by two gateway processes), metrics, access logs, key reloads
// under load, and graceful shutdown, all against running processes.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createServer, Agent, request as httpRequest, type Server, type ServerResponse } from 'node:http';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keysYaml, newKey, rawRequest, type Built, type KeySpec, type RunningGateway } from './harness.ts';
import { gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const KEY = newKey();
const LIMITED = newKey();
const SHARED = newKey();
const CALL = (id: number | string = 1, method = 'eth_chainId') => JSON.stringify({ jsonrpc: '2.0', id, method, params: [] });

let anvil: Anvil;
let bb: BlockbookStub;
let rosetta: RosettaStub;
let redis: RedisServer;
let gate: Server;
let built: Built;
let rig: Gateway;
/** heldchain's upstream holds every call (health checks aside) until releaseHeld(). */
const held: ServerResponse[] = [];
const heldWaiters: { n: number; ok: () => void }[] = [];
function untilHeld(n: number): Promise<void> {
  return held.length >= n ? Promise.resolve() : new Promise((ok) => heldWaiters.push({ n, ok }));
}
function releaseHeld(): void {
  for (const res of held.splice(0)) if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x2"}');
}

const CHAINS: readonly Chain[] = [
  { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
  { path: 'heldchain', interface: 'evm-jsonrpc', retries: 0, upstreams: ['${HELD_URL}'] },
  { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${ROSETTA_URL}'] },
  { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB_URL}'] },
];

const KEYS: KeySpec[] = [
  { id: 'unlimited', key: KEY },
  { id: 'limited', key: LIMITED, rateLimit: '5/h' },
  { id: 'shared', key: SHARED, rateLimit: '6/h' },
];

let heldUrl: string;
beforeAll(async () => {
  [anvil, bb, rosetta, redis] = await Promise.all([startAnvil({ chainId: 1 }), startBlockbookStub(), startRosettaStub({ network: 'preprod' }), startRedis()]);
  gate = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c)).on('end', () => {
      if (body.includes('eth_blockNumber')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      held.push(res);
      for (let i = heldWaiters.length - 1; i >= 0; i--) if (held.length >= heldWaiters[i]!.n) heldWaiters.splice(i, 1)[0]!.ok();
    });
  });
  await new Promise<void>((r) => gate.listen(0, '127.0.0.1', r));
  heldUrl = `http://127.0.0.1:${(gate.address() as { port: number }).port}`;
  rig = await gateway({
    name: 'operations',
    chains: CHAINS,
    header: { health: { intervalMs: 60000, timeoutMs: 1000 }, drainTimeoutMs: 8000 },
    standIns: { gate, redis, ETH_URL: anvil, BB_URL: bb, ROSETTA_URL: rosetta },
    env: { HELD_URL: heldUrl },
    start: false,
  });
  built = rig.built;
}, 60_000);

afterAll(() => rig?.close());

async function launch(extraEnv: Record<string, string> = {}, keys: KeySpec[] = KEYS): Promise<RunningGateway> {
  return rig.start({ env: extraEnv, keys });
}

/** Waits until `cond()` holds (a load running beside the test makes progress); fails after 10 s. */
async function progress(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`no progress within 10 s: ${what}`);
    await new Promise((r) => setTimeout(r, 5)); // poll interval, not a readiness guess
  }
}

describe('rate limits per key (in memory)', () => {
  // A fresh process per test: counters and metrics start from zero, whatever ran before.
  let gw: RunningGateway;
  beforeEach(async () => {
    gw = await launch();
  });
  afterEach(() => gw?.stop());

  it('answers 429 with Retry-After in each interface’s envelope; a batch counts as its items', async () => {
    const h = { 'x-api-key': LIMITED };
    const batch = JSON.stringify([1, 2, 3].map((i) => JSON.parse(CALL(i))));
    expect((await rawRequest(gw.url('rpc', '/ethereum'), { body: batch, headers: h })).status).toBe(200); // 3 of 5
    expect((await rawRequest(gw.url('rpc', '/ethereum'), { body: CALL(), headers: h })).status).toBe(200); // 4
    expect((await rawRequest(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: h })).status).toBe(200); // 5
    const rpc = await rawRequest(gw.url('rpc', '/ethereum'), { body: CALL(), headers: h });
    expect(rpc.status).toBe(429);
    expect(Number(rpc.headers['retry-after'])).toBeGreaterThan(0);
    expect(rpc.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32005 } });
    const explorer = await rawRequest(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: h });
    expect(explorer.status).toBe(429);
    expect(explorer.headers['retry-after']).toBeDefined();
    expect(typeof explorer.json().error).toBe('string');
    const ros = await rawRequest(gw.url('rpc', '/cardano-preprod/network/status'), {
      headers: h,
      body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' }, metadata: {} }),
    });
    expect(ros.status).toBe(500);
    expect(ros.headers['retry-after']).toBeDefined();
    expect(ros.json()).toMatchObject({ retriable: true });
    // Other keys are not affected.
    expect((await rawRequest(gw.url('rpc', '/ethereum'), { body: CALL(), headers: { 'x-api-key': KEY } })).status).toBe(200);
  });

  it('counts rejections by key id in /metrics, with requests, latency, upstreams and in-flight', async () => {
    const post = (key: string, method = 'eth_chainId') => rawRequest(gw.url('rpc', '/ethereum'), { body: CALL(1, method), headers: { 'x-api-key': key } });
    // 'limited' allows 5 an hour: five pass, two are refused.
    for (let i = 0; i < 5; i++) expect((await post(LIMITED)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await post(LIMITED)).status).toBe(429);
    expect((await post(KEY)).status).toBe(200);
    expect((await post(KEY, 'eth_accounts')).status).toBe(200); // refused method: -32601 over 200
    const m = await rawRequest(gw.url('admin', '/metrics'));
    expect(m.status).toBe(200);
    expect(m.text).toMatch(/^gateway_rate_limited_total\{key_id="limited"\} 2$/m);
    expect(m.text).not.toContain('gateway_rate_limited_total{key_id="unlimited"}');
    expect(m.text).toMatch(/^gateway_requests_total\{chain="ethereum",interface="evm-jsonrpc",method="eth_chainId",status="200"\} 6$/m);
    expect(m.text).toMatch(/^gateway_requests_total\{chain="ethereum",interface="evm-jsonrpc",method="refused",status="200"\} 1$/m);
    expect(m.text).toContain('gateway_request_duration_seconds_bucket{le="0.005",chain="ethereum",interface="evm-jsonrpc"}');
    expect(m.text).toContain('gateway_upstream_up{chain="ethereum",upstream="ethereum#0"} 1');
    expect(m.text).toContain('gateway_upstream_head{chain="ethereum",upstream="ethereum#0"}');
    expect(m.text).toContain('gateway_upstream_lag_blocks{chain="ethereum",upstream="ethereum#0"} 0');
    expect(m.text).toContain('gateway_inflight_requests');
    expect(m.text).not.toContain(anvil.url);
    // /metrics is not on the public listeners.
    expect((await rawRequest(gw.url('rpc', '/metrics'))).status).toBe(404);
  });

  it('writes one JSON access-log line per request, with the key id and never the key', async () => {
    const r = await rawRequest(gw.url('rpc', `/ethereum/${KEY}`), { body: CALL(), headers: { 'x-request-id': 'log-check-1' } });
    expect(r.status).toBe(200);
    const line = await gw.waitForLog((e) => e.reqId === 'log-check-1');
    expect(line).toMatchObject({ level: 'info', keyId: 'unlimited', chain: 'ethereum', method: 'eth_chainId', status: 200, upstream: 'ethereum#0' });
    expect(typeof line.time).toBe('string');
    expect(typeof line.ms).toBe('number');
    expect(line.bytes).toBeGreaterThan(0);
    const all = gw.lines.join('\n');
    for (const k of [KEY, LIMITED, SHARED]) expect(all).not.toContain(k);
  });
});

describe('rate limits shared through Redis', () => {
  it('two gateway processes share one limit', { timeout: 60_000 }, async () => {
    const [g1, g2] = [await launch({ REDIS_URL: redis.url }), await launch({ REDIS_URL: redis.url })];
    try {
      const h = { 'x-api-key': SHARED };
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const g = i % 2 === 0 ? g1 : g2;
        statuses.push((await rawRequest(g.url('rpc', '/ethereum'), { body: CALL(), headers: h })).status);
      }
      // 6/h for the key, across both processes.
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429, 429]);
    } finally {
      await Promise.all([g1.stop(), g2.stop()]);
    }
  });

  it('fails open when Redis is unreachable: requests are served and counted per process from the last count Redis gave, and it is logged', { timeout: 30_000 }, async () => {
    const gone = await startRedis();
    const g = await launch({ REDIS_URL: gone.url }, [{ id: 'open', key: KEY, rateLimit: '2/h' }]);
    try {
      expect((await rawRequest(g.url('rpc', '/ethereum'), { body: CALL(), headers: { 'x-api-key': KEY } })).status).toBe(200);
      const down = g.waitForLog((e) => e.event === 'ratelimit_redis_down');
      await gone.stop();
      await down;
      const s = [];
      for (let i = 0; i < 3; i++) s.push((await rawRequest(g.url('rpc', '/ethereum'), { body: CALL(), headers: { 'x-api-key': KEY } })).status);
      // Counting goes on in the process from the last count Redis gave (1 of 2): one more passes, then the limit holds.
      expect(s).toEqual([200, 429, 429]);
    } finally {
      await g.stop();
    }
  });
});

describe('key reloads under load', () => {
  it('reloads the keys file and on SIGHUP while a load runs, with zero failed requests', { timeout: 60_000 }, async () => {
    const g = await launch({}, [{ id: 'steady', key: KEY }]);
    const revoked = newKey();
    let failed = 0;
    let done = 0;
    let stop = false;
    const worker = async () => {
      while (!stop) {
        const r = await rawRequest(g.url('rpc', '/ethereum'), { body: CALL(), headers: { 'x-api-key': KEY } });
        if (r.status !== 200) failed++;
        done++;
      }
    };
    const load = Promise.all(Array.from({ length: 6 }, worker));
    const keysPath = join(built.dir, 'keys.yaml');
    const straddling: number[] = [];
    try {
      for (let i = 0; i < 6; i++) {
        // The load has answered requests since the last reload...
        const before = done;
        await progress(`requests answered before reload ${i}`, () => done > before);
        // ...and one request is inside the gateway, held at the upstream, for the whole reload.
        const inside = rawRequest(g.url('rpc', '/heldchain'), { body: CALL(i), headers: { 'x-api-key': KEY } });
        await untilHeld(1);
        const reloaded = g.nextLog((e) => e.event === 'keys_reloaded' && e.keys === 2 + (i % 2));
        const next = [{ id: 'steady', key: KEY }, { id: 'other', key: revoked, disabled: i % 2 === 1 }, ...(i % 2 ? [{ id: 'extra', key: newKey() }] : [])];
        writeFileSync(`${keysPath}.tmp`, keysYaml(next));
        renameSync(`${keysPath}.tmp`, keysPath);
        if (i === 2) g.proc.kill('SIGHUP');
        await reloaded;
        // A request right after the reload is served under the new file.
        expect((await rawRequest(g.url('rpc', '/ethereum'), { body: CALL(), headers: { 'x-api-key': KEY } })).status).toBe(200);
        releaseHeld();
        straddling.push((await inside).status);
      }
      const after = done;
      await progress('requests answered after the last reload', () => done > after);
    } finally {
      stop = true;
      releaseHeld();
      await load;
    }
    try {
      expect(straddling).toEqual([200, 200, 200, 200, 200, 200]);
      expect(failed).toBe(0);
      // The last file (i = 5) disabled 'other'.
      expect((await rawRequest(g.url('rpc', '/ethereum'), { body: CALL(), headers: { 'x-api-key': revoked } })).status).toBe(403);
    } finally {
      await g.stop();
    }
  });
});

describe('graceful shutdown', () => {
  it('on SIGTERM: /readyz is 503 at once on open connections, new connections are refused, in-flight requests finish, exit 0', { timeout: 60_000 }, async () => {
    const g = await launch();
    const idle = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (path: string, agent: Agent) =>
      new Promise<{ status: number; body: string; connection?: string }>((ok, fail) => {
        const req = httpRequest(g.url('rpc', path), { agent }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c)).on('end', () => ok({ status: res.statusCode!, body, connection: res.headers.connection }));
        });
        req.on('error', fail).end();
      });
    expect((await get('/healthz', idle)).status).toBe(200); // opens a keep-alive connection
    // Five requests in flight: the upstream holds them until the checks below are done.
    const inflight = Array.from({ length: 5 }, (_, i) => rawRequest(g.url('rpc', '/heldchain'), { body: CALL(i), headers: { 'x-api-key': KEY } }));
    await untilHeld(5);
    const draining = g.waitForLog((e) => e.event === 'draining');
    g.proc.kill('SIGTERM');
    await draining;
    try {
      const ready = await get('/readyz', idle);
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body).status).toBe('draining');
      expect(ready.connection).toBe('close');
      await expect(rawRequest(g.url('rpc', '/healthz'))).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      expect(g.proc.exitCode).toBeNull(); // still draining: the five are unanswered
    } finally {
      releaseHeld();
    }
    const answers = await Promise.all(inflight);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers.map((r) => r.json().result)).toEqual(['0x2', '0x2', '0x2', '0x2', '0x2']);
    expect(await g.exited).toBe(0);
    idle.destroy();
  });
});
