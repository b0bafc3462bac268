// Real clients (viem, ethers v6, web3.js) through the emitted gateway, in
// front of real anvil nodes behind recording proxies (issue 4).
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createPublicClient, createWalletClient, http, keccak256, parseEther, defineChain, toHex, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { FetchRequest, JsonRpcProvider, Network, Wallet } from 'ethers';
import { Web3 } from 'web3';
import { newKey, rawRequest, EVM_METHODS, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';

/** anvil's funded dev accounts come from this public test mnemonic; each test signs with its own. */
const MNEMONIC = 'test test test test test test test test test test test junk';
const devAccount = (i: number) => mnemonicToAccount(MNEMONIC, { addressIndex: i });
const devKey = (i: number) => toHex(devAccount(i).getHdKey().privateKey!);
const TO = '0x70997970c51812dc3a635b40f0e2b2c5b1b1e5a6';
/** A contract whose every call returns 42 (runtime 602a60005260206000f3). */
const BYTECODE = '0x600a600c600039600a6000f3602a60005260206000f3';

const KEY = newKey();
let eth: Anvil;
let poly: Anvil;
let ethProxy: RecordingProxy;
let polyProxy: RecordingProxy;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  [eth, poly] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 137 })]);
  [ethProxy, polyProxy] = await Promise.all([startRecordingProxy(eth.url), startRecordingProxy(poly.url)]);
  rig = await gateway({
    name: 'clients',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
      { path: 'polygon', interface: 'evm-jsonrpc', chainId: 137, upstreams: ['${POLY_URL}'] },
    ],
    header: { admin: null, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'wallet', key: KEY }],
    standIns: { eth, poly, ETH_URL: ethProxy, POLY_URL: polyProxy },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

const mainnet = defineChain({ id: 1, name: 'anvil-1', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } });

/** Methods outside the allowlist that viem and ethers try in the flows below (and get -32601 for). */
const REFUSED_BY_CLIENTS = ['eth_fillTransaction', 'eth_maxPriorityFeePerGas'];

describe('viem', () => {
  for (const [label, batch, where] of [
    ['key in the path, no batching', false, 'path'],
    ['key in the header, batch: true', true, 'header'],
    ['key in the query, batch: true', true, 'query'],
  ] as const) {
    it(`runs a full wallet flow (${label})`, async () => {
      const url = where === 'path' ? gw.url('rpc', `/ethereum/${KEY}`) : where === 'query' ? gw.url('rpc', `/ethereum?api_key=${KEY}`) : gw.url('rpc', '/ethereum');
      const transport = http(url, { batch, fetchOptions: where === 'header' ? { headers: { 'X-API-Key': KEY } } : {} });
      const pub = createPublicClient({ chain: mainnet, transport });
      const account = devAccount(where === 'path' ? 0 : where === 'header' ? 1 : 2);
      const wallet = createWalletClient({ chain: mainnet, transport, account });

      const [block, balance, chainId, fees] = await Promise.all([
        pub.getBlockNumber(),
        pub.getBalance({ address: account.address }),
        pub.getChainId(),
        pub.estimateFeesPerGas(),
      ]);
      expect(typeof block).toBe('bigint');
      expect(balance > parseEther('1')).toBe(true);
      expect(chainId).toBe(1);
      expect(fees.maxFeePerGas > 0n).toBe(true);

      // Signed locally, sent with eth_sendRawTransaction.
      const hash = await wallet.sendTransaction({ to: TO, value: parseEther('0.5') });
      const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 50 });
      expect(receipt.status).toBe('success');

      const deployHash = await wallet.deployContract({ abi: [], bytecode: BYTECODE });
      const deployed = await pub.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 50 });
      const address = deployed.contractAddress!;
      const call = await pub.call({ to: address, data: '0x' });
      expect(BigInt(call.data!)).toBe(42n);
      const gas = await pub.estimateGas({ account: account.address, to: address, data: '0x' });
      expect(gas > 21000n).toBe(true);

      const full = await pub.getBlock({ blockNumber: receipt.blockNumber, includeTransactions: true });
      expect(full.transactions.map((t) => (typeof t === 'string' ? t : t.hash))).toContain(hash);
      const proof = await pub.getProof({ address, storageKeys: [`0x${'0'.repeat(64)}`] });
      expect(proof.address.toLowerCase()).toBe(address.toLowerCase());
    });
  }
});

