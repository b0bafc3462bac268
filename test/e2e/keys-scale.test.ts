// Keys files at scale (issue 22), against the emitted server: a keys file
// mounted from a Kubernetes Secret (updated by swapping the `..data` symlink,
// not by writing the file) is picked up without a SIGHUP; a large file is
// reloaded under load with no failed request, answering while it reloads; and the CLI's
// atomic rewrite is never read half-written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { rawRequest, sha256, type Built, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { runCli } from '../support/cli.ts';
import { startFixedAnswer } from '../support/http.ts';

const ANSWER = '{"jsonrpc":"2.0","id":1,"result":"0x10"}';
const CALL = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const keyOf = (i: number) => `scale-test-key-${String(i).padStart(9, '0')}`;

/** A node that answers every call with ANSWER, on a free loopback port it prints. */
const UPSTREAM = `
const body = '${ANSWER}';
const s = require('node:http').createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body)); });
s.listen(0, '127.0.0.1', () => process.stdout.write('http://127.0.0.1:' + s.address().port + '\\n'));
`;

/**
 * The load: 8 keep-alive loops over the given keys until stdin closes; prints
 * `running` once under way; each `mark` line on stdin notes how many answers
 * it had then; at the end it prints its figures as JSON.
 */
const LOADER = `
const http = require('node:http');
const [url, keysJson] = process.argv.slice(1);
const keys = JSON.parse(keysJson);
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
const body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const lat = []; const failures = []; const marks = []; let stop = false; let announced = false;
process.stdin.setEncoding('utf8').on('data', (c) => { for (const l of c.split('\\n')) if (l === 'mark') marks.push(lat.length); });
process.stdin.on('end', () => (stop = true));
const one = (key) => new Promise((done) => {
  const t0 = performance.now();
  const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-api-key': key } }, (res) => {
    res.resume();
    res.on('end', () => { lat.push(performance.now() - t0); if (res.statusCode !== 200) failures.push(key + ': ' + res.statusCode); done(); });
  });
  req.on('error', (e) => { failures.push(key + ': ' + e.message); done(); });
  req.end(body);
});
const worker = async (w) => { for (let i = 0; !stop; i++) { await one(keys[(w + i) % keys.length]); if (!announced && lat.length > 200) { announced = true; process.stdout.write('running\\n'); } } };
Promise.all(Array.from({ length: 8 }, (_, w) => worker(w))).then(() => {
  const s = [...lat].sort((a, b) => a - b);
  process.stdout.write(JSON.stringify({ requests: lat.length, failures, marks, p99: s[Math.floor(s.length * 0.99)], max: s[s.length - 1] }) + '\\n');
  agent.destroy();
});
`;

let rig: Gateway;
let built: Built;

beforeAll(async () => {
  rig = await gateway({
    name: 'keys-scale',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', upstreams: ['${ETH_URL}'] }],
    header: { admin: null, health: { intervalMs: 60000, timeoutMs: 1000 }, methodSets: { evm: ['eth_blockNumber'] } },
    standIns: { ETH_URL: startFixedAnswer(ANSWER) },
    start: false,
  });
  built = rig.built;
}, 60_000);

afterAll(() => rig?.close());

/** A keys file of the keys with these numbers. */
function keysFile(numbers: Iterable<number>): string {
  const lines = ['keys:'];
  for (const i of numbers) lines.push(`  - id: k${i}`, `    sha256: "${sha256(keyOf(i))}"`);
  return lines.join('\n') + '\n';
}

const call = (gw: RunningGateway, key: string) => rawRequest(gw.url('rpc', '/ethereum'), { body: CALL, headers: { 'x-api-key': key } });

describe('keys file from a Kubernetes Secret or ConfigMap', () => {
  it('a swap of the ..data symlink is picked up without a SIGHUP', { timeout: 30_000 }, async () => {
    const dir = join(built.dir, 'secret');
    mkdirSync(join(dir, '..2026_11_25_a'), { recursive: true });
    writeFileSync(join(dir, '..2026_11_25_a', 'keys.yaml'), keysFile([1, 2]));
    symlinkSync('..2026_11_25_a', join(dir, '..data'));
    symlinkSync('..data/keys.yaml', join(dir, 'keys.yaml'));
    const gw = await rig.start({ env: { GATEWAY_KEYS_FILE: join(dir, 'keys.yaml') } });
    try {
      expect((await call(gw, keyOf(1))).status).toBe(200);
      expect((await call(gw, keyOf(3))).status).toBe(403);
      // What the kubelet does: a new timestamped directory, a new symlink beside ..data, renamed over it.
      mkdirSync(join(dir, '..2026_11_25_b'));
      writeFileSync(join(dir, '..2026_11_25_b', 'keys.yaml'), keysFile([2, 3]));
      symlinkSync('..2026_11_25_b', join(dir, '..data_tmp'));
      const reloaded = gw.nextLog((e) => e.event === 'keys_reloaded' && e.keys === 2 && e.reason === 'file changed');
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      await reloaded;
      expect((await call(gw, keyOf(3))).status).toBe(200);
      expect((await call(gw, keyOf(2))).status).toBe(200);
      expect((await call(gw, keyOf(1))).status, 'the key the new Secret left out').toBe(403);
    } finally {
      await gw.stop();
    }
  });
});

