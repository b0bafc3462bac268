// What the property and fuzz tests both stand on: the emitted server with one
// chain of each interface, each in front of an upstream that records what
// reached it (a real anvil behind a recording proxy, the Blockbook and
// Rosetta stand-ins), one key, and limits small enough to reach.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildManifest, keysYaml, startGateway, EVM_METHODS, type RunningGateway } from './harness.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { startRosettaStub, type RosettaStub } from '../support/rosetta-stub.ts';

/** limits.maxBodyBytes of the rig's manifest. */
export const MAX_BODY = 65536;

export interface ThreeChains {
  readonly anvil: Anvil;
  /** In front of anvil: chain `ethereum` on listener rpc. */
  readonly proxy: RecordingProxy;
  /** Chain `bitcoin` on listener explorer. */
  readonly bb: BlockbookStub;
  /** Chain `cardano-preprod` (network preprod) on listener rpc. */
  readonly rosetta: RosettaStub;
  readonly gw: RunningGateway;
  /** Requests the three upstreams have had from clients (their health checks are kept apart). */
  arrivals(): number;
  stop(): Promise<void>;
}

export async function startThreeChains(name: string, key: string): Promise<ThreeChains> {
  const anvil = await startAnvil({ chainId: 1 });
  const proxy = await startRecordingProxy(anvil.url);
  const bb = await startBlockbookStub();
  const rosetta = await startRosettaStub({ network: 'preprod' });
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
  const gw = await startGateway({ cwd: built.dir, bundle: built.bundle, env: { ETH_URL: proxy.url, BB_URL: bb.url, ROSETTA_URL: rosetta.url } });
  return {
    anvil,
    proxy,
    bb,
    rosetta,
    gw,
    arrivals: () => proxy.requests.length + bb.requests.length + rosetta.requests.length,
    stop: async () => {
      await gw.stop();
      await Promise.all([proxy.close(), bb.close(), rosetta.close(), anvil.stop()]);
    },
  };
}
