// getMempoolFilters on a socket of its own (issue 46): its answer is the whole
// mempool since fromTimestamp, which no parameter bounds, so it never goes on
// an upstream's ONE shared socket (its heads, the chain's subscriptions),
// which an answer over 32 MiB would close. It goes on a short-lived socket to
// the chosen upstream, with the bound on that socket; identical requests
// under way together share one exchange; at most 4 such sockets are open to
// an upstream at once. The stand-ins (blockbook-socket-standin.ts) record
// each upgrade (URL, headers), each message with the socket it came on, and
// the most sockets open at once.
import type { Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateway, type Gateway } from './fixture.ts';
import { metricValue, until } from './harness.ts';
import { standInFilter, startBlockbookWithSocket, type BlockbookWithSocket } from '../support/blockbook-socket-standin.ts';
import { connect, wsUrl, type RpcSocket } from '../support/ws-client.ts';
import { MAX_OWN_SOCKETS } from '../../runtime/kinds/blockbook/socket-own.ts';
import { MAX_MERGE_BYTES } from '../../runtime/kinds/common.ts';

const SCRIPTS = 'taproot-noordinals';
/** Entries (~110 bytes each) that make an answer of ~35 MB, over the 32 MiB bound. */
const HUGE_MEMPOOL = 320_000;
/** How late the stand-ins answer while requests must overlap. */
const SLOW_MS = 400;

const upstream = () => startBlockbookWithSocket({ bestHeight: 100 });
let rig: Gateway<{ A: ReturnType<typeof upstream>; B: ReturnType<typeof upstream>; C: ReturnType<typeof upstream> }>;
let A: BlockbookWithSocket;
let B: BlockbookWithSocket;
let C: BlockbookWithSocket;

beforeAll(async () => {
  rig = await gateway({
    name: 'issue-46-blockbook-own-sockets',
    chains: [
      { path: 'btc', interface: 'blockbook', listener: 'explorer', websocket: true, coin: 'Bitcoin', limits: { timeoutMs: 10_000 }, upstreams: ['${A}', '${B}'] },
      { path: 'one', interface: 'blockbook', listener: 'explorer', websocket: true, coin: 'Bitcoin', limits: { timeoutMs: 10_000 }, upstreams: ['${C}'] },
    ],
    // health.timeoutMs is also the wait for an upstream socket's pong: the stand-ins run in this process, and making a
    // 35 MB answer holds its loop (and their pongs) for seconds on a loaded host.
    header: { health: { intervalMs: 100, timeoutMs: 10_000 }, websocket: { maxConnectionsPerKey: 100, maxInflightPerConnection: 2 } },
    keys: [{ id: 'wallet' }],
    standIns: { A: upstream(), B: upstream(), C: upstream() },
  });
  ({ A, B, C } = rig.standIns);
  await live();
}, 60_000);

afterAll(() => rig?.close());

/** Every upstream's shared socket is up (verified and subscribed to heads), as the status page shows it. */
async function live(): Promise<void> {
  await until(async () => {
    const r = await request(rig.gw.url('admin', '/status.json'));
    const d = (await r.body.json()) as { chains: { upstreams: { socket: string | null }[] }[] };
    return d.chains.every((c) => c.upstreams.every((u) => u.socket === 'up'));
  }, 'every upstream socket up');
}

const url = (chain: string) => wsUrl(rig.gw.url('explorer', `/${chain}/${rig.keys.wallet!}/websocket`));
const sent = (u: BlockbookWithSocket, method: string) => u.ws.messages.filter((m) => m.method === method);
/** The sockets that subscribed to heads: the upstream's shared one, each time it was opened. */
const headSockets = (u: BlockbookWithSocket) => new Set(sent(u, 'subscribeNewBlock').map((m) => m.socket));
const mempool = (id: string, fromTimestamp: number) => ({ id, method: 'getMempoolFilters', params: { scriptType: SCRIPTS, fromTimestamp } });

