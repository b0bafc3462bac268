// Issue 37, "one deadline per call": a read whose first node times out is
// retried on another node (retries: 1, the default) only within what is left
// of the call's timeoutMs, so the client gets the gateway's timeout at about
// timeoutMs, not after a second full timeoutMs on the other node (before the
// fix, each retry had a timeoutMs of its own: about twice). Two pools of two
// nodes that answer the call under test only after a minute (proxies in front
// of anvil and of the Blockbook stand-in, test/support/tweak-proxy.ts), no
// hedge: the retry is Forward's own (proxy.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil } from '../support/anvil.ts';
import { startTweakProxy, type TweakProxy } from '../support/tweak-proxy.ts';
import { startBlockbookStub } from '../support/blockbook-stub.ts';

const KEY = newKey();
const TIMEOUT_MS = 3000;
/**
 * The bound the answer must come within: timeoutMs, the coarse timer undici
 * times a head out with (about a second late at worst) and what a loaded
 * machine adds. Before the fix the answer took at least 2 x timeoutMs (6 s).
 */
const BOUND_MS = TIMEOUT_MS + 2000;
const NEVER_MS = 60_000;

let evm1: TweakProxy;
let evm2: TweakProxy;
let bb1: TweakProxy;
let bb2: TweakProxy;
let up: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  const [anvil, bb] = await Promise.all([startAnvil(), startBlockbookStub()]);
  [evm1, evm2, bb1, bb2] = await Promise.all([startTweakProxy(anvil.url), startTweakProxy(anvil.url), startTweakProxy(bb.url), startTweakProxy(bb.url)]);
  const limits = { timeoutMs: TIMEOUT_MS };
  up = await gateway({
    name: 'issue-37-deadline',
    chains: [
      { path: 'deadline', interface: 'evm-jsonrpc', methods: ['eth_chainId', 'eth_blockNumber', 'eth_getCode'], limits, upstreams: ['${EVM1}', '${EVM2}'] },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', limits, upstreams: ['${BB1}', '${BB2}'] },
    ],
    keys: [{ id: 'deadline', key: KEY }],
    standIns: { anvil, bb, evm1, evm2, bb1, bb2 },
    env: { EVM1: evm1.url, EVM2: evm2.url, BB1: `${bb1.url}/api`, BB2: `${bb2.url}/api` },
  });
  gw = up.gw;
}, 60_000);

afterAll(() => up?.close());

async function rpc(method: string, params: unknown[]): Promise<{ status: number; text: string; ms: number }> {
  const t0 = performance.now();
  const r = await request(gw.url('rpc', '/deadline'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
  });
  const text = await r.body.text();
  return { status: r.statusCode, text, ms: performance.now() - t0 };
}

async function get(path: string): Promise<{ status: number; text: string; ms: number }> {
  const t0 = performance.now();
  const r = await request(gw.url('explorer', `/bitcoin/v2/${path}`), { headers: { 'x-api-key': KEY } });
  const text = await r.body.text();
  return { status: r.statusCode, text, ms: performance.now() - t0 };
}

describe('one deadline per call: a retry after a timeout gets what is left of timeoutMs', () => {
  it(`EVM pool: a read both nodes never answer gets the JSON-RPC timeout error within timeoutMs (${TIMEOUT_MS} ms) and a margin, not twice`, async () => {
    await until(async () => (await rpc('eth_chainId', [])).status === 200, 'deadline serving');
    for (const p of [evm1, evm2]) p.tweak = (a) => (a.rpcMethod === 'eth_getCode' ? { delayMs: NEVER_MS, body: '{}' } : undefined);
    const a = await rpc('eth_getCode', ['0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6', 'latest']);
    expect(a.status, a.text).toBe(504);
    expect(JSON.parse(a.text)).toMatchObject({ jsonrpc: '2.0', error: { code: -32051 } });
    expect(evm1.count('eth_getCode') + evm2.count('eth_getCode'), 'asked of a node').toBeGreaterThanOrEqual(1);
    expect(a.ms, 'ms until the answer').toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(a.ms, 'ms until the answer').toBeLessThan(BOUND_MS);
  }, 30_000);

  it(`Blockbook pool: a read both nodes never answer gets Blockbook's timeout error within timeoutMs (${TIMEOUT_MS} ms) and a margin, not twice`, async () => {
    await until(async () => (await get('block/1')).status === 200, 'bitcoin serving');
    for (const p of [bb1, bb2]) p.tweak = (a) => (a.path.includes('/tx/') ? { delayMs: NEVER_MS, body: '{}' } : undefined);
    const a = await get(`tx/${'ab'.repeat(32)}`);
    expect(a.status, a.text).toBe(504);
    expect(JSON.parse(a.text)).toHaveProperty('error');
    expect(bb1.count('/tx/') + bb2.count('/tx/'), 'asked of a node').toBeGreaterThanOrEqual(1);
    expect(a.ms, 'ms until the answer').toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(a.ms, 'ms until the answer').toBeLessThan(BOUND_MS);
  }, 30_000);
});
