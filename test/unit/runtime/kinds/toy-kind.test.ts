// A fourth interface is one new folder (issue 45): a toy JSON-RPC kind that
// lives only in the test tree (test/support/toy-kind.ts), written against the
// module contract alone (runtime/kinds/interface.ts), is served by the real
// server (runtime/server.ts's Gateway, from a hand-made spec): over HTTP on
// 127.0.0.1, through its key's admission at the top of the chain (credits,
// rate limit, usage), its cache's front, its own layer, its cache's layer,
// its pool of two upstreams and Forward, to toy nodes; and the metrics and
// the status page name it by its kind with nothing added for it. The only
// thing the test does that a real kind would not is put its module into the
// kinds table at run time: a real one is a line there, which the compiler
// asks for.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Gateway } from '../../../../runtime/server.ts';
import { INTERFACES } from '../../../../runtime/kinds/index.ts';
import { NO_VALIDATORS } from '../../../../runtime/config/validators.ts';
import type { GatewaySpec, RouteSpec, Template, UpstreamSpec } from '../../../../runtime/types.ts';
import { chainSettings, interfaceKinds, settingValue, upstreamSettings } from '../../../../generator/chain-types.ts';
import { DEFAULT_LIMITS } from '../../../../generator/normalize.ts';
import { keysYaml, newKey } from '../../../e2e/harness.ts';
import { seriesValue } from '../../../support/metrics-text.ts';
import { startToyNode, toy, TOY, type ToyNode } from '../../../support/toy-kind.ts';

const text = (s: string): Template => ({ parts: [s] });

/** Settings as the build fills them from the schema's defaults (generator/chain-types.ts): the toy gets those every kind has. */
function defaults(fields: readonly { name: string }[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const v = settingValue(f as Parameters<typeof settingValue>[0], undefined);
    if (v !== undefined) out[f.name] = v;
  }
  return out;
}
const shared = chainSettings(interfaceKinds()[0]!).filter((f) => interfaceKinds().every((k) => chainSettings(k).some((g) => g.name === f.name)));

function toyRoute(nodes: readonly ToyNode[]): RouteSpec {
  const upstreams: UpstreamSpec[] = nodes.map((n, i) => ({ ...(defaults(upstreamSettings()) as object), name: `${TOY}#${i}`, url: text(n.url), headers: {} }) as UpstreamSpec);
  // A kind the schema does not know: the one cast, of a route every field of which the kind-neutral code reads.
  return { ...defaults(shared), interface: TOY, path: TOY, listener: 'rpc', source: 'chains[0]', limits: DEFAULT_LIMITS, validate: false, upstreams, cache: true } as unknown as RouteSpec;
}

const logLevel = process.env.LOG_LEVEL;
const KEY = newKey();
const LIMITED = newKey();
let a: ToyNode;
let b: ToyNode;
let gw: Gateway;
let dir: string;
let rpc: string;
let admin: string;

beforeAll(async () => {
  // A real kind is its line in the table; the toy's is put there for this file alone (vitest runs each file in its own module graph).
  (INTERFACES as unknown as Record<string, unknown>)[TOY] = toy;
  // Node a is at block 100, node b at 103: both within maxLag (5), so both take calls.
  a = await startToyNode('a', 100);
  b = await startToyNode('b', 103);
  dir = mkdtempSync(join(tmpdir(), 'toy-kind-'));
  const keysFile = join(dir, 'keys.yaml');
  writeFileSync(
    keysFile,
    keysYaml([
      { id: 'toy-key', key: KEY },
      { id: 'toy-limited', key: LIMITED, rateLimit: '5/min' },
    ]),
  );
  const spec: GatewaySpec = {
    source: 'toy-kind.test.ts',
    manifestSha256: '',
    keysFile: text(keysFile),
    listeners: [{ name: 'rpc', host: text('127.0.0.1'), port: text('0'), routes: new Map([[TOY, toyRoute([a, b])]]) }],
    corsOrigins: [],
    admin: { host: text('127.0.0.1'), port: text('0') },
    health: { intervalMs: 1000, timeoutMs: 5000 },
    rateLimit: null,
    drainTimeoutMs: 2000,
    cache: { maxBytes: 1 << 20, headPollMs: 200, batch: 1, redis: false },
    validators: NO_VALIDATORS,
    // What credits may name is the module's (creditNames): a toy method.
    credits: { toy_echo: 3 },
  };
  // The server logs to stdout: only what goes wrong, for this file.
  process.env.LOG_LEVEL = 'warn';
  gw = new Gateway(spec);
  if (logLevel === undefined) delete process.env.LOG_LEVEL;
  else process.env.LOG_LEVEL = logLevel;
  // Resolves after the first poll of both nodes (the toy's probe), with every listener bound.
  const listening = await gw.start();
  const port = (name: string) => listening.find((l) => (l.spec?.name ?? 'admin') === name)!.port;
  rpc = `http://127.0.0.1:${port('rpc')}/${TOY}`;
  admin = `http://127.0.0.1:${port('admin')}`;
}, 30_000);

