// What ops ask of a manifest before a deploy: `gateway routes` (the route
// table it produces) and `gateway check --probe` (every upstream probed once,
// with the runtime's own health probe), and the chain check of `keys add`.
// Plain functions that return text and codes, so tests call them directly.
import type { ChainModel, GatewayModel } from './model.ts';
import type { Limits, RouteSpec, Template } from '../runtime/types.ts';
import type { ChainSettings } from '../runtime/chain-types.gen.ts';
import { didYouMean } from './validate.ts';
import { DEFAULTS } from './normalize.ts';

// ---- gateway routes --------------------------------------------------------------------------

export interface RouteRow {
  readonly path: string;
  readonly interface: ChainModel['interface'];
  readonly upstreams: readonly { readonly name: string; readonly role: string; readonly weight: number; readonly archive: boolean; readonly maxLogRange?: number; readonly rateLimit?: number }[];
  /** Allowed JSON-RPC methods (evm-jsonrpc); null for interfaces without an allowlist. */
  readonly methods: number | null;
  /** Parameters checked against the interface's spec (validate: params), or not (off). */
  readonly validate: 'params' | 'off';
  readonly limits: Limits;
  /** The pool settings as the runtime gets them, defaults filled; the EVM-only ones on evm-jsonrpc routes only. */
  readonly pool: PoolSettings;
}

/** The pool settings of a chain's kind (the EVM-only ones absent elsewhere), as the build's model has them. */
export type PoolSettings = Pick<ChainSettings, (typeof POOL_SETTINGS)[number]>;
const POOL_SETTINGS = ['servedTip', 'hedge', 'rewriteTags', 'pruneDepth', 'broadcast', 'quorum', 'selection'] as const;

export interface RouteTable {
  readonly listeners: readonly { readonly name: string; readonly host: string; readonly port: string; readonly routes: readonly RouteRow[] }[];
}

/** A template as the manifest wrote it: `${VAR}` and `${VAR:-default}` kept, nothing resolved. */
export function templateText(t: Template): string {
  return t.parts.map((p) => (typeof p === 'string' ? p : p.default === undefined ? `\${${p.env}}` : `\${${p.env}:-${p.default}}`)).join('');
}

export function routeTable(model: GatewayModel): RouteTable {
  return {
    listeners: model.listeners.map((l) => ({
      name: l.name,
      host: templateText(l.host),
      port: templateText(l.port),
      routes: model.chains
        .filter((c) => c.listener === l.name)
        .map((c) => ({
          path: `/${c.path}`,
          interface: c.interface,
          upstreams: c.upstreams.map((u) => ({ name: u.name, role: u.role, weight: u.weight, archive: u.archive, ...(u.maxLogRange === undefined ? {} : { maxLogRange: u.maxLogRange }), ...(u.rateLimit === undefined ? {} : { rateLimit: u.rateLimit }) })),
          methods: c.methods === undefined ? null : c.methods.length,
          validate: c.validate ? 'params' : 'off',
          limits: c.limits,
          pool: poolSettings(c),
        })),
    })),
  };
}

function poolSettings(c: ChainModel): PoolSettings {
  return Object.fromEntries(POOL_SETTINGS.filter((k) => c[k] !== undefined).map((k) => [k, c[k]])) as PoolSettings;
}

/** The pool settings that differ from their defaults, or '-' (archive upstreams are marked in UPSTREAMS). */
export function poolText(r: RouteRow): string {
  const p = r.pool;
  const out: string[] = [];
  if (p.servedTip !== DEFAULTS.servedTip) out.push(`servedTip ${p.servedTip}`);
  if (p.rewriteTags !== undefined && p.rewriteTags !== r.upstreams.length > 1) out.push(p.rewriteTags ? 'rewriteTags' : 'rewriteTags off');
  if (p.pruneDepth !== undefined && p.pruneDepth !== DEFAULTS.pruneDepth) out.push(`pruneDepth ${p.pruneDepth}`);
  if (p.hedge !== null) out.push(`hedge ${p.hedge.afterMs === 'p95' ? 'p95' : `${p.hedge.afterMs} ms`}`);
  if (p.broadcast !== undefined && p.broadcast !== (r.upstreams.length > 1 ? 'all' : 'one')) out.push(`broadcast ${p.broadcast}`);
  if (p.quorum) out.push(`quorum of ${p.quorum.of} (${p.quorum.methods.join(' ')})`);
  if (p.selection !== undefined && p.selection !== 'score') out.push(`selection ${p.selection}`);
  return out.length === 0 ? '-' : out.join(', ');
}

