// The upstreams most e2e files stand on, one of each interface, each
// recording what reached it (a real anvil behind a recording proxy, the
// Blockbook and Rosetta stand-ins): startStandIns. And what the property and
// fuzz tests both stand on: the emitted server with one chain in front of
// each, one key, and limits small enough to reach (startThreeChains).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildManifest, keysYaml, startGateway, EVM_METHODS, type RunningGateway } from './harness.ts';
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

/** The stand-ins behind chains `ethereum` and `cardano-preprod` on listener rpc and `bitcoin` on listener explorer. */
export interface ThreeChains extends Omit<StandIns, 'env' | 'close'> {
  readonly gw: RunningGateway;
  stop(): Promise<void>;
}

export async function startThreeChains(name: string, key: string): Promise<ThreeChains> {
  const up = await startStandIns();
  const built = await buildManifest(
    name,
    `
version: 1
listeners:
  rpc: { host: 127.0.0.1, port: "0" }
  explorer: { host: 127.0.0.1, port: "0" }
keys: ./keys.yaml
limits: { maxBodyBytes: ${MAX_BODY}, maxBatchSize: 20, timeoutMs: 5000, maxPageSize: 100 }
health: { intervalMs: 60000, timeoutMs: 1000 }
methodSets:
  evm: [${EVM_METHODS.join(', ')}]
chains:
  - { path: ethereum, interface: evm-jsonrpc, listener: rpc, chainId: 1, methods: evm, upstreams: ["\${ETH_URL}"] }
  - { path: cardano-preprod, interface: rosetta, listener: rpc, network: preprod, upstreams: ["\${ROSETTA_URL}"] }
  - { path: bitcoin, interface: blockbook, listener: explorer, upstreams: ["\${BB_URL}"] }
`,
  );
  writeFileSync(join(built.dir, 'keys.yaml'), keysYaml([{ id: name, key }]));
  const gw = await startGateway({ cwd: built.dir, bundle: built.bundle, env: up.env });
  return {
    ...up,
    gw,
    stop: async () => {
      await gw.stop();
      await up.close();
    },
  };
}
