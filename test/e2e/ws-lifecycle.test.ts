// WebSocket limits and lifecycle (issue 38) through the built gateway in front
// of anvil: the key's policy and rate limit on a socket, notifications in the
// key's usage, metrics, the status page and the access log, pings, a slow
// consumer closed while a fast one gets every header, and the drain (1001).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import { request } from 'undici';
import { SignJWT } from 'jose';
import { keysYaml, metricValue, newKey, sha256, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { connect, openSocket, RpcSocket, wsUrl } from '../support/ws-client.ts';

const KEY = newKey();
const LIMITED = newKey();
const WEB = newKey();
const GONE = newKey();
const SIGNED = newKey();
const NARROW = newKey();
const METERED = newKey();
const LISTENER = newKey();
const AUDIENCE = 'chain-gateway-ws';
const es = generateKeyPairSync('ec', { namedCurve: 'P-256' });
let lifeDir = '';
let anvil: Anvil;
/** Two builds on the file's anvil: life pings each second; slow has a small maxBufferedBytes. */
let rigs: Gateway[] = [];
let life: RunningGateway;
let slow: RunningGateway;

const build = (name: string, websocket: Record<string, number>) =>
  gateway({
    name,
    chains: [evmChain('live', ['ANVIL'], { websocket: true })],
    header: { health: { intervalMs: 100, timeoutMs: 1000 }, drainTimeoutMs: 2000, jwtAudience: AUDIENCE, websocket },
    keys: keysFile(false),
    env: { ANVIL: anvil.url },
  });

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  rigs = await Promise.all([build('ws-life', { pingIntervalMs: 1000 }), build('ws-slow', { maxBufferedBytes: 1024, pingIntervalMs: 600000 })]);
  [life, slow] = rigs.map((r) => r.gw) as [RunningGateway, RunningGateway];
  lifeDir = rigs[0]!.built.dir;
}, 60_000);

afterAll(async () => {
  await Promise.all(rigs.map((r) => r.close()));
  await anvil?.stop();
});

/** The keys file; `goneDisabled`: the key GONE is disabled. */
function keysFile(goneDisabled: boolean): string {
  return (
    keysYaml([
      { id: 'all', key: KEY },
      { id: 'limited', key: LIMITED, rateLimit: '3/min' },
      { id: 'gone', key: GONE, disabled: goneDisabled },
    ]) +
    `  - id: web\n    sha256: "${sha256(WEB)}"\n    allow:\n      origins: ["https://app.example"]\n` +
    `  - id: metered\n    sha256: "${sha256(METERED)}"\n    quota: 5/day\n` +
    `  - id: narrow\n    sha256: "${sha256(NARROW)}"\n    allow:\n      methods: [eth_chainId]\n` +
    `  - id: listener\n    sha256: "${sha256(LISTENER)}"\n    allow:\n      methods: [eth_chainId, eth_subscribe]\n` +
    `  - id: signed\n    sha256: "${sha256(SIGNED)}"\n    jwt:\n      keys:\n        - { kid: k1, alg: ES256, pem: ${JSON.stringify(es.publicKey.export({ type: 'spki', format: 'pem' }).toString())} }\n`
  );
}

const url = (g: RunningGateway, path: string) => wsUrl(g.url('rpc', path));
const admin = async (g: RunningGateway, path: string) => (await request(g.url('admin', path))).body.text();
const head = async () => Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
const socketOf = (s: RpcSocket) => (s.ws as unknown as { _socket: Socket })._socket;

