// WebSockets on an EVM chain with websocket: true (issue 38), through the
// built gateway in front of anvil: the three key placements, the refusals
// before the upgrade, calls over the socket answered as over HTTP, and
// newHeads (order, no gaps, anvil's hashes, a reorg, unsubscribe, limits).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { connect as netConnect } from 'node:net';
import { newKey, until, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { connect, openSocket, RpcSocket, wsUrl, type Refusal } from '../support/ws-client.ts';

const KEY = newKey();
const PLAIN_ONLY = newKey();
const FEW = newKey();
const UNKNOWN = newKey();
let anvil: Anvil;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  await anvil.mine(5);
  rig = await gateway({
    name: 'ws-gateway',
    chains: [evmChain('live', ['ANVIL'], { websocket: true }), evmChain('plain', ['ANVIL'])],
    header: { admin: null, health: { intervalMs: 100, timeoutMs: 2000 }, websocket: { maxConnectionsPerKey: 3, maxSubscriptionsPerConnection: 4 } },
    keys: [
      { id: 'all', key: KEY },
      { id: 'plain-only', key: PLAIN_ONLY, chains: ['plain'] },
      { id: 'few', key: FEW },
    ],
    standIns: { ANVIL: anvil },
  });
  gw = rig.gw;
}, 40_000);

afterAll(() => rig?.close());

const url = (path: string) => wsUrl(gw.url('rpc', path));
const live = () => connect(url('/live'), { 'x-api-key': KEY });

async function refused(path: string, headers: Record<string, string> = {}): Promise<Refusal> {
  const r = await openSocket(url(path), headers);
  if (r instanceof RpcSocket) {
    await r.close();
    throw new Error(`${path}: the upgrade was accepted`);
  }
  return r;
}

async function anvilBlock(n: number): Promise<{ hash: string; parentHash: string; number: string }> {
  return (await anvil.rpc('eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).result as any;
}

async function anvilHead(): Promise<number> {
  return Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
}

describe('the upgrade', () => {
  it('takes the key in X-API-Key, in the path and in the query', async () => {
    for (const [path, headers] of [
      ['/live', { 'x-api-key': KEY }],
      [`/live/${KEY}`, {}],
      [`/live?api_key=${KEY}`, {}],
    ] as const) {
      const s = await connect(url(path), headers);
      const a = await s.call('eth_chainId');
      expect(a, path).toEqual({ jsonrpc: '2.0', id: 1, result: '0x7a69' });
      await s.close();
    }
  });

  it('refuses before the upgrade, as plain HTTP in the JSON-RPC envelope: 401, 403, 404', async () => {
    const none = await refused('/live');
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32040, message: 'API key required' } });
    const unknown = await refused('/live', { 'x-api-key': UNKNOWN });
    expect([unknown.status, JSON.parse(unknown.body).error.code]).toEqual([403, -32041]);
    const elsewhere = await refused(`/live/${PLAIN_ONLY}`);
    expect([elsewhere.status, JSON.parse(elsewhere.body).error.code]).toEqual([403, -32042]);
    // A chain without websocket: true, and a path that is no chain.
    const plain = await refused('/plain', { 'x-api-key': KEY });
    expect([plain.status, JSON.parse(plain.body).error.code]).toEqual([404, -32060]);
    const nowhere = await refused('/nowhere', { 'x-api-key': KEY });
    expect(nowhere.status).toBe(404);
    const deeper = await refused(`/live/${KEY}/more`);
    expect(deeper.status).toBe(404);
  });

  it('refuses a key that holds maxConnectionsPerKey sockets with 429, and takes it again once one closes', async () => {
    const open = [];
    for (let i = 0; i < 3; i++) open.push(await connect(url(`/live/${FEW}`)));
    const over = await refused(`/live?api_key=${FEW}`);
    expect(over.status).toBe(429);
    expect(JSON.parse(over.body)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32005, message: 'Limit exceeded: WebSocket connections per key', data: { maxConnectionsPerKey: 3 } },
    });
    await open.pop()!.close();
    // The gateway has seen the close once the count lets one more in.
    let again: RpcSocket | Refusal = await openSocket(url(`/live/${FEW}`));
    for (let i = 0; i < 50 && !(again instanceof RpcSocket); i++) again = await openSocket(url(`/live/${FEW}`));
    expect(again).toBeInstanceOf(RpcSocket);
    await Promise.all([...open, again as RpcSocket].map((s) => s.close()));
  });

  it('a chain with websocket: true still answers HTTP: a POST to either chain gets its eth_chainId', async () => {
    for (const path of ['/live', '/plain']) {
      const r = await request(gw.url('rpc', path), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: '{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}' });
      expect(r.statusCode).toBe(200);
      expect(await r.body.json()).toEqual({ jsonrpc: '2.0', id: 7, result: '0x7a69' });
    }
  });
});

