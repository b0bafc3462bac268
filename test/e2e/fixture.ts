// The one e2e set-up: `gateway({ chains, keys, standIns })` writes the
// manifest (its chains from a typed description, under the header most files
// share: listeners, admin, keys file, health, methodSets evm, each defaulted
// and overridable) and the keys file, waits for the stand-ins it is given,
// builds and starts the gateway with the real CLI (harness.ts), and gives back
// one object whose close() stops the gateway(s) and every stand-in. A test
// about the manifest's own text passes it whole (`manifest`).
//
//   let rig: Gateway;
//   beforeAll(async () => {
//     const anvil = await startAnvil();
//     rig = await gateway({
//       name: 'my-test',
//       chains: [evmChain('eth', ['NODE_A', 'NODE_B'], { hedge: { afterMs: 50 } })],
//       header: { cache: { headPollMs: 100 } },
//       keys: [{ id: 'k', key: KEY }],
//       // Each stand-in's url is the env variable of its name: NODE_A, NODE_B.
//       standIns: { anvil, NODE_A: startRecordingProxy(anvil.url), NODE_B: startRecordingProxy(anvil.url) },
//     });
//   }, 60_000);
//   afterAll(() => rig?.close());        // or onTestFinished(() => rig.close()) inside a test
import { writeFileSync } from 'node:fs';
import { Server } from 'node:net';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { buildManifest, keysYaml, newKey, startGateway, EVM_METHODS, type Built, type KeySpec, type RunningGateway, type StartOptions } from './harness.ts';
import type { InterfaceKind } from '../../runtime/types.ts';

/** One chain of the manifest, as its YAML says it; settings beyond the common ones (hedge, quorum, cache, ...) go as they are. */
export interface Chain {
  readonly path: string;
  readonly interface: InterfaceKind;
  /** Default `rpc`. */
  readonly listener?: string;
  /** An EVM chain's allowlist: default `evm`, the header's methodSet. */
  readonly methods?: string | readonly string[];
  /** `"${ENV_NAME}"`s (the env gives them), URLs, or upstream objects (`{ url, archive: true }`). */
  readonly upstreams: readonly (string | Readonly<Record<string, unknown>>)[];
  readonly [setting: string]: unknown;
}

/** Upstreams named by env variables: `vars('A', 'B')` is `['${A}', '${B}']`. */
export function vars(...names: readonly string[]): string[] {
  return names.map((n) => `\${${n}}`);
}

/** An EVM chain on listener rpc whose upstreams are the env variables `names` (as a stand-in's name gives its URL). */
export function evmChain(path: string, names: readonly string[], settings: Readonly<Record<string, unknown>> = {}): Chain {
  return { path, interface: 'evm-jsonrpc', ...settings, upstreams: vars(...names) };
}

/** A key of the keys file; one without `key` gets a new strong one (given back in `keys`). */
export type Key = Omit<KeySpec, 'key'> & { readonly key?: string };

/**
 * Anything a test starts that must be stopped: a stand-in (`close()`), anvil or redis (`stop()`), a bare server or
 * one with its URL (`{ server, url }`, as a file's own stand-in often is), or a list of them.
 */
export type StandIn = { close(): unknown } | { stop(): unknown } | Server | { readonly server: Server } | readonly StandIn[];

export interface GatewayOptions<S> {
  /** Names the build folder under .tmp/e2e. */
  readonly name: string;
  /** The chains, under the default header; or the whole manifest's YAML text (then `header` does not apply). */
  readonly chains?: readonly Chain[];
  readonly manifest?: string;
  /**
   * Top-level entries over the default header (listeners: the ones the chains name; admin; keys: ./keys.yaml;
   * health 200/2000 ms; methodSets.evm: the spec's 30 methods); `null` leaves one out. Other entries (limits,
   * cache, websocket, ...) are added.
   */
  readonly header?: Readonly<Record<string, unknown>>;
  /** keys.yaml, from key descriptions or as text; none for a manifest whose keys come from elsewhere. */
  readonly keys?: readonly Key[] | string;
  /** Stand-ins (or the promises of their start), awaited together and stopped by close(). */
  readonly standIns?: S;
  /**
   * The gateway's environment, given the started stand-ins, over the default one: each stand-in that has a `url`
   * gives it under its name (`standIns: { ETH_URL: proxy }` is `${ETH_URL}` in the manifest), and a group of
   * stand-ins with an `env` (three-chains.ts's startStandIns()) gives that.
   */
  readonly env?: Record<string, string> | ((s: Started<S>) => Record<string, string>);
  /** As startGateway's (the node binary and its options). */
  readonly node?: StartOptions['node'];
  readonly nodeArgs?: StartOptions['nodeArgs'];
  /** false: build and write the keys only; `start()` starts it later. */
  readonly start?: boolean;
}

export type Started<S> = { readonly [K in keyof S]: Awaited<S[K]> };

