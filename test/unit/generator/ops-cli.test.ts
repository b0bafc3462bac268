// `gateway routes`, `gateway check --probe` without a network, and `gateway
// keys add --chains` against the manifest, as ops run them: a child process,
// exit codes, stdout and stderr. (check --probe against real nodes: test/e2e/probe.test.ts.)
import { describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli } from '../../support/cli.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';

function freshDir(name: string): string {
  const dir = join(PROJECT_ROOT, '.tmp', `${name}-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

const FIXTURE = 'test/fixtures/valid/upstream-objects.yaml';

describe('gateway routes', { timeout: 30_000 }, () => {
  it('prints each listener with its routes: path, interface, upstreams and roles, allowed methods, limits', async () => {
    const r = await runCli(['routes', FIXTURE]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(
      [
        'listener explorer (0.0.0.0:0): 1 route',
        '  PATH       INTERFACE  UPSTREAMS             METHODS  VALIDATE  POOL  LIMITS',
        '  /ethereum  blockbook  ethereum#0 (primary)  -        params    -     body 1048576 B, batch 100, timeout 30000 ms, page 1000',
        'listener rpc (${RPC_HOST}:${RPC_PORT}): 1 route',
        '  PATH       INTERFACE    UPSTREAMS                                                                    METHODS  VALIDATE  POOL  LIMITS',
        '  /ethereum  evm-jsonrpc  ethereum#0 (primary, weight 2), ethereum#1 (fallback), ethereum#2 (primary)  3        params    -     body 1048576 B, batch 100, timeout 5000 ms, page 1000',
        '',
      ].join('\n'),
    );
  });

  it('--json prints the same table as JSON, and never an upstream URL', async () => {
    const r = await runCli(['routes', FIXTURE, '--json']);
    expect(r.code).toBe(0);
    const t = JSON.parse(r.stdout);
    expect(t.listeners.map((l: { name: string }) => l.name)).toEqual(['explorer', 'rpc']);
    expect(t.listeners[1]).toEqual({
      name: 'rpc',
      host: '${RPC_HOST}',
      port: '${RPC_PORT}',
      routes: [
        {
          path: '/ethereum',
          interface: 'evm-jsonrpc',
          upstreams: [
            { name: 'ethereum#0', role: 'primary', weight: 2, archive: false },
            { name: 'ethereum#1', role: 'fallback', weight: 1, archive: false },
            { name: 'ethereum#2', role: 'primary', weight: 1, archive: false },
          ],
          methods: 3,
          validate: 'params',
          limits: { maxBodyBytes: 1048576, maxBatchSize: 100, timeoutMs: 5000, bodyTimeoutMs: 60000, maxPageSize: 1000, maxParamsDepth: 32, maxArrayItems: 10000, maxHexBytes: 262144 },
          // Nothing set: the defaults the runtime gets.
          pool: { servedTip: 'all', hedge: null, rewriteTags: true, pruneDepth: 128, broadcast: 'all', quorum: null, selection: 'score' },
        },
      ],
    });
    expect(r.stdout).not.toContain('eth.example');
    expect(r.stdout).not.toContain('9130');
  });

  it('shows the pool settings that differ from their defaults, per route, and archive upstreams; --json all of them', async () => {
    const r = await runCli(['routes', 'test/fixtures/valid/pool.yaml']);
    expect(r.code).toBe(0);
    const pool = r.stdout.split('\n').map((l) => l.split(/ {2,}/).filter(Boolean)).filter((cells) => cells[0]?.startsWith('/')).map((cells) => [cells[0], cells[2], cells[5]]);
    expect(pool).toEqual([
      ['/bitcoin', 'bitcoin#0 (primary), bitcoin#1 (primary)', 'servedTip majority, hedge p95'],
      ['/cardano', 'cardano#0 (primary), cardano#1 (primary)', 'hedge 100 ms'],
      ['/ethereum', 'ethereum#0 (primary), ethereum#1 (primary), ethereum#2 (primary, archive)', 'servedTip majority, pruneDepth 64, hedge 250 ms, broadcast one, quorum of 2 (eth_call eth_getBalance)'],
      // Two upstreams and nothing set: broadcast all and rewriteTags are their defaults, so nothing to show.
      ['/gnosis', 'gnosis#0 (primary), gnosis#1 (primary)', '-'],
      ['/polygon', 'polygon#0 (primary)', 'pruneDepth 32'],
    ]);
    const json = await runCli(['routes', 'test/fixtures/valid/pool.yaml', '--json']);
    const routes = JSON.parse(json.stdout).listeners.flatMap((l: { routes: { path: string; pool: unknown }[] }) => l.routes.map((x) => [x.path, x.pool]));
    expect(Object.fromEntries(routes)).toEqual({
      '/bitcoin': { servedTip: 'majority', hedge: { afterMs: 'p95' }, selection: 'score' },
      '/cardano': { servedTip: 'all', hedge: { afterMs: 100 }, selection: 'score' },
      '/ethereum': { servedTip: 'majority', hedge: { afterMs: 250 }, rewriteTags: true, pruneDepth: 64, broadcast: 'one', quorum: { methods: ['eth_call', 'eth_getBalance'], of: 2 }, selection: 'score' },
      '/gnosis': { servedTip: 'all', hedge: null, rewriteTags: true, pruneDepth: 128, broadcast: 'all', quorum: null, selection: 'score' },
      '/polygon': { servedTip: 'all', hedge: null, rewriteTags: false, pruneDepth: 32, broadcast: 'one', quorum: null, selection: 'score' },
    });
  });

  it("shows an upstream's maxLogRange in UPSTREAMS and the chain's limits.maxLogRange in LIMITS (issue 39); --json both", async () => {
    const r = await runCli(['routes', 'test/fixtures/valid/log-ranges.yaml']);
    expect(r.code).toBe(0);
    const row = r.stdout.split('\n').find((l) => l.trimStart().startsWith('/ethereum'))!;
    expect(row).toContain('ethereum#0 (primary), ethereum#1 (fallback, maxLogRange 2000)');
    expect(row).toMatch(/page 1000, maxLogRange 100000$/);
    const json = await runCli(['routes', 'test/fixtures/valid/log-ranges.yaml', '--json']);
    const route = JSON.parse(json.stdout).listeners[0].routes[0];
    expect(route.upstreams.map((u: { maxLogRange?: number }) => u.maxLogRange)).toEqual([undefined, 2000]);
    expect(route.limits.maxLogRange).toBe(100000);
  });

  it('exits 1 with the problems of a bad manifest, as check does', async () => {
    const r = await runCli(['routes', 'no/such.yaml']);
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'no/such.yaml:1:1 manifest not found\nno/such.yaml: 1 problem\n' });
  });
});

describe('gateway check --probe without nodes', { timeout: 30_000 }, () => {
  it('reports an upstream whose ${VAR} is not set as unresolved, naming the variable, and exits 1', async () => {
    const dir = freshDir('probe-env');
    writeFileSync(
      join(dir, 'gateway.yaml'),
      'version: 1\nlisteners:\n  rpc: { port: 0 }\nchains:\n  - { path: eth, interface: evm-jsonrpc, listener: rpc, chainId: 1, methods: [eth_chainId], upstreams: ["${NOT_SET_URL}"] }\n',
    );
    const r = await runCli(['check', '--probe', 'gateway.yaml'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('eth    evm-jsonrpc  eth#0     primary  unresolved');
    expect(r.stdout).toContain('environment variable NOT_SET_URL is not set and has no default');
    expect(r.stdout).toContain('chain eth: no good upstream');
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a --timeout that is not a number of milliseconds', async () => {
    const r = await runCli(['check', '--probe', FIXTURE, '--timeout', 'soon'], { env: { RPC_HOST: 'x', RPC_PORT: '1', ETH_A_URL: 'http://127.0.0.1:1', ETH_B_URL: 'http://127.0.0.1:1', ETH_B_KEY: 'k', ETH_B_TOKEN: 't' } });
    expect(r).toEqual({ code: 1, stdout: '', stderr: "gateway check: --timeout 'soon' must be a whole number of milliseconds\n" });
  });

  it('without --probe, check still needs no environment and probes nothing', async () => {
    expect(await runCli(['check', FIXTURE])).toEqual({ code: 0, stdout: `${FIXTURE}: ok (2 chains)\n`, stderr: '' });
  });
});

describe('gateway keys add --chains against the manifest', { timeout: 30_000 }, () => {
  it('refuses a chain the --manifest does not have, with a did-you-mean hint, and writes nothing', async () => {
    const dir = freshDir('keys-manifest');
    const file = join(dir, 'keys.yaml');
    const r = await runCli(['keys', 'add', '--id', 'acme', '--chains', 'ethereum,etherem,nowhere', '--manifest', 'gateway.yaml', '--file', file]);
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: "gateway keys: chain 'etherem' is not in gateway.yaml (did you mean 'ethereum'?)\ngateway keys: chain 'nowhere' is not in gateway.yaml\n",
    });
    expect(existsSync(file)).toBe(false);
    const ok = await runCli(['keys', 'add', '--id', 'acme', '--chains', 'ethereum,polygon', '--manifest', 'gateway.yaml', '--file', file]);
    expect(ok.code).toBe(0);
    expect(existsSync(file)).toBe(true);
    rmSync(dir, { recursive: true, force: true });
  });

  it('uses ./gateway.yaml when there is one and no --manifest, and checks nothing without a manifest', async () => {
    const dir = freshDir('keys-default-manifest');
    const bare = await runCli(['keys', 'add', '--id', 'a', '--chains', 'polygn', '--file', 'keys.yaml'], { cwd: dir });
    expect(bare.code).toBe(0); // no manifest here: nothing to check against
    copyFileSync(join(PROJECT_ROOT, 'gateway.yaml'), join(dir, 'gateway.yaml'));
    const r = await runCli(['keys', 'add', '--id', 'b', '--chains', 'polygn', '--file', 'keys.yaml'], { cwd: dir });
    expect(r).toEqual({ code: 1, stdout: '', stderr: "gateway keys: chain 'polygn' is not in gateway.yaml (did you mean 'polygon'?)\n" });
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses to check against a manifest with problems, pointing at gateway check', async () => {
    const dir = freshDir('keys-bad-manifest');
    writeFileSync(join(dir, 'broken.yaml'), 'version: 2\n');
    const r = await runCli(['keys', 'add', '--id', 'a', '--chains', 'eth', '--manifest', 'broken.yaml', '--file', 'keys.yaml'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^gateway keys: broken\.yaml has \d+ problems? \(gateway check broken\.yaml\); --chains cannot be checked against it\n$/);
    expect(existsSync(join(dir, 'keys.yaml'))).toBe(false);
    rmSync(dir, { recursive: true, force: true });
  });
});
