// Issue 46, heads pushed by the nodes: the built gateway in front of anvil,
// each upstream's ws endpoint behind a stand-in that counts its upgrades and
// can be killed, restored or muted (test/support/ws-proxy.ts).
//  - pool: two upstreams with `ws:`, cached, polled every 10 s (headPollMs and
//    health.intervalMs): a block named by eth_blockNumber and sent to a
//    subscriber well within a second can only have been pushed; one upstream
//    socket per upstream whatever the number of clients; a reorg pushed;
//  - fall: one upstream, polled every second (a websocket chain without the
//    cache), its ws URL holding a provider-like key: fallback to the polls
//    while its socket is down and back, a quiet socket dropped and opened
//    again, a socket whose peer is gone without a FIN (no pong, nothing
//    passed) dropped and opened again while the polls carry the heads, and
//    the key never in the log;
//  - other: an upstream whose ws URL reaches a node of another chain;
//  - plain: one upstream with `ws:` on a chain that does not follow its head
//    (no cache, no pool, no websocket): no socket is opened for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { postJson, until } from './harness.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startWsProxy, type WsProxy } from '../support/ws-proxy.ts';
import { connect, wsUrl, type RpcSocket } from '../support/ws-client.ts';

const SECRET = 'ws-url-secret-0f1e2d3c4b5a69788796a5b4c3d2e1f0';
/** Far above what a push takes, far below the 10 s between polls. */
const PUSHED_MS = 1000;

let anvil: Anvil;
let other: Anvil;
let rig: Gateway<{ NODE_F: Promise<RecordingProxy>; WS_A1: Promise<WsProxy>; WS_A2: Promise<WsProxy>; WS_F: Promise<WsProxy>; WS_O: Promise<WsProxy>; WS_P: Promise<WsProxy> }>;
let key: string;

const wsOf = (a: Anvil) => a.url.replace(/^http/, 'ws');

beforeAll(async () => {
  [anvil, other] = await Promise.all([startAnvil({ args: ['--no-mining'] }), startAnvil({ chainId: 999, args: ['--no-mining'] })]);
  rig = await gateway({
    name: 'issue-46-head-sockets',
    header: { health: { intervalMs: 10_000, timeoutMs: 2000 }, cache: { headPollMs: 10_000 } },
    chains: [
      {
        path: 'pool',
        interface: 'evm-jsonrpc',
        websocket: true,
        upstreams: [
          { url: '${NODE}', ws: '${WS_A1}' },
          { url: '${NODE}', ws: '${WS_A2}' },
        ],
      },
      { path: 'fall', interface: 'evm-jsonrpc', websocket: true, cache: 'off', upstreams: [{ url: '${NODE_F}', ws: '${WS_F}' }] },
      { path: 'other', interface: 'evm-jsonrpc', websocket: true, cache: 'off', chainId: 31337, upstreams: [{ url: '${NODE}', ws: '${WS_O}' }] },
      { path: 'plain', interface: 'evm-jsonrpc', cache: 'off', upstreams: [{ url: '${NODE}', ws: '${WS_P}' }] },
    ],
    keys: [{ id: 'heads' }],
    standIns: {
      NODE_F: startRecordingProxy(anvil.url),
      WS_A1: startWsProxy(wsOf(anvil)),
      WS_A2: startWsProxy(wsOf(anvil)),
      WS_F: startWsProxy(wsOf(anvil), `/ws/v3/${SECRET}`),
      WS_O: startWsProxy(wsOf(other)),
      WS_P: startWsProxy(wsOf(anvil)),
    },
    env: { NODE: anvil.url },
  });
  key = rig.keys.heads!;
  // Every socket verified and subscribed (the wrong chain's never is).
  for (const [chain, upstream] of [['pool', 'pool#0'], ['pool', 'pool#1'], ['fall', 'fall#0']]) {
    await rig.gw.waitForLog((e) => e.event === 'upstream_socket_open' && e.chain === chain && e.upstream === upstream, 20_000);
  }
}, 60_000);

afterAll(async () => {
  await rig?.close();
  await Promise.all([anvil?.stop(), other?.stop()]);
});

async function nodeHead(a: Anvil = anvil): Promise<number> {
  return Number.parseInt((await a.rpc('eth_blockNumber')).result as string, 16);
}

async function blockNumber(chain: string): Promise<number> {
  const a = await postJson(rig.gw.url('rpc', `/${chain}`), key, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}');
  if (typeof a.json?.result !== 'string') throw new Error(`eth_blockNumber on /${chain}: ${a.status} ${a.text}`);
  return Number.parseInt(a.json.result, 16);
}

/** An upstream's head socket as /status.json shows it. */
async function socketState(upstream: string): Promise<unknown> {
  const status = (await (await fetch(rig.gw.url('admin', '/status.json'))).json()) as { chains: { upstreams: { name: string; socket: unknown }[] }[] };
  return status.chains.flatMap((c) => c.upstreams).find((u) => u.name === upstream)?.socket;
}

