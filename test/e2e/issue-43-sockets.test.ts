// Issue 43, "Sockets" (rules 12 to 18), through the built gateway in front of
// anvil (no automatic mining: blocks come when a test mines them), with a
// tweak proxy between the two that answers the calls a test picks late and
// records every call that reached the node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { request } from 'undici';
import { SignJWT } from 'jose';
import { keysYaml, metricValue, newKey, sha256, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startTweakProxy, type TweakProxy } from '../support/tweak-proxy.ts';
import { connect, wsUrl } from '../support/ws-client.ts';

const KEY = newKey();
const OTHER = newKey();
const LIMITED = newKey();
const WEB = newKey();
const LATER = newKey();
const SIGNED = newKey();
const AUDIENCE = 'chain-gateway-43';
const es = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const MiB = 1024 * 1024;
/** How late the proxy answers a call a test slows down. */
const SLOW_MS = 8_000;

let anvil: Anvil;
let proxy: TweakProxy;
/** Two builds on the file's anvil and proxy: gw pings each second; drainGw drains for up to 20 s. */
let rigs: Gateway[] = [];
let gw: RunningGateway;
let drainGw: RunningGateway;
let dir = '';

const build = (name: string, extra: Record<string, unknown>) =>
  gateway({
    name,
    chains: [evmChain('live', ['NODE'], { websocket: true, limits: { maxBodyBytes: 1048576, timeoutMs: 30000 } })],
    header: { health: { intervalMs: 100, timeoutMs: 1000 }, jwtAudience: AUDIENCE, ...extra },
    keys: keysFile(),
    env: { NODE: proxy.url },
  });

/** The keys file; `changes` are the entries a reload rewrites (web's origins, later's quota, an expiring key). */
function keysFile(changes: { webOrigin?: string; laterQuota?: string; expiring?: { key: string; at: string } } = {}): string {
  return (
    keysYaml([
      { id: 'all', key: KEY },
      { id: 'other', key: OTHER },
      { id: 'limited', key: LIMITED, rateLimit: '1/min' },
    ]) +
    `  - id: web\n    sha256: "${sha256(WEB)}"\n    allow:\n      origins: ["${changes.webOrigin ?? 'https://app.example'}"]\n` +
    `  - id: later\n    sha256: "${sha256(LATER)}"\n${changes.laterQuota ? `    quota: ${changes.laterQuota}\n` : ''}` +
    (changes.expiring ? `  - id: expiring\n    sha256: "${sha256(changes.expiring.key)}"\n    expires: "${changes.expiring.at}"\n` : '') +
    `  - id: signed\n    sha256: "${sha256(SIGNED)}"\n    jwt:\n      keys:\n        - { kid: k1, alg: ES256, pem: ${JSON.stringify(es.publicKey.export({ type: 'spki', format: 'pem' }).toString())} }\n`
  );
}

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  proxy = await startTweakProxy(anvil.url);
  rigs = await Promise.all([build('issue-43-sockets', { websocket: { pingIntervalMs: 1000 } }), build('issue-43-drain', { drainTimeoutMs: 20000 })]);
  [gw, drainGw] = rigs.map((r) => r.gw) as [RunningGateway, RunningGateway];
  dir = rigs[0]!.built.dir;
}, 90_000);

afterAll(async () => {
  await Promise.all(rigs.map((r) => r.close()));
  await proxy?.close();
  await anvil?.stop();
});