afterAll(async () => {
  await gw?.shutdown('test');
  await a?.close();
  await b?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  delete (INTERFACES as unknown as Record<string, unknown>)[TOY];
});

let id = 0;
async function call(method: string, params: unknown[], key: string | null = KEY): Promise<{ status: number; cache: string | null; body: Record<string, any> }> {
  const res = await fetch(rpc, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { 'x-api-key': key }) },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
  });
  return { status: res.status, cache: res.headers.get('x-cache'), body: (await res.json()) as Record<string, any> };
}

describe('a fourth kind, from its module alone', () => {
  it("serves a call of a key through the chain's layers to a node (its own layer over its cache's layer), and refuses a call without a key or of no toy method in its own envelope", async () => {
    const ok = await call('toy_echo', ['hello', 1]);
    expect(ok).toMatchObject({ status: 200, body: { jsonrpc: '2.0', id, result: ['hello', 1] } });
    expect([...a.calls, ...b.calls]).toContainEqual({ method: 'toy_echo', params: ['hello', 1], layers: 'own, cache' });

    const none = await call('toy_echo', ['x'], null);
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'GW_AUTH_KEY_MISSING' } });
    const unknown = await call('eth_blockNumber', []);
    expect(unknown.body).toEqual({ jsonrpc: '2.0', id, error: { code: -32601, message: 'GW_TOY_METHOD_NOT_FOUND' } });
  });

  it("its pool of two sends a call that names a block only to the upstream that has it (the guard's call, the pool core's routing)", async () => {
    const before = a.calls.length;
    for (let i = 0; i < 8; i++) {
      const r = await call('toy_getBlock', [102]);
      expect(r).toMatchObject({ status: 200, body: { result: { number: 102, node: 'b' } } });
    }
    expect(a.calls.slice(before).filter((c) => c.method === 'toy_getBlock')).toEqual([]);
  });

  it("its cache's front answers a repeated call from memory, and its node is asked once", async () => {
    const body = { jsonrpc: '2.0', id: 'v', method: 'toy_version', params: [] };
    const send = () => fetch(rpc, { method: 'POST', headers: { 'x-api-key': KEY }, body: JSON.stringify(body) });
    const first = await send();
    const firstBody = await first.text();
    expect(first.headers.get('x-cache')).toBe('MISS');
    const second = await send();
    expect(second.headers.get('x-cache')).toBe('HIT');
    expect(await second.text()).toBe(firstBody);
    expect([...a.calls, ...b.calls].filter((c) => c.method === 'toy_version')).toHaveLength(1);
  });

  it('admission at the top charges its methods by their credits and refuses past the rate limit in its envelope', async () => {
    // 5 credits a minute: a toy_echo costs 3, so the second is refused before any node sees it.
    const seen = a.calls.length + b.calls.length;
    expect((await call('toy_echo', ['one'], LIMITED)).status).toBe(200);
    const refused = await call('toy_echo', ['two'], LIMITED);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32005, message: 'GW_TOY_RATE_LIMITED' } });
    expect(a.calls.length + b.calls.length).toBe(seen + 1);
    // A toy_head costs 1: still within the 2 credits left.
    expect((await call('toy_head', [], LIMITED)).status).toBe(200);
  });

  it('the metrics and the status page name it by its kind, its methods and its pool, with nothing added for it', async () => {
    const metrics = await (await fetch(`${admin}/metrics`)).text();
    expect(seriesValue(metrics, 'gateway_requests_total', { chain: TOY, interface: TOY, method: 'toy_echo', status: '200' })).toBeGreaterThanOrEqual(2);
    expect(seriesValue(metrics, 'gateway_requests_total', { chain: TOY, interface: TOY, method: 'toy_echo', status: '429' })).toBe(1);
    expect(seriesValue(metrics, 'gateway_cache_hits_total', { chain: TOY })).toBeGreaterThanOrEqual(1);
    // The pool's served tip, from the toy's probe (100 while both nodes are usable; a poll lost under load leaves 103).
    expect([100, 103]).toContain(seriesValue(metrics, 'gateway_pool_served_tip', { chain: TOY }));
    const status = (await (await fetch(`${admin}/status.json`)).json()) as { chains: { path: string; interface: string; state: string; upstreams: unknown[]; pool: unknown }[] };
    const chain = status.chains.find((c) => c.path === TOY)!;
    expect(chain).toMatchObject({ interface: TOY, state: 'up' });
    expect(chain.upstreams).toHaveLength(2);
    expect(chain.pool).not.toBeNull();
  });
});