async function subscriber(chain: string): Promise<{ s: RpcSocket; id: string; has: (n: number) => boolean; hash: (n: number) => string | undefined }> {
  const s = await connect(wsUrl(rig.gw.url('rpc', `/${chain}`)), { 'x-api-key': key });
  const id = await s.subscribe('newHeads');
  const at = (n: number) => s.of(id).filter((x) => Number.parseInt(x.result.number, 16) === n);
  return { s, id, has: (n) => at(n).length > 0, hash: (n) => at(n).at(-1)?.result.hash };
}

/** Mines one block; ms from anvil_mine's answer until `seen` holds (checked as the frames and answers come). */
async function mineAndTime(seen: (n: number) => Promise<boolean>, what: string, ms = 20_000): Promise<{ n: number; ms: number }> {
  const n = (await nodeHead()) + 1;
  await anvil.mine();
  const t0 = performance.now();
  await until(() => seen(n), what, ms).catch(async (err: Error) => {
    // What the gateway knew of its upstreams then, and what it said of them, to tell why.
    const status = await (await fetch(rig.gw.url('admin', '/status.json'))).text();
    const said = rig.gw.lines.filter((l) => /upstream_|ws_feed|circuit/.test(l)).slice(-20);
    throw new Error(`${err.message} (block ${n}); status: ${status.slice(0, 4000)}; log: ${said.join('\n')}`);
  });
  return { n, ms: performance.now() - t0 };
}

