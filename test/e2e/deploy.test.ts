// The README's deployment section, as far as this machine can run it: the
// systemd unit's ExecStart, ExecReload and KillSignal against the emitted
// file, and the Dockerfile's build stage using the project's own build.
// (Building the image needs a container engine, which this machine lacks.)
import { describe, expect, it } from 'vitest';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildManifest, keysYaml, newKey, rawRequest, ROOT, startGateway } from './harness.ts';
import { startAnvil } from '../support/anvil.ts';

function unit(): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const line of readFileSync(join(ROOT, 'deploy/gateway.service'), 'utf8').split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (m) (out[m[1]!] ??= []).push(m[2]!);
  }
  return out;
}

describe('deploy/gateway.service', () => {
  it('runs ExecStart in its WorkingDirectory, reloads keys with ExecReload (SIGHUP), stops cleanly on KillSignal', { timeout: 60_000 }, async () => {
    const u = unit();
    expect(u.KillSignal).toEqual(['SIGTERM']);
    expect(u.ExecReload).toEqual(['/bin/kill -HUP $MAINPID']);
    const [node, ...args] = u.ExecStart![0]!.split(' ');
    const script = args.pop();
    expect(node).toBe('/usr/bin/node');
    expect(args).toEqual(['--no-memory-reducer']);
    expect(script).toBe(`${u.WorkingDirectory![0]}/gateway.mjs`);
    // The unit's layout, in a scratch folder instead of /opt/gateway.
    const anvil = await startAnvil({ chainId: 1 });
    const built = await buildManifest('deploy', 'version: 1\nlisteners:\n  rpc: { host: 127.0.0.1, port: "${RPC_PORT:-0}" }\nkeys: ./keys.yaml\nmethodSets:\n  evm: [eth_chainId]\nchains:\n  - { path: ethereum, interface: evm-jsonrpc, listener: rpc, chainId: 1, methods: evm, upstreams: ["${ETHEREUM_RPC_URL}"] }\n');
    const dir = join(ROOT, '.tmp', `opt-gateway-${process.pid}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    copyFileSync(built.bundle, join(dir, 'gateway.mjs'));
    const key = newKey();
    const next = newKey();
    writeFileSync(join(dir, 'keys.yaml'), keysYaml([{ id: 'a', key }]), { mode: 0o600 });
    const env = Object.fromEntries(u.Environment!.map((e) => e.split('=') as [string, string]));
    const gw = await startGateway({ cwd: dir, bundle: join(dir, 'gateway.mjs'), node: process.execPath, nodeArgs: args, env: { ...env, ETHEREUM_RPC_URL: anvil.url } });
    try {
      expect((await gw.waitForLog((e) => e.event === 'started')).memoryReducer).toBe('off');
      const call = (k: string) => rawRequest(gw.url('rpc', `/ethereum/${k}`), { body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
      expect((await call(key)).status).toBe(200);
      writeFileSync(join(dir, 'keys.yaml'), keysYaml([{ id: 'a', key }, { id: 'b', key: next }]));
      const reloaded = gw.nextLog((e) => e.event === 'keys_reloaded' && e.keys === 2);
      gw.proc.kill('SIGHUP'); // ExecReload
      await reloaded;
      expect((await call(next)).status).toBe(200);
    } finally {
      expect(await gw.stop('SIGTERM')).toBe(0);
      await anvil.stop();
    }
  });
});

describe('deploy/Dockerfile', () => {
  it('names npm ci and npm run build as its build steps and runs only the copied dist/gateway.mjs, with --no-memory-reducer and STOPSIGNAL SIGTERM', () => {
    // Reads the file only: building the image needs a container engine, which this machine lacks.
    const text = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(text).toContain('RUN npm ci');
    expect(text).toContain('RUN npm run build');
    expect(pkg.scripts.build).toBe('gateway build gateway.yaml');
    expect(text).toContain('COPY --from=build /src/dist/gateway.mjs /app/gateway.mjs');
    expect(text).toContain('CMD ["node", "--no-memory-reducer", "/app/gateway.mjs"]');
    expect(text).toContain('STOPSIGNAL SIGTERM');
  });
});
