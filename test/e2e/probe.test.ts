// Not on fixture.ts: it runs `gateway check --probe` on manifests of its own and starts no gateway.
// `gateway check --probe` against real anvils: one of the chain's id, one of
// another chain id, one that is not there. ${VAR} comes from the environment,
// the table says reachable / right chain / head per upstream, and the exit
// code says whether every chain has a good upstream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './harness.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { runCli, type CliRun } from '../support/cli.ts';

let good: Anvil;
let wrong: Anvil;
/** A port where nothing listens: an anvil started and stopped. */
let gonePort: number;
let dir: string;

beforeAll(async () => {
  let gone: Anvil;
  [good, wrong, gone] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 137 }), startAnvil({ chainId: 1 })]);
  gonePort = gone.port;
  await gone.stop();
  await good.mine(7);
  dir = join(ROOT, '.tmp', 'e2e', `probe-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const chain = (path: string, id: number, ups: string[]) => `  - { path: ${path}, interface: evm-jsonrpc, listener: rpc, chainId: ${id}, methods: [eth_chainId], upstreams: [${ups.map((u) => `"\${${u}}"`).join(', ')}] }`;
  const head = 'version: 1\nlisteners:\n  rpc: { port: 0 }\nhealth: { timeoutMs: 2000 }\nchains:\n';
  writeFileSync(join(dir, 'one-good.yaml'), `${head}${chain('ethereum', 1, ['GOOD_URL', 'WRONG_URL', 'GONE_URL'])}\n`);
  writeFileSync(join(dir, 'none-good.yaml'), `${head}${chain('ethereum', 1, ['GOOD_URL', 'WRONG_URL'])}\n${chain('bsc', 56, ['WRONG_URL', 'GONE_URL'])}\n`);
}, 60_000);

afterAll(async () => {
  await Promise.all([good?.stop(), wrong?.stop()]);
});

function probe(file: string): Promise<CliRun> {
  return runCli(['check', '--probe', file], { cwd: dir, env: { GOOD_URL: good.url, WRONG_URL: wrong.url, GONE_URL: `http://127.0.0.1:${gonePort}` } });
}

/** The table's rows as cells (DETAIL may hold spaces: it is the rest of the line). */
const rows = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => /^\S+\s+evm-jsonrpc\s/.test(l))
    .map((l) => {
      const cells = l.split(/\s{2,}/);
      return { chain: cells[0], upstream: cells[2], role: cells[3], state: cells[4], head: cells[5], detail: cells.slice(6).join('  ') };
    });

describe('gateway check --probe', { timeout: 60_000 }, () => {
  it('says which upstream is up (with its head), which serves another chain and which is unreachable; exits 0 while each chain has a good one', async () => {
    const r = await probe('one-good.yaml');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toMatch(/^CHAIN\s+INTERFACE\s+UPSTREAM\s+ROLE\s+STATE\s+HEAD\s+DETAIL$/);
    expect(rows(r.stdout)).toEqual([
      { chain: 'ethereum', upstream: 'ethereum#0', role: 'primary', state: 'up', head: '7', detail: '' },
      { chain: 'ethereum', upstream: 'ethereum#1', role: 'primary', state: 'wrong_chain', head: '-', detail: 'serves chainId 137' },
      { chain: 'ethereum', upstream: 'ethereum#2', role: 'primary', state: 'unreachable', head: '-', detail: 'connection refused' },
    ]);
    expect(r.stdout).toContain('1 chain, with a good upstream');
    // progress on stderr (plain lines: stderr is not a terminal here)
    expect(r.stderr).toBe('probing 3 upstreams of 1 chain (timeout 2000 ms)\nprobed 3 upstreams\n');
    // no URL of any upstream in what it prints
    for (const port of [good.port, wrong.port, gonePort]) expect(r.stdout + r.stderr).not.toContain(String(port));
  });

  it('exits 1 and names the chain when a chain has no good upstream', async () => {
    const r = await probe('none-good.yaml');
    expect(r.code).toBe(1);
    expect(rows(r.stdout).map((x) => [x.upstream, x.state])).toEqual([
      ['bsc#0', 'wrong_chain'],
      ['bsc#1', 'unreachable'],
      ['ethereum#0', 'up'],
      ['ethereum#1', 'wrong_chain'],
    ]);
    expect(r.stdout).toContain('chain bsc: no good upstream');
    expect(r.stdout).not.toContain('chain ethereum: no good upstream');
  });
});