describe('heads pushed by the nodes (issue 46)', () => {
  it('keeps a socket that has pushed nothing while the polls show no new block (quiet is not silent)', async () => {
    const polls = rig.standIns.NODE_F.healthChecks;
    const from = polls.length;
    await until(async () => polls.length >= from + 3, 'three more polls of fall', 20_000);
    expect(rig.standIns.WS_F.upgrades.length).toBe(1);
    expect(rig.gw.lines.filter((l) => l.includes('"event":"upstream_socket_') && l.includes('"chain":"fall"')).map((l) => JSON.parse(l).event)).toEqual(['upstream_socket_open']);
  }, 30_000);

  it('a new block is named by eth_blockNumber on a pool, and reaches a subscriber, well before the 10 s poll', async () => {
    const sub = await subscriber('pool');
    for (let i = 0; i < 3; i++) {
      const http = await mineAndTime(async (n) => (await blockNumber('pool')) >= n, 'eth_blockNumber naming the new block');
      expect(http.ms).toBeLessThan(PUSHED_MS);
      const ws = await mineAndTime(async (n) => sub.has(n), 'the new block at the subscriber');
      expect(ws.ms).toBeLessThan(PUSHED_MS);
    }
    await sub.s.close();
  }, 60_000);

  it('holds one socket per upstream, whatever the number of clients', async () => {
    const [a1, a2] = [rig.standIns.WS_A1, rig.standIns.WS_A2];
    const subs = await Promise.all(Array.from({ length: 40 }, () => subscriber('pool')));
    const { n } = await mineAndTime(async (m) => subs.every((x) => x.has(m)), 'the block at all 40 subscribers');
    expect(subs.every((x) => x.has(n))).toBe(true);
    expect([a1.upgrades.length, a2.upgrades.length, a1.open, a2.open]).toEqual([1, 1, 1, 1]);
    await Promise.all(subs.map((x) => x.s.close()));
  }, 60_000);

  it('a reorg pushed by the node (same height, another hash) reaches the subscribers and the cache at once', async () => {
    const sub = await subscriber('pool');
    const { n } = await mineAndTime(async (m) => sub.has(m), 'the block to be replaced');
    const old = sub.hash(n)!;
    await anvil.rpc('anvil_reorg', [1, []]);
    const t0 = performance.now();
    const fresh = ((await anvil.rpc('eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).result as { hash: string }).hash;
    expect(fresh).not.toBe(old);
    await sub.s.until(() => sub.hash(n) === fresh, 20_000, 'the replacing block');
    expect(performance.now() - t0).toBeLessThan(PUSHED_MS);
    // The cached chain answers the new branch: the push ended the epoch.
    const byNumber = await postJson(rig.gw.url('rpc', '/pool'), key, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x${n.toString(16)}",false]}`);
    expect(byNumber.json.result.hash).toBe(fresh);
    await sub.s.close();
  }, 60_000);

  it('falls back to the polls while the socket is down, and is pushed again once it is back', async () => {
    const proxy = rig.standIns.WS_F;
    const polls = rig.standIns.NODE_F.healthChecks;
    const sub = await subscriber('fall');
    const down = rig.gw.nextLog((e) => e.event === 'upstream_socket_down' && e.chain === 'fall', 20_000);
    await proxy.kill();
    await down;
    expect(await socketState('fall#0')).toBe('down');
    // Down: the block comes with the next poll (every second), and nothing came through the socket.
    const relayed = proxy.relayed;
    const polled = await mineAndTime(async (n) => sub.has(n), 'the block through the polls');
    expect(proxy.relayed).toBe(relayed);
    expect(polled.ms).toBeLessThan(5000);
    // Back: opened again (a new upgrade), subscribed, and a block comes before any poll reached the node.
    const upgrades = proxy.upgrades.length;
    const open = rig.gw.nextLog((e) => e.event === 'upstream_socket_open' && e.chain === 'fall', 40_000);
    await proxy.restore();
    await open;
    expect(proxy.upgrades.length).toBeGreaterThan(upgrades);
    expect(await socketState('fall#0')).toBe('up');
    let clean = 0;
    for (let i = 0; i < 5 && clean === 0; i++) {
      const before = polls.length;
      const t = await mineAndTime(async (n) => sub.has(n), 'the block through the socket again');
      // A poll may have fallen between the mine and the notification (1 s apart): then the sample proves nothing.
      if (polls.length === before) {
        clean++;
        expect(t.ms).toBeLessThan(PUSHED_MS);
      }
    }
    expect(clean).toBe(1);
    await sub.s.close();
  }, 90_000);

  it('a socket that goes quiet while the polls show new blocks is dropped and opened again', async () => {
    const proxy = rig.standIns.WS_F;
    const sub = await subscriber('fall');
    const upgrades = proxy.upgrades.length;
    const quiet = rig.gw.nextLog((e) => e.event === 'upstream_socket_quiet' && e.chain === 'fall', 20_000);
    const reopened = rig.gw.nextLog((e) => e.event === 'upstream_socket_open' && e.chain === 'fall', 40_000);
    proxy.mute();
    const { n } = await mineAndTime(async (m) => sub.has(m), 'the block through the polls');
    const q = await quiet;
    expect(q.missed).toBe(n);
    await reopened;
    expect(proxy.upgrades.length).toBe(upgrades + 1);
    await sub.s.close();
  }, 60_000);

  it('a socket whose peer answers no ping (half-open, no FIN) is dropped and opened again, and the polls carry the heads meanwhile', async () => {
    const proxy = rig.standIns.WS_F;
    const sub = await subscriber('fall');
    const upgrades = proxy.upgrades.length;
    // No block is mined until it is dropped: no poll shows one it did not push, so only the ping can tell.
    const gone = rig.gw.nextLog((e) => e.event === 'upstream_socket_no_pong' && e.chain === 'fall', 20_000);
    const down = rig.gw.nextLog((e) => e.event === 'upstream_socket_down' && e.chain === 'fall', 20_000);
    proxy.hang();
    const [said, closed] = await Promise.all([gone, down]);
    expect(said).toMatchObject({ upstream: 'fall#0', waitedMs: 2000 });
    expect(closed).toMatchObject({ reason: 'no_pong' });
    // Opened again (counted at the stand-in), and, its peer still gone, never subscribed.
    await until(async () => proxy.upgrades.length > upgrades, 'the socket opened again', 20_000);
    expect(await socketState('fall#0')).toBe('down');
    const relayed = proxy.relayed;
    await mineAndTime(async (n) => sub.has(n), 'the block through the polls');
    expect(proxy.relayed).toBe(relayed);
    // The node's side back: a socket opened from now on is subscribed, and pushes again.
    const open = rig.gw.nextLog((e) => e.event === 'upstream_socket_open' && e.chain === 'fall', 40_000);
    proxy.unhang();
    await open;
    expect(await socketState('fall#0')).toBe('up');
    await mineAndTime(async (n) => sub.has(n), 'the block through the socket again');
    expect(proxy.relayed).toBeGreaterThan(relayed);
    await sub.s.close();
  }, 90_000);

  it('never counts the head of a socket that serves another chain than the polls verified', async () => {
    const wrong = await rig.gw.waitForLog((e) => e.event === 'upstream_socket_wrong_chain' && e.chain === 'other', 20_000);
    expect(wrong).toMatchObject({ upstream: 'other#0', serves: 'chainId 999', expected: 'chainId 31337' });
    const sub = await subscriber('other');
    // The other chain's node runs far ahead; the chain's own follows its node alone.
    await other.mine(50);
    await other.mine();
    const n = (await nodeHead()) + 1;
    await anvil.mine();
    await sub.s.until(() => sub.has(n), 20_000, 'the own node block');
    const heights = sub.s.of(sub.id).map((x) => Number.parseInt(x.result.number, 16));
    expect(Math.max(...heights)).toBe(n);
    expect(heights.every((h) => h <= n)).toBe(true);
    await sub.s.close();
  }, 60_000);

  it('opens no socket for a chain that does not follow its head, whatever its upstream names', async () => {
    // By now every other socket has been opened (beforeAll waited for them), and blocks were mined and polled.
    expect(rig.standIns.WS_P.upgrades).toHaveLength(0);
    expect(await socketState('plain#0')).toBeNull();
  });

  it('never writes the ws URL (it holds a key) in its log', async () => {
    expect(rig.gw.lines.some((l) => l.includes('upstream_socket_down'))).toBe(true);
    expect([...rig.gw.lines, ...rig.gw.stderr].filter((l) => l.includes(SECRET) || l.includes('/ws/v3/'))).toEqual([]);
    expect(rig.standIns.WS_F.upgrades.every((u) => u.path === `/ws/v3/${SECRET}`)).toBe(true);
  });
});