const url = (g: RunningGateway, path: string) => wsUrl(g.url('rpc', path));
const head = async () => Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
const call = (id: number, method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

/** Resolves once `cond` holds, polled every 20 ms (rejects after `ms`). */
async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The gateway's resident memory: now, or its peak since the last resetPeak(). */
function rss(g: RunningGateway, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${g.proc.pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}
function resetPeak(g: RunningGateway): void {
  writeFileSync(`/proc/${g.proc.pid}/clear_refs`, '5');
}

/** Reloads the keys file and waits for the gateway to have it. */
async function reload(changes: Parameters<typeof keysFile>[0]): Promise<void> {
  const reloaded = gw.nextLog((e) => e.event === 'keys_reloaded');
  writeFileSync(join(dir, 'keys.yaml'), keysFile(changes));
  await reloaded;
}

describe('rule 12: no socket grows without bound', () => {
  it('keeps at most maxInflightPerConnection (64) calls of a flooding socket in flight, RSS bounded, another key answered within 100 ms, and cancels its calls when it closes', async () => {
    proxy.tweak = (a) => (a.rpcMethod === 'eth_call' ? { delayMs: SLOW_MS } : undefined);
    const before = proxy.count('eth_call');
    const flood = await connect(url(gw, '/live'), { 'x-api-key': KEY });
    await new Promise((r) => setTimeout(r, 200));
    resetPeak(gw);
    const base = rss(gw, 'VmRSS');
    // 1,500 calls of ~100 KB each (150 MB), all sent at once.
    const data = `0x${'ab'.repeat(50_000)}`;
    // The node's proxy runs in this process: the loop lets it answer the gateway's polls every 25 messages (2.5 MB),
    // or on a loaded host the polls time out while it frames 150 MB, the lone upstream is marked down and the calls
    // are answered -32052 without reaching it. The gateway still gets them as fast as its socket takes them.
    for (let i = 0; i < 1500; i++) {
      flood.ws.send(JSON.stringify(call(i + 1, 'eth_call', [{ to: `0x${'11'.repeat(20)}`, data }, 'latest'])));
      if (i % 25 === 24) await new Promise((r) => setImmediate(r));
    }
    // Generous: the test's own process writes the 150 MB while the gateway reads, on two cores shared with the suite.
    await until(() => proxy.count('eth_call') - before >= 64, 60_000, '64 calls at the node');
    // Another key's call over HTTP, meanwhile: the socket holds 64 of the chain's connections at most.
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      const r = await request(gw.url('rpc', '/live'), { method: 'POST', headers: { 'x-api-key': OTHER, 'content-type': 'application/json' }, body: JSON.stringify(call(1, 'eth_blockNumber')) });
      expect((await r.body.json()) as object).toMatchObject({ result: expect.stringMatching(/^0x/) });
      times.push(performance.now() - t);
    }
    // The median of five: one call slowed by the machine's other work (tests share two cores) says nothing of the socket.
    times.sort((x, y) => x - y);
    const inFlight = proxy.count('eth_call') - before;
    const grew = rss(gw, 'VmHWM') - base;
    console.log(`issue 43 rule 12: ${inFlight} calls at the node; HTTP call ${times.map((t) => t.toFixed(0)).join('/')} ms; peak RSS growth ${(grew / MiB).toFixed(1)} MiB`);
    // No answer has come back yet (SLOW_MS): the cap is all that went.
    expect(inFlight).toBe(64);
    expect(times[2]).toBeLessThan(100);
    // 64 messages of 100 KB, each held a few times over (the frame, the parsed params, the upstream body) with the
    // garbage not yet collected: far under the 150 MB sent (the old gateway grew 189 MB with this flood).
    expect(grew).toBeLessThan(64 * MiB);
    // The socket closes: its 64 calls under way are cancelled (status 0 in the access log), and none of the rest is sent.
    const cancelled = () => gw.lines.filter((l) => l.includes('"method":"eth_call","status":0')).length;
    const cancelledBefore = cancelled();
    flood.ws.terminate();
    await until(() => cancelled() - cancelledBefore >= 64, 20_000, '64 cancelled calls in the access log');
    await new Promise((r) => setTimeout(r, 1_000));
    expect(proxy.count('eth_call') - before).toBe(64);
    proxy.tweak = () => undefined;
  }, 120_000);

  it('leaves no subscription behind for a socket that closed while its eth_subscribe was admitted (a JWT verified)', async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ sub: 'dapp' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setExpirationTime(now + 600).setAudience(AUDIENCE).sign(es.privateKey);
    const auth = { authorization: `Bearer ${token}` };
    // Each socket asks to subscribe and goes at once: the JWT is verified (asynchronously) after the socket closed.
    for (let i = 0; i < 5; i++) {
      const s = await connect(url(gw, `/live/${SIGNED}`), auth);
      const closed = gw.nextLog((e) => e.event === 'ws_close' && e.keyId === 'signed');
      s.ws.send(JSON.stringify(call(1, 'eth_subscribe', ['newHeads'])));
      s.ws.terminate();
      await closed;
    }
    // A socket that stays: its own subscribe, verified after those, is answered; once it is gone too, none is held.
    const last = await connect(url(gw, `/live/${SIGNED}`), auth);
    await last.subscribe('newHeads');
    last.ws.close();
    await last.closed;
    const held = () => metricValue(gw, 'gateway_ws_subscriptions', '{chain="live",type="newHeads"}');
    const end = Date.now() + 10_000;
    while ((await held()) !== 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(await held()).toBe(0);
  }, 60_000);
});

/** Writes `head` (an HTTP request head) and `bodyBytes` of body in 1 MiB chunks; the answer as it came, with the bytes the socket took. */
function upgradeRequest(head: string, bodyBytes: number): Promise<{ status: number; text: string; sent: number; closedBy: 'end' | 'error' }> {
  return new Promise((resolve) => {
    const s: Socket = tcpConnect(gw.ports.rpc!, '127.0.0.1');
    const chunks: Buffer[] = [];
    let sent = 0;
    let closedBy: 'end' | 'error' = 'end';
    s.on('data', (c) => chunks.push(c));
    s.on('error', () => (closedBy = 'error'));
    s.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ status: Number(text.split(' ')[1]), text, sent, closedBy });
    });
    s.write(head);
    const chunk = Buffer.alloc(MiB, 0x7b);
    const more = (): void => {
      while (sent < bodyBytes && !s.destroyed) {
        const n = Math.min(MiB, bodyBytes - sent);
        sent += n;
        if (!s.write(n === MiB ? chunk : chunk.subarray(0, n))) return void s.once('drain', more);
      }
    };
    s.once('connect', more);
  });
}

