// Property-based tests (fast-check): random and hostile paths, headers,
// queries and bodies against the running gateway. Every answer must be
// well-formed in the envelope of the interface the path names, with a
// documented status; no answer may hold the key; the process stays up; and
// nothing reaches an upstream that should not.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { newKey, rawRequest, EVM_METHODS, type RawResponse } from './harness.ts';
import { startThreeChains, type ThreeChains } from './three-chains.ts';
import { ROSETTA_ENDPOINTS } from '../../runtime/kinds/rosetta/guard.ts';

const KEY = newKey();
const RUNS = 2000;
let rig: ThreeChains;
let proxy: ThreeChains['proxy'];
let bb: ThreeChains['bb'];
let rosetta: ThreeChains['rosetta'];
let gw: ThreeChains['gw'];

beforeAll(async () => {
  rig = await startThreeChains('property', KEY);
  ({ proxy, bb, rosetta, gw } = rig);
}, 60_000);

afterAll(async () => {
  await rig?.stop();
});

// ---------------------------------------------------------------- generators

const hostileSegment = fc.constantFrom('..', '.', '%2e%2e', '%2E%2e', '%2F', 'a%2Fb', '%5C', '', '%00', 'v2', 'v1', '%76%32', 'block', 'tx', 'address', 'sendtx', 'network', 'status', '%ff', '~', 'é', '%C3%A9', ';', 'a;b=c');
const segment = fc.oneof(hostileSegment, fc.stringMatching(/^[A-Za-z0-9._~-]{0,12}$/), fc.integer({ min: 0, max: 2000 }).map(String));
const chainSegment = fc.constantFrom('ethereum', 'bitcoin', 'cardano-preprod', '%65thereum', 'ETHEREUM', 'bitcoin%2F..', 'nochain', '', 'healthz', 'readyz');
const keyPlacement = fc.constantFrom('header', 'path', 'query', 'none', 'wrong-header', 'wrong-query', 'both');
const queryPart = fc.oneof(
  fc.constantFrom('pageSize=10', 'pageSize=0', 'pageSize=-1', 'pageSize=1e3', 'page=2', 'page=abc', 'api%5Fkey=x', 'a=%zz', '=', '&&', 'details=txs'),
  fc.tuple(fc.stringMatching(/^[a-z_]{1,8}$/), fc.stringMatching(/^[A-Za-z0-9%]{0,10}$/)).map(([k, v]) => `${k}=${v}`),
);