export interface Gateway<S = Record<string, unknown>> {
  /** The gateway started first (undefined with `start: false` until start()). */
  readonly gw: RunningGateway;
  readonly built: Built;
  /** Key by id. */
  readonly keys: Readonly<Record<string, string>>;
  readonly standIns: Started<S>;
  /**
   * Starts one more gateway from the same build (`env` over the fixture's, another node or node options, another
   * keys file: the build's is rewritten); close() stops it too. `bundle` and `cwd` run a copy of the server file
   * instead, as a deploy does (one renamed over the served file, one in a folder with no node_modules above it).
   */
  start(opts?: Partial<Pick<StartOptions, 'env' | 'node' | 'nodeArgs' | 'bundle' | 'cwd'>> & { readonly keys?: GatewayOptions<unknown>['keys'] }): Promise<RunningGateway>;
  /** Stops every gateway started, then every stand-in; safe to call twice. */
  close(): Promise<void>;
}

/** The header most e2e manifests share; `chains` gives the listeners. */
function defaultHeader(chains: readonly Chain[]): Record<string, unknown> {
  const listeners: Record<string, unknown> = {};
  for (const c of chains) listeners[c.listener ?? 'rpc'] = { host: '127.0.0.1', port: '0' };
  return {
    version: 1,
    listeners,
    admin: { host: '127.0.0.1', port: '0' },
    keys: './keys.yaml',
    health: { intervalMs: 200, timeoutMs: 2000 },
    methodSets: { evm: EVM_METHODS },
  };
}

/** The manifest's YAML text for `chains` under the default header with `header` over it. */
export function manifestYaml(chains: readonly Chain[], header: Readonly<Record<string, unknown>> = {}): string {
  const doc: Record<string, unknown> = { ...defaultHeader(chains), ...header };
  for (const [k, v] of Object.entries(doc)) if (v === null) delete doc[k];
  doc.chains = chains.map(({ path, interface: kind, listener = 'rpc', methods, ...rest }) => ({
    path,
    interface: kind,
    listener,
    ...(kind === 'evm-jsonrpc' ? { methods: methods ?? 'evm' } : methods === undefined ? {} : { methods }),
    ...rest,
  }));
  return stringify(doc);
}

function stop(s: StandIn): Promise<unknown> {
  if (Array.isArray(s)) return Promise.all(s.map(stop));
  if (s instanceof Server) {
    if (!s.listening) return Promise.resolve();
    return new Promise((ok) => {
      s.close(ok);
      (s as { closeAllConnections?: () => void }).closeAllConnections?.();
    });
  }
  if ('server' in s) return stop(s.server);
  return Promise.resolve('close' in s ? s.close() : (s as { stop(): unknown }).stop());
}

/** Stops `things` all at once; every one is asked even when one fails, and the first failure is thrown. */
async function stopAll(things: readonly StandIn[]): Promise<void> {
  const failed = (await Promise.allSettled(things.map(stop))).find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/** Writes `dir`/keys.yaml from `keys` (nothing when none); gives back the key of each described id. */
function writeKeys(dir: string, keys: GatewayOptions<unknown>['keys']): Record<string, string> {
  const byId: Record<string, string> = {};
  if (typeof keys === 'string') writeFileSync(join(dir, 'keys.yaml'), keys);
  else if (keys) {
    const specs = keys.map((k) => ({ ...k, key: k.key ?? newKey() }));
    for (const k of specs) byId[k.id] = k.key;
    writeFileSync(join(dir, 'keys.yaml'), keysYaml(specs));
  }
  return byId;
}

export async function gateway<S extends Readonly<Record<string, StandIn | Promise<StandIn> | undefined>> = Record<string, never>>(
  opts: GatewayOptions<S>,
): Promise<Gateway<S>> {
  if ((opts.manifest === undefined) === (opts.chains === undefined)) throw new Error('gateway(): give chains or manifest, one of them');
  const names = Object.keys(opts.standIns ?? {});
  // Settled, not all: a stand-in that fails to start must not leave the others running.
  const settled = await Promise.allSettled(names.map((n) => (opts.standIns as Record<string, unknown>)[n]));
  const standIns = Object.fromEntries(names.map((n, i) => [n, settled[i]!.status === 'fulfilled' ? settled[i]!.value : undefined])) as Started<S>;
  const gateways: RunningGateway[] = [];
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      await stopAll(gateways);
      await stopAll(Object.values(standIns).filter((s): s is StandIn => s !== undefined));
    })());
  try {
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const built = await buildManifest(opts.name, opts.manifest ?? manifestYaml(opts.chains!, opts.header));
    const keys = writeKeys(built.dir, opts.keys);
    const env: Record<string, string> = {};
    for (const [n, s] of Object.entries(standIns as Record<string, { url?: unknown; env?: Record<string, string> } | undefined>)) {
      if (typeof s?.url === 'string') env[n] = s.url;
      Object.assign(env, s?.env);
    }
    Object.assign(env, typeof opts.env === 'function' ? opts.env(standIns) : opts.env);
    const start: Gateway<S>['start'] = async ({ keys: otherKeys, ...more } = {}) => {
      if (otherKeys) Object.assign(keys, writeKeys(built.dir, otherKeys));
      const g = await startGateway({ cwd: built.dir, bundle: built.bundle, node: opts.node, nodeArgs: opts.nodeArgs, ...more, env: { ...env, ...more.env } });
      gateways.push(g);
      return g;
    };
    if (opts.start !== false) await start();
    return {
      get gw() {
        return gateways[0]!;
      },
      built,
      keys,
      standIns,
      start,
      close,
    };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}