const h2cHead = (key: string | null, length: number) =>
  `POST /live HTTP/1.1\r\nhost: 127.0.0.1\r\n${key === null ? '' : `x-api-key: ${key}\r\n`}content-type: application/json\r\ncontent-length: ${length}\r\n` +
  `connection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n`;

describe('rule 13: a non-WebSocket upgrade request crosses the same edge as a plain request', () => {
  it('answers a 60 MB Upgrade: h2c POST without a key with 401 before its body, RSS growing by less than 5 MB', async () => {
    await new Promise((r) => setTimeout(r, 200));
    resetPeak(gw);
    const base = rss(gw, 'VmRSS');
    const r = await upgradeRequest(h2cHead(null, 60_000_000), 60_000_000);
    const grew = rss(gw, 'VmHWM') - base;
    console.log(`issue 43 rule 13: 60 MB h2c POST without a key: ${r.status}, ${(r.sent / MiB).toFixed(0)} MiB written, peak RSS growth ${(grew / 1024).toFixed(0)} KiB`);
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4)).error.code).toBe(-32040);
    expect(grew).toBeLessThan(5 * MiB);
  }, 60_000);

  it('answers the head alone: 401 without a key, 413 for a Content-Length over maxBodyBytes, without waiting for a byte of the body', async () => {
    const calls = proxy.arrivals.length;
    // The body is never sent: the answer comes from the head.
    expect((await upgradeRequest(h2cHead(null, 10_000), 0)).status).toBe(401);
    const big = await upgradeRequest(h2cHead(KEY, 2 * MiB), 0);
    expect(big.status).toBe(413);
    expect(JSON.parse(big.text.slice(big.text.indexOf('\r\n\r\n') + 4)).error).toEqual({ code: -32005, message: 'Limit exceeded: request body too large' });
    expect(proxy.arrivals.length).toBe(calls);
    // Within the limit, with a key: served as the POST it is.
    const body = JSON.stringify(call(7, 'eth_chainId'));
    const ok = await new Promise<string>((resolve) => {
      const s = tcpConnect(gw.ports.rpc!, '127.0.0.1', () => s.write(h2cHead(KEY, Buffer.byteLength(body)) + body));
      const chunks: Buffer[] = [];
      s.on('data', (c) => chunks.push(c));
      s.on('close', () => resolve(Buffer.concat(chunks).toString()));
    });
    expect(ok.split(' ')[1]).toBe('200');
    expect(JSON.parse(ok.slice(ok.indexOf('\r\n\r\n') + 4))).toEqual({ jsonrpc: '2.0', id: 7, result: '0x7a69' });
  }, 30_000);

  it('drops a connection whose body stops coming (read timeout)', async () => {
    const t = performance.now();
    const closed = await new Promise<string>((resolve) => {
      const s = tcpConnect(gw.ports.rpc!, '127.0.0.1', () => s.write(`${h2cHead(KEY, 100)}{"jsonrpc"`));
      const chunks: Buffer[] = [];
      s.on('data', (c) => chunks.push(c));
      s.on('error', () => {});
      s.on('close', () => resolve(Buffer.concat(chunks).toString()));
    });
    expect(closed).toBe('');
    expect(performance.now() - t).toBeLessThan(25_000);
  }, 40_000);
});

