// The server file with WebSockets (issue 38) runs with plain node from a folder
// with no node_modules anywhere above it: ws is bundled, and its optional native
// add-ons (bufferutil, utf-8-validate) are left out, never looked for on disk.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { buildManifest, keysYaml, newKey, startGateway, type RunningGateway } from './harness.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { connect, wsUrl } from '../support/ws-client.ts';

const KEY = newKey();
let anvil: Anvil;
let gw: RunningGateway;
let dir = '';
let text = '';

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  const built = await buildManifest(
    'ws-bundle',
    `
version: 1
listeners:
  rpc: { host: 127.0.0.1, port: "0" }
keys: ./keys.yaml
health: { intervalMs: 100, timeoutMs: 1000 }
chains:
  - { path: live, interface: evm-jsonrpc, listener: rpc, methods: [eth_chainId, eth_blockNumber], websocket: true, upstreams: ["\${ANVIL}"] }
`,
  );
  text = readFileSync(built.bundle, 'utf8');
  dir = mkdtempSync(join(tmpdir(), 'gw-ws-bundle-'));
  copyFileSync(built.bundle, join(dir, 'gateway.mjs'));
  writeFileSync(join(dir, 'keys.yaml'), keysYaml([{ id: 'plain', key: KEY }]));
  gw = await startGateway({ cwd: dir, bundle: 'gateway.mjs', env: { ANVIL: anvil.url }, nodeArgs: [] });
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await anvil?.stop();
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
