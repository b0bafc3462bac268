// One key store for a fleet (issue 22): two gateway processes with `keys:` a
// redis:// URL on a real redis-server, keys managed with `gateway keys
// --store`. A key added works on both within 1 s, a key revoked stops on both
// within 1 s, under load, with no failed request for the other keys; and while
// Redis is down, keys looked up lately keep their answer, a key never seen is
// refused with 503, and a revoked key stays refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rawRequest, sha256, type Built, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { runCli } from '../support/cli.ts';
import { startFixedAnswer } from '../support/http.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const ANSWER = '{"jsonrpc":"2.0","id":1,"result":"0x10"}';
const CALL = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const fileKey = (i: number) => `store-test-key-${String(i).padStart(6, '0')}-abcdef`;

// Redis is the file's own, not a stand-in of the fixture: a case stops it and starts another on its port.
let redis: RedisServer;
let rig: Gateway;
let built: Built;

beforeAll(async () => {
  redis = await startRedis();
  rig = await gateway({
    name: 'keys-store',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', upstreams: ['${ETH_URL}'] }],
    header: { admin: null, keys: '${KEYS_URL}', keyCache: { size: 1000, ttlMs: 30000 }, health: { intervalMs: 60000, timeoutMs: 1000 }, methodSets: { evm: ['eth_blockNumber'] } },
    standIns: { ETH_URL: startFixedAnswer(ANSWER) },
    start: false,
  });
  built = rig.built;
  // Some keys come from a file, imported.
  const lines = ['keys:'];
  for (let i = 0; i < 50; i++) lines.push(`  - id: f${i}`, `    sha256: "${sha256(fileKey(i))}"`);
  writeFileSync(join(built.dir, 'import.yaml'), lines.join('\n') + '\n');
  const r = await runCli(['keys', 'import', join(built.dir, 'import.yaml'), '--store', redis.url]);
  expect(r.stderr).toContain('50 keys imported');
}, 60_000);

afterAll(async () => {
  await rig?.close();
  await redis?.stop();
});

const launch = (): Promise<RunningGateway> => rig.start({ env: { KEYS_URL: redis.url } });
const call = (gw: RunningGateway, key: string) => rawRequest(gw.url('rpc', '/ethereum'), { body: CALL, headers: { 'x-api-key': key } });

/** Milliseconds until `cond` holds on both gateways (polling every 10 ms, 5 s at most). */
async function msUntil(cond: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > 5000) throw new Error('not within 5 s');
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - t0;
}

/** Load from a process of its own: keep-alive loops over keys on both gateways until stdin closes; prints its figures as JSON. */
const LOADER = `
const http = require('node:http');
const [urls, keys] = process.argv.slice(1).map((a) => JSON.parse(a));
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
const body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
let n = 0; const failures = []; let stop = false;
process.stdin.on('end', () => (stop = true)); process.stdin.resume();
const one = (url, key) => new Promise((done) => {
  const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-api-key': key } }, (res) => {
    res.resume(); res.on('end', () => { n++; if (res.statusCode !== 200) failures.push(key + ': ' + res.statusCode); done(); });
  });
  req.on('error', (e) => { failures.push(key + ': ' + e.message); done(); });
  req.end(body);
});
const worker = async (w) => { for (let i = 0; !stop; i++) await one(urls[(w + i) % urls.length], keys[(w * 7 + i) % keys.length]); };
Promise.all(Array.from({ length: 6 }, (_, w) => worker(w))).then(() => { process.stdout.write(JSON.stringify({ requests: n, failures }) + '\\n'); agent.destroy(); });
`;