interface Shape {
  chain: string;
  segs: string[];
  placement: string;
  query: string[];
}
// Paths the stand-ins serve, mixed in so that a good share of runs is
// forwarded and the checks on what reached an upstream have something to see.
const servedSegs = fc.constantFrom<string[]>(['v2', 'block', '1'], ['v2', 'block', '2'], ['v2', 'tx', 'ab'.repeat(32)], ['v2', 'address', 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq'], ['v2'], ['v2', 'status']);
const shape: fc.Arbitrary<Shape> = fc.record({
  chain: fc.oneof({ arbitrary: fc.constantFrom('ethereum', 'bitcoin', 'cardano-preprod'), weight: 2 }, { arbitrary: chainSegment, weight: 1 }),
  segs: fc.oneof(fc.array(segment, { maxLength: 5 }), servedSegs),
  placement: keyPlacement,
  // Many runs have no query parameters, so that a good share of served paths has nothing to refuse.
  query: fc.oneof({ arbitrary: fc.constant([] as string[]), weight: 3 }, { arbitrary: fc.array(queryPart, { maxLength: 4 }), weight: 2 }),
});

function build(s: Shape): { path: string; headers: Record<string, string> } {
  const segs = [...s.segs];
  const query = [...s.query];
  const headers: Record<string, string> = {};
  if (s.placement === 'header' || s.placement === 'both') headers['x-api-key'] = KEY;
  if (s.placement === 'wrong-header') headers['x-api-key'] = 'not-the-key-0123456789';
  if (s.placement === 'path' || s.placement === 'both') segs.unshift(KEY);
  if (s.placement === 'query') query.push(`api_key=${KEY}`);
  if (s.placement === 'wrong-query') query.push('api_key=not-the-key-0123456789');
  const path = `/${[s.chain, ...segs].join('/')}${query.length ? `?${query.join('&')}` : ''}`;
  return { path, headers };
}

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
const rpcBody = fc.oneof(
  fc.record({
    method: fc.oneof(fc.constantFrom(...EVM_METHODS), fc.constantFrom('eth_accounts', 'admin_peers', 'debug_traceTransaction', '', 'ETH_CHAINID', 'eth_chainId ')),
    id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null), fc.constant(undefined), fc.constant({})),
    params: fc.oneof(fc.constant([]), fc.constant(''), fc.constant(undefined), fc.constant(null), fc.constant(7), fc.constant({})),
  }).map((r) => JSON.stringify({ jsonrpc: '2.0', ...r })),
  fc.constantFrom(
    '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"admin_peers"}',
    '{"jsonrpc":"2.0","id":1,"method":"admin_peers","method":"eth_chainId"}',
    '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","METHOD":"admin_peers"}',
    '{"jsonrpc":"2.0","id":1,"m\\u0065thod":"admin_peers","method":"eth_chainId"}',
    '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"eth_chainId"}',
    '{"jsonrpc":"2.0","id":1e400,"method":"eth_chainId"}',
    `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":${deep(2000)}}`,
    deep(5000),
    '[]',
    '[1,2,3]',
    '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","__proto__":{"method":"admin_peers"}}',
    `[${Array.from({ length: 25 }, (_, i) => `{"jsonrpc":"2.0","id":${i},"method":"eth_chainId"}`).join(',')}]`,
  ),
  fc.array(fc.record({ jsonrpc: fc.constant('2.0'), id: fc.integer(), method: fc.constantFrom('eth_chainId', 'eth_accounts', 'net_version', 'admin_peers') }), { minLength: 1, maxLength: 6 }).map((a) => JSON.stringify(a)),
  fc.string({ maxLength: 40 }),
);
const rosettaBody = fc.oneof(
  fc.constant('{"network_identifier":{"blockchain":"cardano","network":"preprod"},"metadata":{}}'),
  fc.record({
    blockchain: fc.constantFrom('cardano', 'bitcoin', 'Cardano', ''),
    network: fc.constantFrom('preprod', 'mainnet', 'preview', KEY, ''),
  }).map((n) => JSON.stringify({ network_identifier: n, metadata: {} })),
  fc.constantFrom(
    '{"network_identifier":{"blockchain":"cardano","network":"mainnet","network":"preprod"}}',
    '{"network_identifier":{"blockchain":"cardano","network":"preprod"},"network_identifier":{"blockchain":"cardano","network":"mainnet"}}',
    '{"network_identifier":null}',
    '[]',
    '{}',
    deep(3000),
  ),
  fc.string({ maxLength: 40 }),
);
const bytes = fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b));

// ----------------------------------------------------------------- checks

const RPC_STATUSES = [200, 204, 400, 401, 403, 404, 405, 413, 502, 503, 504];
const BB_STATUSES = [200, 400, 401, 403, 404, 405, 413, 502, 503, 504];

