// Issue 39, selection by score: pools of two stand-ins in front of one anvil
// (test/support/tweak-proxy.ts), whose answers a test makes slow or fail a
// share of. The tests drive steady traffic through the gateway, count what
// reached each stand-in, and assert the shares over counted requests (with
// bounds a loaded machine still meets), never a time: each waits (until) for
// the shares to move, with a generous bound, then counts a further stretch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { chromium } from 'playwright-core';
import { newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startTweakProxy, type TweakProxy } from '../support/tweak-proxy.ts';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.ts';

const KEY = newKey();
const ADDR = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

let anvil: Anvil;
let up: Gateway;
let gw: RunningGateway;
const S: Record<string, TweakProxy> = {};
const NAMES = ['L1', 'L2', 'F1', 'F2', 'W1', 'W2'];
/** Budgeted stand-ins (and one without a budget beside them), counting every request, polls included. */
const C: Record<string, CountingProxy> = {};
const METERED = ['B1', 'B2', 'O1', 'O2'];

const CHAINS: readonly Chain[] = [
  evmChain('latency', ['L1', 'L2']),
  evmChain('failing', ['F1', 'F2']),
  evmChain('weighted', ['W1', 'W2'], { selection: 'weighted' }),
  { path: 'budget', interface: 'evm-jsonrpc', upstreams: [{ url: '${B1}', rateLimit: '20/s' }, '${B2}'] },
  { path: 'overbudget', interface: 'evm-jsonrpc', upstreams: [{ url: '${O1}', rateLimit: '5/s' }, { url: '${O2}', rateLimit: '300/min' }] },
];

beforeAll(async () => {
  anvil = await startAnvil();
  const proxies = await Promise.all(NAMES.map(() => startTweakProxy(anvil.url)));
  NAMES.forEach((n, i) => (S[n] = proxies[i]!));
  const meters = await Promise.all(METERED.map(() => startCountingProxy(anvil.url)));
  METERED.forEach((n, i) => (C[n] = meters[i]!));
  up = await gateway({ name: 'issue-39-score', chains: CHAINS, keys: [{ id: 'score', key: KEY }], standIns: { anvil, ...S, ...C } });
  gw = up.gw;
}, 60_000);

afterAll(() => up?.close());

/** Client reads that reached a stand-in. */
const reads = (s: TweakProxy): number => s.count('eth_getBalance');

/** A stand-in answers every client read this many ms late. */
const slow = (ms: number) => () => ({ delayMs: ms });

let nextId = 1;
/** `n` reads of the chain, eight at a time; returns every answer's status and result. */
async function drive(chain: string, n: number): Promise<Driven[]> {
  const out: Driven[] = [];
  let left = n;
  const worker = async (): Promise<void> => {
    while (left > 0) {
      left--;
      const r = await request(gw.url('rpc', `/${chain}`), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'eth_getBalance', params: [ADDR, 'latest'] }),
      });
      const j = (await r.body.json()) as { result?: unknown; error?: { code?: number } };
      out.push({ status: r.statusCode, result: j.result, error: j.error, retryAfter: r.headers['retry-after'] });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return out;
}

