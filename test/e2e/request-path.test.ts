// The request path of the emitted server (issue 3), against recording
// upstreams: a real anvil node behind a recording proxy, and the Blockbook and
// Rosetta stand-ins. Each test proves what reached the upstream, not only what
// came back.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { keysYaml, newKey, rawRequest, type RunningGateway } from './harness.ts';
import { gateway, type Chain, type Gateway } from './fixture.ts';
import { startStandIns, type StandIns } from './three-chains.ts';
import { RPC_ERRORS } from '../../runtime/kinds/evm/errors.ts';
import { ROSETTA_ERRORS } from '../../runtime/kinds/rosetta/errors.ts';

const KEY = newKey();
const KEY_ETH_ONLY = newKey();
const KEY_DISABLED = newKey();
const OTHER_KEY = newKey();

let rig: Gateway<{ up: Promise<StandIns>; slow: Server }>;
let up: StandIns;
let slow: Server;
let slowUrl: string;
let gw: RunningGateway;
let dir: string;

const CHAINS: readonly Chain[] = [
  { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
  { path: 'polygon', interface: 'evm-jsonrpc', methods: ['eth_chainId', 'eth_blockNumber'], upstreams: ['${ETH_URL}'] },
  { path: 'deadchain', interface: 'evm-jsonrpc', retries: 0, upstreams: ['http://127.0.0.1:1/rpc'] },
  { path: 'slowchain', interface: 'evm-jsonrpc', retries: 0, upstreams: ['${SLOW_URL}'] },
  { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', sendtx: true, upstreams: ['${BB_URL}'] },
  { path: 'litecoin', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB_URL}'] },
  { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${ROSETTA_URL}'] },
];

beforeAll(async () => {
  // Answers after 10 s: longer than timeoutMs.
  slow = createServer((_req, res) => setTimeout(() => res.end('{}'), 10_000).unref());
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  slowUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
  rig = await gateway({
    name: 'request-path',
    chains: CHAINS,
    header: {
      admin: null,
      limits: { maxBodyBytes: 65536, maxBatchSize: 5, timeoutMs: 1500, maxPageSize: 50 },
      cors: { origins: ['https://wallet.example'] },
      health: { intervalMs: 60000, timeoutMs: 1000 },
    },
    keys: [
      { id: 'all-chains', key: KEY },
      { id: 'eth-only', key: KEY_ETH_ONLY, chains: ['ethereum'] },
      { id: 'revoked', key: KEY_DISABLED, disabled: true },
    ],
    standIns: { up: startStandIns(), slow },
    env: { SLOW_URL: slowUrl },
  });
  ({ gw, standIns: { up } } = rig);
  dir = rig.built.dir;
}, 60_000);

afterAll(() => rig?.close());

beforeEach(() => {
  up.proxy.clear();
  up.bb.clear();
  up.rosetta.clear();
});

const rpc = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  rawRequest(gw.url('rpc', path), { body: typeof body === 'string' ? body : JSON.stringify(body), headers });

const call = (method: string, params: unknown = [], id: unknown = 1) => ({ jsonrpc: '2.0', id, method, params });

describe('keys', () => {
  it('accepts the key in the header, the path and the query, and strips it before the node', async () => {
    for (const [path, headers] of [
      ['/ethereum', { 'x-api-key': KEY }],
      [`/ethereum/${KEY}`, {}],
      [`/ethereum?api_key=${KEY}`, {}],
      [`/ethereum/${KEY}?api_key=${KEY}`, { 'x-api-key': KEY }],
    ] as const) {
      const r = await rpc(path, call('eth_chainId'), headers);
      expect(r.status, path).toBe(200);
      expect(r.json()).toEqual({ jsonrpc: '2.0', id: 1, result: '0x1' });
    }
    expect(up.proxy.requests).toHaveLength(4);
    for (const req of up.proxy.requests) {
      expect(req.path).toBe('/');
      expect(JSON.stringify(req.headers)).not.toContain(KEY);
      expect(req.body.toString()).not.toContain(KEY);
    }
  });

  it('answers 401 without a key, 403 for an unknown, disabled or out-of-scope key, 400 for two different keys', async () => {
    const cases: [string, Record<string, string>, number, number][] = [
      ['/ethereum', {}, 401, RPC_ERRORS.GW_AUTH_KEY_MISSING.code],
      ['/ethereum', { 'x-api-key': OTHER_KEY }, 403, RPC_ERRORS.GW_AUTH_KEY_INVALID.code],
      [`/ethereum/${KEY_DISABLED}`, {}, 403, RPC_ERRORS.GW_AUTH_KEY_INVALID.code],
      ['/ethereum/short', {}, 403, RPC_ERRORS.GW_AUTH_KEY_INVALID.code],
      [`/polygon/${KEY_ETH_ONLY}`, {}, 403, RPC_ERRORS.GW_AUTH_KEY_FORBIDDEN.code],
      [`/ethereum/${KEY}?api_key=${OTHER_KEY}`, {}, 400, RPC_ERRORS.GW_AUTH_KEY_CONFLICT.code],
      [`/ethereum/${KEY}`, { 'x-api-key': OTHER_KEY }, 400, RPC_ERRORS.GW_AUTH_KEY_CONFLICT.code],
    ];
    for (const [path, headers, status, code] of cases) {
      const r = await rpc(path, call('eth_chainId', [], 7), headers);
      expect(r.status, path).toBe(status);
      expect(r.json()).toMatchObject({ jsonrpc: '2.0', error: { code } });
      expect(r.text).not.toContain(OTHER_KEY);
      expect(r.text).not.toContain(KEY_DISABLED);
    }
    expect(up.proxy.requests).toHaveLength(0);
  });

  it('never writes a key to the log', async () => {
    expect((await rpc(`/ethereum/${KEY}?api_key=${OTHER_KEY}`, call('eth_chainId'))).status).toBe(400);
    expect((await rpc(`/ethereum/${OTHER_KEY}`, { jsonrpc: '2.0', id: 1, method: KEY })).status).toBe(403);
    // The same key twice is no conflict: served, and logged by its id.
    expect((await rawRequest(gw.url('explorer', `/bitcoin/${KEY}/v2/block/1?api_key=${KEY}`))).status).toBe(200);
    const log = gw.lines.join('\n');
    for (const k of [KEY, OTHER_KEY, KEY_ETH_ONLY, KEY_DISABLED]) expect(log).not.toContain(k);
    expect(log).toContain('"keyId":"all-chains"');
  });

  it('reloads the keys file when it changes, and keeps the old keys if the new file is invalid', async () => {
    const added = newKey();
    const keysPath = join(dir, 'keys.yaml');
    const base = [
      { id: 'all-chains', key: KEY },
      { id: 'eth-only', key: KEY_ETH_ONLY, chains: ['ethereum'] },
      { id: 'revoked', key: KEY_DISABLED, disabled: true },
    ];
    const reloaded = gw.nextLog((e) => e.event === 'keys_reloaded' && e.keys === 4);
    writeFileSync(`${keysPath}.new`, keysYaml([...base, { id: 'added', key: added }]));
    renameSync(`${keysPath}.new`, keysPath);
    await reloaded;
    expect((await rpc(`/ethereum/${added}`, call('eth_chainId'))).status).toBe(200);

    const failed = gw.nextLog((e) => e.event === 'keys_reload_failed');
    writeFileSync(`${keysPath}.new`, 'keys: [ { id: broken, sha256: nothex } ]\n');
    renameSync(`${keysPath}.new`, keysPath);
    await failed;
    expect((await rpc(`/ethereum/${added}`, call('eth_chainId'))).status).toBe(200);

    const back = gw.nextLog((e) => e.event === 'keys_reloaded' && e.reason === 'SIGHUP');
    writeFileSync(`${keysPath}.new`, keysYaml(base));
    renameSync(`${keysPath}.new`, keysPath);
    gw.proc.kill('SIGHUP');
    await back;
    expect((await rpc(`/ethereum/${added}`, call('eth_chainId'))).status).toBe(403);
  });
});

describe('EVM JSON-RPC', () => {
  const h = () => ({ 'x-api-key': KEY });

  it('refuses a method outside the allowlist with -32601 over HTTP 200, and the node never sees it', async () => {
    for (const m of ['eth_accounts', 'eth_sendTransaction', 'debug_traceTransaction', 'admin_peers']) {
      const r = await rpc('/ethereum', call(m, [], 'abc'), h());
      expect(r.status).toBe(200);
      expect(r.json()).toEqual({ jsonrpc: '2.0', id: 'abc', error: { code: -32601, message: 'Method not found' } });
    }
    // polygon allows only two methods: eth_getBalance is refused there.
    const r = await rpc('/polygon', call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest']), h());
    expect(r.status).toBe(200);
    expect(r.json().error.code).toBe(-32601);
    expect(up.proxy.methodsSeen()).toEqual([]);
  });

  it('sends a batch without its refused items and answers every id', async () => {
    const batch = [call('eth_chainId', [], 1), call('eth_accounts', [], 2), { jsonrpc: '2.0', id: 3, method: 5 }, call('eth_blockNumber', [], 4), { jsonrpc: '2.0', method: 'admin_peers' }];
    const r = await rpc('/ethereum', batch, h());
    expect(r.status).toBe(200);
    const answers = r.json() as { id: unknown; result?: unknown; error?: { code: number } }[];
    expect(answers.map((a) => a.id)).toEqual([1, 2, 3, 4]);
    expect(answers[0]!.result).toBe('0x1');
    expect(answers[1]!.error!.code).toBe(-32601);
    expect(answers[2]!.error!.code).toBe(-32600);
    expect(typeof answers[3]!.result).toBe('string');
    expect(up.proxy.methodsSeen()).toEqual(['eth_chainId', 'eth_blockNumber']);
  });

  it('forwards an all-allowed batch in one request', async () => {
    const r = await rpc('/ethereum', [call('eth_chainId', [], 1), call('net_version', [], 2)], h());
    expect(r.status).toBe(200);
    expect(r.json().map((a: { id: number }) => a.id).sort()).toEqual([1, 2]);
    expect(up.proxy.requests).toHaveLength(1);
    expect(up.proxy.methodsSeen()).toEqual(['eth_chainId', 'net_version']);
  });

  it('refuses an empty batch (400, -32600) and a batch over maxBatchSize whole (413)', async () => {
    const empty = await rpc('/ethereum', [], h());
    expect(empty.status).toBe(400);
    expect(empty.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    const big = await rpc('/ethereum', Array.from({ length: 6 }, (_, i) => call('eth_chainId', [], i)), h());
    expect(big.status).toBe(413);
    expect(big.json().error.code).toBe(-32005);
    expect(up.proxy.requests).toHaveLength(0);
  });

  it('accepts params omitted or as "" (no params), refuses params by name (-32602), and rejects other params', async () => {
    for (const [id, params] of [[1, undefined], [2, '']] as const) {
      const r = await rpc('/ethereum', { jsonrpc: '2.0', id, method: 'eth_chainId', ...(params === undefined ? {} : { params }) }, h());
      expect(r.status, String(id)).toBe(200);
      expect(r.json(), String(id)).toEqual({ jsonrpc: '2.0', id, result: '0x1' });
    }
    const seen = up.proxy.requests.map((r) => r.json);
    expect(seen[1]).toEqual({ jsonrpc: '2.0', id: 2, method: 'eth_chainId' });
    // By name: nodes such as geth refuse it ("non-array args"); with validate: params the gateway answers for them, alike for every node.
    const byName = await rpc('/ethereum', { jsonrpc: '2.0', id: 3, method: 'eth_chainId', params: {} }, h());
    expect(byName.status).toBe(200);
    expect(byName.json()).toEqual({ jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Invalid params', data: { path: '', message: 'params must be an array: parameters go by position' } } });
    for (const bad of [{ params: 'x' }, { params: 5 }, { params: null }, { jsonrpc: '1.0' }, { method: 7 }, { id: {} }]) {
      const r = await rpc('/ethereum', { ...call('eth_chainId'), ...bad }, h());
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.json().error.code).toBe(-32600);
    }
    expect(up.proxy.requests).toHaveLength(2);
  });

  it('forwards an allowed notification and answers a refused one with 204 and no body', async () => {
    const refused = await rpc('/ethereum', { jsonrpc: '2.0', method: 'eth_accounts' }, h());
    expect(refused.status).toBe(204);
    expect(refused.text).toBe('');
    await rpc('/ethereum', { jsonrpc: '2.0', method: 'eth_chainId' }, h());
    expect(up.proxy.methodsSeen()).toEqual(['eth_chainId']);
  });

  it('answers invalid JSON with -32700 (400), non-POST with 405, an oversized body with 413', async () => {
    const bad = await rpc('/ethereum', '{"jsonrpc":', h());
    expect(bad.status).toBe(400);
    expect(bad.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
    const notUtf8 = await rawRequest(gw.url('rpc', '/ethereum'), { body: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), headers: h() });
    expect(notUtf8.status).toBe(400);
    const get = await rawRequest(gw.url('rpc', '/ethereum'), { headers: h() });
    expect(get.status).toBe(405);
    expect(get.json().error.code).toBe(RPC_ERRORS.GW_RPC_HTTP_METHOD_NOT_ALLOWED.code);
    const big = await rpc('/ethereum', { ...call('eth_chainId'), pad: 'x'.repeat(70_000) }, h());
    expect(big.status).toBe(413);
    expect(big.json().error.code).toBe(-32005);
    expect(up.proxy.requests).toHaveLength(0);
  });

  it('answers CORS preflight for allowed origins', async () => {
    const r = await rawRequest(gw.url('rpc', '/ethereum'), {
      method: 'OPTIONS',
      headers: { origin: 'https://wallet.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-api-key' },
    });
    expect(r.status).toBe(204);
    expect(r.headers['access-control-allow-origin']).toBe('https://wallet.example');
    expect(String(r.headers['access-control-allow-headers'])).toContain('x-api-key');
    const other = await rawRequest(gw.url('rpc', '/ethereum'), { method: 'OPTIONS', headers: { origin: 'https://evil.example' } });
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const post = await rpc('/ethereum', call('eth_chainId'), { ...h(), origin: 'https://wallet.example' });
    expect(post.status).toBe(200);
    expect(post.headers['access-control-allow-origin']).toBe('https://wallet.example');
  });

  describe('parser tricks: the node executes exactly what was checked', () => {
    // [body, whether the node gets a call]. The gateway checks what JSON.parse
    // reads: the last of two equal keys (`m\u0065thod` is `method`); `METHOD`
    // is another key, and dropped. A refused call never reaches the node.
    const tricks: [string, boolean][] = [
      ['{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"eth_accounts"}', false],
      ['{"jsonrpc":"2.0","id":1,"method":"eth_accounts","method":"eth_chainId"}', true],
      ['{"jsonrpc":"2.0","id":1,"method":"eth_chainId","METHOD":"eth_accounts"}', true],
      ['{"jsonrpc":"2.0","id":1,"METHOD":"eth_accounts","method":"eth_chainId"}', true],
      ['{"jsonrpc":"2.0","id":1,"m\\u0065thod":"eth_accounts","method":"eth_chainId"}', true],
      ['{"jsonrpc":"2.0","id":1,"method":"eth_chainId","m\\u0065thod":"eth_accounts"}', false],
      ['[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"eth_accounts"}]', false],
      ['[{"jsonrpc":"2.0","id":1,"method":"eth_accounts","method":"eth_chainId"}]', true],
    ];
    for (const [body, forwarded] of tricks) {
      it(`${body} (${forwarded ? 'forwarded as eth_chainId' : 'refused'})`, async () => {
        const r = await rpc('/ethereum', body, h());
        expect(r.status).toBe(200);
        const answer = forwarded ? { jsonrpc: '2.0', id: 1, result: '0x1' } : { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } };
        expect(r.json()).toEqual(body.startsWith('[') ? [answer] : answer);
        if (!forwarded) {
          expect(up.proxy.requests).toHaveLength(0);
          return;
        }
        // The node saw one call, with one method key, and only the allowed method.
        expect(up.proxy.requests).toHaveLength(1);
        const text = up.proxy.requests[0]!.body.toString('utf8');
        expect(text.toLowerCase()).not.toContain('eth_accounts');
        expect(text.match(/"method"/gi)).toHaveLength(1);
        expect(text).not.toContain('\\');
        expect(up.proxy.methodsSeen()).toEqual(['eth_chainId']);
      });
    }
  });

  it('answers 502 for an unreachable upstream and 504 for a timeout, without upstream details', async () => {
    const dead = await rpc('/deadchain', call('eth_chainId'), h());
    expect(dead.status).toBe(502);
    expect(dead.json().error.code).toBe(RPC_ERRORS.GW_RPC_UPSTREAM_UNAVAILABLE.code);
    expect(dead.text).not.toContain('127.0.0.1');
    const slowAnswer = await rpc('/slowchain', call('eth_chainId'), h());
    expect(slowAnswer.status).toBe(504);
    expect(slowAnswer.json().error.code).toBe(RPC_ERRORS.GW_RPC_UPSTREAM_TIMEOUT.code);
    expect(slowAnswer.text).not.toContain(slowUrl);
  });

  it('passes the node’s own errors through unchanged', async () => {
    const body = JSON.stringify(call('eth_getWork', [], 9));
    const viaGateway = await rpc('/ethereum', body, h());
    const direct = await rawRequest(`${up.anvil.url}/`, { body });
    expect(direct.json().error).toBeDefined();
    expect(viaGateway.status).toBe(direct.status);
    expect(viaGateway.json()).toEqual(direct.json());
  });
});

describe('Rosetta', () => {
  const status = (network: unknown, blockchain: unknown = 'cardano') => ({ network_identifier: { blockchain, network }, metadata: {} });
  const post = (path: string, body: unknown, headers: Record<string, string> = { 'x-api-key': KEY }) =>
    rawRequest(gw.url('rpc', path), { body: typeof body === 'string' ? body : JSON.stringify(body), headers });

  it('forwards a matching network, with the key in the header or the query', async () => {
    for (const [path, headers] of [
      ['/cardano-preprod/network/status', { 'x-api-key': KEY }],
      [`/cardano-preprod/network/status?api_key=${KEY}`, {}],
    ] as const) {
      const r = await post(path, status('preprod'), headers);
      expect(r.status).toBe(200);
      expect(r.json().current_block_identifier).toBeDefined();
    }
    expect(up.rosetta.requests.map((r) => r.path)).toEqual(['/network/status', '/network/status']);
    expect(JSON.stringify(up.rosetta.requests)).not.toContain(KEY);
  });

  it('answers a mismatching network with 4002 and a wrong blockchain with 4004, over HTTP 500', async () => {
    const net = await post('/cardano-preprod/network/status', status('mainnet'));
    expect(net.status).toBe(500);
    expect(net.json()).toMatchObject({ code: 4002, message: 'Network not found', retriable: false });
    expect(JSON.stringify(net.json().details)).toContain('preprod');
    const chain = await post('/cardano-preprod/network/status', status('preprod', 'bitcoin'));
    expect(chain.status).toBe(500);
    expect(chain.json()).toMatchObject({ code: 4004, message: 'Invalid blockchain', retriable: false });
    expect(up.rosetta.requests).toHaveLength(0);
  });

  it('answers every gateway error with HTTP 500 and a Rosetta Error', async () => {
    const cases: [string, unknown, Record<string, string>, number][] = [
      ['/cardano-preprod/network/status', status('preprod'), {}, ROSETTA_ERRORS.GW_AUTH_KEY_MISSING.code],
      ['/cardano-preprod/network/status', status('preprod'), { 'x-api-key': OTHER_KEY }, ROSETTA_ERRORS.GW_AUTH_KEY_INVALID.code],
      ['/cardano-preprod/network/status', '{"network_identifier":', { 'x-api-key': KEY }, ROSETTA_ERRORS.GW_ROSETTA_INVALID_JSON.code],
      ['/cardano-preprod/network/status', { metadata: {} }, { 'x-api-key': KEY }, ROSETTA_ERRORS.GW_ROSETTA_INVALID_REQUEST.code],
      ['/cardano-preprod/network/status', { network_identifier: 'preprod' }, { 'x-api-key': KEY }, ROSETTA_ERRORS.GW_ROSETTA_INVALID_REQUEST.code],
      [`/cardano-preprod/${KEY}/network/status`, status('preprod'), {}, ROSETTA_ERRORS.GW_ROSETTA_UNKNOWN_ENDPOINT.code],
      ['/cardano-preprod/network/nope', status('preprod'), { 'x-api-key': KEY }, ROSETTA_ERRORS.GW_ROSETTA_UNKNOWN_ENDPOINT.code],
      [`/cardano-preprod/network/status?api_key=${OTHER_KEY}`, status('preprod'), { 'x-api-key': KEY }, ROSETTA_ERRORS.GW_AUTH_KEY_CONFLICT.code],
    ];
    for (const [path, body, headers, code] of cases) {
      const r = await post(path, body, headers);
      expect(r.status, path).toBe(500);
      const e = r.json();
      expect(e.code, path).toBe(code);
      expect(typeof e.message).toBe('string');
      expect(typeof e.retriable).toBe('boolean');
      expect(r.text).not.toContain(KEY);
    }
    const get = await rawRequest(gw.url('rpc', '/cardano-preprod/network/status'), { headers: { 'x-api-key': KEY } });
    expect(get.status).toBe(500);
    expect(get.json().code).toBe(ROSETTA_ERRORS.GW_ROSETTA_METHOD_NOT_ALLOWED.code);
    expect(up.rosetta.requests).toHaveLength(0);
  });

  it('passes upstream errors on unchanged with HTTP 500, also when the upstream sends 400', async () => {
    const body = { network_identifier: { blockchain: 'cardano', network: 'preprod' }, block_identifier: { index: 999_999_999 } };
    const as500 = await post('/cardano-preprod/block', body);
    up.rosetta.setNonRetriableStatus(400);
    try {
      const as400 = await post('/cardano-preprod/block', body);
      expect(as400.status).toBe(500);
      expect(as400.json()).toEqual(as500.json());
    } finally {
      up.rosetta.setNonRetriableStatus(500);
    }
    expect(as500.status).toBe(500);
    expect(as500.json()).toMatchObject({ code: 4001, retriable: false });
  });

  it('extends /network/options allow.errors with the gateway’s own errors', async () => {
    const r = await post('/cardano-preprod/network/options', status('preprod'));
    expect(r.status).toBe(200);
    const codes = new Set(r.json().allow.errors.map((e: { code: number }) => e.code));
    for (const e of Object.values(ROSETTA_ERRORS)) expect(codes.has(e.code), String(e.code)).toBe(true);
    expect(codes.has(4002)).toBe(true);
  });

  it('forwards a re-serialization, so duplicate network keys cannot reach another network', async () => {
    const r = await post('/cardano-preprod/network/status', '{"network_identifier":{"blockchain":"cardano","network":"mainnet","network":"preprod"},"metadata":{}}');
    expect(r.status).toBe(200);
    expect(up.rosetta.requests).toHaveLength(1);
    expect(up.rosetta.requests[0]!.json).toEqual(status('preprod'));
  });
});

describe('Explorer', () => {
  const get = (path: string, headers: Record<string, string> = {}) => rawRequest(gw.url('explorer', path), { path, headers });

  it('forwards /<chain>/v2/block/<id>?pageSize=N to <upstream>/v2/block/<id> with the key stripped in every placement', async () => {
    for (const [path, headers] of [
      ['/bitcoin/v2/block/1?pageSize=10', { 'x-api-key': KEY }],
      [`/bitcoin/${KEY}/v2/block/1?pageSize=10`, {}],
      [`/bitcoin/v2/block/1?api_key=${KEY}&pageSize=10`, {}],
      [`/bitcoin/v2/block/1?pageSize=10&api_key=${KEY}`, {}],
    ] as const) {
      const r = await get(path, headers);
      expect(r.status, path).toBe(200);
      expect(r.json().height).toBe(1);
    }
    expect(up.bb.requests.map((r) => `${r.path}?${r.query}`)).toEqual(Array(4).fill('/api/v2/block/1?pageSize=10'));
    for (const req of up.bb.requests) expect(JSON.stringify(req.headers)).not.toContain(KEY);
  });

  it('keeps every other query parameter and its order', async () => {
    const r = await get(`/bitcoin/v2/address/addr1?details=txs&api_key=${KEY}&page=2&from=5`);
    expect(r.status).toBe(200);
    expect(up.bb.requests).toHaveLength(1);
    expect(up.bb.requests[0]!.query).toBe('details=txs&page=2&from=5');
  });

  it('passes Blockbook errors through unchanged', async () => {
    const r = await get('/bitcoin/v2/block/999999999', { 'x-api-key': KEY });
    expect(r.status).toBe(400);
    expect(r.json()).toEqual({ error: 'Block not found' });
  });

  it('checks page and pageSize', async () => {
    for (const q of ['pageSize=0', 'pageSize=51', 'pageSize=abc', 'page=-1', 'page=0', 'pageSize=1e3']) {
      const r = await get(`/bitcoin/v2/block/1?${q}`, { 'x-api-key': KEY });
      expect(r.status, q).toBe(400);
      expect(typeof r.json().error).toBe('string');
    }
    expect((await get('/bitcoin/v2/block/1?pageSize=50&page=3', { 'x-api-key': KEY })).status).toBe(200);
    expect(up.bb.requests).toHaveLength(1);
  });

  it('answers gateway errors in Blockbook’s shape', async () => {
    const cases: [string, string, Record<string, string>, number][] = [
      ['GET', '/bitcoin/v2/block/1', {}, 401],
      ['GET', '/bitcoin/v2/block/1', { 'x-api-key': OTHER_KEY }, 403],
      ['GET', `/bitcoin/${KEY_ETH_ONLY}/v2/block/1`, {}, 403],
      ['GET', `/bitcoin/${KEY}/v2/block/1?api_key=${OTHER_KEY}`, {}, 400],
      ['GET', '/bitcoin/v2/nosuch/1', { 'x-api-key': KEY }, 404],
      ['GET', '/dogecoin/v2/block/1', { 'x-api-key': KEY }, 404],
      ['DELETE', '/bitcoin/v2/block/1', { 'x-api-key': KEY }, 405],
      ['GET', '/litecoin/v2/sendtx/00ff', { 'x-api-key': KEY }, 404],
    ];
    for (const [method, path, headers, status] of cases) {
      const r = await rawRequest(gw.url('explorer', path), { method, path, headers });
      expect(r.status, `${method} ${path}`).toBe(status);
      expect(Object.keys(r.json())).toEqual(['error']);
      expect(r.text).not.toContain(OTHER_KEY);
    }
    expect(up.bb.requests).toHaveLength(0);
  });

  it('forwards sendtx only where the manifest enables it', async () => {
    const r = await rawRequest(gw.url('explorer', '/bitcoin/v2/sendtx/'), { method: 'POST', body: '0100ff', headers: { 'x-api-key': KEY, 'content-type': 'text/plain' } });
    expect(r.status).toBe(200);
    expect(r.json().result).toBeDefined();
    expect(up.bb.requests[0]!.method).toBe('POST');
    expect(up.bb.requests[0]!.path).toBe('/api/v2/sendtx/');
  });

  it('never lets encoded tricks reach another route or a path outside the route', async () => {
    const tricks = [
      '/bitcoin/v2/block/../../status',
      '/bitcoin/v2/block/%2e%2e/%2e%2e/status',
      '/bitcoin/v2/block/%2E%2E',
      '/bitcoin/v2/block/1%2F..%2F..%2Fstatus',
      '/bitcoin/v2/block//1',
      '/bitcoin//v2/block/1',
      '/%62itcoin/v2/block/1',
      '/bitcoin/v2/xpub/a%2F..%2F..',
      '/bitcoin/v2/block/1%5C..',
      '/bitcoin/%2e%2e/v2/block/1',
    ];
    for (const path of tricks) {
      const r = await get(path, { 'x-api-key': KEY });
      expect([400, 403, 404], path).toContain(r.status);
      expect(typeof r.json().error).toBe('string');
    }
    expect(up.bb.requests).toHaveLength(0);
  });
});

describe('everywhere', () => {
  it('answers an unknown first segment with 404 and JSON, on both listeners', async () => {
    const a = await rawRequest(gw.url('rpc', '/nochain'), { body: '{}' });
    expect(a.status).toBe(404);
    expect(a.json().error).toBeDefined();
    const b = await rawRequest(gw.url('explorer', '/ethereum/v2/block/1'));
    expect(b.status).toBe(404);
    expect(b.json().error).toBeDefined();
  });

  it('passes X-Request-Id on, or makes one', async () => {
    const given = await rpc('/ethereum', call('eth_chainId'), { 'x-api-key': KEY, 'x-request-id': 'trace-123' });
    expect(given.status).toBe(200);
    expect(given.headers['x-request-id']).toBe('trace-123');
    const r = await rpc('/ethereum', call('eth_chainId'), { 'x-api-key': KEY });
    expect(r.status).toBe(200);
    expect(up.proxy.requests[0]!.headers['x-request-id']).toBe('trace-123');
    expect(up.proxy.requests[1]!.headers['x-request-id']).toBe(r.headers['x-request-id']);
    expect(String(r.headers['x-request-id'])).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('serves /healthz and /readyz on each listener without a key, naming chains but no upstream URL', async () => {
    for (const l of ['rpc', 'explorer']) {
      const h = await rawRequest(gw.url(l, '/healthz'));
      expect(h.status).toBe(200);
      const r = await rawRequest(gw.url(l, '/readyz'));
      // deadchain and slowchain have no reachable upstream.
      expect(r.status).toBe(503);
      const body = r.json();
      expect(Object.keys(body.chains).sort()).toEqual(['bitcoin', 'cardano-preprod', 'deadchain', 'ethereum', 'litecoin', 'polygon', 'slowchain']);
      expect(r.text).not.toContain('127.0.0.1');
    }
  });
});
