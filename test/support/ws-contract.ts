// A contract for the WebSocket tests: every call to it emits one log, the
// event `Ping()` (LOG1 with its topic, no data). Deployed from anvil's first
// dev account with eth_sendTransaction; no compiler needed.
import { keccak256, toHex } from 'viem';
import type { Anvil } from './anvil.ts';

/** topic0 of `event Ping()`. */
export const PING_TOPIC = keccak256(toHex('Ping()'));
export const PING_ABI = [{ type: 'event', name: 'Ping', inputs: [] }] as const;

/** PUSH32 topic, PUSH1 0 (size), PUSH1 0 (offset), LOG1, STOP: 39 bytes. */
const RUNTIME = `7f${PING_TOPIC.slice(2)}60006000a100`;
/** Copies the 39 (0x27) runtime bytes at offset 12 (0x0c) to memory and returns them. */
const INIT = `0x6027600c60003960276000f3${RUNTIME}`;

export interface PingContract {
  readonly address: string;
  readonly from: string;
  /** Sends a call that emits Ping(); mined with the next block. Resolves with the transaction hash. */
  ping(): Promise<string>;
}

/** Deploys it (anvil must be started with --no-mining: this mines the deployment). */
export async function deployPing(anvil: Anvil): Promise<PingContract> {
  const from = ((await anvil.rpc('eth_accounts')).result as string[])[0]!;
  const tx = (await anvil.rpc('eth_sendTransaction', [{ from, data: INIT }])).result as string;
  await anvil.mine(1);
  const receipt = (await anvil.rpc('eth_getTransactionReceipt', [tx])).result as { contractAddress: string; status: string };
  if (receipt?.status !== '0x1') throw new Error('the Ping contract did not deploy');
  const address = receipt.contractAddress.toLowerCase();
  return {
    address,
    from,
    async ping() {
      const r = await anvil.rpc('eth_sendTransaction', [{ from, to: address, gas: '0x10000' }]);
      if (r.error) throw new Error(`ping: ${r.error.message}`);
      return r.result as string;
    },
  };
}
