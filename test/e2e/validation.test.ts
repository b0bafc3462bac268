// Parameters validated at the edge (issue 23), end to end: every allowed EVM
// method's own OpenRPC examples against real anvil (the valid one answered as
// anvil answers it, a mutation of it refused and never forwarded), batches,
// the limits no schema bounds, validate: off, Rosetta bodies and Blockbook
// parameters against the recording stand-ins, and real clients sending
// overrides and EIP-1898 block objects.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, defineChain, http, type Hex } from 'viem';
import { FetchRequest, JsonRpcProvider, Network } from 'ethers';
import { Web3 } from 'web3';
import { newKey, rawRequest, EVM_METHODS, type RawResponse, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startStandIns, type StandIns } from './three-chains.ts';
import { evmExamples } from '../../generator/specs.ts';

const KEY = newKey();
/** anvil's first dev account (funded). */
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
let rig: Gateway<{ up: Promise<StandIns> }>;
let up: StandIns;
let gw: RunningGateway;

beforeAll(async () => {
  const eth = ['${ETH_URL}'];
  rig = await gateway({
    name: 'validation',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: eth },
      { path: 'small', interface: 'evm-jsonrpc', limits: { maxParamsDepth: 6, maxArrayItems: 5, maxHexBytes: 32 }, upstreams: eth },
      { path: 'unchecked', interface: 'evm-jsonrpc', validate: 'off', upstreams: eth },
      { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${ROSETTA_URL}'] },
      { path: 'cardano-unchecked', interface: 'rosetta', network: 'preprod', validate: 'off', upstreams: ['${ROSETTA_URL}'] },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB_URL}'] },
      { path: 'bitcoin-unchecked', interface: 'blockbook', listener: 'explorer', validate: 'off', upstreams: ['${BB_URL}'] },
    ],
    header: { admin: null, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'validation', key: KEY }],
    standIns: { up: startStandIns() },
  });
  ({ gw, standIns: { up } } = rig);
}, 60_000);

afterAll(() => rig?.close());

