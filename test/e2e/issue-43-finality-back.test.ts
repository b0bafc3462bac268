// Issue 43, rule 19: one upstream's finalized block going back is not a chain
// reset. One anvil (chain 1, at block 150, finalized 86: anvil calls final 64
// below its head) sits behind three upstreams of one pool, as one node behind
// a provider's load balancer, each a steerable proxy; one more proxy is the
// only upstream of another chain. A "lying" proxy answers the gateway's polls
// as a node one block behind would: head 149, finalized 85.
//
// What must hold: while one of the three lies, eth_blockNumber stays 150, the
// chain's cache is not reset (a final block stays a HIT, no cache_reset), and
// the liar takes no client call until its finalized block is back at 86; then
// it takes calls again. The controls: when two of the three lie (more than
// half), or the only upstream of a chain lies, the chain resets.
//
// No test waits for a time to pass: each waits for the liar's proxy to have
// answered a number of polls with the lie, or for a log line or figure.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKey, postJson, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startSteerableProxy, type SteerableProxy } from '../support/steerable-proxy.ts';
import { fetchSeries } from '../support/metrics-text.ts';

const KEY = newKey();
const HEAD = 150;
const FINALIZED = HEAD - 64;

let anvil: Anvil;
/** The pool's three upstreams, and the lone chain's one. */
let p: SteerableProxy[];
let lone: SteerableProxy;
let rig: Gateway;
let gw: RunningGateway;
/** anvil's blocks one below the head and one below the finalized block, as a node one block behind reports them. */
let behindHead: unknown;
let behindFinal: unknown;

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1 });
  await anvil.mine(HEAD);
  behindHead = (await anvil.rpc('eth_getBlockByNumber', [hex(HEAD - 1), false])).result;
  behindFinal = (await anvil.rpc('eth_getBlockByNumber', [hex(FINALIZED - 1), false])).result;
  p = await Promise.all([0, 1, 2].map(() => startSteerableProxy(anvil.url)));
  lone = await startSteerableProxy(anvil.url);
  rig = await gateway({
    name: 'issue-43-finality-back',
    chains: [evmChain('three', ['P0', 'P1', 'P2'], { chainId: 1 }), evmChain('lone', ['LONE'])],
    header: { cache: { headPollMs: 100 }, health: { intervalMs: 100, timeoutMs: 2000 } },
    keys: [{ id: 'finality', key: KEY }],
    standIns: { anvil, P0: p[0]!, P1: p[1]!, P2: p[2]!, LONE: lone },
  });
  gw = rig.gw;
  for (const chain of ['three', 'lone']) await until(async () => (await fetchSeries(gw.url('admin', '/metrics'), 'gateway_cache_finalized_block', { chain })) === FINALIZED, `${chain} sees finalized ${FINALIZED}`);
}, 60_000);

afterAll(() => rig?.close());

function hex(n: number): string {
  return `0x${n.toString(16)}`;
}

/** A poll's answer as a node one block behind gives it: its latest block 149, its finalized block 85. */
function oneBehind(poll: unknown, answer: unknown): unknown {
  const calls = (Array.isArray(poll) ? poll : [poll]) as { id?: unknown; method?: unknown; params?: unknown[] }[];
  const tagOf = (id: unknown) => calls.find((c) => c.id === id && c.method === 'eth_getBlockByNumber')?.params?.[0];
  const alter = (a: { id?: unknown }) => {
    const tag = tagOf(a.id);
    return tag === 'latest' ? { ...a, result: behindHead } : tag === 'finalized' ? { ...a, result: behindFinal } : a;
  };
  return Array.isArray(answer) ? (answer as { id?: unknown }[]).map(alter) : alter(answer as { id?: unknown });
}

/** Starts `proxy` lying and resolves once it has answered `n` of the gateway's polls with the lie. */
async function lies(proxy: SteerableProxy, n = 3): Promise<void> {
  const from = proxy.polls.length;
  proxy.pollAnswer = oneBehind;
  await until(async () => proxy.polls.length >= from + n, `${n} polls answered with the lie`);
}

