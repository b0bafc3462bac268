// Not on fixture.ts: it is the pod of kubernetes.test.ts, and starts the gateway as the image's CMD with the container's environment.
// One pod of deploy/kubernetes, as far as this machine can run it, for
// kubernetes.test.ts: started by it inside a network namespace of its own
// (`unshare --net`), so the pod's fixed ports are free whatever else runs here
// and the pod has an address that is not loopback (podIp, on lo). The test
// reads the manifests and hands over a plan; this process carries it out the
// way the kubelet and the cluster would, and writes what it saw as JSON:
// Redis with the StatefulSet's command and args, the upstreams the Secret names
// replaced by stand-ins (there is no DNS here), the keys Secret laid out as the
// kubelet lays out a Secret volume, the gateway started as the image's CMD with
// the container's environment, the probes and the Service ports asked on
// podIp, a Secret update made the kubelet's way (a ..data symlink swap), and
// SIGTERM as after the preStop hook.
import { spawn } from 'node:child_process';
import { mkdirSync, renameSync, symlinkSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { rawRequest, startGateway, type RawResponse } from './harness.ts';
import type { Network } from '../support/rosetta-stub.ts';
import { KINDS } from '../support/kinds.ts';
import type { InterfaceKind } from '../../runtime/types.ts';

export interface PodPlan {
  /** The address the pod has besides loopback (added to lo in the namespace): probes and Service traffic come to it. */
  readonly podIp: string;
  /** The image's WORKDIR, with the built gateway.mjs in it. */
  readonly workdir: string;
  /** The image's CMD, paths mapped (node, its flags, the file). */
  readonly cmd: readonly string[];
  /** The container's environment, resolved; paths under mounts mapped; Service hosts mapped to 127.0.0.1. */
  readonly env: Readonly<Record<string, string>>;
  /** The directory standing for the keys Secret's mount, and the Secret's files. */
  readonly secretDir: string;
  readonly secretFiles: Readonly<Record<string, string>>;
  /** The same Secret, updated: the files the kubelet swaps in later. */
  readonly secretUpdate: Readonly<Record<string, string>>;
  /** The key the update adds, for calls through the Service ports. */
  readonly key: string;
  /** Redis as the StatefulSet runs it (args' paths mapped). */
  readonly redis: { readonly command: string; readonly args: readonly string[]; readonly port: number };
  /** Every chain of the manifest: the variable its upstream URL comes from, and the port its listener is on. */
  readonly chains: readonly {
    readonly path: string;
    readonly interface: InterfaceKind;
    readonly listener: string;
    readonly port: number;
    readonly urlVar: string;
    readonly chainId?: number;
    readonly network?: Network;
    readonly coin?: string;
  }[];
  /** The container's probes: port numbers resolved from names. */
  readonly probes: Readonly<Record<'startup' | 'liveness' | 'readiness', { readonly port: number; readonly path: string }>>;
  /** The PodMonitor's endpoint. */
  readonly metrics: { readonly port: number; readonly path: string };
  readonly report: string;
}

export interface PodReport {
  /** The gateway's `started` line: listener names and the ports they bound. */
  readonly listeners: readonly { listener: string; host: string; port: number }[];
  /** Status of each probe once started (0: no HTTP answer). */
  readonly probes: Record<string, number>;
  readonly readyBody: unknown;
  readonly metrics: { status: number; contentType: string; body: string };
  /** Per chain, status through its listener's port: with the key before the Secret update, and after. */
  readonly before: Record<string, number>;
  readonly after: Record<string, number>;
  /** The EVM chains' eth_chainId answers after the update. */
  readonly chainIds: Record<string, unknown>;
  readonly reloaded: Record<string, unknown>;
  /** The readiness probe once the gateway logged `draining` (0: no HTTP answer). */
  readonly readinessDraining: number;
  readonly exitCode: number | null;
  readonly stopMs: number;
  /** Keys the gateway wrote to Redis (usage, counted from the calls above). */
  readonly redisKeys: string[];
}

/**
 * What the kubelet's httpGet probe does: GET on the pod's address. 0 when no
 * HTTP answer came (refused, or reset: a connection the kernel had queued when
 * the gateway stopped listening), which the kubelet counts as a failure too.
 */
async function probe(podIp: string, port: number, path: string): Promise<{ status: number; res: RawResponse | null }> {
  try {
    const res = await rawRequest(`http://${podIp}:${port}${path}`);
    return { status: res.status, res };
  } catch (err) {
    if (['ECONNREFUSED', 'ECONNRESET'].includes((err as { code?: string }).code ?? '')) return { status: 0, res: null };
    throw err;
  }
}

/** The kubelet's Secret volume: files in a timestamped directory, ..data pointing at it, each file a link through ..data. */
function writeSecretVersion(dir: string, version: string, files: Readonly<Record<string, string>>): void {
  mkdirSync(join(dir, version), { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, version, name), text);
}

async function startRedis(plan: PodPlan): Promise<() => Promise<void>> {
  // setpriv (util-linux, as unshare is): the kernel kills it if this process dies first.
  const proc = spawn('setpriv', ['--pdeathsig', 'KILL', '--', plan.redis.command, ...plan.redis.args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let out = '';
  await new Promise<void>((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`redis-server not ready in 10 s:\n${out}`)), 10_000);
    proc.once('exit', (code) => fail(new Error(`redis-server exited (${code}):\n${out}`)));
    const seen = (c: Buffer) => {
      out += c.toString();
      if (out.includes('Ready to accept connections')) {
        clearTimeout(t);
        ok();
      }
    };
    proc.stdout!.on('data', seen);
    proc.stderr!.on('data', seen);
  });
  return async () => {
    proc.kill('SIGTERM');
    await exited;
  };
}