describe('calls over the socket', () => {
  it('are answered as anvil answers them: a call, a batch, a block', async () => {
    const s = await live();
    const head = await anvilHead();
    expect((await s.call('eth_blockNumber')).result).toBe(`0x${head.toString(16)}`);
    const block = await s.call('eth_getBlockByNumber', ['0x2', false]);
    expect(block.result).toEqual(await anvilBlock(2));
    const answer = await s.batch([
      { jsonrpc: '2.0', id: 'a', method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 'b', method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000000', 'latest'] },
    ]);
    expect(answer.map((a) => a.id).sort()).toEqual(['a', 'b']);
    expect(answer.find((a) => a.id === 'a').result).toBe('0x7a69');
    expect(answer.find((a) => a.id === 'b').result).toBe((await anvil.rpc('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest'])).result);
    await s.close();
  });

  it('answer a batch mixing eth_subscribe with other calls in one array', async () => {
    const s = await live();
    const answer = await s.batch([
      { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['newHeads'] },
      { jsonrpc: '2.0', id: 3, method: 'eth_accounts', params: [] },
    ]);
    expect(answer.map((a) => a.id).sort()).toEqual([1, 2, 3]);
    expect(answer.find((a) => a.id === 1).result).toBe('0x7a69');
    expect(answer.find((a) => a.id === 2).result).toMatch(/^0x[0-9a-f]{32}$/);
    expect(answer.find((a) => a.id === 3).error.code).toBe(-32601);
    await anvil.mine(1);
    const h = await anvilHead();
    const sub = answer.find((a) => a.id === 2).result as string;
    await s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === h));
    await s.close();
  });

  it('keep the allowlist (-32601, id echoed), parameter checks (-32602) and JSON-RPC errors', async () => {
    const s = await live();
    expect(await s.send({ jsonrpc: '2.0', id: 41, method: 'eth_accounts', params: [] }, 41)).toEqual({ jsonrpc: '2.0', id: 41, error: { code: -32601, message: 'Method not found' } });
    const bad = await s.send({ jsonrpc: '2.0', id: 42, method: 'eth_getBalance', params: ['0x12', 'latest'] }, 42);
    expect(bad.error.code).toBe(-32602);
    const parse = await s.raw('{"jsonrpc":"2.0",');
    expect(parse).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
    await s.close();
  });
});

