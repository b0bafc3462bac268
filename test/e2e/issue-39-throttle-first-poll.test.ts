// Issue 39, a throttle before the first good poll: on a chain that verifies
// its upstreams' identity (a chainId in the manifest, or a pool that takes its
// identity from most of its upstreams' first polls, or a Blockbook chain with
// a coin), an upstream takes no traffic before a poll finds it on the chain.
// When the provider throttles those polls from the start
// (test/support/throttle-standin.ts in front of anvil or the Blockbook
// stand-in, answering as Infura does: HTTP 429 with -32005 and Retry-After), the
// client is told "every upstream throttled" (HTTP 429, Retry-After, -32005),
// as when they are throttled later, not "no healthy upstream"; and once the
// polls answer, the identity is checked as always: an upstream of another
// chain never serves. No test waits for a time to pass: each waits (until)
// for what the polls find.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { mnemonicToAccount } from 'viem/accounts';
import { newKey, postJson, until, upstreamStatus, type JsonAnswer, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { PROVIDER, startThrottleStandin, type ThrottleStandin } from '../support/throttle-standin.ts';

const KEY = newKey();
const ADDR = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 0 }).address;

let anvil: Anvil;
let bb: BlockbookStub;
let up: Gateway;
let gw: RunningGateway;

/** The stand-ins, by the env name the manifest gives their URL. */
const S: Record<string, ThrottleStandin> = {};
const NAMES = ['NAMED_A', 'NAMED_B', 'ELECTED_A', 'ELECTED_B', 'OTHER_A', 'OTHER_B', 'Q_A', 'Q_B', 'BTC'];
/** Stand-ins whose polls are still throttled (every one, from the gateway's start on). */
const holding = new Set<string>(NAMES);


// anvil serves chainId 31337: `other` names another chain.
const CHAINS: readonly Chain[] = [
  evmChain('named', ['NAMED_A', 'NAMED_B'], { chainId: 31337 }),
  evmChain('elected', ['ELECTED_A', 'ELECTED_B']),
  evmChain('other', ['OTHER_A', 'OTHER_B'], { chainId: 1 }),
  evmChain('quorum', ['Q_A', 'Q_B'], { quorum: { methods: ['eth_getBalance'], of: 2 } }),
  { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', coin: 'Bitcoin', upstreams: ['${BTC}/api'] },
];

beforeAll(async () => {
  anvil = await startAnvil();
  bb = await startBlockbookStub();
  const all = await Promise.all(NAMES.map((n) => startThrottleStandin(n === 'BTC' ? bb.url : anvil.url)));
  NAMES.forEach((n, i) => {
    const s = all[i]!;
    S[n] = s;
    // Infura's 429, with Retry-After: 2, to every poll until the test lets them through.
    s.throttlePoll = () => (holding.has(n) ? { ...PROVIDER.infura429, retryAfter: '2' } : undefined);
  });
  up = await gateway({ name: 'issue-39-throttle-first-poll', chains: CHAINS, keys: [{ id: 'first-poll', key: KEY }], standIns: { anvil, bb, ...S } });
  gw = up.gw;
}, 60_000);

afterAll(() => up?.close());

let nextId = 1;
const rpc = (path: string, method: string, params: unknown[] = []): Promise<JsonAnswer> => postJson(gw.url('rpc', `/${path}`), KEY, JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }));
const balance = (path: string) => rpc(path, 'eth_getBalance', [ADDR, 'latest']);

/** "every upstream throttled" as the EVM interface writes it: HTTP 429, Retry-After (at most the provider's 2 s), -32005. */
function expectEveryThrottled(a: JsonAnswer): void {
  expect(a.status, a.text).toBe(429);
  expect(a.json.error.code, a.text).toBe(-32005);
  expect(a.json.error.message, a.text).toBe('Limit exceeded: every upstream throttled');
  const after = Number(a.headers['retry-after']);
  expect(after, a.text).toBeGreaterThanOrEqual(1);
  expect(after, a.text).toBeLessThanOrEqual(2);
}

/** Until `path` answers something other than "every upstream throttled" (each throttled answer checked on the way); that answer. */
async function pastThrottle(path: string): Promise<JsonAnswer> {
  let last: JsonAnswer | null = null;
  await until(
    async () => {
      last = await balance(path);
      if (last.status !== 429) return true;
      expectEveryThrottled(last);
      return false;
    },
    `${path} past its throttled first polls`,
    30_000,
  );
  return last!;
}

