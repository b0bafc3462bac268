// Real clients, unmodified, over the gateway's WebSocket (issue 38): viem's
// webSocket() transport (watchBlocks, watchContractEvent) and ethers v6's
// WebSocketProvider (on('block'), a contract event), in front of anvil.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, defineChain, webSocket, type Block } from 'viem';
import { Contract, WebSocketProvider } from 'ethers';
import { newKey, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { wsUrl } from '../support/ws-client.ts';
import { deployPing, PING_ABI, type PingContract } from '../support/ws-contract.ts';

const KEY = newKey();
let anvil: Anvil;
let ping: PingContract;
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  anvil = await startAnvil({ args: ['--no-mining'] });
  ping = await deployPing(anvil);
  rig = await gateway({
    name: 'ws-clients',
    chains: [evmChain('live', ['ANVIL'], { chainId: 31337, websocket: true })],
    header: { admin: null, health: { intervalMs: 100, timeoutMs: 1000 } },
    keys: [{ id: 'dapp', key: KEY }],
    standIns: { ANVIL: anvil },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

const chain = defineChain({ id: 31337, name: 'anvil', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } });
const url = () => wsUrl(gw.url('rpc', `/live/${KEY}`));

/** eth_subscribe calls the gateway has answered so far (its access log). */
const subscribes = () => gw.lines.filter((l) => l.includes('"method":"eth_subscribe"')).length;

async function head(): Promise<number> {
  return Number.parseInt((await anvil.rpc('eth_blockNumber')).result as string, 16);
}
async function hashOf(n: number): Promise<string> {
  return ((await anvil.rpc('eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).result as { hash: string }).hash;
}

/** Resolves once `cond` holds, checked every 10 ms (rejects after `ms`). */
function until(cond: () => boolean, what: string, ms = 20_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + ms;
    const check = () => (cond() ? resolve() : Date.now() > deadline ? reject(new Error(`not within ${ms} ms: ${what}`)) : setTimeout(check, 10));
    check();
  });
}

describe('viem webSocket()', () => {
  it('watchBlocks gets every mined block with anvil\'s hash, and watchContractEvent the contract\'s events', async () => {
    const before = subscribes();
    const transport = webSocket(url(), { retryCount: 0 });
    const client = createPublicClient({ chain, transport });
    const blocks: Block[] = [];
    const events: { blockNumber: bigint | null; transactionHash: string | null; eventName: string }[] = [];
    const errors: Error[] = [];
    const unwatchBlocks = client.watchBlocks({ onBlock: (b) => void blocks.push(b), onError: (e) => void errors.push(e) });
    const unwatchEvents = client.watchContractEvent({
      address: ping.address as `0x${string}`,
      abi: PING_ABI,
      eventName: 'Ping',
      onLogs: (logs) => void events.push(...logs.map((l) => ({ blockNumber: l.blockNumber, transactionHash: l.transactionHash, eventName: l.eventName }))),
      onError: (e) => void errors.push(e),
    });
    // Both subscriptions are in place once the gateway counts them.
    await until(() => subscribes() >= before + 2, 'two eth_subscribe calls');
    const from = await head();
    const txs: string[] = [];
    for (let i = 0; i < 3; i++) {
      txs.push(await ping.ping());
      await anvil.mine(1);
    }
    await until(() => blocks.some((b) => b.number === BigInt(from + 3)) && events.length === 3, 'three blocks and three events');
    // viem's watchBlocks asks getBlock for each header it is sent, and hands each block on when its answer comes:
    // the answers may come in another order than the headers did (it does so against anvil too). The order of the
    // headers themselves is ws-gateway.test.ts's to show; here every block arrives, once, as anvil has it.
    const mine = blocks.filter((b) => b.number! > BigInt(from));
    expect(mine.map((b) => Number(b.number)).sort((a, b) => a - b)).toEqual([from + 1, from + 2, from + 3]);
    for (const b of mine) expect(b.hash).toBe(await hashOf(Number(b.number)));
    expect(events.map((e) => [Number(e.blockNumber), e.transactionHash, e.eventName])).toEqual(txs.map((t, i) => [from + 1 + i, t, 'Ping']));
    expect(errors).toEqual([]);
    unwatchBlocks();
    unwatchEvents();
    const socket = await transport({ chain }).value?.getRpcClient();
    socket?.close();
  }, 60_000);
});

describe('ethers v6 WebSocketProvider', () => {
  it("on('block') gets every mined block, and a contract's event listener its events", async () => {
    const before = subscribes();
    const provider = new WebSocketProvider(url(), 31337, { staticNetwork: true });
    const blocks: number[] = [];
    const events: { tx: string; block: number }[] = [];
    await provider.on('block', (n: number) => void blocks.push(n));
    const contract = new Contract(ping.address, ['event Ping()'], provider);
    await contract.on('Ping', (ev: { log: { transactionHash: string; blockNumber: number } }) => void events.push({ tx: ev.log.transactionHash, block: ev.log.blockNumber }));
    await until(() => subscribes() >= before + 2, "ethers' two eth_subscribe calls");
    const from = await head();
    const txs: string[] = [];
    for (let i = 0; i < 3; i++) {
      txs.push(await ping.ping());
      await anvil.mine(1);
    }
    await until(() => blocks.includes(from + 3) && events.length === 3, 'three blocks and three events');
    expect(blocks.filter((n) => n > from)).toEqual([from + 1, from + 2, from + 3]);
    expect(events).toEqual(txs.map((tx, i) => ({ tx, block: from + 1 + i })));
    await provider.destroy();
  }, 60_000);
});