function checkEnvelope(chain: string, r: RawResponse): void {
  expect(r.text).not.toContain(KEY);
  if (r.status === 204) {
    expect(r.text).toBe('');
    return;
  }
  expect(String(r.headers['content-type'])).toContain('application/json');
  const body = r.json() as unknown;
  if (chain === 'ethereum') {
    expect(RPC_STATUSES).toContain(r.status);
    const one = (x: unknown) => {
      const o = x as { jsonrpc?: string; result?: unknown; error?: { code: number; message: string } };
      expect(o.jsonrpc).toBe('2.0');
      expect('result' in o || (Number.isInteger(o.error?.code) && typeof o.error?.message === 'string')).toBe(true);
    };
    if (Array.isArray(body)) body.forEach(one);
    else one(body);
  } else if (chain === 'cardano-preprod') {
    expect([200, 500]).toContain(r.status);
    if (r.status === 500) {
      const e = body as { code: unknown; message: unknown; retriable: unknown };
      expect(Number.isInteger(e.code) && typeof e.message === 'string' && typeof e.retriable === 'boolean').toBe(true);
    }
  } else if (chain === 'bitcoin') {
    expect(BB_STATUSES).toContain(r.status);
    if (r.status !== 200) expect(typeof (body as { error?: unknown }).error).toBe('string');
  } else {
    // Not a chain on this listener (or an own route): 404 with JSON, or health.
    expect([200, 400, 404, 405, 503]).toContain(r.status);
  }
}

/** A JSON-RPC answer (or a batch answer with a member) carrying a result: only the node makes those here. */
const hasResult = (body: unknown): boolean =>
  Array.isArray(body) ? body.some(hasResult) : typeof body === 'object' && body !== null && 'result' in body;


/**
 * Every answer the gateway gave with status 200 for a served chain came from
 * an upstream (no cache in this manifest), so the upstreams saw at least that
 * many requests; and a good share of runs must be forwarded at all, or the
 * checks on what arrived prove nothing. The floors sit some four standard
 * deviations under what the generators give (paths and Rosetta bodies: 16-51
 * of 2,000 across seeds; JSON-RPC bodies 150-190), so that any FC_SEED passes.
 */
function checkForwarded(label: string, before: number, ok: number, floor: number): void {
  const forwarded = rig.arrivals() - before;
  console.log(`property ${label}: ${ok} answers 200 from a served chain, ${forwarded} requests reached an upstream (floor ${floor})`);
  expect(ok).toBeGreaterThanOrEqual(floor);
  expect(forwarded).toBeGreaterThanOrEqual(ok);
}

function checkUpstreams(): void {
  for (const r of proxy.requests) {
    expect(JSON.stringify(r.headers) + r.path + r.query).not.toContain(KEY);
    expect(r.body.toString('latin1')).not.toContain(KEY);
    const items = Array.isArray(r.json) ? r.json : [r.json];
    for (const it of items) expect(EVM_METHODS as readonly string[]).toContain((it as { method: string }).method);
    // One method key per call: nothing the node could read as another method.
    expect((r.body.toString('utf8').match(/"method"/gi) ?? []).length).toBe(items.length);
  }
  for (const r of bb.requests) {
    expect(JSON.stringify(r.headers) + r.path + r.query).not.toContain(KEY);
    expect(r.path.startsWith('/api/v2/')).toBe(true);
    const decoded = decodeURIComponent(r.path);
    expect(decoded.split('/')).not.toContain('..');
    expect(decoded.split('/')).not.toContain('.');
  }
  for (const r of rosetta.requests) {
    expect(JSON.stringify(r.headers) + r.path + r.query).not.toContain(KEY);
    expect(ROSETTA_ENDPOINTS.has(r.path.slice(1))).toBe(true);
    const ni = (r.json as { network_identifier?: { network: string; blockchain: string } }).network_identifier;
    if (ni) expect(ni).toEqual({ blockchain: 'cardano', network: 'preprod' });
  }
}

async function stillAlive(): Promise<void> {
  expect(gw.proc.exitCode).toBeNull();
  const h = await rawRequest(gw.url('rpc', '/healthz'));
  expect(h.status).toBe(200);
}

