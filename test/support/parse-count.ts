// A gateway whose every JSON.parse of a text holding a marker is logged
// (test/support/count-parses.mjs, preloaded), in front of a pool of two nodes
// (anvil behind two recording proxies: NODE1, NODE2 in the manifest), so an
// issue-37 test can count how many times the gateway parsed a call it sent
// and how many of the nodes' requests carried it. The manifest is the test's.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keysYaml, type RunningGateway } from '../e2e/harness.ts';
import { gateway } from '../e2e/fixture.ts';
import { NO_MEMORY_REDUCER } from '../../runtime/process/node-flags.ts';
import { startAnvil, type Anvil } from './anvil.ts';
import { startRecordingProxy, type RecordingProxy } from './recording-proxy.ts';

const PRELOAD = fileURLToPath(new URL('./count-parses.mjs', import.meta.url));

/**
 * The manifest the parse-counting tests share: two chains over the same two nodes (NODE1, NODE2), one cached and
 * one pooled without the cache; `extra` adds chains (YAML lines of the list).
 */
export function parseCountManifest(extra = ''): string {
  return `
version: 1
listeners:
  rpc: { host: 127.0.0.1, port: "0" }
admin: { host: 127.0.0.1, port: "0" }
keys: ./keys.yaml
cache: { maxBytes: 1048576, headPollMs: 100 }
health: { intervalMs: 200, timeoutMs: 2000 }
chains:
  - { path: cached, interface: evm-jsonrpc, listener: rpc, methods: [eth_chainId, eth_blockNumber, eth_call], upstreams: ["\${NODE1}", "\${NODE2}"] }
  - { path: pooled, interface: evm-jsonrpc, listener: rpc, methods: [eth_chainId, eth_blockNumber, eth_call], cache: off, upstreams: ["\${NODE1}", "\${NODE2}"] }
${extra}`;
}

export interface ParseCountedPool {
  readonly anvil: Anvil;
  readonly node1: RecordingProxy;
  readonly node2: RecordingProxy;
  readonly gw: RunningGateway;
  /** How many times the gateway parsed a text holding `data`. */
  parsesOf(data: string): number;
  /** The gateway's whole-text scans (jsonrpc/scan.ts scanSeen) of texts holding `data`: each scan's name and the text. */
  scansOf(data: string): { readonly scan: string; readonly text: string }[];
  /** How many of the nodes' requests carried `data`. */
  reached(data: string): number;
  close(): Promise<void>;
}

/** Anvil (4 blocks mined), two recording proxies before it, and the gateway built from `manifest` with key `key` (id `call`; or the keys file `keys`), counting parses of `mark`. */
export async function startParseCountedPool(name: string, manifest: string, key: string, mark: string, keys = keysYaml([{ id: 'call', key }])): Promise<ParseCountedPool> {
  const anvil = await startAnvil();
  await anvil.mine(4);
  const rig = await gateway({
    name,
    manifest,
    keys,
    standIns: { anvil, NODE1: startRecordingProxy(anvil.url), NODE2: startRecordingProxy(anvil.url) },
    nodeArgs: [NO_MEMORY_REDUCER, '--import', PRELOAD],
    // Started below: the logs go in the build's folder.
    start: false,
  });
  const parseLog = join(rig.built.dir, 'parses.log');
  const scanLog = join(rig.built.dir, 'scans.log');
  try {
    await rig.start({ env: { PARSE_MARK: mark, PARSE_LOG: parseLog, SCAN_LOG: scanLog } });
  } catch (err) {
    await rig.close();
    throw err;
  }
  const { NODE1: node1, NODE2: node2 } = rig.standIns;
  return {
    anvil,
    node1,
    node2,
    gw: rig.gw,
    parsesOf: (data) =>
      existsSync(parseLog)
        ? readFileSync(parseLog, 'utf8')
            .split('\n')
            .filter((line) => line.includes(data)).length
        : 0,
    scansOf: (data) =>
      existsSync(scanLog)
        ? readFileSync(scanLog, 'utf8')
            .split('\n')
            .filter((line) => line.includes(data))
            .map((line) => JSON.parse(line) as { scan: string; text: string })
        : [],
    reached: (data) => [...node1.requests, ...node2.requests].filter((r) => JSON.stringify(r.json).includes(data)).length,
    close: rig.close,
  };
}