describe('rule 14: an open socket is admitted again at every ping interval', () => {
  it('closes a socket with 1008 once its key expires', async () => {
    const key = newKey();
    await reload({ expiring: { key, at: new Date(Date.now() + 6_000).toISOString() } });
    const s = await connect(url(gw, `/live/${key}`));
    await s.subscribe('newHeads');
    expect(await s.closed).toEqual({ code: 1008, reason: "refused by the key's policy: expired" });
  }, 30_000);

  it("closes a socket with 1008 once a reload takes its origin from the key's policy", async () => {
    const s = await connect(url(gw, `/live/${WEB}`), { origin: 'https://app.example' });
    await s.subscribe('newHeads');
    await reload({ webOrigin: 'https://other.example' });
    expect(await s.closed).toEqual({ code: 1008, reason: "refused by the key's policy: origin" });
    await reload({});
  }, 30_000);

  it("closes a socket with 1008 once its JWT's exp passes", async () => {
    const now = Math.floor(Date.now() / 1000);
    // jose allows 30 s of leeway (keys/jwt.ts): this token verifies for about 6 s more.
    const token = await new SignJWT({ sub: 'dapp' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuedAt(now - 60).setExpirationTime(now - 24).setAudience(AUDIENCE).sign(es.privateKey);
    const s = await connect(url(gw, `/live/${SIGNED}`), { authorization: `Bearer ${token}` });
    expect((await s.call('eth_chainId')).result).toBe('0x7a69');
    expect(await s.closed).toEqual({ code: 1008, reason: "refused by the key's policy: jwt" });
  }, 30_000);

  it("applies a quota set by a reload to the socket's notifications", async () => {
    const s = await connect(url(gw, `/live/${LATER}`));
    const sub = await s.subscribe('newHeads');
    await reload({ laterQuota: '3/day' });
    // The entry is taken up at the next recheck (each ping interval, 1 s; no event to wait on), then the quota counts
    // the notifications; a recheck that comes later only means more blocks before the close.
    await new Promise((r) => setTimeout(r, 1_500));
    for (let i = 0; i < 10 && s.ws.readyState === s.ws.OPEN; i++) {
      await anvil.mine(1);
      const h = await head();
      await Promise.race([s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === h), 10_000), s.closed]);
    }
    // Closed for the quota only the reloaded entry has (the entry it opened with has none).
    expect(await s.closed).toEqual({ code: 1008, reason: 'quota exceeded' });
    expect(await gw.waitForLog((e) => e.event === 'ws_close' && e.keyId === 'later')).toMatchObject({ reason: 'quota' });
    await reload({});
  }, 60_000);
});