describe('property: hostile requests', () => {
  it(`paths, key placements and queries (${RUNS} runs per listener)`, { timeout: 180_000 }, async () => {
    const before = rig.arrivals();
    let ok = 0;
    let heads = 0;
    for (const listener of ['rpc', 'explorer'] as const) {
      await fc.assert(
        fc.asyncProperty(shape, fc.oneof({ arbitrary: fc.constantFrom('GET', 'POST'), weight: 2 }, { arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'HEAD'), weight: 1 }), async (s, method) => {
          const { path, headers } = build(s);
          const body = method === 'POST' ? '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' : undefined;
          const r = await rawRequest(gw.url(listener, '/'), { method, path, headers, body });
          const served = listener === 'rpc' ? ['ethereum', 'cardano-preprod'] : ['bitcoin'];
          const chain = served.includes(s.chain) ? s.chain : 'other';
          if (r.status === 200 && chain !== 'other' && method !== 'OPTIONS') ok++;
          if (method === 'HEAD') {
            // No body may come back; the status is one the listener documents,
            // and the key appears in no header.
            heads++;
            expect(r.text).toBe('');
            expect(JSON.stringify(r.headers)).not.toContain(KEY);
            const statuses = chain === 'ethereum' ? RPC_STATUSES : chain === 'bitcoin' ? BB_STATUSES : chain === 'cardano-preprod' ? [200, 500] : [200, 400, 404, 405, 503];
            expect(statuses).toContain(r.status);
            return;
          }
          // Preflight is answered with 204 on every chain route (a malformed URL aside).
          if (method === 'OPTIONS' && chain !== 'other' && r.status === 204) return;
          checkEnvelope(chain, r);
        }),
        { numRuns: RUNS },
      );
    }
    expect(heads).toBeGreaterThan(0);
    checkForwarded('paths', before, ok, RUNS / 200);
    checkUpstreams();
    await stillAlive();
  });

  it(`JSON-RPC bodies: duplicate keys, deep nesting, huge numbers, invalid UTF-8 (${RUNS} runs)`, { timeout: 180_000 }, async () => {
    const before = rig.arrivals();
    let ok = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(rpcBody.map((b) => Buffer.from(b)), bytes), keyPlacement, async (body, placement) => {
        const { path, headers } = build({ chain: 'ethereum', segs: [], placement, query: [] });
        const r = await rawRequest(gw.url('rpc', '/'), { method: 'POST', path, headers, body });
        if (r.status === 200 && hasResult(r.json())) ok++;
        checkEnvelope('ethereum', r);
      }),
      { numRuns: RUNS },
    );
    checkForwarded('JSON-RPC bodies', before, ok, RUNS / 20);
    checkUpstreams();
    await stillAlive();
  });

  it(`Rosetta bodies and endpoints (${RUNS} runs)`, { timeout: 180_000 }, async () => {
    const before = rig.arrivals();
    let ok = 0;
    const endpoint = fc.oneof({ arbitrary: fc.constantFrom(...ROSETTA_ENDPOINTS.keys()), weight: 3 }, fc.constantFrom('network/../block', 'network%2Fstatus', 'nope', ''));
    await fc.assert(
      fc.asyncProperty(fc.oneof(rosettaBody.map((b) => Buffer.from(b)), bytes), endpoint, fc.constantFrom('header', 'query', 'none', 'wrong-header'), async (body, ep, placement) => {
        const headers: Record<string, string> = {};
        let path = `/cardano-preprod/${ep}`;
        if (placement === 'header') headers['x-api-key'] = KEY;
        if (placement === 'wrong-header') headers['x-api-key'] = 'not-the-key-0123456789';
        if (placement === 'query') path += `?api_key=${KEY}`;
        const r = await rawRequest(gw.url('rpc', '/'), { method: 'POST', path, headers, body });
        if (r.status === 200) ok++;
        checkEnvelope('cardano-preprod', r);
      }),
      { numRuns: RUNS },
    );
    checkForwarded('Rosetta bodies', before, ok, RUNS / 200);
    checkUpstreams();
    await stillAlive();
  });
});
