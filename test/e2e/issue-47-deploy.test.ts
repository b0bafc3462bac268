// Deploys without a dropped request (issue 47): GATEWAY_WORKERS=2, the server
// file replaced by an atomic rename and SIGHUP, under load from keep-alive
// HTTP clients and newHeads subscribers, with every answer checked, and the
// admin listener read throughout. The three kinds of file that cannot start
// are refused while the old workers serve on; a file with the same content
// reloads the keys only; two rolls in a row, the second asked for during the
// first; single-process mode says a restart is needed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from 'undici';
import { keysYaml, newKey, rawRequest, sha256, until, type Built, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { freePort } from '../support/http.ts';
import { connect, wsUrl } from '../support/ws-client.ts';

const run = promisify(execFile);
const KEY = newKey();
const NEXT = newKey();
const CLIENTS = 8;
const SUBSCRIBERS = 6;
const CALL = (id: number, method = 'eth_chainId', params: unknown[] = []) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

let anvil: Anvil;
let rpcPort: number;
/** a's, the one served (from a copy, as a deploy does); it holds the stand-ins. */
let rig: Gateway;
/** Builds: a (served first), b (a new chain and eth_getBalance allowed), c (b with another manifest), and three that cannot start. */
let a: Built, b: Built, c: Built, unsetVar: Built, portInUse: Built;
let heldPort: number;

const manifest = (opts: { methods: string[]; extraChain?: string; extraListener?: string; note?: string }) => `
version: 1
# ${opts.note ?? 'first'}
listeners:
  rpc: { host: 127.0.0.1, port: "\${RPC_PORT}" }
${opts.extraListener ?? ''}
admin: { host: 127.0.0.1, port: "0" }
keys: ./keys.yaml
health: { intervalMs: 200, timeoutMs: 2000 }
drainTimeoutMs: 8000
websocket: { pingIntervalMs: 600000 }
methodSets:
  evm: [${opts.methods.join(', ')}]
chains:
  - { path: ethereum, interface: evm-jsonrpc, listener: rpc, chainId: 1, methods: evm, websocket: true, upstreams: ["\${ETH_URL}"] }
${opts.extraChain ?? ''}
`;

const BASE = ['eth_chainId', 'eth_blockNumber', 'eth_subscribe', 'eth_unsubscribe'];

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1, args: ['--block-time', '1'] });
  rpcPort = await freePort();
  const held = createServer();
  await new Promise<void>((ok) => held.listen(0, '127.0.0.1', ok));
  heldPort = (held.address() as { port: number }).port;
  const built = async (name: string, text: string) => (await gateway({ name, manifest: text, start: false })).built;
  [rig, b, c, unsetVar, portInUse] = await Promise.all([
    gateway({ name: 'deploy-a', manifest: manifest({ methods: BASE }), standIns: { ETH_URL: anvil, held }, start: false }),
    built('deploy-b', manifest({ methods: [...BASE, 'eth_getBalance'], extraChain: '  - { path: second, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["${ETH_URL}"] }' })),
    built('deploy-c', manifest({ methods: [...BASE, 'eth_getBalance'], note: 'third', extraChain: '  - { path: second, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["${ETH_URL}"] }' })),
    built('deploy-unset', manifest({ methods: BASE, extraChain: '  - { path: third, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["${THIRD_CHAIN_URL}"] }' })),
    built(
      'deploy-port',
      manifest({ methods: BASE, extraListener: `  extra: { host: 127.0.0.1, port: "${'$'}{EXTRA_PORT}" }`, extraChain: '  - { path: third, interface: evm-jsonrpc, listener: extra, chainId: 1, methods: evm, upstreams: ["${ETH_URL}"] }' }),
    ),
  ]);
  a = rig.built;
}, 120_000);

afterAll(() => rig?.close());

