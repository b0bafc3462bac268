// Every manifest check, with a failing fixture and the exact FILE:LINE:COL
// message it must print (issue 2). Positions point at the offending key or
// value itself.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { loadManifest } from '../../../generator/load.ts';
import { validateManifest } from '../../../generator/validate.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

const run = promisify(execFile);
const F = 'test/fixtures/invalid';

function check(name: string): string[] {
  const file = `${F}/${name}.yaml`;
  return validateManifest(loadManifest(join(PROJECT_ROOT, file)))
    .map((p) => `${file}:${p.line}:${p.col} ${p.message}${p.hint ? ` (hint: ${p.hint})` : ''}`);
}

const EXPECTED: Record<string, string[]> = {
  'duplicate-path': [`${F}/duplicate-path.yaml:9:13 chains[1] (ethereum): path 'ethereum' is already used on listener 'rpc' by chains[0]`],
  'reserved-path': [
    `${F}/reserved-path.yaml:8:11 chains[0] (healthz): path 'healthz' clashes with the server's own /healthz route (hint: reserved: healthz, readyz, metrics)`,
    `${F}/reserved-path.yaml:12:11 chains[1] (metrics): path 'metrics' clashes with the server's own /metrics route (hint: reserved: healthz, readyz, metrics)`,
  ],
  'unknown-method-set': [`${F}/unknown-method-set.yaml:12:14 chains[0] (ethereum): unknown methodSet 'evn' (hint: did you mean 'evm'?)`],
  'unknown-listener': [`${F}/unknown-listener.yaml:10:15 chains[0] (bitcoin): unknown listener 'explorr' (hint: did you mean 'explorer'?)`],
  'rosetta-network': [
    `${F}/rosetta-network.yaml:11:14 chains[0] (cardano): unknown Rosetta network 'testnet' (hint: use mainnet, preprod, preview)`,
    `${F}/rosetta-network.yaml:16:14 chains[1] (cardano-x): unknown Rosetta network 'preprd' (hint: did you mean 'preprod'?)`,
  ],
  'duplicate-chain-id': [`${F}/duplicate-chain-id.yaml:9:71 chains[1] (mainnet2): chainId 1 is already used on listener 'rpc' by chains[0]`],
  'upstream-url': [
    `${F}/upstream-url.yaml:14:9 chains[0] (ethereum): upstream 'ws://node:8546' is not an http(s) URL (hint: write http://host:port/path or https://...)`,
    `${F}/upstream-url.yaml:15:16 chains[0] (ethereum): upstream 'ftp://files' is not an http(s) URL (hint: write http://host:port/path or https://...)`,
    `${F}/upstream-url.yaml:17:9 chains[0] (ethereum): upstream 'not a url' is not an http(s) URL (hint: write http://host:port/path or https://...)`,
  ],
  'misspelt-method': [
    `${F}/misspelt-method.yaml:5:22 methodSets.evm[1]: unknown method 'eth_getBalanse' (hint: did you mean 'eth_getBalance'?)`,
    `${F}/misspelt-method.yaml:11:15 chains[0] (ethereum) methods[0]: unknown method 'eth_blockNumbr' (hint: did you mean 'eth_blockNumber'?)`,
  ],
  'misspelt-field': [
    `${F}/misspelt-field.yaml:3:37 listeners.rpc: unknown field 'hots' (hint: did you mean 'host'?)`,
    `${F}/misspelt-field.yaml:4:1 (top level): unknown field 'limtis' (hint: did you mean 'limits'?)`,
    `${F}/misspelt-field.yaml:6:5 chains[0] (ethereum): missing required field 'chainId' (required for evm-jsonrpc chains)`,
    `${F}/misspelt-field.yaml:9:5 chains[0] (ethereum): unknown field 'chainid' (hint: did you mean 'chainId'?)`,
    `${F}/misspelt-field.yaml:11:36 chains[0] (ethereum) upstreams[0]: unknown field 'wieght' (hint: did you mean 'weight'?)`,
  ],
  'schema-and-semantic': [
    `${F}/schema-and-semantic.yaml:1:10 version: must be 1`,
    `${F}/schema-and-semantic.yaml:5:11 chains[0] (Ethereum) path: 'Ethereum' is not valid here (hint: The first path segment: /<path>/... Lower-case letters, digits and dashes.)`,
    `${F}/schema-and-semantic.yaml:6:16 chains[0] (Ethereum) interface: must be one of blockbook, evm-jsonrpc, rosetta`,
    `${F}/schema-and-semantic.yaml:8:16 chains[0] (Ethereum) upstreams: must list at least 1 (hint: Nodes or servers behind this chain: a URL string, or an object with options.)`,
    `${F}/schema-and-semantic.yaml:13:13 chains[1] (btc) sendtx: must be boolean (hint: Forward Blockbook's sendtx (blockbook only).)`,
    `${F}/schema-and-semantic.yaml:14:5 chains[1] (btc): 'methods' applies to evm-jsonrpc chains only, not blockbook`,
  ],
  'bad-template': [
    `${F}/bad-template.yaml:3:16 listeners.rpc.port: unclosed '\${' in '\${RPC_PORT:-8545' (hint: write \${VAR} or \${VAR:-default})`,
    `${F}/bad-template.yaml:4:21 listeners.explorer.port: must be <= 65535`,
    `${F}/bad-template.yaml:11:41 chains[0] (eth) upstreams[1]: unclosed '\${' in 'http://\${HOST' (hint: write \${VAR} or \${VAR:-default})`,
  ],
  'yaml-syntax': [
    `${F}/yaml-syntax.yaml:11:5 Map keys must be unique`,
    `${F}/yaml-syntax.yaml:13:1 Flow sequence in block collection must be sufficiently indented and end with a ]`,
  ],
};