describe('keys in Redis, shared by two gateway processes', () => {
  it('a key added with the CLI works on both within 1 s, a key revoked stops on both within 1 s, under load, other keys unharmed', { timeout: 60_000 }, async () => {
    const [a, b] = await Promise.all([launch(), launch()]);
    try {
      expect((await call(a, fileKey(3))).status).toBe(200);
      expect((await call(b, fileKey(49))).status).toBe(200);
      const loader = spawn(process.execPath, ['-e', LOADER, JSON.stringify([a.url('rpc', '/ethereum'), b.url('rpc', '/ethereum')]), JSON.stringify([0, 1, 2, 10, 20].map(fileKey))], { stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      loader.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
      const added = await runCli(['keys', 'add', '--id', 'live', '--chains', 'ethereum', '--store', redis.url]);
      expect(added.code).toBe(0);
      const key = added.stdout.trim();
      const addMs = await msUntil(async () => (await call(a, key)).status === 200 && (await call(b, key)).status === 200);
      // Now revoke it: both must stop within 1 s, though both have it cached.
      expect((await runCli(['keys', 'revoke', '--id', 'live', '--store', redis.url])).code).toBe(0);
      const revokeMs = await msUntil(async () => (await call(a, key)).status === 403 && (await call(b, key)).status === 403);
      // A key both have cached as unknown works on both once it is imported.
      const late = 'store-test-key-late-0123456789';
      expect((await call(a, late)).status).toBe(403);
      expect((await call(b, late)).status).toBe(403);
      writeFileSync(join(built.dir, 'late.yaml'), `keys:\n  - id: late\n    sha256: "${sha256(late)}"\n`);
      expect((await runCli(['keys', 'import', join(built.dir, 'late.yaml'), '--store', redis.url])).code).toBe(0);
      const lateMs = await msUntil(async () => (await call(a, late)).status === 200 && (await call(b, late)).status === 200);
      expect(lateMs).toBeLessThan(1000);
      loader.stdin!.end();
      await new Promise((r) => loader.once('exit', r));
      const stats = JSON.parse(out.trim()) as { requests: number; failures: string[] };
      console.log(`key store: added key live on both after ${addMs} ms, revoked on both after ${revokeMs} ms; ${stats.requests} requests of other keys meanwhile, ${stats.failures.length} failed`);
      expect(addMs).toBeLessThan(1000);
      expect(revokeMs).toBeLessThan(1000);
      expect(stats.requests).toBeGreaterThan(0);
      expect(stats.failures).toEqual([]);
      const list = await runCli(['keys', 'list', '--store', redis.url]);
      expect(list.stdout).toMatch(/^live\tdisabled\tchains=ethereum\t/m);
      expect(list.stdout).not.toContain(key);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('Redis stopped under load: keys looked up lately keep working with no failed request, a key never seen gets 503, a revoked key stays refused', { timeout: 60_000 }, async () => {
    const g = await launch();
    try {
      const revoked = await runCli(['keys', 'add', '--id', 'gone-soon', '--store', redis.url]);
      const gone = revoked.stdout.trim();
      expect((await call(g, gone)).status).toBe(200);
      await runCli(['keys', 'revoke', '--id', 'gone-soon', '--store', redis.url]);
      await msUntil(async () => (await call(g, gone)).status === 403);
      expect((await call(g, fileKey(7))).status).toBe(200);
      // Under load on keys looked up lately (cached), from a process of its own.
      const cached = [7, 11, 12].map(fileKey);
      for (const k of cached) expect((await call(g, k)).status).toBe(200);
      const loader = spawn(process.execPath, ['-e', LOADER, JSON.stringify([g.url('rpc', '/ethereum')]), JSON.stringify(cached)], { stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      loader.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
      const down = g.waitForLog((e) => e.event === 'keys_store_down');
      await redis.stop();
      await down;
      expect((await call(g, fileKey(7))).status, 'a key looked up lately').toBe(200);
      loader.stdin!.end();
      await new Promise((r) => loader.once('exit', r));
      const stats = JSON.parse(out.trim()) as { requests: number; failures: string[] };
      expect(stats.requests).toBeGreaterThan(0);
      expect(stats.failures, 'cached keys under load while Redis stopped').toEqual([]);
      const never = await call(g, fileKey(8));
      expect(never.status, 'a key never seen').toBe(503);
      expect(never.json()).toMatchObject({ error: { code: -32045, message: 'Key store unavailable' } });
      expect((await call(g, gone)).status, 'a revoked key').toBe(403);
    } finally {
      await g.stop();
      redis = await startRedis(redis.port);
    }
  });
});
