// The server file with WebSockets (issue 38) runs with plain node from a folder
// with no node_modules anywhere above it: ws is bundled, and its optional native
// add-ons (bufferutil, utf-8-validate) are left out, never looked for on disk.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { newKey, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { connect, wsUrl } from '../support/ws-client.ts';

const KEY = newKey();
let anvil: Anvil;
let rig: Gateway;
let gw: RunningGateway;
let dir = '';
let text = '';

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  rig = await gateway({
    name: 'ws-bundle',
    chains: [evmChain('live', ['ANVIL'], { methods: ['eth_chainId', 'eth_blockNumber'], websocket: true })],
    header: { admin: null, health: { intervalMs: 100, timeoutMs: 1000 }, methodSets: null },
    keys: [{ id: 'plain', key: KEY }],
    standIns: { ANVIL: anvil },
    start: false,
  });
  text = readFileSync(rig.built.bundle, 'utf8');
  // The server file and its keys, alone in a folder of the system's temp dir.
  dir = mkdtempSync(join(tmpdir(), 'gw-ws-bundle-'));
  for (const f of ['gateway.mjs', 'keys.yaml']) copyFileSync(join(rig.built.dir, f), join(dir, f));
  gw = await rig.start({ cwd: dir, bundle: 'gateway.mjs', nodeArgs: [] });
}, 60_000);

afterAll(async () => {
  await rig?.close();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('the server file with websocket: true', () => {
  it('bundles ws without its native add-ons', () => {
    expect(text).toContain('bufferutil is not bundled');
    expect(text).toContain('utf-8-validate is not bundled');
    expect(text).not.toMatch(/require\(["'](bufferutil|utf-8-validate|ws)["']\)/);
  });

  it('serves a socket from a folder with no node_modules above it', async () => {
    for (let d = dir; d !== dirname(d); d = dirname(d)) expect(existsSync(join(d, 'node_modules')), d).toBe(false);
    const s = await connect(wsUrl(gw.url('rpc', `/live/${KEY}`)));
    expect((await s.call('eth_chainId')).result).toBe('0x7a69');
    const sub = await s.subscribe('newHeads');
    await anvil.mine(1);
    const h = `0x${Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16).toString(16)}`;
    await s.until(() => s.of(sub).some((n) => n.result.number === h));
    await s.close();
  });
});
