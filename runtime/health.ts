// Active health checks, one per upstream per interval, by interface:
// EVM eth_blockNumber, Blockbook /status, Rosetta /network/status. Each check
// records the upstream's head; an upstream more than maxLag blocks behind the
// chain's best head is taken out like one that does not answer. Each check
// also verifies which chain the upstream serves, where the manifest says
// (EVM chainId, Blockbook coin, Rosetta network): one on another chain is
// wrong_chain, takes no traffic, and is checked again every round.
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { RouteSpec } from './types.ts';
import { moduleOf } from './interfaces/index.ts';
import type { IdentityCheck, ProbeRequest } from './interfaces/interface.ts';
import { HEALTH_AGENT, HEALTH_FAILS_TO_DOWN, type Upstream, type UpstreamGroup } from './upstream.ts';


/** Groups of chains checked together, spread over each interval. */
const SLOTS = 10;

export class HealthChecker {
  private readonly timers: NodeJS.Timeout[] = [];
  /** Chains whose check is under way: a slow check is never overlapped by the next. */
  private readonly checking = new Set<RouteSpec>();

  constructor(
    private readonly routes: readonly RouteSpec[],
    private readonly groups: ReadonlyMap<RouteSpec, UpstreamGroup>,
    private readonly opts: { readonly intervalMs: number; readonly timeoutMs: number },
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    // Where the manifest says which chain an upstream must serve, none takes traffic before a check says it does.
    for (const route of routes) if (this.identities(route) !== null) for (const u of groups.get(route)!.all) u.verify = true;
  }

  /**
   * Checks every chain at once (so that readiness is known at start), then
   * each chain once per interval, in up to SLOTS groups spread evenly over it:
   * with 200 chains and the default 5 s, 20 chains every 500 ms instead of 200
   * probes at once every 5 s, a burst that a rate-limited provider behind all
   * of them may refuse and that the requests being served would wait behind.
   * Not one chain at a time: a probe that runs alone costs far more CPU than
   * one among others (200 chains at idle, CPU per second: ~45 ms one at a
   * time, ~21 ms in groups of 20, ~15-19 ms all at once; a perf profile of
   * the lone probes is mostly V8's inline-cache builtins, code that is not hot).
   * Resolves when the first round is over (each probe is bounded by timeoutMs):
   * the server listens only then.
   */
  start(): Promise<void> {
    const firstRound = this.round();
    const every = this.opts.intervalMs;
    const n = this.routes.length;
    const slots = Math.min(n, SLOTS);
    this.routes.forEach((route, i) => {
      const first = setTimeout(() => {
        void this.check(route);
        const t = setInterval(() => void this.check(route), every);
        t.unref();
        this.timers.push(t);
      }, every + Math.floor((every * Math.floor((i * slots) / n)) / slots));
      first.unref();
      this.timers.push(first);
    });
    return firstRound;
  }

  stop(): void {
    for (const t of this.timers) clearTimeout(t); // clears intervals as well
    this.timers.length = 0;
  }

  /** One check of every chain, all at once. */
  private async round(): Promise<void> {
    await Promise.all(this.routes.map((r) => this.check(r)));
  }

  /** One check of a chain's upstreams; skipped while its previous check is under way. */
  private async check(route: RouteSpec): Promise<void> {
    if (this.checking.has(route)) return;
    this.checking.add(route);
    try {
      await this.checkChain(route);
    } finally {
      this.checking.delete(route);
    }
  }

  private async checkChain(route: RouteSpec): Promise<void> {
    const group = this.groups.get(route)!;
    const results = await Promise.all(group.all.map((u) => this.probe(route, u)));
    let best = -1;
    for (let i = 0; i < results.length; i++) {
      const h = results[i];
      if (typeof h === 'number' && !Number.isNaN(h) && h > best) best = h;
    }
    group.all.forEach((u, i) => {
      const result = results[i] ?? null;
      const before = u.state;
      if (result === null) {
        u.healthFails++;
        // One found on another chain stays so until a check finds the right one.
        if (u.healthFails >= HEALTH_FAILS_TO_DOWN && before !== 'wrong_chain') u.state = 'down';
      } else if (typeof result === 'object') {
        u.healthFails = 0;
        u.lagging = false;
        u.state = 'wrong_chain';
        if (before !== 'wrong_chain') {
          // Once per transition; never the URL, which may hold a provider's secret.
          this.log.error(
            { event: 'upstream_wrong_chain', chain: route.path, upstream: u.name, serves: result.wrong, from: before },
            `upstream ${u.name} of chain ${route.path} serves another chain (${result.wrong}): taken out`,
          );
        }
      } else {
        const head = result;
        u.healthFails = 0;
        const known = !Number.isNaN(head);
        if (known) u.head = head;
        u.lagging = known && best - head > route.maxLag;
        // A passing check does not clear the circuit breaker's run of failed
        // requests: eth_blockNumber answering says nothing of whether calls do.
        // An upstream it brings back after the breaker opened is on trial: its
        // next failed request takes it out again, its next success clears the run.
        u.state = u.lagging ? 'down' : 'up';
        // Back from down: the node may have been restarted, upgraded or reconfigured. If it refused batches, it is
        // asked with one again (the next check, head poll or batch of misses learns the answer afresh).
        if (before === 'down' && u.state === 'up' && !u.takesBatches) u.takesBatches = true;
      }
      this.metrics.upstream(route.path, u, best);
      if (before !== u.state && before !== 'unknown' && u.state !== 'wrong_chain') {
        this.log.warn({ event: 'upstream_state', chain: route.path, upstream: u.name, from: before, to: u.state, head: u.head, lagging: u.lagging }, 'upstream state changed');
      }
    });
  }