const H = { 'x-api-key': KEY, 'content-type': 'application/json' };
const call = (method: string, params: unknown, id: unknown = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

function rpc(chain: string, body: string): Promise<RawResponse> {
  return rawRequest(gw.url('rpc', `/${chain}`), { body, headers: H });
}

/** What anvil itself answers, straight, without the gateway or the recording proxy. */
async function direct(body: string): Promise<unknown> {
  const r = await fetch(up.anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return r.json();
}

/** A mutation of valid params that the spec refuses: the first param broken, or one param too many. */
function broken(params: unknown[]): unknown[] {
  return params.length === 0 ? ['0xZZ'] : ['0xZZ', ...params.slice(1)];
}

describe('EVM params against the OpenRPC examples, on real anvil', () => {
  it('every allowed method: its example is answered as anvil answers it; a mutation of it gets -32602 at the edge and never reaches anvil', async () => {
    expect(EVM_METHODS).toHaveLength(30);
    let withExamples = 0;
    for (const method of EVM_METHODS) {
      const examples = evmExamples(method);
      // eth_mining and eth_getWork have none; they take no params.
      const valid = examples.length > 0 ? examples.map((e) => e as unknown[]) : [[]];
      if (examples.length > 0) withExamples++;
      for (const params of valid) {
        up.proxy.clear();
        const body = call(method, params, 7);
        const r = await rpc('ethereum', body);
        const expected = await direct(body);
        expect(r.status, method).toBe(200);
        expect(r.json(), `${method} ${JSON.stringify(params)}`).toEqual(expected);
        expect(up.proxy.methodsSeen(), method).toEqual([method]);

        up.proxy.clear();
        const bad = await rpc('ethereum', call(method, broken(params), 8));
        expect(bad.status, method).toBe(200);
        const j = bad.json();
        expect(j.id).toBe(8);
        expect(j.error.code, method).toBe(-32602);
        expect(j.error.message).toBe('Invalid params');
        expect(typeof j.error.data.path).toBe('string');
        expect(j.error.data.message.length, method).toBeGreaterThan(0);
        expect(up.proxy.requests, method).toHaveLength(0);
      }
    }
    expect(withExamples).toBe(28);
  });

  it('names the path and the problem: a bad `to` inside the transaction, a bad block, a missing param, too many', async () => {
    const addr = '0x' + 'ab'.repeat(20);
    const cases: [string, unknown[], string, RegExp][] = [
      ['eth_call', [{ to: '0x1234', data: '0x' }, 'latest'], '/0/to', /address/],
      ['eth_call', [{ to: addr, data: '0x123' }, 'latest'], '/0/data', /bytes/],
      ['eth_call', [{ to: addr, TO: addr }, 'latest'], '/0', /unknown field "TO"/],
      ['eth_getBalance', [addr, 'newest'], '/1', /block number, block tag, block hash/],
      ['eth_getBalance', [addr, '0x01'], '/1', /block number, block tag, block hash/],
      ['eth_getBalance', [addr], '', /at least 2/],
      ['eth_blockNumber', ['latest'], '', /at most 0/],
      ['eth_getBlockByNumber', ['latest', 'yes'], '/1', /boolean/],
    ];
    up.proxy.clear();
    for (const [method, params, path, message] of cases) {
      const r = await rpc('ethereum', call(method, params, 'x'));
      const j = r.json();
      expect(j.id).toBe('x');
      expect(j.error.data.path, `${method} ${JSON.stringify(params)}`).toBe(path);
      expect(j.error.data.message, `${method} ${JSON.stringify(params)}`).toMatch(message);
    }
    expect(up.proxy.requests).toHaveLength(0);
  });

  it('a key named twice: the value checked is the value the node gets, once (a parser that keeps the first key reads nothing unchecked)', async () => {
    const addr = '0x' + 'ab'.repeat(20);
    // In the transaction object, and at the top; the first value malformed, the last (what JSON.parse reads) valid.
    const nested = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${addr}","data":"0xZZ","data":"0x"},"latest"]}`;
    const top = `{"jsonrpc":"2.0","id":2,"method":"eth_call","params":[{"to":"0x12"},"latest"],"params":[{"to":"${addr}","data":"0x"},"latest"]}`;
    const batch = `[${nested},${top}]`;
    up.proxy.clear();
    for (const body of [nested, top, batch]) {
      const r = await rpc('ethereum', body);
      expect(r.status, body).toBe(200);
      const items = (Array.isArray(r.json()) ? r.json() : [r.json()]) as { result?: string; error?: unknown }[];
      for (const it of items) expect(it, body).toMatchObject({ result: '0x' });
    }
    const sent = up.proxy.requests.map((r) => r.body!.toString('utf8'));
    expect(sent).toHaveLength(3);
    for (const t of sent) {
      expect(t).not.toMatch(/0xZZ|"0x12"/);
      const calls = t.startsWith('[') ? (JSON.parse(t) as unknown[]) : [JSON.parse(t)];
      expect(t.match(/"params"/g)).toHaveLength(calls.length);
      expect(t.match(/"data"/g)).toHaveLength(calls.length);
    }
    // The other way round (the last value malformed): refused at the edge, nothing forwarded.
    up.proxy.clear();
    const bad = await rpc('ethereum', `{"jsonrpc":"2.0","id":3,"method":"eth_call","params":[{"to":"${addr}","data":"0x","data":"0xZZ"},"latest"]}`);
    expect(bad.json()).toMatchObject({ id: 3, error: { code: -32602, data: { path: '/0/data' } } });
    expect(up.proxy.requests).toHaveLength(0);
  });

  it('a batch gets the error per item, and its valid items still go to the node, in one request', async () => {
    up.proxy.clear();
    const addr = '0x' + 'cd'.repeat(20);
    const body = JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [addr, 'latest'] },
      { jsonrpc: '2.0', id: 2, method: 'eth_getBalance', params: [addr, 'Latest'] },
      { jsonrpc: '2.0', id: 3, method: 'eth_blockNumber', params: [] },
      { jsonrpc: '2.0', method: 'eth_getBalance', params: ['nope'] },
    ]);
    const r = await rpc('ethereum', body);
    expect(r.status).toBe(200);
    const items = r.json() as { id: number; result?: string; error?: { code: number; data: { path: string } } }[];
    expect(items.map((i) => i.id)).toEqual([1, 2, 3]);
    expect(items[0]!.result).toBe('0x0');
    expect(items[1]!.error).toMatchObject({ code: -32602, data: { path: '/1' } });
    expect(items[2]!.result).toMatch(/^0x/);
    expect(up.proxy.requests).toHaveLength(1);
    expect(up.proxy.methodsSeen()).toEqual(['eth_getBalance', 'eth_blockNumber']);
  });

  it('refuses params past the limits no schema bounds (depth, array length, hex length), before the node sees them', async () => {
    up.proxy.clear();
    const addr = '0x' + 'ab'.repeat(20);
    let deep: unknown = addr;
    for (let i = 0; i < 8; i++) deep = [deep];
    const over: [unknown[], string, RegExp][] = [
      [[addr, ['0x' + '00'.repeat(32)], deep], '/2/0/0/0/0/0', /maxParamsDepth/],
      [[addr, Array.from({ length: 6 }, () => '0x00'), 'latest'], '/1', /maxArrayItems/],
      [[{ to: addr, data: '0x' + 'ff'.repeat(33) }, 'latest'], '/0/data', /maxHexBytes/],
    ];
    for (const [params, path, message] of over) {
      const method = Array.isArray(params[1]) ? 'eth_getProof' : 'eth_call';
      const r = await rpc('small', call(method, params));
      expect(r.status).toBe(200);
      expect(r.json().error, JSON.stringify(params).slice(0, 80)).toMatchObject({ code: -32602, data: { path, message: expect.stringMatching(message) } });
    }
    // At the limits: forwarded.
    const at = await rpc('small', call('eth_call', [{ to: addr, data: '0x' + 'ff'.repeat(32) }, 'latest']));
    expect(at.json()).toEqual(await direct(call('eth_call', [{ to: addr, data: '0x' + 'ff'.repeat(32) }, 'latest'])));
    expect(up.proxy.methodsSeen()).toEqual(['eth_call']);
    // Far deeper than maxParamsDepth (but within the 128-level hard limit): still the call's own error, with its id.
    const nested = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":${'['.repeat(40)}${']'.repeat(40)}}`;
    const r = await rpc('small', nested);
    expect(r.json()).toMatchObject({ id: 1, error: { code: -32602, data: { path: '/0'.repeat(6), message: expect.stringMatching(/maxParamsDepth/) } } });
    expect(up.proxy.methodsSeen()).toEqual(['eth_call']);
  });

  it('a call nested past maxParamsDepth costs only itself: in a batch it gets -32602 with its id and data.path, the valid calls still reach the node (issue 32)', async () => {
    const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const deepCall = (idJson: string) => `{"jsonrpc":"2.0","id":${idJson},"method":"eth_getBalance","params":${nest(40)}}`;
    // maxParamsDepth is 32 on this chain: the 33rd level, index 0 at each step, is where the limit is crossed.
    const tooDeep = { code: -32602, message: 'Invalid params', data: { path: '/0'.repeat(32), message: 'nested deeper than 32 levels (limits.maxParamsDepth)' } };
    const addr = '0x' + 'cd'.repeat(20);
    up.proxy.clear();
    const r = await rpc('ethereum', `[${call('eth_getBalance', [addr, 'latest'], 1)},${deepCall('"deep"')},${call('eth_chainId', [], 3)}]`);
    expect(r.status).toBe(200);
    const items = r.json() as { id: unknown; result?: string; error?: unknown }[];
    expect(items.map((i) => i.id)).toEqual([1, 'deep', 3]);
    expect(items[0]).toEqual({ jsonrpc: '2.0', id: 1, result: '0x0' });
    expect(items[1]).toEqual({ jsonrpc: '2.0', id: 'deep', error: tooDeep });
    expect(items[2]).toEqual({ jsonrpc: '2.0', id: 3, result: '0x1' });
    // The node got the two valid calls, in one request, and nothing of the deep one.
    expect(up.proxy.requests).toHaveLength(1);
    expect((up.proxy.requests[0]!.json as { id: unknown }[]).map((c) => c.id)).toEqual([1, 3]);
    expect(up.proxy.requests[0]!.body!.toString('utf8')).not.toContain('[[[');

    // A lone call refused for depth echoes its id.
    up.proxy.clear();
    const lone = await rpc('ethereum', deepCall('"lone-40"'));
    expect(lone.status).toBe(200);
    expect(lone.json()).toEqual({ jsonrpc: '2.0', id: 'lone-40', error: tooDeep });
    expect(up.proxy.requests).toHaveLength(0);

    // Past the 128-level hard limit the body is refused whole, before it is parsed (HTTP 400, id unknown).
    const whole = await rpc('ethereum', `[${call('eth_chainId', [], 1)},{"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":${nest(127)}}]`);
    expect(whole.status).toBe(400);
    expect(whole.json()).toMatchObject({ id: null, error: { code: -32600 } });
    expect(up.proxy.requests).toHaveLength(0);
  });

  it('validate: off forwards params the spec refuses, and the node answers them', async () => {
    up.proxy.clear();
    const body = call('eth_getBalance', ['0x' + 'ab'.repeat(20), 'Latest']);
    const r = await rpc('unchecked', body);
    expect(r.json()).toEqual(await direct(body));
    expect(up.proxy.methodsSeen()).toEqual(['eth_getBalance']);
    // The allowlist still applies.
    const refused = await rpc('unchecked', call('eth_accounts', []));
    expect(refused.json().error.code).toBe(-32601);
  });
});

