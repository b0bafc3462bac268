// Multi-process mode (GATEWAY_WORKERS): workers share the listeners, the
// primary sums their metrics, passes SIGHUP and SIGTERM on, and exits 0.
import { describe, expect, it, onTestFinished } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { newKey, rawRequest, sha256 } from './harness.ts';
import { gateway } from './fixture.ts';
import { startAnvil } from '../support/anvil.ts';
import { freePort } from '../support/http.ts';

const KEY = newKey();

describe('GATEWAY_WORKERS=2', () => {
  it('serves from two workers started with the memory reducer off, sums their metrics on the primary’s admin listener, reloads keys and drains on signals', { timeout: 60_000 }, async () => {
    // Workers share one fixed port; pick one that is free now.
    const port = await freePort();
    // The primary is started with plain `node`: its workers get --no-memory-reducer all the same.
    const rig = await gateway({
      name: 'cluster',
      chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] }],
      header: { listeners: { rpc: { host: '127.0.0.1', port: '${RPC_PORT}' } }, health: null, methodSets: { evm: ['eth_chainId'] } },
      keys: [{ id: 'k', key: KEY }],
      standIns: { ETH_URL: startAnvil({ chainId: 1 }) },
      env: { RPC_PORT: String(port), GATEWAY_WORKERS: '2' },
      nodeArgs: [],
    });
    onTestFinished(() => rig.close());
    const { gw, built } = rig;
    const primary = await gw.waitForLog((e) => e.event === 'primary_started');
    await gw.waitForLog((e) => e.event === 'started' && gw.lines.filter((l) => l.includes('"event":"started"')).length === 2);
    const started = gw.lines.filter((l) => l.includes('"event":"started"')).map((l) => JSON.parse(l) as { memoryReducer: string });
    expect(started.map((s) => s.memoryReducer)).toEqual(['off', 'off']);
    expect(gw.lines.filter((l) => l.includes('memory_reducer_on'))).toEqual([]);
    for (let i = 0; i < 40; i++) {
      const r = await rawRequest(`http://127.0.0.1:${port}/ethereum/${KEY}`, { body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
      expect(r.json().result).toBe('0x1');
    }
    const adminPort = (primary.admin as { port: number }).port;
    const metrics = await rawRequest(`http://127.0.0.1:${adminPort}/metrics`);
    expect(metrics.text).toContain('gateway_requests_total{chain="ethereum",interface="evm-jsonrpc",method="eth_chainId",status="200"} 40');
    expect(metrics.text).toContain('gateway_upstream_requests_total{chain="ethereum",upstream="ethereum#0",outcome="ok"} 40');
    // The status page's figures are one worker's (of the build served), with the build and the workers.
    const status = await rawRequest(`http://127.0.0.1:${adminPort}/status.json`);
    expect(status.status).toBe(200);
    const doc = status.json();
    expect(doc.build.manifestSha256).toBe(sha256(readFileSync(join(built.dir, 'gateway.yaml'), 'utf8')));
    expect(doc.workers.count).toBe(2);
    expect(doc.workers.pids).toContain(doc.workers.shown);
    expect(doc.chains.map((c: { path: string }) => c.path)).toEqual(['ethereum']);
    // SIGHUP reaches both workers.
    const reloads = gw.nextLog((e) => e.event === 'keys_reloaded' && gw.lines.filter((l) => l.includes('"keys_reloaded"')).length >= 2);
    gw.proc.kill('SIGHUP');
    await reloads;
    expect(await gw.stop('SIGTERM')).toBe(0);
  });
});
