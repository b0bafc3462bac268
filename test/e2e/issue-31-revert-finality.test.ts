// Issue 31, defect 3: a chain that goes back below its own finalized block
// (evm_revert, anvil_reset, a hardhat snapshot, a testnet reset under the same
// chain id, a resynced node) must not keep answering from the old history.
// anvil reports its finalized block 64 below the head: at 110 it is 46, so
// block 40 and a balance at block 40 are final and kept forever. evm_revert
// to a snapshot taken at block 10 puts anvil back at 10, finalized 0. Once the
// gateway has seen that (its own gauges), it must answer as anvil answers now:
// eth_blockNumber 10, block 40 null, the balance at 40 anvil's error; and it
// says so once, as a cache_reset log line with reason finalized_backwards and
// in gateway_cache_resets_total.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { fetchSeries } from '../support/metrics-text.ts';

const KEY = newKey();

let anvil: Anvil;
let proxy: RecordingProxy;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1 });
  proxy = await startRecordingProxy(anvil.url);
  rig = await gateway({
    name: 'issue-31-revert',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] }],
    header: { cache: { headPollMs: 100 }, health: { intervalMs: 60000, timeoutMs: 2000 } },
    keys: [{ id: 'revert', key: KEY }],
    standIns: { anvil, ETH_URL: proxy },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

const metric = (name: string): Promise<number> => metricValue(gw, name, '{chain="ethereum"}');

let nextId = 1;
async function rpc(method: string, params: unknown[]): Promise<{ xCache: string; body: { result?: unknown; error?: { code: number; message: string } } }> {
  const res = await fetch(gw.url('rpc', '/ethereum'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  return { xCache: res.headers.get('x-cache') ?? '', body: (await res.json()) as { result?: unknown } };
}

/** What anvil itself answers to a call now: its result or its error, without the id. */
async function fromAnvil(method: string, params: unknown[]): Promise<{ result?: unknown; error?: unknown }> {
  const r = await anvil.rpc(method, params);
  return r.error === undefined ? { result: r.result } : { error: r.error };
}
const same = (b: { result?: unknown; error?: unknown }): { result?: unknown; error?: unknown } => (b.error === undefined ? { result: b.result } : { error: b.error });

/** The gateway's figures of the head and finalized block match `head` and `finalized`. */
async function sees(head: number, finalized: number): Promise<void> {
  await until(async () => (await metric('gateway_cache_head_block')) === head && (await metric('gateway_cache_finalized_block')) === finalized, `the gateway sees head ${head}, finalized ${finalized}`);
}

const isReset = (e: Record<string, unknown>): boolean => e.event === 'cache_reset' && e.chain === 'ethereum' && e.reason === 'finalized_backwards';

describe('issue 31: a chain that goes back below its finalized block', () => {
  it('after evm_revert below finality, the gateway answers as anvil does now and logs and counts one cache_reset', { timeout: 40_000 }, async () => {
    const [rich] = (await anvil.rpc('eth_accounts')).result as string[];
    await anvil.mine(10);
    const snapshot = (await anvil.rpc('evm_snapshot')).result as string;
    await anvil.mine(100);
    // anvil's own view: head 110, finalized 46 (64 below), as the issue says.
    const finalized = (await anvil.rpc('eth_getBlockByNumber', ['finalized', false])).result as { number: string };
    expect(Number.parseInt(finalized.number, 16)).toBe(46);
    await sees(110, 46);

    // Final answers: kept forever (a HIT on repeat, nothing more reaches the node).
    const finals: Array<[string, unknown[]]> = [
      ['eth_getBlockByNumber', ['0x28', false]],
      ['eth_getBalance', [rich, '0x28']],
    ];
    for (const [m, p] of finals) {
      const first = await rpc(m, p);
      expect(first.xCache, `${m} first`).toBe('MISS');
      expect(same(first.body), m).toEqual(await fromAnvil(m, p));
      const seen = proxy.requests.length;
      expect((await rpc(m, p)).xCache, `${m} again`).toBe('HIT');
      expect(proxy.requests.length).toBe(seen);
    }
    expect((await rpc('eth_blockNumber', [])).body.result).toBe('0x6e');

    const resetsBefore = gw.lines.filter((l) => l.includes('"cache_reset"')).length;
    expect((await anvil.rpc('evm_revert', [snapshot])).result).toBe(true);
    expect((await anvil.rpc('eth_blockNumber')).result).toBe('0xa');
    await sees(10, 0);
    // The reset may be logged a moment after the gauges move: wait for it, a bounded while.
    const reset = await gw.waitForLog(isReset, 5000).catch(() => null);

    // Each answer as anvil gives it now.
    const number = await rpc('eth_blockNumber', []);
    expect.soft(number.body.result, 'eth_blockNumber follows the chain down').toBe('0xa');
    for (const [m, p] of finals) {
      const now = await rpc(m, p);
      expect.soft(same(now.body), `${m} ${JSON.stringify(p)} after the revert (X-Cache ${now.xCache})`).toEqual(await fromAnvil(m, p));
    }
    expect.soft(reset, 'a cache_reset log line with reason finalized_backwards').toMatchObject({ event: 'cache_reset', chain: 'ethereum', reason: 'finalized_backwards' });
    const resets = gw.lines.filter((l) => l.includes('"cache_reset"'));
    expect.soft(resets.length - resetsBefore, 'logged once').toBe(1);
    expect
      .soft(await fetchSeries(gw.url('admin', '/metrics'), 'gateway_cache_resets_total', { chain: 'ethereum', reason: 'finalized_backwards' }), 'gateway_cache_resets_total{reason="finalized_backwards"}')
      .toBe(1);
  });
});
