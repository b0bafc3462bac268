// The upstreams most e2e files stand on, one of each interface, each
// recording what reached it (a real anvil behind a recording proxy, the
// Blockbook and Rosetta stand-ins): startStandIns. And what the property and
// fuzz tests both stand on: the emitted server with one chain in front of
// each (THREE_CHAINS, which other files put under their own header), one key,
// and limits small enough to reach (startThreeChains, on test/e2e/fixture.ts).
import type { RunningGateway } from './harness.ts';
import { gateway, type Chain } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';

/** limits.maxBodyBytes of the rig's manifest. */
export const MAX_BODY = 65536;

/**
 * One upstream of each interface, as most e2e files put them behind the
 * gateway: anvil (chain id 1) behind a recording proxy, a Blockbook stand-in
 * and a Rosetta one (network preprod).
 */
export interface StandIns {
  readonly anvil: Anvil;
  /** In front of anvil: what a manifest names `${ETH_URL}`. */
  readonly proxy: RecordingProxy;
  /** `${BB_URL}`. */
  readonly bb: BlockbookStub;
  /** `${ROSETTA_URL}` (network preprod). */
  readonly rosetta: RosettaStub;
  /** ETH_URL, BB_URL and ROSETTA_URL, for startGateway's env. */
  readonly env: { readonly ETH_URL: string; readonly BB_URL: string; readonly ROSETTA_URL: string };
  /** Requests the three upstreams have had from clients (their health checks are kept apart). */
  arrivals(): number;
  close(): Promise<void>;
}

export async function startStandIns(): Promise<StandIns> {
  const [anvil, bb, rosetta] = await Promise.all([startAnvil({ chainId: 1 }), startBlockbookStub(), startRosettaStub({ network: 'preprod' })]);
  const proxy = await startRecordingProxy(anvil.url);
  return {
    anvil,
    proxy,
    bb,
    rosetta,
    env: { ETH_URL: proxy.url, BB_URL: bb.url, ROSETTA_URL: rosetta.url },
    arrivals: () => proxy.requests.length + bb.requests.length + rosetta.requests.length,
    close: async () => {
      await Promise.all([proxy.close(), bb.close(), rosetta.close(), anvil.stop()]);
    },
  };
}

/** One chain in front of each stand-in: `ethereum` (chain id 1) and `cardano-preprod` on listener rpc, `bitcoin` on explorer. */
export const THREE_CHAINS: readonly Chain[] = [
  { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, upstreams: ['${ETH_URL}'] },
  { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${ROSETTA_URL}'] },
  { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB_URL}'] },
];

/** The stand-ins behind THREE_CHAINS, with the gateway in front of them. */
export interface ThreeChains extends Omit<StandIns, 'env' | 'close'> {
  readonly gw: RunningGateway;
  stop(): Promise<void>;
}

/** THREE_CHAINS in front of startStandIns(), one key, no admin listener, and limits small enough to reach. */
export async function startThreeChains(name: string, key: string): Promise<ThreeChains> {
  const g = await gateway({
    name,
    chains: THREE_CHAINS,
    header: { admin: null, limits: { maxBodyBytes: MAX_BODY, maxBatchSize: 20, timeoutMs: 5000, maxPageSize: 100 }, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: name, key }],
    standIns: { up: startStandIns() },
  });
  return { ...g.standIns.up, gw: g.gw, stop: g.close };
}