describe('gateway check: every problem, at its key or value', () => {
  for (const [name, lines] of Object.entries(EXPECTED)) {
    it(name, () => expect(check(name)).toEqual(lines));
  }

  it('accepts the shipped gateway.yaml, and needs no environment for ${VAR} without a default', () => {
    expect(validateManifest(loadManifest(join(PROJECT_ROOT, 'gateway.yaml')))).toEqual([]);
    const noDefault = 'version: 1\nlisteners:\n  rpc: { host: "${HOST}", port: "${PORT}" }\nchains:\n  - { path: eth, interface: evm-jsonrpc, listener: rpc, chainId: 1, methods: [eth_chainId], upstreams: ["${ETH_URL}", { url: "${B}/x", headers: { Authorization: "Bearer ${T}" } }] }\n';
    expect(validateManifest(loadManifest('inline.yaml', noDefault))).toEqual([]);
  });

  it('the CLI exits 1 and prints every problem on stderr; exits 0 for a valid manifest; build writes nothing on failure', async () => {
    const bad = await run(process.execPath, ['bin/gateway.mjs', 'check', `${F}/schema-and-semantic.yaml`], { cwd: PROJECT_ROOT }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(bad?.code).toBe(1);
    for (const line of EXPECTED['schema-and-semantic']!) expect(bad!.stderr).toContain(line);
    const ok = await run(process.execPath, ['bin/gateway.mjs', 'check', 'gateway.yaml'], { cwd: PROJECT_ROOT });
    expect(ok.stdout).toBe('gateway.yaml: ok (12 chains)\n');
    const out = `.tmp/unit-build-${process.pid}/never.mjs`;
    const build = await run(process.execPath, ['bin/gateway.mjs', 'build', `${F}/unknown-listener.yaml`, '--out', out], { cwd: PROJECT_ROOT }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(build?.code).toBe(1);
    const { existsSync } = await import('node:fs');
    expect(existsSync(join(PROJECT_ROOT, out))).toBe(false);
  });
});