describe('ethers v6', () => {
  it('runs a wallet flow with default batching and staticNetwork, key in the header', async () => {
    const req = new FetchRequest(gw.url('rpc', '/ethereum'));
    req.setHeader('X-API-Key', KEY);
    const provider = new JsonRpcProvider(req, Network.from(1), { staticNetwork: true });
    // A batch that mixes allowed and refused methods: each refused item gets its own -32601.
    const [bn, fee, refused] = await Promise.allSettled([provider.getBlockNumber(), provider.getFeeData(), provider.send('eth_accounts', [])]);
    expect(bn.status).toBe('fulfilled');
    expect(fee.status === 'fulfilled' && fee.value.gasPrice! > 0n).toBe(true);
    expect(refused.status).toBe('rejected');
    expect(String((refused as PromiseRejectedResult).reason)).toMatch(/-32601|method not found/i);

    const wallet = new Wallet(devKey(3), provider);
    const tx = await wallet.sendTransaction({ to: TO, value: 1000n });
    const receipt = await tx.wait();
    expect(receipt!.status).toBe(1);
    // ethers caches identical calls for a moment; anvil mines at once: give the nonce.
    const deploy = await wallet.sendTransaction({ data: BYTECODE, nonce: tx.nonce + 1 });
    const deployed = await deploy.wait();
    expect(BigInt(await provider.call({ to: deployed!.contractAddress!, data: '0x' }))).toBe(42n);
    const block = await provider.getBlock(receipt!.blockNumber, true);
    expect(block!.prefetchedTransactions.map((t) => t.hash)).toContain(tx.hash);
    provider.destroy();
  });

  it('works with the key in the path (the way a wallet sets it)', async () => {
    const provider = new JsonRpcProvider(gw.url('rpc', `/polygon/${KEY}`), undefined, { staticNetwork: Network.from(137) });
    expect(Number((await provider.getNetwork()).chainId)).toBe(137);
    expect(await provider.getBalance(devAccount(9).address)).toBeGreaterThan(parseEther('1'));
    provider.destroy();
  });
});

describe('web3.js', () => {
  it('reads and sends a locally signed transaction, key in the query', async () => {
    const web3 = new Web3(gw.url('rpc', `/polygon?api_key=${KEY}`));
    expect(Number(await web3.eth.getChainId())).toBe(137);
    const account = web3.eth.accounts.privateKeyToAccount(devKey(4));
    const before = await web3.eth.getBalance(TO);
    const signed = await account.signTransaction({
      to: TO,
      value: '1000',
      gas: 21000,
      gasPrice: await web3.eth.getGasPrice(),
      nonce: await web3.eth.getTransactionCount(account.address),
      chainId: 137n,
    });
    const receipt = await web3.eth.sendSignedTransaction(signed.rawTransaction);
    expect(Number(receipt.status)).toBe(1);
    expect((await web3.eth.getBalance(TO)) - before).toBe(1000n);
  });
});

describe('what reached the nodes', () => {
  it('no method outside the allowlist reaches anvil, though the clients try some', async () => {
    // A recording proxy in front of the gateway shows what the clients sent.
    const front = await startRecordingProxy(gw.url('rpc', ''));
    onTestFinished(() => front.close());
    ethProxy.clear();
    polyProxy.clear();

    // viem, batching, key in the path: fee estimate and a locally signed transfer.
    const transport = http(`${front.url}/ethereum/${KEY}`, { batch: true });
    const pub = createPublicClient({ chain: mainnet, transport });
    const wallet = createWalletClient({ chain: mainnet, transport, account: devAccount(6) });
    expect((await pub.estimateFeesPerGas()).maxFeePerGas > 0n).toBe(true);
    const hash = await wallet.sendTransaction({ to: TO, value: 1n });
    expect((await pub.waitForTransactionReceipt({ hash, pollingInterval: 50 })).status).toBe('success');

    // ethers, key in the header: fee data and a transfer.
    const req = new FetchRequest(`${front.url}/ethereum`);
    req.setHeader('X-API-Key', KEY);
    const provider = new JsonRpcProvider(req, Network.from(1), { staticNetwork: true });
    expect((await provider.getFeeData()).gasPrice! > 0n).toBe(true);
    const tx = await new Wallet(devKey(7), provider).sendTransaction({ to: TO, value: 1n });
    expect((await tx.wait())!.status).toBe(1);
    provider.destroy();

    // web3.js, key in the query: gas price and balance.
    const web3 = new Web3(`${front.url}/polygon?api_key=${KEY}`);
    expect(await web3.eth.getGasPrice()).toBeGreaterThan(0n);
    expect(await web3.eth.getBalance(devAccount(8).address)).toBeGreaterThan(parseEther('1'));

    const tried = front.methodsSeen();
    const triedOutside = [...new Set(tried.filter((m) => !(EVM_METHODS as readonly string[]).includes(m)))].sort();
    // What these pinned versions try first and fall back from when refused.
    expect(triedOutside).toEqual(REFUSED_BY_CLIENTS);
    const seen = [...ethProxy.methodsSeen(), ...polyProxy.methodsSeen()];
    expect(seen.length).toBeGreaterThan(0);
    for (const m of seen) expect(EVM_METHODS as readonly string[]).toContain(m);
    for (const m of triedOutside) expect(seen).not.toContain(m);
    for (const r of [...ethProxy.requests, ...polyProxy.requests]) {
      expect(JSON.stringify(r.headers)).not.toContain(KEY);
      expect(r.query).toBe('');
    }
  });

  it('refuses four methods outside the list, none reaching anvil', async () => {
    ethProxy.clear();
    for (const m of ['eth_accounts', 'eth_sendTransaction', 'debug_traceTransaction', 'admin_peers']) {
      const r = await rawRequest(gw.url('rpc', `/ethereum/${KEY}`), { body: JSON.stringify({ jsonrpc: '2.0', id: m, method: m, params: [] }) });
      expect(r.status).toBe(200);
      expect(r.json()).toEqual({ jsonrpc: '2.0', id: m, error: { code: -32601, message: 'Method not found' } });
    }
    expect(ethProxy.requests).toHaveLength(0);
  });
});