describe('getMempoolFilters, on a socket of its own', () => {
  it("answers an answer over the bound with an error carrying the client's id; the shared sockets stay open and no other upstream is asked", async () => {
    for (const u of [A, B]) u.ws.mempoolExtra = HUGE_MEMPOOL;
    const heads = [A, B].map((u) => headSockets(u).size);
    const asked = [A, B].map((u) => sent(u, 'getMempoolFilters').length);
    const from = rig.gw.lines.length;
    const s = await connect(url('btc'));
    const a = await s.send(mempool('big', 1), 'big');
    for (const u of [A, B]) u.ws.mempoolExtra = 0;
    expect(a).toEqual({ id: 'big', data: { error: { message: `getMempoolFilters: answer over ${MAX_MERGE_BYTES} bytes: ask with a later fromTimestamp` } } });
    // Asked once, on one upstream: the other's mempool would be as large.
    expect([A, B].map((u, i) => sent(u, 'getMempoolFilters').length - asked[i]!).sort()).toEqual([0, 1]);
    // The client's socket goes on.
    expect(await s.send({ id: 'after', method: 'ping' }, 'after')).toEqual({ id: 'after', data: {} });
    // The shared sockets were never lost: no new connection for heads, no socket down, and heads still arrive.
    expect([A, B].map((u) => headSockets(u).size)).toEqual(heads);
    expect(rig.gw.lines.slice(from).filter((l) => l.includes('upstream_socket_down'))).toEqual([]);
    await s.send({ id: 'blocks', method: 'subscribeNewBlock', params: {} }, 'blocks');
    const h = A.bb.bestHeight + 1;
    for (const u of [A, B]) u.bb.setBestHeight(h);
    for (const u of [A, B]) u.ws.newBlock(h, u.bb.blockHash(h));
    await s.until(() => s.frames.some((f) => f.includes(`"height":${h}`)), 20_000, `block ${h}`);
    expect([A, B].map((u) => headSockets(u).size)).toEqual(heads);
    await s.close();
  }, 60_000);

  it("answers a mempool intact, on a socket that carried it alone, opened as the shared one is (URL, headers), with no client's key, counted as the upstream's attempt", async () => {
    // The upstream's attempts, as forwarded HTTP calls count them (its tally, which the pool's score reads).
    const attempts = () => metricValue(rig.gw, 'gateway_upstream_requests_total', '{chain="one",upstream="one#0",outcome="ok"}');
    const before = await attempts();
    C.ws.mempoolExtra = 2000;
    const s = await connect(url('one'));
    const a = await s.send(mempool('m', 42), 'm');
    C.ws.mempoolExtra = 0;
    const entries = Object.values(a.data.entries as Record<string, string>);
    expect(entries).toHaveLength(2001);
    expect(entries[0]).toBe(standInFilter('mempool:42'));
    const m = sent(C, 'getMempoolFilters').at(-1)!;
    expect(m.params).toEqual({ scriptType: SCRIPTS, fromTimestamp: 42 });
    // A socket of its own: not the one heads come on, and it carried this message alone.
    expect(headSockets(C).has(m.socket)).toBe(false);
    expect(C.ws.messages.filter((x) => x.socket === m.socket)).toHaveLength(1);
    const own = C.ws.upgrades.find((u) => u.socket === m.socket)!;
    const shared = C.ws.upgrades.find((u) => headSockets(C).has(u.socket))!;
    expect(own.url).toBe(shared.url);
    expect(own.headers['user-agent']).toBe(shared.headers['user-agent']);
    expect(own.headers['x-api-key']).toBeUndefined();
    expect(JSON.stringify(own)).not.toContain(rig.keys.wallet!);
    expect(await attempts()).toBe(before + 1);
    await s.close();
  }, 60_000);

  it('gives a client that reads an answer longer than its maxBufferedBytes (4 MiB) whole, and keeps its socket open', async () => {
    // ~6 MB of entries: over the client's 4 MiB of unsent data, under the own socket's 32 MiB.
    C.ws.mempoolExtra = 55_000;
    const s = await connect(url('one'));
    const a = await s.send(mempool('wide', 7), 'wide');
    C.ws.mempoolExtra = 0;
    expect(Object.keys(a.data.entries as Record<string, string>)).toHaveLength(55_001);
    expect(s.frames.find((f) => f.includes('"id":"wide"'))!.length).toBeGreaterThan(4 * 1024 * 1024);
    // Not taken for a slow consumer: the socket goes on.
    expect(await s.send({ id: 'after', method: 'ping' }, 'after')).toEqual({ id: 'after', data: {} });
    await s.close();
  }, 60_000);

  it('closes (1013, slow) a client that leaves such an answer unread past the grace a closing socket gets', async () => {
    C.ws.mempoolExtra = 55_000;
    const s = await connect(url('one'));
    const closing = rig.gw.nextLog((e) => e.event === 'ws_closing' && e.reason === 'slow', 30_000);
    // It reads nothing from here: the ~6 MB answer stays in the gateway's buffer past maxBufferedBytes.
    (s.ws as unknown as { _socket: Socket })._socket.pause();
    s.ws.send(JSON.stringify(mempool('unread', 9)));
    const line = await closing;
    C.ws.mempoolExtra = 0;
    expect(line.bufferedBytes).toBeGreaterThan(4 * 1024 * 1024);
    (s.ws as unknown as { _socket: Socket })._socket.resume();
    expect((await s.closed).code).toBe(1013);
  }, 60_000);

  it('joins identical requests under way together onto one upstream exchange', async () => {
    for (const u of [A, B]) u.ws.delays.set('getMempoolFilters', SLOW_MS);
    const asked = sent(A, 'getMempoolFilters').length + sent(B, 'getMempoolFilters').length;
    const clients = await Promise.all(Array.from({ length: 10 }, () => connect(url('btc'))));
    // Two each (maxInflightPerConnection), the same parameters.
    const answers = await Promise.all(clients.flatMap((s) => [s.send(mempool('x', 77), 'x'), s.send(mempool('y', 77), 'y')]));
    for (const u of [A, B]) u.ws.delays.delete('getMempoolFilters');
    for (const a of answers) expect(Object.values(a.data.entries)).toEqual([standInFilter('mempool:77')]);
    expect(answers.map((a) => a.id).sort()).toEqual([...Array(10).fill('x'), ...Array(10).fill('y')]);
    expect(sent(A, 'getMempoolFilters').length + sent(B, 'getMempoolFilters').length).toBe(asked + 1);
    await Promise.all(clients.map((s) => s.close()));
  }, 60_000);

  it(`holds the sockets of their own to ${MAX_OWN_SOCKETS} an upstream: more requests wait and are answered, the upstream never sees more`, async () => {
    // Only the shared socket open (an earlier test's own socket closed): the peak counts this test's.
    await until(async () => C.ws.open === 1, 'only the shared socket open');
    C.ws.delays.set('getMempoolFilters', SLOW_MS);
    C.ws.peak = 1;
    const asked = sent(C, 'getMempoolFilters').length;
    const clients: RpcSocket[] = await Promise.all(Array.from({ length: 6 }, () => connect(url('one'))));
    // Twelve different requests at once: three times the cap.
    const answers = await Promise.all(clients.flatMap((s, i) => [s.send(mempool('p', 1000 + 2 * i), 'p'), s.send(mempool('q', 1001 + 2 * i), 'q')]));
    C.ws.delays.delete('getMempoolFilters');
    answers.forEach((a, k) => expect(Object.values(a.data.entries)).toEqual([standInFilter(`mempool:${1000 + k}`)]));
    const ours = sent(C, 'getMempoolFilters').slice(asked);
    expect(ours).toHaveLength(12);
    // Each on a socket of its own, none on the shared one; at most the cap of them open at once beside it.
    expect(new Set(ours.map((m) => m.socket)).size).toBe(12);
    for (const m of ours) expect(headSockets(C).has(m.socket)).toBe(false);
    expect(C.ws.peak).toBe(1 + MAX_OWN_SOCKETS);
    await until(async () => C.ws.open === 1, 'the sockets of their own closed');
    await Promise.all(clients.map((s) => s.close()));
  }, 60_000);
});