describe('rule 15: a batch subscription notifies only after the batch answer', () => {
  it('sends the batch answer before any notification of the subscription it made, with a slow call in the batch', async () => {
    // The batch's other call goes to the node as a batch of one.
    const balance = () => proxy.arrivals.filter((a) => a.body.includes('eth_getBalance')).length;
    proxy.tweak = (a) => (a.body.includes('eth_getBalance') ? { delayMs: 2_000 } : undefined);
    const s = await connect(url(gw, '/live'), { 'x-api-key': KEY });
    const arrived = balance();
    const answer = s.batch([call(1, 'eth_subscribe', ['newHeads']), call(2, 'eth_getBalance', [`0x${'22'.repeat(20)}`, 'latest'])]);
    await until(() => balance() > arrived, 10_000, 'the slow call at the node');
    // Blocks come while the batch waits for its slow call.
    await anvil.mine(3);
    const h = await head();
    const a = await answer;
    proxy.tweak = () => undefined;
    const sub = a.find((x) => x.id === 1).result as string;
    await s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === h), 20_000);
    // The first frame is the batch's answer: no notification for an id the client had not been told.
    expect(Array.isArray(JSON.parse(s.frames[0]!))).toBe(true);
    expect(s.of(sub).map((n) => Number.parseInt(n.result.number, 16))).toEqual([h - 2, h - 1, h]);
    await s.close();
  }, 30_000);
});

describe('rule 16: a subscription starts after the head the gateway knew when it came', () => {
  it('sends a subscriber that comes during a 300-block gap fill none of those blocks, and every block after', async () => {
    const first = await connect(url(gw, '/live'), { 'x-api-key': KEY });
    const early = await first.subscribe('newHeads');
    await anvil.mine(1);
    const from = await head();
    await first.until(() => first.of(early).some((n) => Number.parseInt(n.result.number, 16) === from), 20_000);
    // The node answers no block while 300 come; then each block by hash 20 ms late, so the fill takes seconds.
    const blocks = (a: { rpcMethod?: string }) => a.rpcMethod === 'eth_getBlockByNumber' || a.rpcMethod === 'eth_getBlockByHash';
    proxy.tweak = (a) => (blocks(a) ? { error: { code: -32000, message: 'header not found' } } : undefined);
    await anvil.mine(300);
    const top = await head();
    const byHash = () => proxy.arrivals.filter((a) => a.rpcMethod === 'eth_getBlockByHash').length;
    const before = byHash();
    proxy.tweak = (a) => (a.rpcMethod === 'eth_getBlockByHash' ? { delayMs: 20 } : undefined);
    // The fill is under way (walking back from the new head): a client subscribes now.
    await until(() => byHash() - before >= 20, 30_000, 'the gap fill under way');
    const second = await connect(url(gw, '/live'), { 'x-api-key': KEY });
    const late = await second.subscribe('newHeads');
    await first.until(() => first.of(early).some((n) => Number.parseInt(n.result.number, 16) === top), 60_000);
    proxy.tweak = () => undefined;
    await anvil.mine(1);
    await second.until(() => second.of(late).length > 0, 20_000);
    await first.until(() => first.of(early).some((n) => Number.parseInt(n.result.number, 16) === top + 1), 20_000);
    expect(first.of(early).map((n) => Number.parseInt(n.result.number, 16))).toEqual(Array.from({ length: top + 2 - from }, (_, i) => from + i));
    expect(second.of(late).map((n) => Number.parseInt(n.result.number, 16))).toEqual([top + 1]);
    await Promise.all([first.close(), second.close()]);
  }, 120_000);
});

