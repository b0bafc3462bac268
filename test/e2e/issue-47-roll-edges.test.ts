// Rolls at their edges (issue 47). A stop (SIGTERM to the primary: `systemctl
// stop`) while a roll's old worker still drains a request: the primary passes
// SIGTERM on to every worker, the draining one too, and that one must go on
// draining, not exit under the request it is answering; the primary starts no
// worker after the stop. And GATEWAY_WORKERS=1 (what `auto` gives on a
// one-core host, deploy/gateway.service's setting) rolls like any N.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keysYaml, newKey, rawRequest, until, type Built } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil } from '../support/anvil.ts';
import { freePort } from '../support/http.ts';
import { startSteerableProxy, type SteerableProxy } from '../support/steerable-proxy.ts';

const KEY = newKey();
let proxy: SteerableProxy;
/** a serves (from a copy, as a deploy does); b is only built, the file a roll brings. */
let rig: Gateway;
let a: Built, b: Built;

const manifest = (note: string) => `
version: 1
# ${note}
listeners:
  rpc: { host: 127.0.0.1, port: "\${RPC_PORT}" }
admin: { host: 127.0.0.1, port: "0" }
keys: ./keys.yaml
drainTimeoutMs: 20000
methodSets:
  evm: [eth_chainId, eth_blockNumber, eth_getBalance]
chains:
  - { path: ethereum, interface: evm-jsonrpc, listener: rpc, chainId: 1, methods: evm, upstreams: ["\${ETH_URL}"] }
`;

beforeAll(async () => {
  const anvil = await startAnvil({ chainId: 1 });
  proxy = await startSteerableProxy(anvil.url);
  [rig, b] = await Promise.all([
    gateway({ name: 'stop-roll-a', manifest: manifest('a'), standIns: { anvil, ETH_URL: proxy }, start: false }),
    gateway({ name: 'stop-roll-b', manifest: manifest('b'), start: false }).then((g) => g.built),
  ]);
  a = rig.built;
}, 120_000);

afterAll(() => rig?.close());

describe('SIGTERM during a roll', () => {
  it('an old worker draining a request when SIGTERM comes answers it before it exits, and the primary exits 0 without starting workers', { timeout: 120_000 }, async () => {
    writeFileSync(join(a.dir, 'keys.yaml'), keysYaml([{ id: 'k', key: KEY }]));
    const file = join(a.dir, 'served.mjs');
    copyFileSync(a.bundle, file);
    const rpcPort = await freePort();
    const gw = await rig.start({ bundle: file, env: { RPC_PORT: String(rpcPort), GATEWAY_WORKERS: '2' } });
    const count = (event: string) => gw.lines.filter((l) => l.includes(`"event":"${event}"`)).length;
    try {
      await gw.waitForLog(() => count('started') === 2, 60_000);
      const pid = gw.proc.pid!;
      const children = () => readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).length;
      // A request the upstream holds: the worker that took it drains until it is answered.
      const held = (address: string) => {
        const hold = proxy.holdNext((j) => (j as { params?: unknown[] }).params?.[0] === address, 60_000);
        const settled = rawRequest(`http://127.0.0.1:${rpcPort}/ethereum`, {
          headers: { 'x-api-key': KEY },
          body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_getBalance', params: [address, 'latest'] }),
        }).then(
          (r) => ({ status: r.status, text: r.text }),
          (err: Error) => ({ status: 0, text: err.message }),
        );
        return { hold, settled };
      };
      const answered = async (r: Promise<{ status: number; text: string }>) => {
        const { status, text } = await r;
        expect(status, text).toBe(200);
        expect(JSON.parse(text)).toMatchObject({ id: 7, result: expect.stringMatching(/^0x/) });
      };
      const onOld = held('0x0000000000000000000000000000000000000001');
      await onOld.hold.arrived;
      // The roll: both old workers stop accepting; the one without the request exits ('stopped'), the other drains.
      writeFileSync(`${file}.new`, readFileSync(b.bundle));
      renameSync(`${file}.new`, file);
      gw.proc.kill('SIGHUP');
      const retired = () => gw.lines.filter((l) => l.includes('"event":"draining"') && l.includes('"signal":"reload"')).length;
      await gw.waitForLog(() => retired() === 2 && count('stopped') === 1, 60_000);
      // A request on a new worker (only those accept now), held too.
      const onNew = held('0x0000000000000000000000000000000000000002');
      await onNew.hold.arrived;
      // Stop now: every worker gets SIGTERM. The new one without a request stops and goes; the two holding one wait.
      gw.proc.kill('SIGTERM');
      await gw.waitForLog(() => count('stopped') === 2, 60_000);
      await until(async () => children() <= 2, 'the idle new worker gone', 30_000);
      // The old one answers and goes; the roll ends ('reloaded') while the gateway stops.
      onOld.hold.release();
      await answered(onOld.settled);
      await gw.waitForLog((e) => e.event === 'reloaded', 30_000);
      onNew.hold.release();
      await answered(onNew.settled);
      // Then the primary exits, having started no worker after the stop.
      await until(async () => gw.proc.exitCode !== null, `the primary exits (its children: ${children()})`, 30_000);
      expect(await gw.exited).toBe(0);
    } finally {
      if (gw.proc.exitCode === null) await gw.stop('SIGKILL');
    }
  });
});

describe('GATEWAY_WORKERS=1', () => {
  it('runs a primary and one worker, and SIGHUP rolls it onto a changed file', { timeout: 120_000 }, async () => {
    writeFileSync(join(a.dir, 'keys.yaml'), keysYaml([{ id: 'k', key: KEY }]));
    const file = join(a.dir, 'one.mjs');
    copyFileSync(a.bundle, file);
    const rpcPort = await freePort();
    const gw = await rig.start({ bundle: file, env: { RPC_PORT: String(rpcPort), GATEWAY_WORKERS: '1' } });
    try {
      expect(await gw.waitForLog((e) => e.event === 'primary_started')).toMatchObject({ workers: 1 });
      writeFileSync(`${file}.new`, readFileSync(b.bundle));
      renameSync(`${file}.new`, file);
      const rolled = gw.nextLog((e) => e.event === 'reloaded', 60_000);
      gw.proc.kill('SIGHUP');
      expect((await rolled).pids).toHaveLength(1);
      const r = await rawRequest(`http://127.0.0.1:${rpcPort}/ethereum`, { headers: { 'x-api-key': KEY }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }) });
      expect(r.json()).toMatchObject({ id: 1, result: '0x1' });
      expect(await gw.stop('SIGTERM')).toBe(0);
    } finally {
      if (gw.proc.exitCode === null) await gw.stop('SIGKILL');
    }
  });
});
