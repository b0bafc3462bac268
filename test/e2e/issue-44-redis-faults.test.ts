// A fleet that survives its Redis (issue 44): gateway processes on a real
// redis-server, under load from a process of its own (test/support/key-load.mjs:
// every answer checked), through the faults a real Redis has: a stall
// (DEBUG SLEEP), a freeze (SIGSTOP), a revoke racing a lookup whose answer is
// late at one replica (test/support/redis-proxy.ts), and a restart that comes
// back empty. Each case failed on the code before the change.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { metricValue, rawRequest, ROOT, sha256, until, type RawResponse, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { close, startFixedAnswer } from '../support/http.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { startRedisProxy } from '../support/redis-proxy.ts';
import { addKeyToStore, importKeysFile, revokeKeyInStore, setKeyInStore } from '../../generator/keys-store.ts';

const ANSWER = '{"jsonrpc":"2.0","id":1,"result":"0x10"}';
const CALL = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const DEBUG = ['--enable-debug-command', 'local'];
const key = (name: string) => `issue44-${name}-0123456789abcdef`;

let node: { server: Server; url: string };
/** Two builds on one node that answers ANSWER to everything: keys from the store at KEYS_URL, and from a keys file. */
let rig: Gateway;
let limitsRig: Gateway;

beforeAll(async () => {
  node = await startFixedAnswer(ANSWER);
  const common = { chains: [evmChain('ethereum', ['ETH_URL'])], env: { ETH_URL: node.url }, start: false };
  const header = { keyCache: { size: 1000, ttlMs: 3000 }, health: { intervalMs: 60000, timeoutMs: 1000 }, methodSets: { evm: ['eth_blockNumber'] } };
  [rig, limitsRig] = await Promise.all([
    gateway({ name: 'issue-44', ...common, header: { ...header, keys: '${KEYS_URL}' } }),
    gateway({
      name: 'issue-44-limits',
      ...common,
      header,
      keys: `keys:
  - { id: limited, sha256: "${sha256(key('limited'))}", rateLimit: 100000/s, quota: 100000000/day }
  - { id: free, sha256: "${sha256(key('free'))}" }
`,
    }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([rig?.close(), limitsRig?.close()]);
  await close(node.server);
});

/** Keys old0..old3 and new0..new5 (and any named), imported into the store as `gateway keys import` does. */
async function importKeys(url: string, names: readonly string[] = []): Promise<void> {
  const all = [...[0, 1, 2, 3].map((i) => `old${i}`), ...[0, 1, 2, 3, 4, 5].map((i) => `new${i}`), ...names];
  const file = join(rig.built.dir, `keys-${Date.now()}.yaml`);
  writeFileSync(file, ['keys:', ...all.flatMap((n) => [`  - id: ${n}`, `    sha256: "${sha256(key(n))}"`])].join('\n') + '\n');
  await importKeysFile(url, file);
}

function launch(keysUrl: string, redisUrl?: string): Promise<RunningGateway> {
  return rig.start({ env: { KEYS_URL: keysUrl, ...(redisUrl ? { REDIS_URL: redisUrl } : {}) } });
}

const call = (g: RunningGateway, k: string) => rawRequest(g.url('rpc', '/ethereum'), { body: CALL, headers: { 'x-api-key': k } });
const answered = async (g: RunningGateway, k: string) => {
  const r = await call(g, k);
  return r.status === 200 && r.text === ANSWER;
};

interface Loaded {
  requests: number;
  ok: number[];
  refused: number[];
  badCount: number;
  bad: { at: number; target: number; status: number; body: string }[];
  refusedAt: number[];
  samples?: [number, number][][];
}

/** The loader (test/support/key-load.mjs) on these targets until `stop()`. */
function load(targets: { url: string; key: string }[], rps: number, samples = false): { stop(): Promise<Loaded> } {
  const child: ChildProcess = spawn(process.execPath, [join(ROOT, 'test/support/key-load.mjs'), JSON.stringify({ targets, body: CALL, answer: ANSWER, rps, concurrency: 4, samples })], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  const exited = new Promise((r) => child.once('exit', r));
  return {
    stop: async () => {
      child.stdin!.end();
      await exited;
      return JSON.parse(out.trim()) as Loaded;
    },
  };
}

const on = (gs: RunningGateway[], keys: string[]) => gs.flatMap((g) => keys.map((k) => ({ url: g.url('rpc', '/ethereum'), key: key(k) })));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('issue 44: a fleet on one Redis, through its faults', () => {
  it('a DEBUG SLEEP 2 under load: both replicas answer new keys and old keys within 2 s of Redis answering again, and go on after keyCache.ttlMs', { timeout: 90_000 }, async () => {
    const redis = await startRedis(undefined, DEBUG);
    const gs: RunningGateway[] = [];
    const sleeper = new Redis(redis.url);
    const pinger = new Redis(redis.url, { commandTimeout: 200, maxRetriesPerRequest: 0 });
    try {
      await importKeys(redis.url);
      gs.push(...(await Promise.all([launch(redis.url, redis.url), launch(redis.url, redis.url)])));
      const [a, b] = gs as [RunningGateway, RunningGateway];
      for (const g of gs) for (const k of ['old0', 'old1', 'old2', 'old3']) expect(await answered(g, key(k))).toBe(true);
      const loader = load(on(gs, ['old0', 'old1', 'old2', 'old3']), 200);
      // The stall: Redis asleep for 2 s, its connections open.
      const stall = sleeper.call('DEBUG', 'SLEEP', '2');
      await until(async () => pinger.ping().then(() => false, () => true), 'Redis asleep');
      // A key neither replica has seen: a lookup that times out, so each marks its key store down.
      const downs = gs.map((g) => g.nextLog((e) => e.event === 'keys_store_down', 5000));
      const during = await Promise.all([call(a, key('new0')), call(b, key('new1'))]);
      for (const r of during) expect(r.json()).toMatchObject({ error: { code: -32045, message: 'Key store unavailable' } });
      await Promise.all(downs);
      await stall;
      const back = Date.now();
      // New keys (never looked up) and old ones, on both.
      await until(async () => (await Promise.all(gs.flatMap((g) => ['new2', 'new3', 'old0', 'old3'].map((k) => answered(g, key(k)))))).every(Boolean), 'every key on both replicas', 10_000);
      const recovered = Date.now() - back;
      // Past keyCache.ttlMs (3 s) every cached answer has expired: the store must still be asked, and answer.
      while (Date.now() < back + 4000) {
        for (const g of gs) for (const k of ['new4', 'old1']) expect(await answered(g, key(k)), `${k} after ${Date.now() - back} ms`).toBe(true);
        await new Promise((r) => setTimeout(r, 200));
      }
      for (const g of gs) expect(await answered(g, key('new5'))).toBe(true);
      const loaded = await loader.stop();
      console.log(`DEBUG SLEEP 2: every key answered on both replicas ${recovered} ms after Redis answered; load: ${loaded.requests} requests, ${sum(loaded.refused)} refused (503 while the store was down), ${loaded.badCount} bad`);
      expect(recovered).toBeLessThan(2000);
      expect(loaded.bad).toEqual([]);
      expect(loaded.refusedAt.filter((t) => t > back + 2000)).toEqual([]);
      for (const g of gs) {
        expect(await metricValue(g, 'gateway_redis_state', '{part="keys",state="up"}')).toBe(1);
        expect(await metricValue(g, 'gateway_redis_state', '{part="limits",state="up"}')).toBe(1);
      }
    } finally {
      sleeper.disconnect();
      pinger.disconnect();
      await Promise.all(gs.map((g) => g.stop()));
      await redis.stop();
    }
  });

  it('a 10 s SIGSTOP under load: the usage in Redis equals the requests answered, on two replicas', { timeout: 90_000 }, async () => {
    const redis = await startRedis();
    const gs: RunningGateway[] = [];
    const reader = new Redis(redis.url);
    const usageCalls = async (): Promise<number> => {
      let n = 0;
      for (const h of await reader.keys('gw:usage:old*')) for (const [f, v] of Object.entries(await reader.hgetall(h))) if (f.endsWith(' calls')) n += Number(v);
      return n;
    };
    try {
      await importKeys(redis.url);
      gs.push(...(await Promise.all([launch(redis.url, redis.url), launch(redis.url, redis.url)])));
      const loader = load(on(gs, ['old0', 'old1', 'old2', 'old3']), 200);
      await until(async () => (await usageCalls()) > 0, 'usage flushed to Redis');
      redis.proc.kill('SIGSTOP');
      const frozenAt = Date.now();
      try {
        while (Date.now() < frozenAt + 10_000) await new Promise((r) => setTimeout(r, 100));
      } finally {
        redis.proc.kill('SIGCONT');
      }
      // Load goes on for a while after the freeze, then a drain sends what is left.
      const thawed = Date.now();
      while (Date.now() < thawed + 2000) await new Promise((r) => setTimeout(r, 100));
      const loaded = await loader.stop();
      await Promise.all(gs.map((g) => g.stop()));
      const counted = await usageCalls();
      console.log(`SIGSTOP 10 s: ${sum(loaded.ok)} requests answered, ${counted} calls in Redis's usage, ${sum(loaded.refused)} refused (503: keys past keyCache.ttlMs while Redis was away), ${loaded.badCount} bad answers`);
      expect(loaded.bad).toEqual([]);
      expect(sum(loaded.ok)).toBeGreaterThan(500);
      expect(counted).toBe(sum(loaded.ok));
    } finally {
      reader.disconnect();
      await Promise.all(gs.map((g) => g.stop()));
      await redis.stop();
    }
  });

  it('a revoke, and a `keys set` that sets a limit, racing a lookup whose answer is late at one replica: in force on every replica within 1 s', { timeout: 60_000 }, async () => {
    const redis = await startRedis();
    const proxy = await startRedisProxy(redis);
    const gs: RunningGateway[] = [];
    try {
      await importKeys(redis.url);
      const raced = { revoked: await addKeyToStore(redis.url, 'revoked'), limited: await addKeyToStore(redis.url, 'limited') };
      // a asks Redis through the proxy (its change feed is not delayed), b directly.
      gs.push(...(await Promise.all([launch(proxy.url), launch(redis.url)])));
      const [a, b] = gs as [RunningGateway, RunningGateway];
      /** The change made while a's lookup of `k` is on the wire, its answer (the key as it was) held back until a has heard of the change; ms until `done` holds on both. */
      const race = async (k: string, change: () => Promise<void>, done: (r: RawResponse) => boolean): Promise<number> => {
        expect(await answered(b, k)).toBe(true);
        proxy.hold();
        const asked = proxy.sent(`gw:key:${sha256(k)}`);
        const first = call(a, k);
        await asked;
        const told = proxy.told(sha256(k));
        await change();
        const changedAt = Date.now();
        await told;
        proxy.release();
        const r = await first;
        expect(r.status === 200 && r.text === ANSWER, 'the lookup that was on the wire serves its own request').toBe(true);
        await until(async () => done(await call(a, k)) && done(await call(b, k)), 'the change in force on both', 5000);
        return Date.now() - changedAt;
      };
      const revokedMs = await race(raced.revoked, () => revokeKeyInStore(redis.url, 'revoked', false), (r) => r.status === 403);
      expect((await call(a, raced.revoked)).json()).toMatchObject({ error: { code: -32041, message: 'Invalid API key' } });
      const limitedMs = await race(raced.limited, () => setKeyInStore(redis.url, 'limited', { rateLimit: '1000/min' }), (r) => r.headers['x-ratelimit-limit'] === '1000');
      console.log(`racing a late lookup: a revoke refused on both replicas ${revokedMs} ms after it, a new rate limit in force on both ${limitedMs} ms after it`);
      expect(revokedMs).toBeLessThan(1000);
      expect(limitedMs).toBeLessThan(1000);
    } finally {
      await Promise.all(gs.map((g) => g.stop()));
      await proxy.close();
      await redis.stop();
    }
  });

  it('a frozen Redis: a key with a rate limit and a quota answers within 50 ms of a key without (p99), after the first second', { timeout: 60_000 }, async () => {
    const redis = await startRedis();
    let g: RunningGateway | null = null;
    try {
      g = await limitsRig.start({ env: { REDIS_URL: redis.url } });
      const url = g.url('rpc', '/ethereum');
      const limited = await call(g, key('limited'));
      expect(limited.headers['x-ratelimit-limit']).toBe('100000');
      const loader = load([{ url, key: key('limited') }, { url, key: key('free') }], 200, true);
      redis.proc.kill('SIGSTOP');
      const frozenAt = Date.now();
      try {
        while (Date.now() < frozenAt + 4000) await new Promise((r) => setTimeout(r, 100));
      } finally {
        redis.proc.kill('SIGCONT');
      }
      const loaded = await loader.stop();
      const p99 = (s: [number, number][]) => {
        const ms = s.filter(([t]) => t >= frozenAt + 1000 && t <= frozenAt + 4000).map(([, v]) => v).sort((x, y) => x - y);
        expect(ms.length).toBeGreaterThan(5);
        return ms[Math.ceil(ms.length * 0.99) - 1]!;
      };
      const [withLimits, without] = [p99(loaded.samples![0]!), p99(loaded.samples![1]!)];
      console.log(`frozen Redis: p99 ${withLimits} ms with a rate limit and a quota, ${without} ms without`);
      expect(loaded.bad).toEqual([]);
      expect(withLimits - without).toBeLessThanOrEqual(50);
    } finally {
      await g?.stop();
      await redis.stop();
    }
  });

  it('Redis restarted empty: keys_store_empty, 503 GW_AUTH_KEY_STORE_UNAVAILABLE (not 403) and the state on the status page, until the keys are imported again', { timeout: 60_000 }, async () => {
    let redis: RedisServer = await startRedis();
    let g: RunningGateway | null = null;
    try {
      await importKeys(redis.url);
      g = await launch(redis.url);
      expect(await answered(g, key('old0'))).toBe(true);
      const back = g.nextLog((e) => e.event === 'keys_store_empty' || e.event === 'keys_store_up', 10_000);
      await redis.stop();
      redis = await startRedis(redis.port);
      await back;
      const r = await call(g, key('new0'));
      expect(r.status).toBe(503);
      expect(r.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32045, message: 'Key store unavailable' } });
      expect((await call(g, key('not-a-key-at-all'))).status).toBe(503);
      const status = (await (await fetch(g.url('admin', '/status.json'))).json()) as { redis: Record<string, string> };
      expect(status.redis).toEqual({ keys: 'empty' });
      expect(await metricValue(g, 'gateway_redis_state', '{part="keys",state="empty"}')).toBe(1);
      expect(await g.waitForLog((e) => e.event === 'keys_store_empty', 0)).toMatchObject({ event: 'keys_store_empty' });
      // The keys imported again: served at once.
      const up = g.nextLog((e) => e.event === 'keys_store_up', 10_000);
      await importKeys(redis.url);
      await up;
      expect(await answered(g, key('new0'))).toBe(true);
      expect((await call(g, key('not-a-key-at-all'))).status).toBe(403);
    } finally {
      await g?.stop();
      await redis.stop();
    }
  });
});
