// Not on fixture.ts: it runs the deployment's own layout (the unit's folder and command, the Dockerfile's stages).
// The deployment section of docs/operations.md, as far as this machine can
// run it: the systemd unit's ExecStart, ExecReload and KillSignal against the
// emitted file, and the Dockerfile's build stage using the project's own build.
// (Building the image needs a container engine, which this machine lacks.)
import { describe, expect, it, onTestFinished } from 'vitest';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { availableParallelism, tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { join, relative, sep } from 'node:path';
import { buildManifest, keysYaml, newKey, rawRequest, ROOT, startGateway } from './harness.ts';
import { startAnvil } from '../support/anvil.ts';
import { freePort } from '../support/http.ts';

const run = promisify(execFile);

function unit(): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const line of readFileSync(join(ROOT, 'deploy/gateway.service'), 'utf8').split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (m) (out[m[1]!] ??= []).push(m[2]!);
  }
  return out;
}

describe('deploy/gateway.service', () => {
  it('runs ExecStart in its WorkingDirectory with a worker per core, reloads keys and rolls onto a new file with ExecReload (SIGHUP), stops cleanly on KillSignal', { timeout: 90_000 }, async () => {
    const u = unit();
    expect(u.KillSignal).toEqual(['SIGTERM']);
    expect(u.ExecReload).toEqual(['/bin/kill -HUP $MAINPID']);
    expect(u.Environment).toContain('GATEWAY_WORKERS=auto');
    const [node, ...args] = u.ExecStart![0]!.split(' ');
    const script = args.pop();
    expect(node).toBe('/usr/bin/node');
    expect(args).toEqual(['--no-memory-reducer']);
    expect(script).toBe(`${u.WorkingDirectory![0]}/gateway.mjs`);
    // The unit's layout, in a scratch folder instead of /opt/gateway.
    const anvil = await startAnvil({ chainId: 1 });
    const manifest = (chains: string) => `version: 1\nlisteners:\n  rpc: { host: 127.0.0.1, port: "\${RPC_PORT:-0}" }\nkeys: ./keys.yaml\nmethodSets:\n  evm: [eth_chainId]\nchains:\n  - { path: ethereum, interface: evm-jsonrpc, listener: rpc, chainId: 1, methods: evm, upstreams: ["\${ETHEREUM_RPC_URL}"] }\n${chains}`;
    const [built, next] = await Promise.all([
      buildManifest('deploy', manifest('')),
      buildManifest('deploy-next', manifest('  - { path: mainnet, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["${ETHEREUM_RPC_URL}"] }\n')),
    ]);
    // The workers share one fixed port.
    const port = await freePort();
    const dir = join(ROOT, '.tmp', `opt-gateway-${process.pid}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    copyFileSync(built.bundle, join(dir, 'gateway.mjs'));
    const key = newKey();
    const nextKey = newKey();
    writeFileSync(join(dir, 'keys.yaml'), keysYaml([{ id: 'a', key }]), { mode: 0o600 });
    const env = Object.fromEntries(u.Environment!.map((e) => e.split('=') as [string, string]));
    const gw = await startGateway({ cwd: dir, bundle: join(dir, 'gateway.mjs'), node: process.execPath, nodeArgs: args, env: { ...env, ETHEREUM_RPC_URL: anvil.url, RPC_PORT: String(port) } });
    const workers = availableParallelism();
    try {
      expect((await gw.waitForLog((e) => e.event === 'started')).memoryReducer).toBe('off');
      // Every worker up before the SIGHUP: one still starting has no SIGHUP handler yet, and reads the keys anyway.
      await gw.waitForLog(() => gw.lines.filter((l) => l.includes('"event":"started"')).length >= workers);
      const call = (k: string) => rawRequest(gw.url('rpc', `/ethereum/${k}`), { body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
      expect((await call(key)).status).toBe(200);
      writeFileSync(join(dir, 'keys.yaml'), keysYaml([{ id: 'a', key }, { id: 'b', key: nextKey }]));
      const reloaded = gw.nextLog(() => gw.lines.filter((l) => l.includes('"event":"keys_reloaded"') && l.includes('"keys":2')).length >= workers);
      gw.proc.kill('SIGHUP'); // ExecReload
      await reloaded;
      expect((await call(nextKey)).status).toBe(200);
      // A new build, renamed over the file as the unit's comment says, then ExecReload: the workers roll onto it.
      const rolled = gw.nextLog((e) => e.event === 'reloaded', 60_000);
      copyFileSync(next.bundle, join(dir, 'gateway.mjs.new'));
      renameSync(join(dir, 'gateway.mjs.new'), join(dir, 'gateway.mjs'));
      gw.proc.kill('SIGHUP');
      expect((await rolled).pids).toHaveLength(workers);
      const mainnet = await rawRequest(gw.url('rpc', `/mainnet/${key}`), { body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
      expect(mainnet.json().result).toBe('0x1');
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
    expect(pkg.scripts.build).toBe('node bin/gateway.mjs build gateway.yaml');
    expect(text).toContain('COPY --from=build /src/dist/gateway.mjs /app/gateway.mjs');
    expect(text).toContain('CMD ["node", "--no-memory-reducer", "/app/gateway.mjs"]');
    expect(text).toContain('STOPSIGNAL SIGTERM');
  });
});

/** The Dockerfile's instructions, stage by stage (continuation lines joined, comments dropped). */
function dockerStages(text: string): { name: string | null; steps: [string, string][] }[] {
  const stages: { name: string | null; steps: [string, string][] }[] = [];
  for (const line of text.replace(/\\\n/g, ' ').split('\n')) {
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const [, op, arg] = m as unknown as [string, string, string];
    if (op === 'FROM') stages.push({ name: /\sAS\s+(\S+)/i.exec(arg)?.[1] ?? null, steps: [] });
    else stages.at(-1)!.steps.push([op, arg.trim()]);
  }
  return stages;
}

describe('deploy/Dockerfile, replayed without a container engine', () => {
  it('builds and runs: the build stage’s own commands make the file that the final stage’s CMD runs alone', { timeout: 180_000 }, async () => {
    const [build, final] = dockerStages(readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8'));
    expect(build!.name).toBe('build');
    // Each image path maps to a scratch folder; the instructions are carried out in order.
    // Outside the project: the build context is copied into it.
    const scratch = mkdtempSync(join(tmpdir(), 'gateway-docker-'));
    onTestFinished(() => rmSync(scratch, { recursive: true, force: true }));
    const dirs: Record<string, string> = { '/src': join(scratch, 'src'), '/app': join(scratch, 'app') };
    const host = (p: string) => {
      const root = Object.keys(dirs).find((d) => p === d || p.startsWith(`${d}/`));
      expect(root, `image path ${p}`).toBeDefined();
      return dirs[root!]! + p.slice(root!.length);
    };
    let cwd = '';
    for (const [op, arg] of build!.steps) {
      if (op === 'WORKDIR') mkdirSync((cwd = host(arg)), { recursive: true });
      else if (op === 'COPY' && arg === '. .') {
        // The build context, minus what npm ci and the build itself make.
        cpSync(ROOT, cwd, { recursive: true, filter: (f) => !/^(node_modules|\.git|\.tmp|dist)$/.test(relative(ROOT, f).split(sep)[0]!) });
      } else if (op === 'COPY') {
        const parts = arg.split(/\s+/);
        for (const f of parts.slice(0, -1)) copyFileSync(join(ROOT, f), join(cwd, f));
      } else if (op === 'RUN' && /^npm ci\b/.test(arg)) {
        // npm ci needs the registry: the project's installed node_modules stand in for it.
        symlinkSync(join(ROOT, 'node_modules'), join(cwd, 'node_modules'));
      } else if (op === 'RUN') {
        await run('sh', ['-c', arg], { cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } });
      } else throw new Error(`the build stage has an instruction this replay does not know: ${op} ${arg}`);
    }
    let cmd: string[] = [];
    let stopSignal: NodeJS.Signals = 'SIGTERM';
    for (const [op, arg] of final!.steps) {
      if (op === 'WORKDIR') mkdirSync((cwd = host(arg)), { recursive: true });
      else if (op === 'COPY') {
        const [, from, src, dst] = /^--from=(\S+)\s+(\S+)\s+(\S+)$/.exec(arg) ?? [];
        expect(from, 'the final stage copies only from the build stage').toBe('build');
        copyFileSync(host(src!), host(dst!));
      } else if (op === 'CMD') cmd = JSON.parse(arg) as string[];
      else if (op === 'STOPSIGNAL') stopSignal = arg as NodeJS.Signals;
      else expect(['USER', 'EXPOSE'], `${op} ${arg}`).toContain(op);
    }
    // The image holds node and the one file; keys.yaml is mounted beside it.
    expect(readdirSync(dirs['/app']!)).toEqual(['gateway.mjs']);
    const key = newKey();
    writeFileSync(join(cwd, 'keys.yaml'), keysYaml([{ id: 'docker', key }]));
    expect(cmd[0]).toBe('node');
    const anvil = await startAnvil({ chainId: 1 });
    const gw = await startGateway({
      cwd,
      bundle: host(cmd.at(-1)!),
      nodeArgs: cmd.slice(1, -1),
      env: { ETHEREUM_RPC_URL: anvil.url, RPC_PORT: '0', EXPLORER_PORT: '0', ADMIN_PORT: '0' },
    });
    try {
      const r = await rawRequest(gw.url('rpc', '/ethereum'), { body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}', headers: { 'x-api-key': key } });
      expect(r.status).toBe(200);
      expect(r.json()).toEqual({ jsonrpc: '2.0', id: 1, result: '0x1' });
    } finally {
      expect(await gw.stop(stopSignal)).toBe(0);
      await anvil.stop();
    }
  });
});
