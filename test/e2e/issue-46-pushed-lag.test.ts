// Issue 46, heads pushed by the nodes: an upstream's lag (the maxLag check
// that takes it out) judged with the pushed heads, through the built gateway
// in front of a pool of two anvils of the same chain (the same genesis):
//  - A: its http endpoint behind a steerable proxy (test/support) that can hold
//    back the answer to one poll, and its ws endpoint behind a ws proxy: its
//    heads are pushed;
//  - B: behind a steerable proxy only: its heads come from its polls.
// A poll whose answer is held while blocks are mined is a poll sent before a
// block and answered after it, as on any chain whose blocks come faster than
// a poll's round trip. maxLag is 2; each step mines 4 blocks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { postJson, until } from './harness.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startSteerableProxy, type SteerableProxy } from '../support/steerable-proxy.ts';
import { startWsProxy, type WsProxy } from '../support/ws-proxy.ts';

const MAX_LAG = 2;
const STEP = MAX_LAG + 2;
/** Both nodes start from the same genesis block: one chain, two nodes. */
const SAME_GENESIS = ['--no-mining', '--timestamp', '1700000000'];

let a: Anvil;
let b: Anvil;
let rig: Gateway<{ HTTP_A: Promise<SteerableProxy>; WS_A: Promise<WsProxy>; HTTP_B: Promise<SteerableProxy> }>;
let key: string;

beforeAll(async () => {
  [a, b] = await Promise.all([startAnvil({ args: SAME_GENESIS }), startAnvil({ args: SAME_GENESIS })]);
  rig = await gateway({
    name: 'issue-46-pushed-lag',
    // A held poll must not time out: its answer is what is under test.
    header: { health: { intervalMs: 1000, timeoutMs: 10_000 } },
    chains: [{ path: 'lag', interface: 'evm-jsonrpc', cache: 'off', maxLag: MAX_LAG, upstreams: [{ url: '${HTTP_A}', ws: '${WS_A}' }, '${HTTP_B}'] }],
    keys: [{ id: 'lag' }],
    standIns: { HTTP_A: startSteerableProxy(a.url), WS_A: startWsProxy(a.url.replace(/^http/, 'ws')), HTTP_B: startSteerableProxy(b.url) },
  });
  key = rig.keys.lag!;
  await rig.gw.waitForLog((e) => e.event === 'upstream_socket_open' && e.upstream === 'lag#0', 20_000);
}, 60_000);

afterAll(async () => {
  await rig?.close();
  await Promise.all([a?.stop(), b?.stop()]);
});

async function head(node: Anvil): Promise<number> {
  return Number.parseInt((await node.rpc('eth_blockNumber')).result as string, 16);
}

/** An upstream as /status.json shows it. */
async function upstream(name: string): Promise<{ state: string; head: number | null; lag: number | null }> {
  const status = (await (await fetch(rig.gw.url('admin', '/status.json'))).json()) as { chains: { upstreams: { name: string; state: string; head: number | null; lag: number | null }[] }[] };
  return status.chains.flatMap((c) => c.upstreams).find((u) => u.name === name)!;
}

/** The log's upstream_state lines that took `name` out, from line `from` on. */
function takenOut(name: string, from: number): Record<string, unknown>[] {
  return rig.gw.lines
    .slice(from)
    .filter((l) => l.includes('"event":"upstream_state"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((e) => e.upstream === name && e.to === 'down');
}

/** The held poll's answer has been applied: the proxy answered it and the gateway's next poll of that upstream came (one is out at a time). */
async function applied(proxy: SteerableProxy, polls: number, what: string): Promise<void> {
  await until(async () => proxy.polls.length >= polls + 2, what, 20_000);
}

describe('lag with pushed heads (issue 46)', () => {
  it('an upstream is not judged behind by the head its own socket pushed while its poll was out', async () => {
    const httpA = rig.standIns.HTTP_A;
    const from = rig.gw.lines.length;
    const hold = httpA.holdNextPoll(20_000);
    await hold.arrived;
    // The held answer names at most this head; the blocks after it are pushed while it is held.
    const n = await head(a);
    await b.mine(STEP);
    await a.mine(STEP);
    await until(async () => ((await upstream('lag#0')).head ?? -1) >= n + STEP, "A's pushed head", 20_000);
    const polls = httpA.polls.length;
    hold.release();
    await hold.answered;
    await applied(httpA, polls, "A's poll after the held one");
    expect(takenOut('lag#0', from)).toEqual([]);
    expect(await upstream('lag#0')).toMatchObject({ state: 'up', head: n + STEP, lag: 0 });
  }, 60_000);

  it('a poll-only upstream is judged behind only by blocks the chain had when its poll was sent, and no call goes to it for a block it is not known to have', async () => {
    const httpB = rig.standIns.HTTP_B;
    const from = rig.gw.lines.length;
    const hold = httpB.holdNextPoll(20_000);
    await hold.arrived;
    const m = await head(b);
    // B's node has the blocks before A pushes them; its held answer does not.
    await b.mine(STEP);
    await a.mine(STEP);
    await until(async () => ((await upstream('lag#0')).head ?? -1) >= m + STEP, "A's pushed head", 20_000);
    // B is known at m until its answer comes: a call for the new block goes to A, whatever B's node has.
    const calls = httpB.requests.length;
    for (let i = 0; i < 5; i++) {
      const r = await postJson(rig.gw.url('rpc', '/lag'), key, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x${(m + STEP).toString(16)}",false]}`);
      expect(Number.parseInt(r.json?.result?.number, 16)).toBe(m + STEP);
    }
    expect(httpB.requests.length).toBe(calls);
    const polls = httpB.polls.length;
    hold.release();
    await hold.answered;
    await applied(httpB, polls, "B's poll after the held one");
    expect(takenOut('lag#1', from)).toEqual([]);
    expect((await upstream('lag#1')).state).toBe('up');
    // Blocks the chain had when B's poll was sent, and B's node has not: B is behind, and taken out.
    const out = rig.gw.nextLog((e) => e.event === 'upstream_state' && e.upstream === 'lag#1' && e.to === 'down', 20_000);
    await a.mine(STEP);
    expect(await out).toMatchObject({ lagging: true, head: m + STEP });
  }, 60_000);
});
