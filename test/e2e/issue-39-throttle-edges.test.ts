// Issue 39, throttling at its edges: a provider that throttles the gateway's
// own polls, a quorum whose voters are throttled, and a chain of one upstream
// whose throttle comes in a 200 (test/support/throttle-standin.ts in front of
// anvil, answering as Infura, Alchemy and QuickNode do). The tests steer what
// a stand-in throttles, count what reached it and when (Date.now(), the clock
// the gateway's cooldowns run on), and read /status.json. No test waits for a
// time to pass: each waits (until) for requests to reach a node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mnemonicToAccount } from 'viem/accounts';
import { newKey, postJson, until, upstreamStatus, type JsonAnswer, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { PROVIDER, startThrottleStandin, type ThrottleStandin } from '../support/throttle-standin.ts';

const KEY = newKey();
const ADDR = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 0 }).address;

let anvil: Anvil;
let up: Gateway;
let gw: RunningGateway;

/** The stand-ins, by the env name the manifest gives their URL. */
const S: Record<string, ThrottleStandin> = {};
const NAMES = ['POLL_A', 'POLL_B', 'COOL_A', 'COOL_B', 'Q_A', 'Q_B', 'Q2_A', 'Q2_B', 'ONE', 'ONE_TEXT'];

const CHAINS: readonly Chain[] = [
  evmChain('polled', ['POLL_A', 'POLL_B']),
  evmChain('polledcool', ['COOL_A', 'COOL_B']),
  evmChain('quorum', ['Q_A', 'Q_B'], { quorum: { methods: ['eth_getBalance'], of: 2 } }),
  evmChain('quorum2', ['Q2_A', 'Q2_B'], { quorum: { methods: ['eth_getBalance'], of: 2 } }),
  evmChain('one', ['ONE']),
  evmChain('onetext', ['ONE_TEXT']),
];

beforeAll(async () => {
  anvil = await startAnvil();
  const all = await Promise.all(NAMES.map(() => startThrottleStandin(anvil.url)));
  NAMES.forEach((n, i) => (S[n] = all[i]!));
  up = await gateway({ name: 'issue-39-throttle-edges', chains: CHAINS, keys: [{ id: 'edges', key: KEY }], standIns: { anvil, ...S } });
  gw = up.gw;
}, 60_000);

afterAll(() => up?.close());

// ---------------------------------------------------------------- helpers

type Answer = JsonAnswer;

let nextId = 1;
const rpc = (path: string, method: string, params: unknown[] = []): Promise<Answer> => postJson(gw.url('rpc', `/${path}`), KEY, JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }));