function call(podIp: string, c: PodPlan['chains'][number], key: string): Promise<RawResponse> {
  const base = `http://${podIp}:${c.port}/${c.path}`;
  const { path, body } = KINDS[c.interface].firstCall(c);
  return rawRequest(base + path, { headers: { 'x-api-key': key }, body });
}

async function main(): Promise<void> {
  const plan = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as PodPlan;
  const stops: (() => Promise<unknown>)[] = [];
  try {
    stops.push(await startRedis(plan));
    // The upstreams the Secret names, each replaced by a stand-in of its chain.
    const env: Record<string, string> = { ...plan.env };
    await Promise.all(
      plan.chains.map(async (c) => {
        const node = await KINDS[c.interface].standIn(c);
        stops.push(() => node.stop());
        env[c.urlVar] = node.url;
      }),
    );
    writeSecretVersion(plan.secretDir, '..2026_01_01_00_00_00.1', plan.secretFiles);
    symlinkSync('..2026_01_01_00_00_00.1', join(plan.secretDir, '..data'));
    for (const name of Object.keys(plan.secretFiles)) symlinkSync(`..data/${name}`, join(plan.secretDir, name));

    const [node, ...rest] = plan.cmd;
    const gw = await startGateway({ cwd: plan.workdir, bundle: rest.at(-1)!, node: node === 'node' ? process.execPath : node!, nodeArgs: rest.slice(0, -1), env });
    stops.push(() => gw.stop('SIGKILL'));
    const started = await gw.waitForLog((e) => e.event === 'started');
    const probes: Record<string, number> = {};
    for (const [name, p] of Object.entries(plan.probes)) probes[name] = (await probe(plan.podIp, p.port, p.path)).status;
    const ready = await probe(plan.podIp, plan.probes.readiness.port, plan.probes.readiness.path);
    const m = await rawRequest(`http://${plan.podIp}:${plan.metrics.port}${plan.metrics.path}`);

    const before: Record<string, number> = {};
    for (const c of plan.chains) before[c.path] = (await call(plan.podIp, c, plan.key)).status;
    // The Secret updated the kubelet's way: a new version beside the old, ..data swapped by rename.
    writeSecretVersion(plan.secretDir, '..2026_01_01_00_05_00.2', plan.secretUpdate);
    symlinkSync('..2026_01_01_00_05_00.2', join(plan.secretDir, '..data_tmp'));
    const reloaded = gw.nextLog((e) => e.event === 'keys_reloaded');
    renameSync(join(plan.secretDir, '..data_tmp'), join(plan.secretDir, '..data'));
    const reload = await reloaded;
    const after: Record<string, number> = {};
    const chainIds: Record<string, unknown> = {};
    for (const c of plan.chains) {
      const r = await call(plan.podIp, c, plan.key);
      after[c.path] = r.status;
      if (c.interface === 'evm-jsonrpc' && r.status === 200) chainIds[c.path] = (r.json() as { result?: unknown }).result;
    }

    // The kubelet's SIGTERM, once the preStop hook is over.
    const t0 = performance.now();
    const draining = gw.nextLog((e) => e.event === 'draining');
    gw.proc.kill('SIGTERM');
    await draining;
    const readinessDraining = (await probe(plan.podIp, plan.probes.readiness.port, plan.probes.readiness.path)).status;
    const exitCode = await gw.exited;
    const stopMs = performance.now() - t0;

    const redis = new Redis(plan.redis.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
    const redisKeys = (await redis.keys('gw:*')).sort();
    redis.disconnect();

    const report: PodReport = {
      listeners: started.listeners as PodReport['listeners'],
      probes,
      readyBody: ready.res?.json(),
      metrics: { status: m.status, contentType: String(m.headers['content-type']), body: m.text },
      before,
      after,
      chainIds,
      reloaded: reload,
      readinessDraining,
      exitCode,
      stopMs,
      redisKeys,
    };
    writeFileSync(plan.report, JSON.stringify(report));
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    process.stderr.write(`${err.stack ?? err.message}\n`);
    process.exit(1);
  },
);