/** Columns padded to their widest cell; the last column is not padded. */
export function columns(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n');
}

export function formatRouteTable(t: RouteTable): string {
  const out: string[] = [];
  for (const l of t.listeners) {
    out.push(`listener ${l.name} (${l.host}:${l.port}): ${l.routes.length} route${l.routes.length === 1 ? '' : 's'}`);
    if (l.routes.length === 0) continue;
    const rows = [['PATH', 'INTERFACE', 'UPSTREAMS', 'METHODS', 'VALIDATE', 'POOL', 'LIMITS']];
    for (const r of l.routes) {
      const ups = r.upstreams.map((u) => `${u.name} (${u.role}${u.weight === 1 ? '' : `, weight ${u.weight}`}${u.archive ? ', archive' : ''}${u.maxLogRange === undefined ? '' : `, maxLogRange ${u.maxLogRange}`}${u.rateLimit === undefined ? '' : `, rateLimit ${u.rateLimit}/s`})`).join(', ');
      const m = r.limits;
      const limits = `body ${m.maxBodyBytes} B, batch ${m.maxBatchSize}, timeout ${m.timeoutMs} ms, page ${m.maxPageSize}${m.maxLogRange === undefined ? '' : `, maxLogRange ${m.maxLogRange}`}`;
      rows.push([r.path, r.interface, ups, r.methods === null ? '-' : String(r.methods), r.validate, poolText(r), limits]);
    }
    out.push(columns(rows).replace(/^/gm, '  '));
  }
  return `${out.join('\n')}\n`;
}

// ---- gateway check --probe -------------------------------------------------------------------

/** unreachable: no answer (refused, timeout); failing: an answer that is not a proper one; unresolved: a ${VAR} without a value or a bad URL. */
export type ProbeState = 'up' | 'lagging' | 'wrong_chain' | 'unreachable' | 'failing' | 'unresolved';

export interface ProbeRow {
  readonly chain: string;
  readonly interface: ChainModel['interface'];
  readonly upstream: string;
  readonly role: string;
  readonly state: ProbeState;
  readonly head: number | null;
  /** Why it is not up: what it serves instead, how far behind, a missing variable. Never a URL. */
  readonly detail: string;
}

export interface ProbeReport {
  readonly rows: readonly ProbeRow[];
  /** Chains with no upstream that is up. */
  readonly failed: readonly string[];
}

/** The chain as the runtime's probe reads it (what the emitted tables would hold). */
function routeOf(c: ChainModel): RouteSpec {
  return { ...c, methods: new Set(c.methods ?? []) } as unknown as RouteSpec;
}

/**
 * Probes every upstream of every chain once, with the runtime's health probe
 * (head and identity: chainId, network, coin), at most `parallel` at a time.
 * ${VAR} parts are resolved from `env` as the server would at start.
 */