describe('every one of the 30 methods, on two chain paths', () => {
  for (const [path, node] of [
    ['ethereum', () => eth],
    ['polygon', () => poly],
  ] as const) {
    it(`answers exactly as anvil does on /${path}`, async () => {
      const a = node();
      // A block with a transaction and a contract to ask about.
      const account = devAccount(5);
      const wallet = createWalletClient({ chain: defineChain({ ...mainnet, id: a.chainId }), transport: http(a.url), account });
      const hash = await wallet.deployContract({ abi: [], bytecode: BYTECODE });
      // anvil mines in the background: wait for the receipt rather than assume it.
      await createPublicClient({ transport: http(a.url) }).waitForTransactionReceipt({ hash, pollingInterval: 50 });
      const receipt = (await a.rpc('eth_getTransactionReceipt', [hash])).result as { blockHash: Hex; blockNumber: Hex; contractAddress: Hex };
      const addr = receipt.contractAddress;
      const call = { to: addr, data: '0x' };
      const params: Record<string, unknown[]> = {
        web3_clientVersion: [],
        web3_sha3: ['0x68656c6c6f'],
        net_version: [],
        net_listening: [],
        eth_syncing: [],
        eth_mining: [],
        eth_gasPrice: [],
        eth_blockNumber: [],
        eth_chainId: [],
        eth_getBalance: [TO, 'latest'],
        eth_getStorageAt: [addr, '0x0', 'latest'],
        eth_getTransactionCount: [account.address, 'latest'],
        eth_getBlockTransactionCountByHash: [receipt.blockHash],
        eth_getBlockTransactionCountByNumber: [receipt.blockNumber],
        eth_getUncleCountByBlockHash: [receipt.blockHash],
        eth_getUncleCountByBlockNumber: [receipt.blockNumber],
        eth_getCode: [addr, 'latest'],
        eth_call: [call, 'latest'],
        eth_estimateGas: [call],
        eth_getBlockByHash: [receipt.blockHash, true],
        eth_getBlockByNumber: [receipt.blockNumber, false],
        eth_getTransactionByHash: [hash],
        eth_getTransactionByBlockHashAndIndex: [receipt.blockHash, '0x0'],
        eth_getTransactionByBlockNumberAndIndex: [receipt.blockNumber, '0x0'],
        eth_getTransactionReceipt: [hash],
        eth_getUncleByBlockHashAndIndex: [receipt.blockHash, '0x0'],
        eth_getUncleByBlockNumberAndIndex: [receipt.blockNumber, '0x0'],
        eth_getWork: [],
        eth_getProof: [addr, [], 'latest'],
      };
      for (const method of EVM_METHODS) {
        if (method === 'eth_sendRawTransaction') continue;
        const direct = await a.rpc(method, params[method]);
        const via = await rawRequest(gw.url('rpc', `/${path}`), {
          headers: { 'x-api-key': KEY },
          body: JSON.stringify({ jsonrpc: '2.0', id: 77, method, params: params[method] }),
        });
        expect(via.status, method).toBe(200);
        const { id, ...rest } = via.json();
        expect(id).toBe(77);
        const { id: _id, ...expected } = direct;
        expect(rest, method).toEqual(expected);
      }
      // eth_sendRawTransaction: the answer is the hash of the bytes sent.
      const raw = await wallet.signTransaction(await wallet.prepareTransactionRequest({ to: TO, value: 1n }));
      const sent = await rawRequest(gw.url('rpc', `/${path}/${KEY}`), { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: [raw] }) });
      expect(sent.json().result).toBe(keccak256(raw));
    });
  }
});
