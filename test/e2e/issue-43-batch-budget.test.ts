// Issue 43, rule 8: a batch costs its calls against `rateLimit` (the plans a
// rate stands for count calls, not HTTP requests). Anvil behind counting
// proxies (test/support/counting-proxy.ts, which count each request's calls),
// on a chain of one upstream and a pool, each upstream with `rateLimit: 5/s`.
// Clients send batches of 20 reads every 200 ms; the calls that reach each
// node in any one second stay within the budget (rate × 1.1 + 1, and a call of
// slack for a poll's batch), and every call of every batch is answered in its
// slot: anvil's balance, or -32005 "every upstream throttled" with its own id.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { newKey, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.ts';

const KEY = newKey();
const ADDR = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

let anvil: Anvil;
let rig: Gateway;
let gw: RunningGateway;
const C: Record<string, CountingProxy> = {};
const NAMES = ['ONE', 'P1', 'P2'];

beforeAll(async () => {
  anvil = await startAnvil();
  const meters = await Promise.all(NAMES.map(() => startCountingProxy(anvil.url)));
  NAMES.forEach((n, i) => (C[n] = meters[i]!));
  rig = await gateway({
    name: 'issue-43-batch-budget',
    chains: [
      { path: 'one', interface: 'evm-jsonrpc', upstreams: [{ url: '${ONE}', rateLimit: '5/s' }] },
      { path: 'pool', interface: 'evm-jsonrpc', upstreams: [{ url: '${P1}', rateLimit: '5/s' }, { url: '${P2}', rateLimit: '5/s' }] },
    ],
    header: { health: { intervalMs: 1000, timeoutMs: 2000 } },
    keys: [{ id: 'batch43', key: KEY }],
    standIns: { anvil, ...C },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

let nextId = 1;

/** One client batch of `n` reads; checks that every call is answered in its slot, with its id; returns how many got a balance. */
async function batch(chain: string, n: number, balance: string): Promise<number> {
  const calls = Array.from({ length: n }, () => ({ jsonrpc: '2.0', id: nextId++, method: 'eth_getBalance', params: [ADDR, 'latest'] }));
  const r = await request(gw.url('rpc', `/${chain}`), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: JSON.stringify(calls) });
  const text = await r.body.text();
  const doc = JSON.parse(text) as unknown;
  expect(Array.isArray(doc), text).toBe(true);
  const items = doc as { id: number; result?: string; error?: { code: number } }[];
  expect(items.map((i) => i.id).sort((a, b) => a - b)).toEqual(calls.map((c) => c.id));
  // Every call refused: the batch fails as one call does (429), one -32005 per call with its id (issue 43 rule 11).
  if (r.statusCode === 429) {
    for (const it of items) expect(it.error?.code, text).toBe(-32005);
    return 0;
  }
  expect(r.statusCode, text).toBe(200);
  let ok = 0;
  for (const it of items) {
    if (it.result !== undefined) {
      expect(it.result).toBe(balance);
      ok++;
    } else expect(it.error?.code, JSON.stringify(it)).toBe(-32005);
  }
  return ok;
}

/** Batches of 20 every 200 ms for three seconds; returns the calls answered with a balance. */
async function drive(chain: string): Promise<number> {
  const balance = (await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result as string;
  const sent: Promise<number>[] = [];
  for (let i = 0; i < 15; i++) {
    sent.push(batch(chain, 20, balance));
    await new Promise((r) => setTimeout(r, 200));
  }
  return (await Promise.all(sent)).reduce((a, b) => a + b, 0);
}

describe('rule 8: a batch costs its calls against rateLimit', () => {
  it('a chain of one upstream at 5/s: batches of 20 every 200 ms put no more than the budget of calls a second through; some calls are answered', async () => {
    const from = Date.now();
    const ok = await drive('one');
    expect(ok).toBeGreaterThan(0);
    expect(C.ONE!.busiestSecond(from, true)).toBeLessThanOrEqual(5 * 1.1 + 1 + 4);
  }, 60_000);

  it('a pool of two at 5/s each: the same, for each upstream', async () => {
    const from = Date.now();
    const ok = await drive('pool');
    expect(ok).toBeGreaterThan(0);
    for (const n of ['P1', 'P2']) expect(C[n]!.busiestSecond(from, true), n).toBeLessThanOrEqual(5 * 1.1 + 1 + 4);
  }, 60_000);
});