describe('a large keys file', () => {
  const N = 300_000;

  it(`reloads ${N.toLocaleString('en')} keys under load: no request fails, requests go on while it loads, and the change takes effect`, { timeout: 120_000 }, async () => {
    const file = join(built.dir, 'large.yaml');
    const all = Array.from({ length: N }, (_, i) => i);
    writeFileSync(file, keysFile(all));
    // The next version, made now: making it during the load would stall this process's own requests.
    const next = keysFile([...all.slice(0, N - 1), N]);
    // The node answers from a process of its own too: this one is busy with the test.
    const up = spawn(process.execPath, ['-e', UPSTREAM], { stdio: ['pipe', 'pipe', 'inherit'] });
    const upUrl = await new Promise<string>((ok) => up.stdout!.setEncoding('utf8').once('data', (c: string) => ok(c.trim())));
    const gw = await rig.start({ env: { ETH_URL: upUrl, GATEWAY_KEYS_FILE: file } });
    try {
      // Load from a process of its own (keep-alive, 8 at once), so this process's work (the test runner reading
      // the gateway's log lines) does not count in the latencies. Keys spread over the file, in both versions of it.
      const steady = [0, 1, 2, 1000, 54_321, 150_000, 299_998].map(keyOf);
      const loader = spawn(process.execPath, ['-e', LOADER, gw.url('rpc', '/ethereum'), JSON.stringify(steady)], { stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      loader.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
      // Wait until the load runs, then replace the file atomically: one key out (N-1), one key in (N).
      while (!out.includes('running')) await new Promise((r) => setTimeout(r, 10));
      await writeFile(`${file}.tmp`, next);
      const reloaded = gw.nextLog((e) => e.event === 'keys_reloaded' && e.keys === N, 60_000);
      loader.stdin!.write('mark\n');
      await rename(`${file}.tmp`, file);
      await reloaded;
      loader.stdin!.write('mark\n');
      loader.stdin!.end();
      await new Promise((r) => loader.once('exit', r));
      const stats = JSON.parse(out.slice(out.lastIndexOf('{'))) as { requests: number; failures: string[]; marks: number[]; p99: number; max: number };
      const during = stats.marks[1]! - stats.marks[0]!;
      // Figures only: the latency goal (p99 under 50 ms during a reload of 1M keys) is a benchmark's (npm run bench:extra).
      console.log(`reload of ${N} keys under load: ${stats.requests} requests, ${during} of them while it reloaded, p99 ${stats.p99.toFixed(1)} ms, max ${stats.max.toFixed(1)} ms`);
      expect(stats.failures).toEqual([]);
      expect(during, 'requests were answered while the file reloaded').toBeGreaterThan(10);
      expect((await call(gw, keyOf(N))).status).toBe(200);
      expect((await call(gw, keyOf(N - 1))).status).toBe(403);
    } finally {
      await gw.stop();
      up.kill();
    }
  });

  it('`gateway keys add` rewrites the file atomically: the running server never reads half of it', { timeout: 120_000 }, async () => {
    const file = join(built.dir, 'cli.yaml');
    writeFileSync(file, keysFile(Array.from({ length: 20_000 }, (_, i) => i)));
    const gw = await rig.start({ env: { GATEWAY_KEYS_FILE: file } });
    try {
      const added: string[] = [];
      for (let i = 0; i < 3; i++) {
        const reloaded = gw.nextLog((e) => e.event === 'keys_reloaded' && e.keys === 20_001 + i, 60_000);
        const r = await runCli(['keys', 'add', '--id', `added-${i}`, '--file', file]);
        expect(r.code, r.stderr).toBe(0);
        added.push(r.stdout.trim());
        await reloaded;
      }
      for (const k of added) expect((await call(gw, k)).status).toBe(200);
      expect((await call(gw, keyOf(19_999))).status).toBe(200);
      expect(gw.lines.some((l) => l.includes('"keys_reload_failed"')), 'a reload read a half-written file').toBe(false);
    } finally {
      await gw.stop();
    }
  });
});