/** Replaces the served file as ops do: a copy beside it, renamed over it. */
function deploy(target: string, bytes: Buffer | string): void {
  writeFileSync(`${target}.new`, bytes);
  renameSync(`${target}.new`, target);
}

interface Status {
  build: { manifestSha256: string };
  workers: { count: number; pids: number[]; sha256: string };
  chains: { path: string }[];
}

/** Keep-alive HTTP clients, each in a loop with short pauses; every answer is checked. */
function load(port: number) {
  const failures: string[] = [];
  let answered = 0;
  let closes = 0;
  let stop = false;
  const one = async (n: number): Promise<void> => {
    const client = new Client(`http://127.0.0.1:${port}`, { pipelining: 1, headersTimeout: 10_000, bodyTimeout: 10_000 });
    for (let i = 0; !stop; i++) {
      try {
        const r = await client.request({ path: '/ethereum', method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: CALL(i) });
        const text = await r.body.text();
        if (r.headers.connection === 'close') closes++;
        const doc = JSON.parse(text) as { id: number; result?: string };
        if (r.statusCode !== 200 || doc.id !== i || doc.result !== '0x1') failures.push(`client ${n}: ${r.statusCode} ${text}`);
        else answered++;
      } catch (err) {
        failures.push(`client ${n}: ${(err as Error & { code?: string }).code ?? ''} ${(err as Error).message}`);
      }
      // A client's pause between two requests: well under the drain's idle bound (process/drain.ts).
      await new Promise((r) => setTimeout(r, (n * 7 + i * 13) % 20));
    }
    await client.close();
  };
  const done = Promise.all(Array.from({ length: CLIENTS }, (_, n) => one(n)));
  return {
    failures,
    get answered() {
      return answered;
    },
    get closes() {
      return closes;
    },
    async stop() {
      stop = true;
      await done;
    },
  };
}

/** newHeads subscribers that reconnect at once when closed; each subscription's heads must follow one another. */
function subscribers(port: number) {
  const failures: string[] = [];
  const closes: number[][] = Array.from({ length: SUBSCRIBERS }, () => []);
  let heads = 0;
  let stop = false;
  const one = async (n: number): Promise<void> => {
    while (!stop) {
      let s;
      try {
        s = await connect(wsUrl(`http://127.0.0.1:${port}/ethereum`), { 'x-api-key': KEY });
      } catch (err) {
        failures.push(`subscriber ${n}: connect: ${(err as Error).message}`);
        return;
      }
      let sub: string;
      try {
        sub = await s.subscribe('newHeads');
      } catch (err) {
        failures.push(`subscriber ${n}: subscribe: ${(err as Error & { code?: string }).code ?? ''} ${(err as Error).message}`);
        return;
      }
      let last: number | null = null;
      const gaps = setInterval(() => {
        const list = s.of(sub);
        for (const note of list.splice(0)) {
          const number = Number((note.result as { number: string }).number);
          if (last !== null && number !== last + 1) failures.push(`subscriber ${n}: block ${number} after ${last}`);
          last = number;
          heads++;
        }
      }, 50);
      const closed = await Promise.race([s.closed, new Promise<null>((r) => { const t = setInterval(() => stop && (clearInterval(t), r(null)), 50); })]);
      clearInterval(gaps);
      if (closed === null) {
        await s.close();
        return;
      }
      closes[n]!.push(closed.code);
    }
  };
  const done = Promise.all(Array.from({ length: SUBSCRIBERS }, (_, n) => one(n)));
  return {
    failures,
    closes,
    get heads() {
      return heads;
    },
    async stop() {
      stop = true;
      await done;
    },
  };
}