let nextId = 1;
const rpc = (chain: string, method: string, params: unknown[] = []) => postJson(gw.url('rpc', `/${chain}`), KEY, JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }));
const resets = (chain: string) => fetchSeries(gw.url('admin', '/metrics'), 'gateway_cache_resets_total', { chain, reason: 'finalized_backwards' });
const finalizedBehind = async (name: string): Promise<number | null> => {
  const doc = (await (await fetch(gw.url('admin', '/status.json'))).json()) as { chains: { upstreams: { name: string; finalizedBehind: number | null }[] }[] };
  for (const c of doc.chains) for (const u of c.upstreams) if (u.name === name) return u.finalizedBehind;
  throw new Error(`no upstream ${name}`);
};

/** A call no cache answers (another address each time): it reaches an upstream of `chain`. */
let fresh = 1;
async function uncached(chain: string): Promise<void> {
  const a = await rpc(chain, 'eth_getBalance', [`0x${(fresh++).toString(16).padStart(40, '0')}`, hex(HEAD)]);
  expect(a.json?.result, a.text).toBe('0x0');
}

describe('rule 19: one upstream of three reports a finalized block one lower', () => {
  it('eth_blockNumber does not go back, the cache is not reset, the liar takes no calls until it catches up', { timeout: 90_000 }, async () => {
    const liar = p[0]!;
    // Before: the liar takes its share of calls.
    await until(async () => {
      await uncached('three');
      return liar.requests.length > 0;
    }, 'the liar takes a call before it lies');
    const final = await rpc('three', 'eth_getBlockByNumber', ['0x10', false]);
    expect(final.json.result.number).toBe('0x10');
    expect((await rpc('three', 'eth_getBlockByNumber', ['0x10', false])).headers['x-cache']).toBe('HIT');
    expect((await rpc('three', 'eth_blockNumber')).json.result).toBe(hex(HEAD));
    const resetsBefore = await resets('three');
    const logged = gw.lines.length;

    await lies(liar);
    expect((await rpc('three', 'eth_blockNumber')).json.result, 'eth_blockNumber after the lie').toBe(hex(HEAD));
    expect((await rpc('three', 'eth_getBlockByNumber', ['0x10', false])).headers['x-cache'], 'a final block after the lie').toBe('HIT');
    expect(await resets('three'), 'gateway_cache_resets_total').toBe(resetsBefore);
    expect(gw.lines.slice(logged).filter((l) => l.includes('"cache_reset"'))).toEqual([]);
    expect(await finalizedBehind('three#0'), 'status.json: the liar is behind finality it reported').toBe(FINALIZED);
    expect(await gw.waitForLog((e) => e.event === 'upstream_finalized_behind' && e.upstream === 'three#0')).toMatchObject({ chain: 'three', finalized: FINALIZED - 1, was: FINALIZED });
    const seen = liar.requests.length;
    for (let i = 0; i < 12; i++) await uncached('three');
    expect(liar.requests.length, 'calls that reached the liar while it lies').toBe(seen);
    for (let i = 0; i < 5; i++) expect((await rpc('three', 'eth_blockNumber')).json.result).toBe(hex(HEAD));

    // It catches up: back at finalized 86, it takes calls again.
    liar.pollAnswer = null;
    await until(async () => (await finalizedBehind('three#0')) === null, 'the liar caught up');
    expect(await gw.waitForLog((e) => e.event === 'upstream_finalized_caught_up' && e.upstream === 'three#0')).toMatchObject({ chain: 'three', finalized: FINALIZED });
    await until(async () => {
      await uncached('three');
      return liar.requests.length > seen;
    }, 'the liar takes a call once caught up');
    expect(await resets('three')).toBe(resetsBefore);
  });

  it('control: two of the three (more than half) going back reset the chain', { timeout: 60_000 }, async () => {
    const before = await resets('three');
    await Promise.all([lies(p[0]!), lies(p[1]!)]);
    await until(async () => (await resets('three')) === before + 1, 'a finalized_backwards reset of chain three');
    await gw.waitForLog((e) => e.event === 'cache_reset' && e.chain === 'three' && e.reason === 'finalized_backwards');
    p[0]!.pollAnswer = p[1]!.pollAnswer = null;
  });
});

describe('rule 19: the only upstream of a chain reports a finalized block one lower', () => {
  it('control: the chain resets', { timeout: 60_000 }, async () => {
    const before = await resets('lone');
    await lies(lone);
    await until(async () => (await resets('lone')) === before + 1, 'a finalized_backwards reset of chain lone');
    lone.pollAnswer = null;
  });
});