describe('admission on a socket', () => {
  it("refuses the upgrade for an origin the key's policy does not allow (403), and takes the allowed one", async () => {
    const r = await openSocket(url(life, `/live/${WEB}`), { origin: 'https://evil.example' });
    expect(r).not.toBeInstanceOf(RpcSocket);
    expect([(r as { status: number }).status, JSON.parse((r as { body: string }).body).error]).toEqual([403, { code: -32044, message: "Request not allowed by this key's policy", data: { reason: 'origin' } }]);
    const ok = await connect(url(life, `/live/${WEB}`), { origin: 'https://app.example' });
    expect((await ok.call('eth_chainId')).result).toBe('0x7a69');
    await ok.close();
  });

  it('asks a key with jwt for its bearer token on the upgrade (401 without), as on an HTTP call', async () => {
    const none = await openSocket(url(life, `/live/${SIGNED}`));
    expect(none).not.toBeInstanceOf(RpcSocket);
    expect([(none as { status: number }).status, JSON.parse((none as { body: string }).body).error.data]).toEqual([401, { reason: 'jwt' }]);
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ sub: 'dapp' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuedAt(now).setExpirationTime(now + 300).setAudience(AUDIENCE).sign(es.privateKey);
    const s = await connect(url(life, `/live/${SIGNED}`), { authorization: `Bearer ${token}` });
    expect((await s.call('eth_chainId')).result).toBe('0x7a69');
    await s.close();
  });

  it("lets a key with its own methods list subscribe only if the list names eth_subscribe", async () => {
    const narrow = await connect(url(life, `/live/${NARROW}`));
    expect((await narrow.call('eth_chainId')).result).toBe('0x7a69');
    expect((await narrow.call('eth_blockNumber')).error).toMatchObject({ code: -32044, data: { reason: 'method' } });
    expect(await narrow.call('eth_subscribe', ['newHeads'])).toEqual({ jsonrpc: '2.0', id: 3, error: { code: -32044, message: "Request not allowed by this key's policy", data: { reason: 'method' } } });
    await narrow.close();
    const listener = await connect(url(life, `/live/${LISTENER}`));
    expect((await listener.call('eth_subscribe', ['newHeads'])).result).toMatch(/^0x[0-9a-f]{32}$/);
    await listener.close();
  });

  it("keeps the key's rate limit: past it, a call gets -32005 with its own id", async () => {
    const s = await connect(url(life, `/live?api_key=${LIMITED}`));
    for (let i = 0; i < 3; i++) expect((await s.call('eth_chainId')).result).toBe('0x7a69');
    expect(await s.call('eth_chainId')).toEqual({ jsonrpc: '2.0', id: 4, error: { code: -32005, message: 'Limit exceeded: rate limit' } });
    await s.close();
  });

  it("takes each notification from the key's quota, and closes the socket with 1008 once it is spent", async () => {
    const s = await connect(url(life, `/live/${METERED}`));
    // The subscription costs 1 of the 5 credits; four notifications spend the rest.
    const sub = await s.subscribe('newHeads');
    await anvil.mine(6);
    expect(await s.closed).toEqual({ code: 1008, reason: 'quota exceeded' });
    expect(s.of(sub)).toHaveLength(4);
    expect(await life.waitForLog((e) => e.event === 'ws_close' && e.keyId === 'metered')).toMatchObject({ reason: 'quota' });
  });

  it('counts each notification as a call of eth_subscribe in the key\'s usage', async () => {
    const s = await connect(url(life, '/live'), { 'x-api-key': KEY });
    const sub = await s.subscribe('newHeads');
    await anvil.mine(3);
    const h = await head();
    await s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === h));
    const sent = s.of(sub).length;
    await s.close();
    const usage = JSON.parse(await admin(life, '/usage?key=all')) as { days: { chain: string; method: string; calls: number; credits: number }[] };
    const row = usage.days.find((d) => d.chain === 'live' && d.method === 'eth_subscribe');
    // The eth_subscribe call itself and every notification.
    expect(row).toMatchObject({ calls: 1 + sent, credits: 1 + sent });
  });
});

