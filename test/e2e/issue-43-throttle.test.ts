// Issue 43, rules 1 and 7, against the built gateway: anvil behind throttle
// stand-ins (test/support/throttle-standin.ts), which pass every call on unless
// a test steers them to answer as a provider that throttles.
//  - Rule 1: a call whose revert reason reads as a throttle ("rate limit
//    exceeded", "Too Many Requests": an `eth_call` without `to` runs init code
//    that reverts with any string) is the call's answer: no upstream is marked
//    throttled, on a pool or on a chain of one upstream, and the next client's
//    call is served. An error that every upstream gives alike is the call's
//    answer too, not N throttles.
//  - Rule 7: Retry-After is honoured up to 300 s, as whole seconds (a fraction
//    rounds up), Infura's backoff_seconds counts as one, and the client is told
//    a whole number of seconds.
// No test waits for a time to pass: each waits (until) for what it looks for.
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
const NAMES = ['POOL_A', 'POOL_B', 'ONE', 'ALIKE_A', 'ALIKE_B', 'FRAC_A', 'FRAC_B', 'HUGE', 'BACKOFF', 'DAY_A', 'DAY_B'];

const CHAINS: readonly Chain[] = [
  evmChain('pool', ['POOL_A', 'POOL_B']),
  evmChain('one', ['ONE']),
  evmChain('alike', ['ALIKE_A', 'ALIKE_B']),
  evmChain('frac', ['FRAC_A', 'FRAC_B']),
  evmChain('huge', ['HUGE']),
  evmChain('backoff', ['BACKOFF']),
  evmChain('day', ['DAY_A', 'DAY_B']),
];

beforeAll(async () => {
  anvil = await startAnvil();
  const all = await Promise.all(NAMES.map(() => startThrottleStandin(anvil.url)));
  NAMES.forEach((n, i) => (S[n] = all[i]!));
  up = await gateway({ name: 'issue-43-throttle', chains: CHAINS, keys: [{ id: 'i43', key: KEY }], standIns: { anvil, ...S } });
  gw = up.gw;
  for (const path of ['pool', 'one', 'alike', 'frac', 'huge', 'backoff', 'day']) {
    await until(async () => (await rpc(path, 'eth_getBalance', [ADDR, 'latest'])).status === 200, `${path} serving`, 30_000);
  }
  for (const s of Object.values(S)) s.arrivals.length = 0;
}, 90_000);

afterAll(() => up?.close());

// ---------------------------------------------------------------- helpers

let nextId = 1;
const rpc = (path: string, method: string, params: unknown[] = []): Promise<JsonAnswer> => postJson(gw.url('rpc', `/${path}`), KEY, JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }));