/** /metrics and /status.json read in a loop: every answer 200, no series of gateway_requests_total ever lower. */
function admin(port: number) {
  const failures: string[] = [];
  const series = new Map<string, number>();
  const builds: string[] = [];
  let reads = 0;
  let stop = false;
  const loop = async (): Promise<void> => {
    while (!stop) {
      let m, s;
      try {
        [m, s] = await Promise.all([rawRequest(`http://127.0.0.1:${port}/metrics`), rawRequest(`http://127.0.0.1:${port}/status.json`)]);
      } catch (err) {
        failures.push(`admin: ${(err as Error & { code?: string }).code ?? ''} ${(err as Error).message}`);
        return;
      }
      if (m.status !== 200) failures.push(`/metrics ${m.status} ${m.text}`);
      if (s.status !== 200) failures.push(`/status.json ${s.status} ${s.text}`);
      else builds.push((s.json() as Status).build.manifestSha256);
      for (const line of m.text.split('\n')) {
        if (!line.startsWith('gateway_requests_total{') && !line.startsWith('gateway_upstream_requests_total{') && !line.startsWith('gateway_request_duration_seconds_count{')) continue;
        const at = line.lastIndexOf(' ');
        const name = line.slice(0, at);
        const value = Number(line.slice(at + 1));
        const before = series.get(name);
        if (before !== undefined && value < before) failures.push(`${name} went from ${before} to ${value}`);
        series.set(name, value);
      }
      reads++;
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const done = loop();
  return {
    failures,
    builds,
    series,
    get reads() {
      return reads;
    },
    async stop() {
      stop = true;
      await done;
    },
  };
}

describe('SIGHUP with GATEWAY_WORKERS=2', () => {
  it('rolls the workers onto a new file under load with no failed request, refuses the three files that cannot start, takes a SIGHUP during a roll after it', { timeout: 240_000 }, async () => {
    const file = join(a.dir, 'served.mjs');
    copyFileSync(a.bundle, file);
    writeFileSync(join(a.dir, 'keys.yaml'), keysYaml([{ id: 'k', key: KEY }]));
    const gw: RunningGateway = await rig.start({ bundle: file, env: { RPC_PORT: String(rpcPort), EXTRA_PORT: String(heldPort), GATEWAY_WORKERS: '2' } });
    const adminPort = ((await gw.waitForLog((e) => e.event === 'primary_started')).admin as { port: number }).port;
    const status = async (): Promise<Status> => (await rawRequest(`http://127.0.0.1:${adminPort}/status.json`)).json() as Status;
    const hashOf = (x: Built) => sha256(readFileSync(join(x.dir, 'gateway.yaml'), 'utf8'));
    const call = (path: string, method: string, params: unknown[] = []) => rawRequest(`http://127.0.0.1:${rpcPort}${path}`, { body: CALL(1, method, params), headers: { 'x-api-key': KEY } });
    const logs = (event: string) => gw.lines.filter((l) => l.includes(`"event":"${event}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
    // Whatever happens, the loops stop before the gateway does.
    const loops: { stop(): Promise<void> }[] = [];
    try {
      await gw.waitForLog(() => logs('started').length === 2);
      // A worker logs 'started' before the primary has its ready message: the primary's count is read once it has both.
      let first = await status();
      for (let tries = 0; first.workers.count < 2 && tries < 200; tries++) first = await new Promise<Status>((r) => setTimeout(() => void status().then(r), 50));
      expect(first.build.manifestSha256).toBe(hashOf(a));
      expect(first.workers.count).toBe(2);
      const pids = [...first.workers.pids].sort();

      const http = load(rpcPort);
      const ws = subscribers(rpcPort);
      const board = admin(adminPort);
      loops.push(http, ws, board);
      const progressed = (what: string, since: number) => until(async () => http.answered >= since + 100, `load progress ${what}`, 20_000);
      await progressed('at the start', 0);
      await until(async () => ws.heads >= SUBSCRIBERS * 2, 'heads to every subscriber', 20_000);

      // The same content under a new file: the keys reload, no roll.
      writeFileSync(join(a.dir, 'keys.yaml'), keysYaml([{ id: 'k', key: KEY }, { id: 'next', key: NEXT }]));
      const reloaded = gw.nextLog(() => logs('keys_reloaded').filter((e) => e.keys === 2).length >= 2);
      deploy(file, readFileSync(a.bundle));
      gw.proc.kill('SIGHUP');
      await reloaded;
      expect((await rawRequest(`http://127.0.0.1:${rpcPort}/ethereum`, { body: CALL(1), headers: { 'x-api-key': NEXT } })).status).toBe(200);
      expect(logs('rolling')).toEqual([]);
      expect([...(await status()).workers.pids].sort()).toEqual(pids);

      // Three files that cannot start: each refused, naming why; the same workers serve on.
      const refusals: [Buffer | string, RegExp][] = [
        [readFileSync(unsetVar.bundle), /THIRD_CHAIN_URL/],
        [`${readFileSync(a.bundle, 'utf8')}\nconst = 1;\n`, /SyntaxError/],
        [readFileSync(portInUse.bundle), new RegExp(`127\\.0\\.0\\.1:${heldPort}.*EADDRINUSE`)],
      ];
      for (const [bytes, reason] of refusals) {
        const refused = gw.nextLog((e) => e.event === 'reload_refused', 60_000);
        deploy(file, bytes);
        gw.proc.kill('SIGHUP');
        const line = await refused;
        expect(line.reason).toMatch(reason);
        expect(line.level).toBe('error');
        const now = await status();
        expect([...now.workers.pids].sort()).toEqual(pids);
        expect(now.build.manifestSha256).toBe(hashOf(a));
        await progressed('after a refusal', http.answered);
      }
      expect(logs('reload_refused')).toHaveLength(3);
      expect(logs('reloaded')).toHaveLength(0);
      expect((await call('/ethereum', 'eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest'])).json().error.code).toBe(-32601);

      // Two rolls in a row: b, and c asked for while b's roll is under way.
      const rolledB = gw.nextLog((e) => e.event === 'reloaded' && e.manifestSha256 === hashOf(b), 60_000);
      const rolledC = gw.nextLog((e) => e.event === 'reloaded' && e.manifestSha256 === hashOf(c), 90_000);
      const rolling = gw.nextLog((e) => e.event === 'rolling');
      const queued = gw.nextLog((e) => e.event === 'reload_queued');
      deploy(file, readFileSync(b.bundle));
      gw.proc.kill('SIGHUP');
      await rolling;
      deploy(file, readFileSync(c.bundle));
      gw.proc.kill('SIGHUP');
      await queued;
      const bLine = await rolledB;
      expect(bLine.ms).toBeLessThan(20_000);
      const cLine = await rolledC;
      expect(cLine.ms).toBeLessThan(20_000);
      await progressed('after the rolls', http.answered);
      await until(async () => ws.closes.every((c) => c.length >= 2), 'every subscriber closed by both rolls', 20_000);
      const headsThen = ws.heads;
      await until(async () => ws.heads >= headsThen + SUBSCRIBERS, 'heads to the resubscribed', 20_000);

      const [httpFailures, wsFailures] = [http.failures, ws.failures];
      await Promise.all([http.stop(), ws.stop(), board.stop()]);
      expect(httpFailures).toEqual([]);
      expect(wsFailures).toEqual([]);
      expect(board.failures).toEqual([]);
      // Each subscriber was closed once per roll, with 1001 (going away).
      expect(ws.closes).toEqual(Array.from({ length: SUBSCRIBERS }, () => [1001, 1001]));
      expect(http.answered).toBeGreaterThan(500);
      // Old workers closed keep-alive connections after an answer that said so.
      expect(http.closes).toBeGreaterThan(0);
      // The status page followed the build: a, then b (or straight to c), then c.
      const order = board.builds.map((h) => [hashOf(a), hashOf(b), hashOf(c)].indexOf(h));
      expect(order[0]).toBe(0);
      expect(order.at(-1)).toBe(2);
      expect(order.every((o, i) => o >= 0 && (i === 0 || o >= order[i - 1]!))).toBe(true);
      expect(board.reads).toBeGreaterThan(20);

      // The new build serves: its new chain, and its method list.
      const after = await status();
      expect(after.build.manifestSha256).toBe(hashOf(c));
      expect(after.chains.map((ch) => ch.path)).toEqual(['ethereum', 'second']);
      expect(after.workers.count).toBe(2);
      expect(after.workers.pids.filter((p) => pids.includes(p))).toEqual([]);
      expect((await call('/second', 'eth_chainId')).json().result).toBe('0x1');
      expect((await call('/ethereum', 'eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest'])).json().result).toMatch(/^0x/);
      // The counters kept what the retired workers counted: every answer of the load is in the sum.
      const metrics = (await rawRequest(`http://127.0.0.1:${adminPort}/metrics`)).text;
      const ok = Number(/gateway_requests_total\{chain="ethereum",interface="evm-jsonrpc",method="eth_chainId",status="200"\} (\d+)/.exec(metrics)?.[1]);
      expect(ok).toBeGreaterThanOrEqual(http.answered);
    } finally {
      await Promise.all(loops.map((l) => l.stop()));
      expect(await gw.stop('SIGTERM')).toBe(0);
    }
  });
});

describe('a first start that cannot start, with GATEWAY_WORKERS=2', () => {
  it('exits 1 with one start_failed line naming why, as one process would (no restart loop)', { timeout: 60_000 }, async () => {
    writeFileSync(join(unsetVar.dir, 'keys.yaml'), keysYaml([{ id: 'k', key: KEY }]));
    const r = await run(process.execPath, [unsetVar.bundle], { cwd: unsetVar.dir, timeout: 30_000, env: { PATH: process.env.PATH ?? '', ETH_URL: anvil.url, RPC_PORT: String(await freePort()), GATEWAY_WORKERS: '2' } }).then(
      () => ({ code: 0, stdout: '' }),
      (e: { code: number | null; stdout: string }) => e,
    );
    expect(r.code).toBe(1);
    const failed = r.stdout.split('\n').filter((l) => l.includes('"event":"start_failed"'));
    expect(failed).toHaveLength(1);
    expect(JSON.parse(failed[0]!).reason).toContain('THIRD_CHAIN_URL');
  });
});

describe('SIGHUP in one process', () => {
  it('reloads the keys and says once that a changed file needs a restart (restart_needed)', { timeout: 60_000 }, async () => {
    const file = join(a.dir, 'single.mjs');
    copyFileSync(a.bundle, file);
    writeFileSync(join(a.dir, 'keys.yaml'), keysYaml([{ id: 'k', key: KEY }]));
    const gw = await rig.start({ bundle: file, env: { RPC_PORT: '0' } });
    try {
      // Same content: keys only.
      let reloaded = gw.nextLog((e) => e.event === 'keys_reloaded');
      deploy(file, readFileSync(a.bundle));
      gw.proc.kill('SIGHUP');
      await reloaded;
      expect(gw.lines.filter((l) => l.includes('restart_needed'))).toEqual([]);
      reloaded = gw.nextLog((e) => e.event === 'keys_reloaded');
      const warned = gw.nextLog((e) => e.event === 'restart_needed');
      deploy(file, readFileSync(b.bundle));
      gw.proc.kill('SIGHUP');
      await reloaded;
      const line = await warned;
      expect(line.msg).toMatch(/restart|GATEWAY_WORKERS/);
      expect(gw.lines.filter((l) => l.includes('restart_needed'))).toHaveLength(1);
      // Still the first build: eth_getBalance is not on its list.
      const r = await rawRequest(gw.url('rpc', '/ethereum'), { body: CALL(1, 'eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest']), headers: { 'x-api-key': KEY } });
      expect(r.json().error.code).toBe(-32601);
    } finally {
      expect(await gw.stop('SIGTERM')).toBe(0);
    }
  });
});