describe('observability', () => {
  it('shows sockets, subscriptions and notifications in /metrics and /status.json, and opens and closes in the log, never the key', async () => {
    const s = await connect(url(life, '/live'), { 'x-api-key': KEY });
    const sub = await s.subscribe('newHeads');
    await s.subscribe('logs', {});
    const before = await metricValue(life, 'gateway_ws_notifications_total', '{chain="live",type="newHeads"}');
    await anvil.mine(1);
    const h = await head();
    await s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === h));
    expect(await metricValue(life, 'gateway_ws_connections', '{chain="live"}')).toBe(1);
    expect(await metricValue(life, 'gateway_ws_subscriptions', '{chain="live",type="newHeads"}')).toBe(1);
    expect(await metricValue(life, 'gateway_ws_subscriptions', '{chain="live",type="logs"}')).toBe(1);
    expect(await metricValue(life, 'gateway_ws_notifications_total', '{chain="live",type="newHeads"}')).toBeGreaterThanOrEqual(before + 1);
    const status = JSON.parse(await admin(life, '/status.json')) as { chains: { path: string; websocket: { connections: number } | null }[] };
    expect(status.chains.find((c) => c.path === 'live')!.websocket).toMatchObject({ connections: 1, subscriptions: { newHeads: 1, logs: 1 } });
    const closing = life.nextLog((e) => e.event === 'ws_close');
    await s.close();
    const closed = await closing;
    expect(closed).toMatchObject({ chain: 'live', keyId: 'all', reason: 'client', code: 1005 });
    const opened = await life.waitForLog((e) => e.event === 'ws_open' && e.keyId === 'all');
    expect(opened).toMatchObject({ chain: 'live' });
    // The upgrade is in the access log as a request of the chain, answered 101.
    expect(life.lines.some((l) => l.includes('"chain":"live","method":"websocket","status":101'))).toBe(true);
    for (const k of [KEY, LIMITED, WEB]) expect(life.lines.some((l) => l.includes(k))).toBe(false);
    expect(await metricValue(life, 'gateway_ws_connections', '{chain="live"}')).toBe(0);
  });

  it('closes a client that answers no ping within an interval', async () => {
    const s = await connect(url(life, '/live'), { 'x-api-key': KEY });
    const closing = life.nextLog((e) => e.event === 'ws_close' && e.reason === 'ping');
    // It stops reading: no pong leaves it.
    socketOf(s).pause();
    expect(await closing).toMatchObject({ chain: 'live', keyId: 'all' });
    expect(await metricValue(life, 'gateway_ws_closed_total', '{chain="live",reason="ping"}')).toBe(1);
    socketOf(s).resume();
    await s.closed;
  });
});

describe('a key revoked', () => {
  it('closes its sockets with 1008 (revoked) once the reloaded keys file no longer has it', async () => {
    const s = await connect(url(life, `/live/${GONE}`));
    await s.subscribe('newHeads');
    const reloaded = life.nextLog((e) => e.event === 'keys_reloaded');
    writeFileSync(join(lifeDir, 'keys.yaml'), keysFile(true));
    await reloaded;
    expect(await s.closed).toEqual({ code: 1008, reason: 'API key no longer valid for this chain' });
    expect(await life.waitForLog((e) => e.event === 'ws_close' && e.keyId === 'gone')).toMatchObject({ reason: 'revoked' });
  });
});

describe('a slow consumer', () => {
  it('is closed with 1013 once its unsent data passes maxBufferedBytes, while a fast one gets every header', async () => {
    const fast = await connect(url(slow, '/live'), { 'x-api-key': KEY });
    const fastSub = await fast.subscribe('newHeads');
    const laggard = await connect(url(slow, '/live'), { 'x-api-key': KEY });
    for (let i = 0; i < 100; i++) await laggard.subscribe('newHeads');
    const from = await head();
    // The gateway's decision (the socket itself closes once the client has read what was sent before the close).
    const closing = slow.nextLog((e) => e.event === 'ws_closing' && e.reason === 'slow', 60_000);
    let closed = false;
    void closing.then(() => (closed = true));
    // It reads nothing; blocks come until the socket's buffers and then the gateway's limit are full.
    socketOf(laggard).pause();
    for (let i = 0; i < 20 && !closed; i++) {
      await anvil.mine(100);
      const h = await head();
      await fast.until(() => fast.of(fastSub).some((n) => Number.parseInt(n.result.number, 16) === h), 30_000, `block ${h}`);
    }
    expect(await closing).toMatchObject({ chain: 'live', keyId: 'all' });
    const to = await head();
    const numbers = fast.of(fastSub).map((n) => Number.parseInt(n.result.number, 16)).filter((n) => n > from);
    expect(numbers).toEqual(Array.from({ length: to - from }, (_, i) => from + 1 + i));
    socketOf(laggard).resume();
    expect((await laggard.closed).code).toBe(1013);
    await slow.waitForLog((e) => e.event === 'ws_close' && e.reason === 'slow');
    expect(await metricValue(slow, 'gateway_ws_closed_total', '{chain="live",reason="slow"}')).toBe(1);
    await fast.close();
  }, 120_000);
});

describe('the drain', () => {
  it('closes sockets with 1001 (going away) after the drain, and the process exits', async () => {
    const s = await connect(url(life, '/live'), { 'x-api-key': KEY });
    await s.subscribe('newHeads');
    const exit = life.stop('SIGTERM');
    const closed = await s.closed;
    expect(closed).toEqual({ code: 1001, reason: 'server going away' });
    expect(await exit).toBe(0);
    expect(life.lines.some((l) => l.includes('"event":"ws_close"') && l.includes('"reason":"drain"'))).toBe(true);
  });
});