/** A read that must be anvil's own answer. */
async function realRead(path: string): Promise<void> {
  const a = await rpc(path, 'eth_getBalance', [ADDR, 'latest']);
  expect(a.status, a.text).toBe(200);
  expect(a.json.result, a.text).toBe((await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result);
}

const throttles = async (names: readonly string[]) => Promise.all(names.map(async (n) => (await upstreamStatus(gw, n)).throttledTotal));

/**
 * Init code that reverts with Error(reason), as Solidity's `revert(reason)`
 * does: it copies the revert data that follows it in the code to memory and
 * reverts with it. `eth_call` without `to` runs it; any client can send it.
 */
function revertingInitCode(reason: string): string {
  const text = Buffer.from(reason, 'utf8');
  const word = (n: number) => n.toString(16).padStart(64, '0');
  const padded = Buffer.concat([text, Buffer.alloc((32 - (text.length % 32)) % 32)]);
  const data = '08c379a0' + word(32) + word(text.length) + padded.toString('hex');
  const len = data.length / 2;
  const hex1 = (n: number) => n.toString(16).padStart(2, '0');
  // PUSH1 len PUSH1 12 PUSH1 0 CODECOPY  PUSH1 len PUSH1 0 REVERT: 12 bytes, then the data.
  const code = `60${hex1(len)}600c600039` + `60${hex1(len)}6000fd`;
  return '0x' + code + data;
}

// ---------------------------------------------------------------- rule 1

describe('rule 1: a revert whose reason reads as a throttle is the call\'s answer, never a throttle', () => {
  for (const reason of ['rate limit exceeded', 'Too Many Requests', 'daily request count exceeded, request rate limited']) {
    it(`"${reason}" on a pool of two: the client gets the revert; no upstream is marked throttled; the next client's read is served`, async () => {
      const own = await anvil.rpc('eth_call', [{ data: revertingInitCode(reason) }, 'latest']);
      // The set-up is right: anvil executes it and reverts with the reason.
      expect(JSON.stringify(own.error)).toContain(reason);
      const before = await throttles(['pool#0', 'pool#1']);
      for (let i = 0; i < 3; i++) {
        const a = await rpc('pool', 'eth_call', [{ data: revertingInitCode(reason) }, 'latest']);
        expect(a.status, a.text).toBe(200);
        expect(a.json.error, a.text).toEqual(own.error);
      }
      expect(await throttles(['pool#0', 'pool#1'])).toEqual(before);
      for (let i = 0; i < 4; i++) await realRead('pool');
    }, 60_000);

    it(`"${reason}" on a chain of one upstream: the client gets the revert; the upstream is not marked throttled; the next client's read is served`, async () => {
      const own = await anvil.rpc('eth_call', [{ data: revertingInitCode(reason) }, 'latest']);
      const [before] = await throttles(['one#0']);
      const a = await rpc('one', 'eth_call', [{ data: revertingInitCode(reason) }, 'latest']);
      expect(a.status, a.text).toBe(200);
      expect(a.json.error, a.text).toEqual(own.error);
      expect((await throttles(['one#0']))[0]).toBe(before);
      await realRead('one');
    }, 60_000);
  }

  it('an error that both upstreams of a pool give alike (a provider\'s throttle sentence, in a 200) is the call\'s answer: relayed, neither marked throttled', async () => {
    const [a, b] = [S.ALIKE_A!, S.ALIKE_B!];
    const error = PROVIDER.infuraRate;
    for (const s of [a, b]) s.throttle = (x) => (x.rpcMethod === 'eth_getBalance' ? { error } : undefined);
    const before = await throttles(['alike#0', 'alike#1']);
    const r = await rpc('alike', 'eth_getBalance', [ADDR, 'latest']);
    expect(r.status, r.text).toBe(200);
    expect(r.json.error, r.text).toEqual(error);
    // Both were asked: it is what every upstream says.
    expect(a.throttledCount() + b.throttledCount()).toBe(2);
    expect(await throttles(['alike#0', 'alike#1'])).toEqual(before);
    // Control: when only one of them says it, the other's answer is the call's, and that one is throttled.
    for (const s of [a, b]) s.throttle = () => undefined;
    let first = true;
    a.throttle = (x) => (x.rpcMethod === 'eth_getBalance' && first ? ((first = false), { error }) : undefined);
    await until(
      async () => {
        await realRead('alike');
        return !first;
      },
      'the throttling node asked',
    );
    expect((await throttles(['alike#0']))[0]).toBe(before[0]! + 1);
    a.throttle = () => undefined;
  }, 60_000);
});

describe('rule 1 in a client batch on a pool: a throttle error in one item of the batch the pool sends', () => {
  const batchOf = (calls: { method: string; params: unknown[] }[]) => postJson(gw.url('rpc', '/alike'), KEY, JSON.stringify(calls.map((c) => ({ jsonrpc: '2.0', id: nextId++, ...c }))));

  it('the same error from both upstreams is that call\'s answer in its slot; neither is marked throttled; with one saying it, that one is', async () => {
    const [a, b] = [S.ALIKE_A!, S.ALIKE_B!];
    const error = PROVIDER.infuraRate;
    // Both take traffic (the case above throttled one for its cooldown), with their heads polled since (a pool leaves out of its tip a head not asked during a cooldown).
    await until(async () => (await Promise.all(['alike#0', 'alike#1'].map((n) => upstreamStatus(gw, n)))).every((u) => u.throttledUntil === null || u.throttledUntil < Date.now()), 'both upstreams out of their cooldown');
    const polled = [a.polls.length, b.polls.length];
    await until(async () => a.polls.length > polled[0]! && b.polls.length > polled[1]!, 'a poll of each since');
    // Every item of eth_getBalance in a batch, and eth_getBalance alone, get the same -32005 from both.
    for (const s of [a, b]) {
      s.throttleItem = (c) => (c.method === 'eth_getBalance' ? error : undefined);
      s.throttle = (x) => (x.rpcMethod === 'eth_getBalance' ? { error } : undefined);
    }
    const before = await throttles(['alike#0', 'alike#1']);
    const r = await batchOf([
      { method: 'eth_getBalance', params: [ADDR, 'latest'] },
      { method: 'eth_chainId', params: [] },
    ]);
    expect(r.status, r.text).toBe(200);
    const [bal, id] = r.json as { error?: unknown; result?: unknown }[];
    expect(bal!.error, r.text).toEqual(error);
    expect(id!.result, r.text).toBe((await anvil.rpc('eth_chainId', [])).result);
    // Both were asked for it (the batch's node, then the other, alone).
    expect(a.throttledCount() + b.throttledCount()).toBeGreaterThanOrEqual(2);
    expect(await throttles(['alike#0', 'alike#1'])).toEqual(before);

    // Control: only the batch's node says it; the other answers: the first is throttled, the client gets the balance.
    const balance = (await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result;
    for (const s of [a, b]) s.throttle = () => undefined;
    let once = true;
    for (const s of [a, b]) s.throttleItem = (c) => (c.method === 'eth_getBalance' && once ? ((once = false), error) : undefined);
    const c = await batchOf([
      { method: 'eth_getBalance', params: [ADDR, 'latest'] },
      { method: 'eth_chainId', params: [] },
    ]);
    expect((c.json as { result?: unknown }[])[0]!.result, c.text).toBe(balance);
    const after = await throttles(['alike#0', 'alike#1']);
    expect(after[0]! + after[1]!).toBe(before[0]! + before[1]! + 1);
    for (const s of [a, b]) s.throttleItem = () => undefined;
  }, 60_000);
});

// ---------------------------------------------------------------- rule 7

describe('rule 7: Retry-After is bounded and parsed strictly', () => {
  it('Retry-After: 1.5 is two seconds of cooldown (not a date in 2001, no cooldown at all): the node is asked again no sooner', async () => {
    const a = S.FRAC_A!;
    let first = true;
    a.throttle = () => (first ? ((first = false), { ...PROVIDER.infura429, retryAfter: '1.5' }) : undefined);
    await until(
      async () => {
        await realRead('frac');
        return !first;
      },
      'the throttling node asked',
    );
    const t = a.arrivals.find((x) => x.throttled)!;
    const u = await upstreamStatus(gw, 'frac#0');
    expect(u.throttledUntil, JSON.stringify(u)).not.toBeNull();
    expect(u.throttledUntil! - t.at).toBeGreaterThanOrEqual(1900);
    const n = a.arrivals.length;
    await until(
      async () => {
        await realRead('frac');
        return a.arrivals.length > n;
      },
      'the node asked again after its cooldown',
    );
    expect(a.arrivals[n]!.at - t.at).toBeGreaterThanOrEqual(1900);
  }, 60_000);

  it('Retry-After: 86400 takes the upstream out for at most 300 s', async () => {
    const a = S.DAY_A!;
    let first = true;
    a.throttle = () => (first ? ((first = false), { ...PROVIDER.alchemy429, retryAfter: '86400' }) : undefined);
    await until(
      async () => {
        await realRead('day');
        return !first;
      },
      'the throttling node asked',
    );
    const t = a.arrivals.find((x) => x.throttled)!;
    const u = await upstreamStatus(gw, 'day#0');
    expect(u.throttledUntil! - t.at).toBeGreaterThan(290_000);
    expect(u.throttledUntil! - t.at).toBeLessThanOrEqual(300_000 + 1000);
  }, 60_000);

  it('a huge Retry-After reaches the client as a whole number of seconds, at most 300 (not 1e+23)', async () => {
    S.HUGE!.throttle = () => ({ ...PROVIDER.alchemy429, retryAfter: '99999999999999999999999' });
    const a = await rpc('huge', 'eth_getBalance', [ADDR, 'latest']);
    expect(a.status, a.text).toBe(429);
    expect(a.json.error.code, a.text).toBe(-32005);
    const after = String(a.headers['retry-after']);
    expect(after).toMatch(/^[1-9]\d*$/);
    expect(Number(after)).toBeGreaterThan(290);
    expect(Number(after)).toBeLessThanOrEqual(300);
  }, 60_000);

  it('Infura\'s data.rate.backoff_seconds (30) without a Retry-After is its Retry-After: the client is told about 30 s, the node asked nothing meanwhile', async () => {
    const s = S.BACKOFF!;
    // Infura's 429 as it sends it: -32005 with {"rate": {"backoff_seconds": 30, ...}}, no Retry-After header.
    s.throttle = () => ({ status: 429, error: PROVIDER.infura429.error });
    const a = await rpc('backoff', 'eth_getBalance', [ADDR, 'latest']);
    expect(a.status, a.text).toBe(429);
    const after = Number(a.headers['retry-after']);
    expect(after, a.text).toBeGreaterThanOrEqual(28);
    expect(after, a.text).toBeLessThanOrEqual(30);
    s.throttle = () => undefined;
    const n = s.arrivals.length;
    const b = await rpc('backoff', 'eth_getBalance', [ADDR, 'latest']);
    expect(b.status, b.text).toBe(429);
    expect(s.arrivals.length).toBe(n);
  }, 60_000);
});