describe('real clients through a validating chain', () => {
  const url = () => gw.url('rpc', `/ethereum/${KEY}`);
  const chain = () => defineChain({ id: 1, name: 'anvil', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [url()] } } });

  it('viem: eth_call with state and block overrides, getBalance by block hash (EIP-1898, requireCanonical)', async () => {
    const client = createPublicClient({ chain: chain(), transport: http(url()) });
    const target = '0x00000000000000000000000000000000000000c0' as Hex;
    // Code that returns the block number: NUMBER PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN.
    const code = '0x4360005260206000f3' as Hex;
    up.proxy.clear();
    const r = await client.call({ to: target, stateOverride: [{ address: target, code, balance: 5n }], blockOverrides: { number: 77n } });
    expect(BigInt(r.data!)).toBe(77n);
    const sent = up.proxy.requests.at(-1)!.json as { params: unknown[] };
    expect(sent.params).toHaveLength(4);
    const block = await client.getBlock();
    const balance = await client.getBalance({ address: DEV as Hex, blockHash: block.hash!, requireCanonical: true });
    expect(balance > 0n).toBe(true);
    expect((up.proxy.requests.at(-1)!.json as { params: unknown[] }).params[1]).toEqual({ blockHash: block.hash, requireCanonical: true });
  });

  it('ethers: calls, estimates and reads by block hash pass; a malformed raw call through ethers gets -32602', async () => {
    const req = new FetchRequest(url());
    const provider = new JsonRpcProvider(req, Network.from(1), { staticNetwork: true, batchMaxCount: 1 });
    const addr = DEV;
    const block = await provider.getBlock('latest');
    expect(await provider.getBalance(addr, block!.hash!)).toBeGreaterThan(0n);
    expect(await provider.getTransactionCount(addr, 'latest')).toBeGreaterThanOrEqual(0);
    expect(await provider.call({ to: addr, data: '0x' })).toBe('0x');
    expect(await provider.estimateGas({ from: addr, to: addr, value: 1n })).toBeGreaterThan(0n);
    const viaSend = await provider.send('eth_getBalance', [addr, { blockHash: block!.hash }]);
    expect(BigInt(viaSend)).toBeGreaterThan(0n);
    await expect(provider.send('eth_getBalance', [addr, 'Latest'])).rejects.toThrow(/Invalid params/);
    provider.destroy();
  });

  it('web3.js: balance by number and hash, call, estimateGas, getProof', async () => {
    const web3 = new Web3(url());
    const addr = DEV;
    const block = await web3.eth.getBlock('latest');
    expect(BigInt(await web3.eth.getBalance(addr, block.number))).toBeGreaterThan(0n);
    // By hash as EIP-1898 through web3's own request manager: web3.eth.getBalance formats its block argument as
    // a number, so a hash with a leading zero nibble (1 in 16 genesis hashes) would reach the node as a 63-digit
    // block number, which the spec allows and anvil refuses ("number too large").
    const byHash = await web3.requestManager.send({ method: 'eth_getBalance', params: [addr, { blockHash: block.hash as string }] });
    expect(BigInt(byHash as string)).toBeGreaterThan(0n);
    expect(await web3.eth.call({ to: addr, data: '0x' })).toBe('0x');
    expect(BigInt(await web3.eth.estimateGas({ from: addr, to: addr, value: 1 }))).toBeGreaterThan(0n);
    const proof = await web3.eth.getProof(addr, ['0x' + '00'.repeat(32)], 'latest');
    expect(BigInt(proof.balance)).toBeGreaterThan(0n);
  });
});