  private probe(route: RouteSpec, u: Upstream): Promise<ProbeResult> {
    return probeUpstream(route, u, this.opts.timeoutMs, this.identities(route));
  }

  private readonly identityChecks = new Map<RouteSpec, IdentityCheck | null>();
  private identities(route: RouteSpec): IdentityCheck | null {
    let id = this.identityChecks.get(route);
    if (id === undefined) {
      id = identityOf(route);
      this.identityChecks.set(route, id);
    }
    return id;
  }
}

/**
 * null if the upstream did not answer properly in time; `{ wrong }` if it
 * serves another chain (what it serves, for the log); otherwise its head, or
 * NaN when it answered but reported no usable height (then it counts as up,
 * and takes no part in lag checks).
 */
export type ProbeResult = number | null | { readonly wrong: string };

/** The identity check the manifest asks of a chain's upstreams (null: none). */
export function identityOf(route: RouteSpec): IdentityCheck | null {
  return moduleOf(route).health.identity(route as never);
}

/** One probe of one upstream: its head and, with `identity`, which chain it serves. */
export async function probeUpstream(route: RouteSpec, u: Upstream, timeoutMs: number, identity: IdentityCheck | null = identityOf(route)): Promise<ProbeResult> {
  return (await probeWithReason(route, u, timeoutMs, identity)).result;
}

/**
 * The same probe, with why it failed (`gateway check --probe` prints it):
 * `unreachable` for no answer (connection refused, timeout), `failing` for an
 * answer that is not a proper one. Reasons are error codes and statuses, never
 * an error's message, which may carry the upstream's address.
 */
export async function probeWithReason(
  route: RouteSpec,
  u: Upstream,
  timeoutMs: number,
  identity: IdentityCheck | null = identityOf(route),
): Promise<{ readonly result: ProbeResult; readonly failure?: { readonly kind: 'unreachable' | 'failing'; readonly reason: string } }> {
  const probe = moduleOf(route).health;
  const own = identity?.request;
  const apart = identity !== null && own === undefined ? (probe.apart?.(route as never, u) ?? null) : null;
  let doc: Answer;
  let idDoc: Answer | null;
  if (apart !== null && !u.takesBatches) [doc, idDoc] = await Promise.all([ask(u, apart.head, timeoutMs), ask(u, apart.identity, timeoutMs)]);
  else {
    [doc, idDoc] = await Promise.all([ask(u, probe.request(route as never, u), timeoutMs), own === undefined ? null : ask(u, own(u), timeoutMs)]);
    // One object for a batch: a node that takes no batches. Asked apart, now and from then on.
    if (apart !== null && 'doc' in doc && !Array.isArray(doc.doc)) {
      u.takesBatches = false;
      [doc, idDoc] = await Promise.all([ask(u, apart.head, timeoutMs), ask(u, apart.identity, timeoutMs)]);
    }
  }
  const fail = (a: Answer | null, reason?: string) => ({
    result: null,
    failure: a !== null && !('doc' in a) ? a : { kind: 'failing' as const, reason: reason ?? 'no proper answer' },
  });
  if (identity !== null) {
    // Identity first: a node of another network may fail the head probe (Rosetta's 4002).
    const said = idDoc ?? doc;
    if (!('doc' in said)) return fail(said);
    const ok = identity.check(said.doc);
    if (ok === false) return fail(null, 'the answer does not say which chain it serves');
    if (ok !== true) return { result: { wrong: ok } };
  }
  if (!('doc' in doc)) return fail(doc);
  const head = probe.head(doc.doc);
  if (head === null) return fail(null, 'the answer reports no head');
  return { result: typeof head === 'number' && Number.isSafeInteger(head) && head >= 0 ? head : Number.NaN };
}

type Answer = { readonly doc: Record<string, any> } | { readonly kind: 'unreachable' | 'failing'; readonly reason: string };

/** The answer as a JSON object (or array); else why there is none: no answer in time, not a 200, or not JSON. */
async function ask(u: Upstream, req: ProbeRequest, timeout: number): Promise<Answer> {
  let status: number;
  let text: string;
  try {
    const type = req.body === undefined ? null : { 'content-type': 'application/json' };
    const headers = { ...type, 'user-agent': HEALTH_AGENT, ...u.headers };
    const res = await u.pool.request({ path: req.path, method: req.method, headers, body: req.body, headersTimeout: timeout, bodyTimeout: timeout });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return { kind: 'unreachable', reason: typeof code === 'string' ? (REASONS[code] ?? code) : 'no answer' };
  }
  if (status !== 200) return { kind: 'failing', reason: `HTTP ${status}` };
  try {
    const doc = JSON.parse(text) as Record<string, any>;
    if (doc !== null && typeof doc === 'object') return { doc };
  } catch {
    // below
  }
  return { kind: 'failing', reason: 'the answer is not JSON' };
}

const REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found (DNS)',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  UND_ERR_SOCKET: 'connection closed',
};