/** Lets `names`' polls through, after at least one of each was throttled. */
async function release(...names: string[]): Promise<void> {
  await until(async () => names.every((n) => S[n]!.polls.some((p) => p.throttled)), `${names.join(', ')} throttled polls`);
  for (const n of names) holding.delete(n);
}

describe('every upstream of a verifying chain throttled before its first good poll', () => {
  it('chainId in the manifest: 429 with Retry-After and -32005, not 503; no call reaches a node; served once a poll verifies them', async () => {
    const a = await balance('named');
    expectEveryThrottled(a);
    expect((await upstreamStatus(gw, 'named#0')).state).toBe('unknown');
    expect(S.NAMED_A!.arrivals.length + S.NAMED_B!.arrivals.length).toBe(0);
    await release('NAMED_A', 'NAMED_B');
    const served = await pastThrottle('named');
    expect(served.status, served.text).toBe(200);
    expect(served.json.result, served.text).toBe((await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result);
    expect((await upstreamStatus(gw, 'named#0')).state).toBe('up');
  }, 60_000);

  it('a pool that takes its identity from its upstreams\' first polls: 429 with Retry-After and -32005, not 503; served once the polls answer', async () => {
    expectEveryThrottled(await balance('elected'));
    expect(S.ELECTED_A!.arrivals.length + S.ELECTED_B!.arrivals.length).toBe(0);
    await release('ELECTED_A', 'ELECTED_B');
    const served = await pastThrottle('elected');
    expect(served.status, served.text).toBe(200);
    expect(served.json.result, served.text).toBe((await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result);
  }, 60_000);

  it('a quorum (of 2) whose voters are all throttled before their first good poll: 429 with Retry-After and -32005, not 503; answered once the polls verify them', async () => {
    expectEveryThrottled(await balance('quorum'));
    expect(S.Q_A!.arrivals.length + S.Q_B!.arrivals.length).toBe(0);
    // One voter verified (with a head), the other still throttled before its first good poll (no head to route by):
    // still "every upstream throttled", not "no healthy upstream".
    await release('Q_A');
    await until(async () => (await upstreamStatus(gw, 'quorum#0')).state === 'up', 'quorum#0 verified by a poll');
    expect((await upstreamStatus(gw, 'quorum#1')).state).toBe('unknown');
    expectEveryThrottled(await balance('quorum'));
    await release('Q_B');
    const served = await pastThrottle('quorum');
    expect(served.status, served.text).toBe(200);
    expect(served.json.result, served.text).toBe((await anvil.rpc('eth_getBalance', [ADDR, 'latest'])).result);
  }, 60_000);

  it('Blockbook with a coin: 429 {"error":"Every upstream throttled"} with Retry-After, not 503; served once a poll verifies the coin', async () => {
    const block = async () => {
      const r = await request(gw.url('explorer', '/bitcoin/v2/block/1'), { headers: { 'x-api-key': KEY } });
      return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
    };
    const a = await block();
    expect(a.status, a.text).toBe(429);
    expect(JSON.parse(a.text)).toEqual({ error: 'Every upstream throttled' });
    expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(S.BTC!.arrivals.length).toBe(0);
    await release('BTC');
    let last = a;
    await until(
      async () => {
        last = await block();
        if (last.status !== 429) return true;
        expect(JSON.parse(last.text)).toEqual({ error: 'Every upstream throttled' });
        return false;
      },
      'bitcoin past its throttled first polls',
      30_000,
    );
    expect(last.status, last.text).toBe(200);
    expect(JSON.parse(last.text).height).toBe(1);
  }, 60_000);

  it('upstreams of another chain than the manifest names: 429 while throttled, then wrong_chain and 503; never a call to a node', async () => {
    expectEveryThrottled(await balance('other'));
    await release('OTHER_A', 'OTHER_B');
    const after = await pastThrottle('other');
    expect(after.status, after.text).toBe(503);
    expect(after.json.error.code, after.text).not.toBe(-32005);
    for (const u of ['other#0', 'other#1']) expect((await upstreamStatus(gw, u)).state).toBe('wrong_chain');
    expect(S.OTHER_A!.arrivals.length + S.OTHER_B!.arrivals.length).toBe(0);
  }, 60_000);
});