interface Driven {
  status: number;
  result: unknown;
  error: { code?: number } | undefined;
  retryAfter: unknown;
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

/** Drives traffic until a stretch of 100 reads sends at least `min` of them to `a`. */
async function untilShare(chain: string, a: TweakProxy, b: TweakProxy, min: number, what: string): Promise<void> {
  await until(async () => (await share(chain, a, b, 100)) >= min, what, 60_000);
}

interface StatusUpstream {
  name: string;
  score: number | null;
  rank: number | null;
  preferred: boolean | null;
  window: { calls: number; latencyMs: number; errorRate: number; throttleRate: number; lag: number | null } | null;
  pollsPerSecond: number | null;
}
async function status(chain: string): Promise<{ selection: string; upstreams: StatusUpstream[] }> {
  const r = await request(gw.url('admin', '/status.json'));
  const d = (await r.body.json()) as { chains: { path: string; selection: string; upstreams: StatusUpstream[] }[] };
  return d.chains.find((c) => c.path === chain)!;
}

describe('selection by score', () => {
  it('sends at least 80% of reads to the fast one of two equal primaries, follows when they swap latencies, and never starves the slow one', async () => {
    S.L1!.tweak = slow(5);
    S.L2!.tweak = slow(80);
    await untilShare('latency', S.L1!, S.L2!, 0.8, 'most reads on the fast upstream L1');
    // A stretch of steady traffic: at least 80% on the fast one, and the slow one still probed.
    const a1 = reads(S.L2!);
    expect(await share('latency', S.L1!, S.L2!, 400)).toBeGreaterThanOrEqual(0.8);
    expect(reads(S.L2!) - a1).toBeGreaterThan(0);

    // status.json: the fast one ranks first, with the window's figures behind its score.
    const st = await status('latency');
    expect(st.selection).toBe('score');
    const [u1, u2] = st.upstreams;
    expect(u1!.rank).toBe(1);
    expect(u2!.rank).toBe(2);
    expect(u1!.preferred).toBe(true);
    expect(u2!.preferred).toBe(false);
    expect(typeof u1!.score).toBe('number');
    expect(u1!.score!).toBeLessThan(u2!.score!);
    expect(u1!.window!.latencyMs).toBeLessThan(u2!.window!.latencyMs);
    expect(u2!.window!.latencyMs).toBeGreaterThanOrEqual(80);
    expect(u1!.window!.errorRate).toBe(0);
    expect(u1!.window!.throttleRate).toBe(0);

    // They swap: traffic follows.
    S.L1!.tweak = slow(80);
    S.L2!.tweak = slow(5);
    await untilShare('latency', S.L2!, S.L1!, 0.8, 'most reads on L2 once it is the fast one');
    const b1 = reads(S.L1!);
    expect(await share('latency', S.L2!, S.L1!, 400)).toBeGreaterThanOrEqual(0.8);
    expect(reads(S.L1!) - b1).toBeGreaterThan(0);
    expect((await status('latency')).upstreams[1]!.rank).toBe(1);
  }, 240_000);

  it('the status page (Chromium) says why each upstream ranks where it does', async () => {
    // After the swap above: L2 (latency#1) is the fast one, L1 (latency#0) only probed; with no traffic since, the scores stand.
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
    try {
      const page = await browser.newPage();
      await page.goto(gw.url('admin', '/'));
      const cell = (name: string, field: string) => page.locator(`tr[data-upstream="${name}"] [data-field="${field}"]`);
      await cell('latency#1', 'rank').waitFor();
      expect(await cell('latency#1', 'rank').textContent()).toMatch(/^#1 preferred · score [\d.]+ = [\d.]+ ms × \(1 \+ 20 × 0\.0% errors \+ 20 × 0\.0% throttled\) · over \d+ calls in \d+ s$/);
      const slowOne = await cell('latency#0', 'rank').textContent();
      expect(slowOne).toMatch(/^#2 probed only · score (\d+) = (\d+) ms × /);
      // And the band it is out of: the best score, the fast one's.
      const fastScore = /score ([\d.]+)/.exec((await cell('latency#1', 'rank').textContent())!)![1];
      expect(slowOne).toMatch(/ · out of the band: over 1\.5 × the best score \([\d.]+\) to come in, 2 × to stay$/);
      expect(slowOne).toContain(`the best score (${fastScore})`);
      expect(Number(/= (\d+) ms/.exec(slowOne!)![1])).toBeGreaterThanOrEqual(80);
      expect(await page.locator('tbody[data-chain="weighted"] tr.chain [data-field="selection"]').textContent()).toBe('weighted round-robin');
      expect(await cell('weighted#0', 'rank').textContent()).toBe('–');
      // What the poller costs each upstream, a second.
      expect(await cell('latency#0', 'polls').textContent()).toMatch(/^[\d.]+\/s$/);
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('pushes out an upstream that fails 30% of calls, its failed reads retried elsewhere, the client seeing none', async () => {
    const balance = (await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result;
    let n = 0;
    // Three in ten client reads get a load balancer's 502 (nginx's page), spread out.
    S.F1!.tweak = () => [0, 3, 6].includes(n++ % 10) ? { status: 502, body: '<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>' } : { delayMs: 2 };
    S.F2!.tweak = slow(2);
    const answers: Driven[] = [];
    await until(
      async () => {
        const f1 = reads(S.F1!);
        const f2 = reads(S.F2!);
        answers.push(...(await drive('failing', 100)));
        return (reads(S.F1!) - f1) / (reads(S.F1!) - f1 + reads(S.F2!) - f2) < 0.25;
      },
      'the failing upstream F1 under 25% of reads',
      60_000,
    );
    const f1 = reads(S.F1!);
    const f2 = reads(S.F2!);
    answers.push(...(await drive('failing', 400)));
    expect((reads(S.F1!) - f1) / (reads(S.F1!) - f1 + reads(S.F2!) - f2)).toBeLessThan(0.25);
    // Every read answered, with anvil's own balance: the 502s were retried on F2.
    expect(answers.filter((a) => a.status !== 200 || a.result !== balance)).toEqual([]);
    const st = await status('failing');
    expect(st.upstreams[0]!.rank).toBe(2);
    expect(st.upstreams[0]!.window!.errorRate).toBeGreaterThan(0);
  }, 180_000);

  it('selection: weighted keeps plain weighted round-robin: equal weights, equal shares, whatever the latency', async () => {
    S.W1!.tweak = slow(5);
    S.W2!.tweak = slow(80);
    // Long enough for a scorer (were there one) to have pushed W2 out.
    const shares: number[] = [];
    for (let i = 0; i < 4; i++) shares.push(await share('weighted', S.W1!, S.W2!, 200));
    for (const s of shares) {
      expect(s).toBeGreaterThanOrEqual(0.4);
      expect(s).toBeLessThanOrEqual(0.6);
    }
    const st = await status('weighted');
    expect(st.selection).toBe('weighted');
    expect(st.upstreams.map((u) => u.rank)).toEqual([null, null]);
  }, 120_000);
});

describe('per-upstream budget', () => {
  it('holds an upstream with rateLimit 20/s within 20 × 1.1 + 2 requests in any second, polls included, under a load far above it; the rest goes to the other, the client sees no error', async () => {
    const balance = (await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result;
    const from = Date.now();
    const b1 = C.B1!.arrivals.length;
    // Three seconds of load at least.
    const answers: Driven[] = [];
    while (Date.now() - from < 3000) answers.push(...(await drive('budget', 300)));
    const seconds = (Date.now() - from) / 1000;
    expect(answers.filter((a) => a.status !== 200 || a.result !== balance)).toEqual([]);
    const got = C.B1!.arrivals.slice(b1).filter((a) => !a.poll).length;
    // The load was above the budget, B1 took at most its share of it, and it did take calls.
    expect(answers.length / seconds).toBeGreaterThan(20 * 1.1 + 2);
    expect(got).toBeGreaterThan(0);
    expect(got).toBeLessThanOrEqual(Math.ceil(seconds + 1) * (20 * 1.1 + 2));
    expect(C.B1!.busiestSecond(from)).toBeLessThanOrEqual(20 * 1.1 + 2);
    expect(C.B2!.busiestSecond(from)).toBeGreaterThan(20 * 1.1 + 2);
  }, 120_000);

  it('polls a budgeted upstream at no more than its share, and the status page figures say so', async () => {
    // health.intervalMs 200: an upstream without a budget is polled 5 times a second; B1 (20/s) at most 2 (a tenth of it).
    const from = Date.now();
    await until(async () => Date.now() - from >= 3000 && C.B1!.arrivals.some((a) => a.poll && a.at >= from + 2000), 'three seconds of polls', 20_000);
    const polls = (s: CountingProxy) => s.arrivals.filter((a) => a.poll && a.at >= from).length;
    const seconds = (Date.now() - from) / 1000;
    expect(polls(C.B1!) / seconds).toBeLessThanOrEqual(2 + 1 / seconds);
    expect(polls(C.B2!)).toBeGreaterThan(polls(C.B1!));
    const st = await status('budget');
    expect(st.upstreams[0]!.pollsPerSecond).not.toBeNull();
    expect(st.upstreams[0]!.pollsPerSecond!).toBeLessThan(st.upstreams[1]!.pollsPerSecond!);
  }, 60_000);

  it('answers HTTP 429 with Retry-After and -32005 when every upstream is out of budget, and sends neither more than its rate', async () => {
    const from = Date.now();
    const answers = await drive('overbudget', 300);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    for (const a of refused) {
      expect(a.error?.code).toBe(-32005);
      expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 429)).toEqual([]);
    expect(C.O1!.busiestSecond(from)).toBeLessThanOrEqual(5 * 1.1 + 2);
    expect(C.O2!.busiestSecond(from)).toBeLessThanOrEqual(5 * 1.1 + 2);
  }, 60_000);
});