describe('Rosetta bodies against the Rosetta API', () => {
  const NET = { blockchain: 'cardano', network: 'preprod' };
  const post = (chain: string, endpoint: string, body: unknown) => rawRequest(gw.url('rpc', `/${chain}/${endpoint}`), { body: JSON.stringify(body), headers: H });

  it('an invalid body gets 6018 (HTTP 500, retriable false) with details naming the path, and never reaches the node', async () => {
    up.rosetta.clear();
    const cases: [string, unknown, string][] = [
      ['block', { network_identifier: NET, block_identifier: { index: -1 } }, '/block_identifier/index'],
      ['block', { network_identifier: NET, block_identifier: { index: 'one' } }, '/block_identifier/index'],
      ['block', { network_identifier: NET }, ''],
      ['account/balance', { network_identifier: NET, account_identifier: { addr: 'x' } }, '/account_identifier'],
      ['network/list', { metadata: 'not an object' }, '/metadata'],
    ];
    for (const [endpoint, body, path] of cases) {
      const r = await post('cardano-preprod', endpoint, body);
      expect(r.status, endpoint).toBe(500);
      expect(r.json(), `${endpoint} ${JSON.stringify(body)}`).toMatchObject({ code: 6018, retriable: false, details: { path } });
      expect(typeof r.json().details.message).toBe('string');
    }
    expect(up.rosetta.requests).toHaveLength(0);
    const ok = await post('cardano-preprod', 'block', { network_identifier: NET, block_identifier: { index: 1 } });
    expect(ok.status).toBe(200);
    expect(up.rosetta.requests).toHaveLength(1);
  });

  it('6018 is in /network/options allow.errors; validate: off forwards the body', async () => {
    const opts = await post('cardano-preprod', 'network/options', { network_identifier: NET });
    expect(opts.json().allow.errors).toContainEqual({ code: 6018, message: 'Invalid request body: does not match the Rosetta API', retriable: false });
    up.rosetta.clear();
    await post('cardano-unchecked', 'block', { network_identifier: NET, block_identifier: { index: 'one' } });
    expect(up.rosetta.requests).toHaveLength(1);
  });
});