describe('newHeads', () => {
  it('sends 15 mined blocks in ascending order, with no gaps, each once, with anvil\'s hashes', async () => {
    const s = await live();
    const sub = await s.subscribe('newHeads');
    expect(sub).toMatch(/^0x[0-9a-f]{32}$/);
    const from = await anvilHead();
    // Mined in steps of 1, 5 and 9: the gateway sees heads skip heights and fills them.
    await anvil.mine(1);
    await anvil.mine(5);
    await anvil.mine(9);
    const to = from + 15;
    await s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === to), 20_000, `block ${to}`);
    const numbers = s.of(sub).map((n) => Number.parseInt(n.result.number, 16));
    // Ascending, no gaps, no repeats, ending at the head.
    for (let i = 1; i < numbers.length; i++) expect(numbers[i], `after ${numbers[i - 1]}`).toBe(numbers[i - 1]! + 1);
    expect(numbers.at(-1)).toBe(to);
    expect(numbers[0]).toBeLessThanOrEqual(from + 1);
    for (const n of s.of(sub)) {
      const b = await anvilBlock(Number.parseInt(n.result.number, 16));
      expect(n.result.hash).toBe(b.hash);
      expect(n.result.parentHash).toBe(b.parentHash);
      expect(n.result.transactions).toBeUndefined();
    }
    expect(s.frames.filter((f) => f.includes('"eth_subscription"'))[0]).toMatch(/^\{"jsonrpc":"2.0","method":"eth_subscription","params":\{"subscription":"0x[0-9a-f]{32}","result":\{/);
    await s.close();
  });

  it('after anvil_reorg, sends the new branch from the first replaced height, as geth does', async () => {
    const s = await live();
    const sub = await s.subscribe('newHeads');
    await anvil.mine(3);
    const top = await anvilHead();
    await s.until(() => s.of(sub).some((n) => Number.parseInt(n.result.number, 16) === top), 20_000, `block ${top}`);
    const before = s.of(sub).length;
    const old = await anvilBlock(top - 1);
    expect((await anvil.rpc('anvil_reorg', [2, []])).error).toBeUndefined();
    const replaced = await anvilBlock(top);
    await s.until(() => s.of(sub).some((n) => n.result.hash === replaced.hash), 20_000, 'the new branch');
    const after = s.of(sub).slice(before).map((n) => n.result);
    // The new branch: heights top-1 and top, each with anvil's new hashes, linked to what was sent before.
    expect(after.map((b) => Number.parseInt(b.number, 16))).toEqual([top - 1, top]);
    expect(after[0].hash).not.toBe(old.hash);
    expect(after[0].hash).toBe((await anvilBlock(top - 1)).hash);
    expect(after[1].hash).toBe(replaced.hash);
    expect(after[0].parentHash).toBe(s.of(sub)[before - 3]!.result.hash);
    await s.close();
  });

  it('refuses other subscription types (-32602) and a subscription past maxSubscriptionsPerConnection', async () => {
    const s = await live();
    const pending = await s.call('eth_subscribe', ['newPendingTransactions']);
    expect(pending.error.code).toBe(-32602);
    const syncing = await s.call('eth_subscribe', ['syncing']);
    expect(syncing.error.code).toBe(-32602);
    const badFilter = await s.call('eth_subscribe', ['logs', { address: '0x12' }]);
    expect(badFilter.error).toMatchObject({ code: -32602, data: { path: '/1/address' } });
    for (let i = 0; i < 4; i++) await s.subscribe('newHeads');
    const over = await s.call('eth_subscribe', ['newHeads']);
    expect(over.error).toEqual({ code: -32005, message: 'Limit exceeded: subscriptions per connection', data: { maxSubscriptionsPerConnection: 4 } });
    await s.close();
  });

  it('eth_unsubscribe returns true, and nothing follows for that id', async () => {
    const s = await live();
    const gone = await s.subscribe('newHeads');
    const stays = await s.subscribe('newHeads');
    await anvil.mine(1);
    const first = await anvilHead();
    await s.until(() => s.of(stays).length > 0 && s.of(gone).length > 0 && s.of(stays).at(-1)!.result.number === `0x${first.toString(16)}`);
    expect(await s.call('eth_unsubscribe', [gone])).toEqual({ jsonrpc: '2.0', id: 3, result: true });
    const kept = s.of(gone).length;
    await anvil.mine(3);
    const last = `0x${(first + 3).toString(16)}`;
    await s.until(() => s.of(stays).at(-1)?.result.number === last, 20_000, last);
    expect(s.of(gone)).toHaveLength(kept);
    expect((await s.call('eth_unsubscribe', [gone])).error).toEqual({ code: -32062, message: 'Subscription not found' });
    await s.close();
  });
});

describe('other upgrades on the listener', () => {
  /** One request as raw bytes on its own connection; resolves with everything the server sent before it closed. */
  function raw(head: string, body: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const c = netConnect(gw.ports.rpc!, '127.0.0.1', () => c.end(`${head}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));
      let got = '';
      c.setEncoding('utf8').on('data', (d: string) => (got += d));
      c.on('end', () => resolve(got));
      c.on('error', reject);
    });
  }

  it("serve a request that asks for h2c (curl --http2) as the HTTP/1.1 POST it also is, on either chain", async () => {
    for (const path of ['/plain', '/live']) {
      const body = '{"jsonrpc":"2.0","id":9,"method":"eth_chainId","params":[]}';
      const answer = await raw(
        `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: ${KEY}\r\ncontent-type: application/json\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQCAAAAAAIAAAAA`,
        body,
      );
      expect(answer.split('\r\n')[0], path).toBe('HTTP/1.1 200 OK');
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ jsonrpc: '2.0', id: 9, result: '0x7a69' });
    }
  });
});

describe('a handshake ws refuses itself', () => {
  it('answers 400 to an upgrade without Sec-WebSocket-Key, and leaves nothing under way', async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const c = netConnect(gw.ports.rpc!, '127.0.0.1', () =>
        c.write(`GET /live HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: ${KEY}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\n\r\n`),
      );
      let got = '';
      c.setEncoding('utf8').on('data', (d: string) => (got += d));
      c.on('close', () => resolve(got));
      c.on('error', reject);
    });
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    // The attempt is over for the gateway too: its access-log line says 0 (the client went away).
    await until(async () => gw.lines.some((l) => l.includes('"method":"websocket","status":0')), 'the access-log line of the refused handshake');
  });
});
