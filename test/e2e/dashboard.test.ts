// deploy/grafana/gateway-dashboard.json stays true to the code: every metric
// its PromQL names (panels' `expr`, found at any depth, and the chain
// variable's label_values query) has samples in /metrics of a running gateway
// after some traffic: served calls (the cache on, so its series exist), a refused key, a rate limit and a quota hit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { newKey, rawRequest, ROOT, sha256, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';

const DASHBOARD = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana/gateway-dashboard.json'), 'utf8')) as unknown;

/** Every string under a key named `expr`, at any depth. */
function exprs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const x of node) exprs(x, out);
  else if (node !== null && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === 'expr' && typeof v === 'string') out.push(v);
      else exprs(v, out);
    }
  }
  return out;
}

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression reads: label matchers, ranges,
 * strings, Grafana variables and grouping clauses removed first; then every
 * identifier that is not a function (followed by '(') or a keyword.
 */
export function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""') // strings (they may hold braces)
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\$\{?\w+\}?/g, ' ') // Grafana variables
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' '); // grouping labels
  const names = new Set<string>();
  for (const m of s.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const after = s.slice(m.index! + m[0].length).trimStart();
    if (after.startsWith('(')) continue; // a function
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    // the exponent of a number such as 1e3 is no name
    if (/[0-9.]$/.test(s.slice(0, m.index!))) continue;
    names.add(m[0]);
  }
  return [...names];
}

/** /metrics as families: name -> type, and the names that have at least one sample. */
function families(text: string): { types: Map<string, string>; sampled: Set<string> } {
  const types = new Map<string, string>();
  const sampled = new Set<string>();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) types.set(t[1]!, t[2]!);
    else if (line !== '' && !line.startsWith('#')) sampled.add(/^[^{\s]+/.exec(line)![0]);
  }
  return { types, sampled };
}

/** Whether /metrics exports the name: a family with samples, or a histogram's (or summary's) own series. */
function exported(name: string, m: ReturnType<typeof families>): boolean {
  if (!m.sampled.has(name)) return false;
  if (m.types.has(name)) return !['histogram', 'summary'].includes(m.types.get(name)!); // a histogram's bare name has no samples
  const base = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (base === null) return false;
  const type = m.types.get(base[1]!);
  return type === 'histogram' || (type === 'summary' && base[2] !== 'bucket');
}

describe('the PromQL name reader', () => {
  it('finds metric names and nothing else', () => {
    expect(metricNames('sum by (chain, le) (rate(gateway_request_duration_seconds_bucket{chain=~"$chain",le!="+Inf"}[$__rate_interval]))')).toEqual(['gateway_request_duration_seconds_bucket']);
    expect(metricNames('histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m]))) / on (instance) group_left (x) b_total offset 1h')).toEqual(['a_bucket', 'b_total']);
    expect(metricNames('count(up{job="x"} == 0) or vector(0) + 1e3 * c')).toEqual(['up', 'c']);
    expect(metricNames('topk(10, sum without (key_id) (increase(k_total{a="}{"}[$__range])))')).toEqual(['k_total']);
  });

  it('tells a histogram\'s series from a suffix on something else', () => {
    const m = families(
      ['# TYPE h histogram', 'h_bucket{le="1"} 1', 'h_sum 1', 'h_count 1', '# TYPE c_total counter', 'c_total 1', '# TYPE g gauge', 'g_count 1', '# TYPE quiet counter'].join('\n'),
    );
    expect(['h_bucket', 'h_sum', 'h_count', 'c_total'].map((n) => exported(n, m))).toEqual([true, true, true, true]);
    // a histogram's bare name, a gauge that happens to end in _count, a family with no sample, a name not there
    expect(['h', 'g_count', 'quiet', 'nothing_total'].map((n) => exported(n, m))).toEqual([false, false, false, false]);
  });
});

let anvil: Anvil;
let rig: Gateway;
let gw: RunningGateway;
const KEYS = { plain: newKey(), limited: newKey(), metered: newKey() };

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 1 });
  rig = await gateway({
    name: 'dashboard',
    chains: [{ path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, methods: ['eth_chainId', 'eth_blockNumber'], upstreams: ['${ETH_URL}'] }],
    header: { health: { intervalMs: 500, timeoutMs: 1000 }, cache: { headPollMs: 200 }, methodSets: null },
    keys: `keys:
  - { id: plain, sha256: "${sha256(KEYS.plain)}" }
  - { id: limited, sha256: "${sha256(KEYS.limited)}", rateLimit: 1/min }
  - { id: metered, sha256: "${sha256(KEYS.metered)}", quota: 1/day }
`,
    standIns: { ETH_URL: anvil },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

describe('deploy/grafana/gateway-dashboard.json', () => {
  it('names only metrics a running gateway exports, after traffic', async () => {
    const call = (key: string, method = 'eth_blockNumber') => rawRequest(gw.url('rpc', '/ethereum'), { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }), headers: { 'x-api-key': key } });
    for (let i = 0; i < 5; i++) expect((await call(KEYS.plain)).status).toBe(200);
    expect((await call(KEYS.plain, 'eth_sendTransaction')).json().error).toBeDefined(); // a refused method
    expect((await call(newKey())).status).toBe(403); // an unknown key
    expect((await call(KEYS.limited)).status).toBe(200);
    expect((await call(KEYS.limited)).status).toBe(429); // rate limit
    expect((await call(KEYS.metered)).status).toBe(200);
    expect((await call(KEYS.metered)).status).toBe(429); // quota

    const m = families(await (await fetch(gw.url('admin', '/metrics'))).text());
    const all = exprs(DASHBOARD);
    // The chain variable's query reads a metric too.
    const variables = JSON.stringify((DASHBOARD as { templating: unknown }).templating).match(/label_values\((\w+)/g) ?? [];
    const names = new Set([...all.flatMap(metricNames), ...variables.map((v) => v.slice('label_values('.length))]);
    // what the issue asks the dashboard to show is there (the reader did find names)
    expect(all.length).toBeGreaterThanOrEqual(15);
    for (const n of ['gateway_requests_total', 'gateway_request_duration_seconds_bucket', 'gateway_upstream_state', 'gateway_upstream_head', 'gateway_upstream_lag_blocks', 'gateway_rate_limited_total', 'gateway_quota_exceeded_total', 'gateway_inflight_requests', 'process_resident_memory_bytes', 'process_cpu_seconds_total']) {
      expect(names, n).toContain(n);
    }
    const missing = [...names].filter((n) => !exported(n, m)).sort();
    expect(missing).toEqual([]);
  });
});