describe('Blockbook parameters against the Blockbook API', () => {
  const get = (chain: string, rest: string) => rawRequest(gw.url('explorer', `/${chain}/v2/${rest}`), { headers: { 'x-api-key': KEY } });

  it('an invalid value of a parameter the endpoint takes gets HTTP 400 {"error"} naming it, and never reaches the server', async () => {
    up.bb.clear();
    const cases: [string, string][] = [
      ['block/not-a-block', 'blockId'],
      ['block/01', 'blockId'],
      ['block-index/x', 'height'],
      ['tx/abc', 'txid'],
      ['address/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq?details=everything', 'details'],
      ['address/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq?from=-3', 'from'],
      ['utxo/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq?confirmed=maybe', 'confirmed'],
      ['estimatefee/0', 'blocks'],
      ['block-filters/', 'scriptType'],
      // Next to parameters the endpoint does not take, a known one is still checked.
      ['address/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq?_=1732000000000&details=everything&colour=red', 'details'],
      ['utxo/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq?utm_source=x&confirmed=maybe', 'confirmed'],
      ['block-index/x?_=1', 'height'],
    ];
    for (const [rest, parameter] of cases) {
      const r = await get('bitcoin', rest);
      expect(r.status, rest).toBe(400);
      const j = r.json();
      expect(j.parameter, rest).toBe(parameter);
      expect(j.error, rest).toContain(`'${parameter}'`);
    }
    expect(up.bb.requests).toHaveLength(0);
  });

  it('valid parameters are forwarded as sent; validate: off forwards what the spec refuses', async () => {
    up.bb.clear();
    const ok = await get('bitcoin', `block/${up.bb.blockHash(1)}?page=1&pageSize=10`);
    expect(ok.status).toBe(200);
    expect((await get('bitcoin', 'address/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq?details=txids&page=2')).status).toBe(200);
    expect(up.bb.requests.map((r) => r.url)).toEqual([`/api/v2/block/${up.bb.blockHash(1)}?page=1&pageSize=10`, '/api/v2/address/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq?details=txids&page=2']);
    up.bb.clear();
    await get('bitcoin-unchecked', 'block/1?colour=red');
    expect(up.bb.requests).toHaveLength(1);
  });

  // Issue 32: Blockbook ignores a parameter it does not read, and clients add
  // them (cache-busters, tracking tags, parameters of newer Blockbooks).
  it('a parameter the endpoint does not take reaches Blockbook as sent, in order, with the rest; api_key never does', async () => {
    up.bb.clear();
    const address = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
    const sent = [
      `block/${up.bb.blockHash(1)}?_=1732000000000`,
      `block/${up.bb.blockHash(1)}?page=1&utm_source=wallet&pageSize=10&_=1732000000001`,
      `address/${address}?details=txids&secondary=usd&contractFilter=0xabc`,
      // Names that are not the endpoint's own: on an object's prototype, the path parameter's, repeated, escaped, empty.
      `block-index/1?constructor=1&__proto__=2&toString=3&height=7&x=1&x=2&a%20b=c%2Bd&=e&f`,
    ];
    for (const rest of sent) {
      const r = await get('bitcoin', rest);
      expect(r.status, rest).toBe(200);
    }
    // With the key in the query too: the key goes, everything else stays where it was.
    const keyed = await rawRequest(gw.url('explorer', `/bitcoin/v2/block-index/2?_=5&api_key=${KEY}&newerParam=true`));
    expect(keyed.status).toBe(200);
    expect(up.bb.requests.map((r) => r.url)).toEqual([...sent.map((rest) => `/api/v2/${rest}`), '/api/v2/block-index/2?_=5&newerParam=true']);
    for (const r of up.bb.requests) expect(r.url + JSON.stringify(r.headers)).not.toContain(KEY);
  });
});