describe('rule 17: a batch refused on the socket', () => {
  it('gets one error per call, each with its own id', async () => {
    const s = await connect(url(gw, `/live/${LIMITED}`));
    // The rate limit (1/min) lets eth_subscribe through; the three other calls are refused together.
    const a = await s.batch([call(1, 'eth_subscribe', ['newHeads']), call(2, 'eth_chainId'), call(3, 'eth_blockNumber'), call(4, 'eth_chainId')]);
    const limited = { code: -32005, message: 'Limit exceeded: rate limit' };
    expect(a.map((x) => x.id).sort()).toEqual([1, 2, 3, 4]);
    expect(a.find((x) => x.id === 1).result).toMatch(/^0x[0-9a-f]{32}$/);
    for (const id of [2, 3, 4]) expect(a.find((x) => x.id === id)).toEqual({ jsonrpc: '2.0', id, error: limited });
    // A batch refused whole: each call its error; a notification in it none.
    const b = await s.batch([call(5, 'eth_chainId'), { jsonrpc: '2.0', method: 'eth_chainId', params: [] }, { ...call(6, 'eth_blockNumber'), id: 'six' }]);
    expect(b).toEqual([
      { jsonrpc: '2.0', id: 5, error: limited },
      { jsonrpc: '2.0', id: 'six', error: limited },
    ]);
    // An empty batch is still the one Invalid Request with id null.
    expect(await s.raw('[]')).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request: empty batch' } });
    await s.close();
  });
});

describe('rule 18: small edges', () => {
  it('recognises eth_subscribe after JSON parsing (eth_\\u0073ubscribe subscribes)', async () => {
    const s = await connect(url(gw, '/live'), { 'x-api-key': KEY });
    const a = await s.send('{"jsonrpc":"2.0","id":1,"method":"eth_\\u0073ubscribe","params":["newHeads"]}', 1);
    expect(a.result).toMatch(/^0x[0-9a-f]{32}$/);
    await anvil.mine(1);
    const h = await head();
    await s.until(() => s.of(a.result).some((n) => Number.parseInt(n.result.number, 16) === h), 20_000);
    await s.close();
  });

  it('closes every subscriber with 1013 naming the first block it missed when the feed will not fill a gap (over 1,024 blocks)', async () => {
    const s = await connect(url(gw, '/live'), { 'x-api-key': KEY });
    const sub = await s.subscribe('newHeads');
    await anvil.mine(1);
    const h = await head();
    await s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === h), 20_000);
    // The gateway is cut off from the node's blocks (the node answers no block) while 1,100 come, then gets them again.
    proxy.tweak = (a) => (a.rpcMethod === 'eth_getBlockByNumber' || a.rpcMethod === 'eth_getBlockByHash' ? { error: { code: -32000, message: 'header not found' } } : undefined);
    await anvil.mine(1100);
    await gw.waitForLog((e) => e.event === 'ws_feed_retry');
    proxy.tweak = () => undefined;
    expect(await s.closed).toEqual({ code: 1013, reason: `missed blocks from ${h + 1}: subscribe again` });
    expect(await gw.waitForLog((e) => e.event === 'ws_close' && e.reason === 'gap')).toMatchObject({ code: 1013 });
  }, 60_000);

  it('during a drain, closes a socket that carries only subscriptions at once (1001), answers eth_subscribe with -32005, and closes the rest once answered', async () => {
    const listener = await connect(url(drainGw, '/live'), { 'x-api-key': KEY });
    await listener.subscribe('newHeads');
    const busy = await connect(url(drainGw, '/live'), { 'x-api-key': KEY });
    proxy.tweak = (a) => (a.rpcMethod === 'eth_getBalance' ? { delayMs: 3_000 } : undefined);
    const arrived = proxy.count('eth_getBalance');
    let answeredAt = 0;
    const slow = busy.call('eth_getBalance', [`0x${'33'.repeat(20)}`, 'latest']).then((a) => {
      answeredAt = performance.now();
      return a;
    });
    await until(() => proxy.count('eth_getBalance') > arrived, 10_000, 'the slow call at the node');
    const exit = drainGw.stop('SIGTERM');
    expect(await listener.closed).toEqual({ code: 1001, reason: 'server going away' });
    const listenerClosedAt = performance.now();
    expect(await busy.call('eth_subscribe', ['newHeads'])).toEqual({ jsonrpc: '2.0', id: 2, error: { code: -32005, message: 'Limit exceeded: server going away' } });
    expect((await slow).result).toBe('0x0');
    expect(listenerClosedAt).toBeLessThan(answeredAt);
    expect(await busy.closed).toEqual({ code: 1001, reason: 'server going away' });
    proxy.tweak = () => undefined;
    expect(await exit).toBe(0);
  }, 60_000);
});
