// Issue 43, rule 4: the score counts error answers. Pools of two stand-ins in
// front of one anvil (test/support/tweak-proxy.ts) under the default
// selection (by score): one answers every client read at once with a JSON-RPC
// error in a 200. An error the call did not cause (-32603 "Internal error")
// is a failure in the score's window, so that upstream is pushed out; one the
// call causes (-32602, an execution result) is not. Shares are counted over
// reads that reached the stand-ins, never timed: each wait is for the shares
// to move (until), with a generous bound.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startTweakProxy, type TweakProxy } from '../support/tweak-proxy.ts';

const KEY = newKey();
const ADDR = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

let anvil: Anvil;
let up: Gateway;
let gw: RunningGateway;
const S: Record<string, TweakProxy> = {};
const NAMES = ['I1', 'I2', 'C1', 'C2'];

const CHAINS: readonly Chain[] = [evmChain('internal', ['I1', 'I2']), evmChain('caused', ['C1', 'C2'])];

beforeAll(async () => {
  anvil = await startAnvil();
  const proxies = await Promise.all(NAMES.map(() => startTweakProxy(anvil.url)));
  NAMES.forEach((n, i) => (S[n] = proxies[i]!));
  up = await gateway({ name: 'issue-43-score', chains: CHAINS, keys: [{ id: 'score43', key: KEY }], standIns: { anvil, ...S } });
  gw = up.gw;
}, 60_000);

afterAll(() => up?.close());

const reads = (s: TweakProxy): number => s.count('eth_getBalance');

let nextId = 1;
/** `n` reads of the chain, eight at a time. */
async function drive(chain: string, n: number): Promise<void> {
  let left = n;
  const worker = async (): Promise<void> => {
    while (left > 0) {
      left--;
      const r = await request(gw.url('rpc', `/${chain}`), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'eth_getBalance', params: [ADDR, 'latest'] }),
      });
      expect(r.statusCode).toBe(200);
      await r.body.json();
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

/** The share of `n` reads of `chain` that reached `a` (of those that reached `a` or `b`). */
async function share(chain: string, a: TweakProxy, b: TweakProxy, n: number): Promise<number> {
  const a0 = reads(a);
  const b0 = reads(b);
  await drive(chain, n);
  const da = reads(a) - a0;
  const db = reads(b) - b0;
  return da / (da + db);
}

interface StatusUpstream {
  name: string;
  window: { calls: number; errorRate: number } | null;
}
async function upstreams(chain: string): Promise<StatusUpstream[]> {
  const r = await request(gw.url('admin', '/status.json'));
  const d = (await r.body.json()) as { chains: { path: string; upstreams: StatusUpstream[] }[] };
  return d.chains.find((c) => c.path === chain)!.upstreams;
}

describe('rule 4: the score counts error answers', () => {
  it('an upstream that answers every read at once with -32603 "Internal error" is pushed out (the other gets at least 90% of reads); errors the call causes are no failure', async () => {
    S.I1!.tweak = (a) => (a.rpcMethod === 'eth_getBalance' ? { error: { code: -32603, message: 'Internal error' } } : undefined);
    // The real node answers a little later than the failing one: by latency alone, the failing one would win.
    S.I2!.tweak = () => ({ delayMs: 5 });
    await until(async () => (await share('internal', S.I2!, S.I1!, 100)) >= 0.9, 'most reads on the upstream that answers', 60_000);
    expect(await share('internal', S.I2!, S.I1!, 200)).toBeGreaterThanOrEqual(0.9);
    // The window says why: its errors.
    const [i1] = await upstreams('internal');
    expect(i1!.window!.errorRate).toBeGreaterThan(0.5);

    // Control: errors the call causes (-32602, a revert) are no failure, the window of the upstream that gives them shows none.
    let n = 0;
    S.C1!.tweak = (a) =>
      a.rpcMethod !== 'eth_getBalance'
        ? undefined
        : n++ % 2 === 0
          ? { error: { code: -32602, message: 'invalid argument 0: hex string has length 3, want 40 for common.Address' } }
          : { error: { code: 3, message: 'execution reverted: Internal error' } };
    S.C2!.tweak = () => undefined;
    // Reads until the window of C1 has calls of its own.
    await until(
      async () => {
        await drive('caused', 40);
        const [c1] = await upstreams('caused');
        return c1!.window !== null && c1!.window.calls >= 10;
      },
      'a window for C1',
      60_000,
    );
    const [c1] = await upstreams('caused');
    expect(c1!.window!.errorRate).toBe(0);
  }, 180_000);
});
