// Issue 31, defect 4: one upstream that answers polls late must not stretch
// the staleness window for the whole chain. Two stand-ins in front of one
// anvil: A forwards everything at once; B forwards everything too but answers
// the gateway's polls (User-Agent chain-gateway-health/...) 2 s late. With
// headPollMs 1000, the README's bound is headPollMs plus one poll round trip
// of the fastest usable upstream, counted from the new block; counted from the
// moment A's stand-in sent the gateway a poll answer naming the new block, it
// is about one round trip: the epoch must move on A's report, without waiting
// for B's.
//
// The test warms a call bound to the head (a HIT), mines a block, then asks
// the call back to back until it names the new block, and measures how long
// after A's poll answer the old block was still served. Today the poll waits
// for B, so that is about 2 s; the assertion allows 1 s (a wide margin for a
// slow, noisy machine over the few milliseconds it should take). Counted from
// the block itself, it allows headPollMs + 1 s: the fast upstream is polled
// every headPollMs whatever the slow one does. Health checks run only at the
// start (intervalMs 60 s): every poll answer A sends later is the cache's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { polledHead, startSteerableProxy, type SteerableProxy } from '../support/steerable-proxy.ts';

const KEY = newKey();
const HEAD_POLL_MS = 1000;
/** How late B answers the gateway's polls. */
const POLL_DELAY_MS = 2000;
/** The most an old answer may be served after A reported the new block (the bound is ~one round trip). */
const ALLOWED_MS = 1000;

let anvil: Anvil;
let fast: SteerableProxy;
let slow: SteerableProxy;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1 });
  await anvil.mine(3);
  [fast, slow] = await Promise.all([startSteerableProxy(anvil.url), startSteerableProxy(anvil.url)]);
  slow.pollDelayMs = POLL_DELAY_MS;
  rig = await gateway({
    name: 'issue-31-slow-poll',
    chains: [
      // The cache's bound, not the pool's: with rewriteTags (a pool's default), latest is the served tip, which waits for the slow upstream's poll (issue 37, defect 15).
      evmChain('ethereum', ['FAST_URL', 'SLOW_URL'], { chainId: 1, rewriteTags: false }),
    ],
    header: { cache: { headPollMs: HEAD_POLL_MS }, health: { intervalMs: 60000, timeoutMs: 5000 } },
    keys: [{ id: 'slow', key: KEY }],
    standIns: { anvil, FAST_URL: fast, SLOW_URL: slow },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

let nextId = 1;
async function latest(): Promise<{ xCache: string; number: number; at: number }> {
  const res = await fetch(gw.url('rpc', '/ethereum'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'eth_getBlockByNumber', params: ['latest', false] }),
  });
  const body = (await res.json()) as { result?: { number?: string } };
  const at = performance.now();
  return { xCache: res.headers.get('x-cache') ?? '', number: Number.parseInt(body.result?.number ?? '-1', 16), at };
}

describe('issue 31: an upstream that answers polls late holds up no one', () => {
  it(`an old answer is served at most ${ALLOWED_MS} ms after the fast upstream reported the new block, though the other answers polls ${POLL_DELAY_MS} ms late`, { timeout: 40_000 }, async () => {
    const head = Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
    await until(async () => (await metricValue(gw, 'gateway_cache_head_block', '{chain="ethereum"}')) === head, 'the gateway sees the head');
    // Both stand-ins take part: the slow one is up, it only answers polls late.
    const ready = (await (await fetch(gw.url('admin', '/readyz'))).json()) as { chains: Record<string, { upstreams: { state: string }[] }> };
    expect(ready.chains.ethereum!.upstreams.map((u) => u.state)).toEqual(['up', 'up']);
    // Warm: the call bound to the head is answered from memory.
    await until(async () => (await latest()).xCache === 'HIT', 'eth_getBlockByNumber(latest) kept');

    const polled = fast.polls.length;
    await anvil.mine(1);
    const minedAt = performance.now();
    const fresh = head + 1;
    const answers: Array<{ number: number; at: number }> = [];
    const deadline = performance.now() + 15_000;
    for (;;) {
      const a = await latest();
      answers.push(a);
      if (a.number === fresh) break;
      expect(a.number, 'only the old block or the new one').toBe(head);
      if (a.at > deadline) throw new Error('the gateway served the old block for 15 s');
    }
    // When the gateway could first have known: the fast stand-in's first poll answer naming the new block.
    const report = fast.polls.slice(polled).find((p) => polledHead(p) >= fresh);
    expect(report, 'the fast stand-in answered a poll with the new block').toBeDefined();
    const lastOld = answers.filter((a) => a.number === head).reduce((m, a) => Math.max(m, a.at), Number.NEGATIVE_INFINITY);
    const stale = Math.max(0, lastOld - report!.answeredAt);
    const sinceBlock = Math.max(0, lastOld - minedAt);
    console.log(
      `issue-31 slow poll: old block served ${stale.toFixed(0)} ms after the fast upstream reported the new one (allowed ${ALLOWED_MS}), ` +
        `${sinceBlock.toFixed(0)} ms after the block was mined (allowed headPollMs + ${ALLOWED_MS}); ${answers.length} reads; slow upstream's polls ${POLL_DELAY_MS} ms late`,
    );
    expect.soft(stale, 'ms an old answer was served after the fast upstream reported the new block').toBeLessThan(ALLOWED_MS);
    // The bound itself, from the block: the fast upstream is polled every headPollMs whatever the slow one does.
    expect.soft(sinceBlock, 'ms an old answer was served after the block was mined').toBeLessThan(HEAD_POLL_MS + ALLOWED_MS);
  });
});