/** A read that must be anvil's own answer (never a throttle). */
async function realRead(path: string): Promise<void> {
  const a = await rpc(path, 'eth_getBalance', [ADDR, 'latest']);
  expect(a.status, a.text).toBe(200);
  expect(a.json.result, a.text).toBe((await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result);
}

const upstream = (name: string) => upstreamStatus(gw, name);

/** Waits until `s` has had `n` more polls than now. */
const morePolls = (s: ThrottleStandin, n: number, what: string) => {
  const at = s.polls.length;
  return until(async () => s.polls.length >= at + n, what, 30_000);
};

/** "every upstream throttled" as the EVM interface writes it: HTTP 429, Retry-After, -32005. */
function expectEveryThrottled(a: Answer, atMostSeconds: number): void {
  expect(a.status, a.text).toBe(429);
  expect(a.json.error.code, a.text).toBe(-32005);
  expect(a.json.error.message, a.text).toBe('Limit exceeded: every upstream throttled');
  const after = Number(a.headers['retry-after']);
  expect(after, a.text).toBeGreaterThanOrEqual(1);
  expect(after, a.text).toBeLessThanOrEqual(atMostSeconds);
}

describe('every chain serves', () => {
  it('each chain answers before the tests steer its nodes', async () => {
    for (const path of ['polled', 'polledcool', 'quorum', 'quorum2', 'one', 'onetext']) {
      await until(async () => (await rpc(path, 'eth_getBalance', [ADDR, 'latest'])).status === 200, `${path} serving`);
    }
    for (const s of Object.values(S)) s.arrivals.length = 0;
  }, 60_000);
});

describe('a poll the upstream throttles throttles it: not down, and not polled again before the throttle is over', () => {
  it('HTTP 429 with Retry-After: 30 to a poll: the upstream stays up, is out of client traffic and of the polls for 30 s', async () => {
    const a = S.POLL_A!;
    const b = S.POLL_B!;
    a.throttlePoll = () => ({ ...PROVIDER.infura429, retryAfter: '30' });
    await until(async () => a.polls.some((p) => p.throttled), 'a poll of POLL_A throttled', 30_000);
    const first = a.polls.find((p) => p.throttled)!;
    const since = a.polls.length;
    // Ten polls of the other upstream (two seconds at 200 ms): the throttled one is asked nothing meanwhile.
    await morePolls(b, 10, 'ten more polls of POLL_B');
    expect(a.polls.length).toBe(since);
    const u = await upstream('polled#0');
    expect(u.state).toBe('up');
    expect(u.throttledUntil!).toBeGreaterThanOrEqual(first.at + 30_000);
    expect(u.throttledTotal).toBe(1);
    // The clients' reads all go to the other upstream.
    for (let i = 0; i < 5; i++) await realRead('polled');
    expect(a.arrivals.length).toBe(0);
    expect(b.arrivals.length).toBeGreaterThanOrEqual(5);
  }, 60_000);

  it('-32005 in a 200 to the polls (Infura, no Retry-After): a cooldown of 1 s, then 2 s, between polls; never down; back once a poll answers', async () => {
    const a = S.COOL_A!;
    let left = 3;
    a.throttlePoll = () => (left-- > 0 ? { error: PROVIDER.infuraRate } : undefined);
    await until(async () => a.polls.filter((p) => p.throttled).length === 3 && a.polls.length > a.polls.findIndex((p) => p.throttled) + 3, 'three throttled polls of COOL_A, and one after', 30_000);
    const i = a.polls.findIndex((p) => p.throttled);
    const [t1, t2, t3, after] = a.polls.slice(i, i + 4);
    expect([t1!.throttled, t2!.throttled, t3!.throttled, after!.throttled]).toEqual([true, true, true, false]);
    // Each throttle starts the cooldown (1 s, 2 s, 4 s): no poll before it is over.
    expect(t2!.at - t1!.at).toBeGreaterThanOrEqual(1000);
    expect(t3!.at - t2!.at).toBeGreaterThanOrEqual(2000);
    expect(after!.at - t3!.at).toBeGreaterThanOrEqual(4000);
    // The poll that answered finds it up: it never went down.
    await morePolls(a, 1, 'a poll of COOL_A after the throttles');
    const u = await upstream('polledcool#0');
    expect(u.state).toBe('up');
    expect(u.throttledTotal).toBe(3);
    await realRead('polledcool');
  }, 60_000);
});

describe('a quorum short because its voters are throttled: "every upstream throttled", not "no healthy upstream"', () => {
  it('both voters throttle the call (429, Retry-After: 30): 429 with Retry-After and -32005; the next call reaches no node', async () => {
    const [a, b] = [S.Q_A!, S.Q_B!];
    for (const s of [a, b]) s.throttle = (x) => (x.rpcMethod === 'eth_getBalance' ? { ...PROVIDER.infura429, retryAfter: '30' } : undefined);
    expectEveryThrottled(await rpc('quorum', 'eth_getBalance', [ADDR, 'latest']), 30);
    const n = a.arrivals.length + b.arrivals.length;
    expect(n).toBe(2);
    // Both out for 30 s: the quorum cannot be had, and the client is told when to come back.
    expectEveryThrottled(await rpc('quorum', 'eth_getBalance', [ADDR, 'latest']), 30);
    expect(a.arrivals.length + b.arrivals.length).toBe(n);
  }, 30_000);

  it('one voter throttled: the quorum (of 2) cannot be had until it is back: 429 with its Retry-After, not 503', async () => {
    const [a, b] = [S.Q2_A!, S.Q2_B!];
    a.throttle = (x) => (x.rpcMethod === 'eth_getBalance' ? { ...PROVIDER.infura429, retryAfter: '30' } : undefined);
    // The call it throttles: the other voter's answer alone is no quorum.
    expectEveryThrottled(await rpc('quorum2', 'eth_getBalance', [ADDR, 'latest']), 30);
    expect(a.arrivals.length).toBe(1);
    // While it is out: at once, without asking either node.
    const n = b.arrivals.length;
    expectEveryThrottled(await rpc('quorum2', 'eth_getBalance', [ADDR, 'latest']), 30);
    expect(a.arrivals.length).toBe(1);
    expect(b.arrivals.length).toBe(n);
    // Calls that need no quorum are served by the other node.
    const block = await rpc('quorum2', 'eth_getBlockByNumber', ['0x0', false]);
    expect(block.status, block.text).toBe(200);
    expect(block.json.result.number).toBe('0x0');
  }, 30_000);
});

describe('a chain of one upstream: a throttle in a 200 is seen, although answers stream', () => {
  it('-32005 in a 200 (Infura, no Retry-After): the client gets 429 with Retry-After; the node is asked nothing during its cooldown; then it answers again', async () => {
    const s = S.ONE!;
    let once = true;
    s.throttle = (x) => (x.rpcMethod === 'eth_getBalance' && once ? ((once = false), { error: PROVIDER.infuraRate }) : undefined);
    const a = await rpc('one', 'eth_getBalance', [ADDR, 'latest']);
    expectEveryThrottled(a, 1);
    expect(s.arrivals.length).toBe(1);
    const u = await upstream('one#0');
    expect(u.throttledTotal).toBe(1);
    expect(u.throttledUntil!).toBeGreaterThanOrEqual(s.arrivals[0]!.at + 1000);
    // Until the cooldown is over every call gets the 429 without reaching the node; then the node's answer.
    await until(
      async () => {
        const r = await rpc('one', 'eth_getBalance', [ADDR, 'latest']);
        if (r.status === 429) {
          expect(s.arrivals.length).toBe(1);
          return false;
        }
        expect(r.status, r.text).toBe(200);
        return true;
      },
      'the node answers after its cooldown',
      30_000,
    );
    expect(s.arrivals.length).toBe(2);
    expect(s.arrivals[1]!.at).toBeGreaterThanOrEqual(u.throttledUntil!);
  }, 60_000);

  it('a throttle text in a 200 (QuickNode -32007 "request limit reached"): 429 with Retry-After, not the provider\'s error', async () => {
    const s = S.ONE_TEXT!;
    let once = true;
    s.throttle = (x) => (x.rpcMethod === 'eth_getBalance' && once ? ((once = false), { error: PROVIDER.quicknode }) : undefined);
    expectEveryThrottled(await rpc('onetext', 'eth_getBalance', [ADDR, 'latest']), 1);
    expect((await upstream('onetext#0')).throttledTotal).toBe(1);
  }, 30_000);

  it('a node\'s own short error streams on unchanged (geth\'s "execution reverted" is no throttle)', async () => {
    const s = S.ONE_TEXT!;
    const reverted = { code: 3, message: 'execution reverted', data: '0x' };
    s.throttle = (x) => (x.rpcMethod === 'eth_call' ? { error: reverted } : undefined);
    await until(async () => (await upstream('onetext#0')).throttledUntil === null, 'onetext out of its cooldown');
    const a = await rpc('onetext', 'eth_call', [{ to: ADDR, data: '0x' }, 'latest']);
    expect(a.status, a.text).toBe(200);
    expect(a.json.error, a.text).toEqual(reverted);
    expect((await upstream('onetext#0')).throttledTotal).toBe(1);
  }, 30_000);
});