export async function probeManifest(
  model: GatewayModel,
  opts: { readonly timeoutMs: number; readonly env?: NodeJS.ProcessEnv; readonly parallel?: number; readonly progress?: (done: number, total: number) => void },
): Promise<ProbeReport> {
  // The runtime's modules, loaded only here: routes and check stay light.
  const { Upstream } = await import('../runtime/upstreams/upstream.ts');
  const { probeWithReason } = await import('../runtime/upstreams/poller.ts');
  const { moduleOf } = await import('../runtime/kinds/index.ts');
  const { resolveTemplate } = await import('../runtime/config/env.ts');
  const env = opts.env ?? process.env;
  type Job = { chain: ChainModel; index: number };
  const jobs: Job[] = model.chains.flatMap((chain) => chain.upstreams.map((_, index) => ({ chain, index })));
  const results = new Map<Job, { state: ProbeState; head: number | null; detail: string }>();
  let done = 0;
  opts.progress?.(0, jobs.length);
  const one = async (job: Job): Promise<void> => {
    const route = routeOf(job.chain);
    const spec = job.chain.upstreams[job.index]!;
    let u: InstanceType<typeof Upstream>;
    try {
      // The same resolution as at start (Upstream resolves through resolveTemplate), here from `env`.
      const resolved = {
        ...spec,
        url: { parts: [resolveTemplate(spec.url, `chain ${job.chain.path} (${spec.name})`, env)] },
        headers: Object.fromEntries(Object.entries(spec.headers).map(([k, t]) => [k, { parts: [resolveTemplate(t, `chain ${job.chain.path} (${spec.name})`, env)] }])),
      };
      u = new Upstream(resolved, route);
    } catch (err) {
      results.set(job, { state: 'unresolved', head: null, detail: (err as Error).message });
      return;
    }
    try {
      const { result: r, failure } = await probeWithReason(route, moduleOf(route.interface).probe, u, opts.timeoutMs);
      if (r === null) results.set(job, { state: failure!.kind, head: null, detail: failure!.reason });
      else if (typeof r === 'object') results.set(job, { state: 'wrong_chain', head: null, detail: `serves ${r.wrong}` });
      else results.set(job, { state: 'up', head: Number.isNaN(r) ? null : r, detail: '' });
    } finally {
      await u.pool.close().catch(() => undefined);
      opts.progress?.(++done, jobs.length);
    }
  };
  const queue = [...jobs];
  const workers = Array.from({ length: Math.min(opts.parallel ?? 16, queue.length) }, async () => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) await one(job);
  });
  await Promise.all(workers);

  const rows: ProbeRow[] = [];
  const failed: string[] = [];
  for (const chain of model.chains) {
    const mine = jobs.filter((j) => j.chain === chain).map((j) => [j, results.get(j)!] as const);
    // Lag as the health check counts it: behind the best head the chain's upstreams report.
    const best = Math.max(-1, ...mine.map(([, r]) => (r.state === 'up' && r.head !== null ? r.head : -1)));
    let good = false;
    for (const [job, r] of mine) {
      let { state, detail } = r;
      if (state === 'up' && r.head !== null && best - r.head > chain.maxLag) {
        state = 'lagging';
        detail = `${best - r.head} blocks behind (maxLag ${chain.maxLag})`;
      }
      if (state === 'up') good = true;
      const spec = chain.upstreams[job.index]!;
      rows.push({ chain: chain.path, interface: chain.interface, upstream: spec.name, role: spec.role, state, head: r.head, detail });
    }
    if (!good) failed.push(chain.path);
  }
  return { rows, failed };
}

export function formatProbeReport(r: ProbeReport): string {
  const rows = [['CHAIN', 'INTERFACE', 'UPSTREAM', 'ROLE', 'STATE', 'HEAD', 'DETAIL']];
  for (const x of r.rows) rows.push([x.chain, x.interface, x.upstream, x.role, x.state, x.head === null ? '-' : String(x.head), x.detail]);
  const lines = [columns(rows)];
  const chains = new Set(r.rows.map((x) => x.chain)).size;
  if (r.failed.length === 0) lines.push(chains === 1 ? '1 chain, with a good upstream' : `${chains} chains, every one with a good upstream`);
  else for (const c of r.failed) lines.push(`chain ${c}: no good upstream`);
  return `${lines.join('\n')}\n`;
}

// ---- gateway keys add --chains ---------------------------------------------------------------

/** Chain names the manifest does not have, each with a did-you-mean hint when one is close. */
export function unknownChains(model: GatewayModel, names: readonly string[], file: string = model.source): string[] {
  const known = new Set(model.chains.map((c) => c.path));
  return names
    .filter((n) => !known.has(n))
    .map((n) => {
      const hint = didYouMean(n, known);
      return `chain '${n}' is not in ${file}${hint === undefined ? '' : ` (${hint})`}`;
    });
}

// ---- the commands' printing ------------------------------------------------------------------

/** `gateway check --probe`: the table on stdout, progress on stderr; the exit code. */
export async function probeCommand(model: GatewayModel, timeout: string | undefined): Promise<number> {
  const timeoutMs = timeout === undefined ? model.health.timeoutMs : Number(timeout);
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    process.stderr.write(`gateway check: --timeout '${timeout}' must be a whole number of milliseconds\n`);
    return 1;
  }
  const tty = process.stderr.isTTY === true;
  const report = await probeManifest(model, {
    timeoutMs,
    // On a terminal, one line that counts up; otherwise a line at the start and one at the end.
    progress: (done, total) => {
      if (tty) process.stderr.write(`\r\x1b[Kprobing upstreams: ${done}/${total}${done === total ? '\n' : ''}`);
      else if (done === 0) process.stderr.write(`probing ${plural(total, 'upstream')} of ${plural(model.chains.length, 'chain')} (timeout ${timeoutMs} ms)\n`);
      else if (done === total) process.stderr.write(`probed ${plural(total, 'upstream')}\n`);
    },
  });
  process.stdout.write(formatProbeReport(report));
  return report.failed.length === 0 ? 0 : 1;
}

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
