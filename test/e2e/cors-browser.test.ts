// CORS in a real browser (issue 32): a page served from another origin calls
// the gateway with fetch() in Debian's chromium (driven by playwright-core),
// with a key in X-API-Key, and with a key plus a bearer JWT (a key with `jwt`
// keys: the browser sends Authorization only if the preflight grants it). The
// page's script must be able to read the answer, X-RateLimit-* (the keys have
// a rate limit) and X-Cache (the chains have a cache). A page from an origin
// cors.origins does not list gets no grant: its fetch fails and its request
// never reaches the gateway's chain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPairSync } from 'node:crypto';
import type { Server } from 'node:http';
import { chromium, type Browser, type Page } from 'playwright-core';
import { SignJWT } from 'jose';
import { newKey, rawRequest, sha256, until, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startBlockbookStub, type BlockbookStub } from '../support/blockbook-stub.ts';
import { createSafeServer, listen } from '../support/http.ts';

const CHROMIUM = '/usr/bin/chromium';
const AUDIENCE = 'chain-gateway-cors';
const PLAIN = newKey();
const JWT = newKey();
const es = generateKeyPairSync('ec', { namedCurve: 'P-256' });

/**
 * The page: its script calls the gateway and returns what it could read
 * (a header not exposed reads as null), or the error fetch() threw.
 */
const PAGE = `<!doctype html><html><head><title>dapp</title><script>
window.callGateway = async (url, init) => {
  try {
    const r = await fetch(url, init);
    const read = (n) => r.headers.get(n);
    return {
      status: r.status,
      body: await r.text(),
      headers: {
        'x-ratelimit-limit': read('x-ratelimit-limit'),
        'x-ratelimit-remaining': read('x-ratelimit-remaining'),
        'x-ratelimit-reset': read('x-ratelimit-reset'),
        'x-cache': read('x-cache'),
        'x-request-id': read('x-request-id'),
      },
    };
  } catch (err) {
    return { failed: String(err) };
  }
};
</script></head><body>dapp</body></html>`;

interface PageAnswer {
  status?: number;
  body?: string;
  headers?: Record<string, string | null>;
  failed?: string;
}

let anvil: Anvil;
let bb: BlockbookStub;
let rig: Gateway;
let gw: RunningGateway;
let browser: Browser;
/** The dapp's server (its origin is in cors.origins) and another one (not listed). */
let dapp: Server;
let other: Server;
let dappPage: Page;
let otherPage: Page;

function pageServer(): Server {
  return createSafeServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
  });
}

beforeAll(async () => {
  dapp = pageServer();
  other = pageServer();
  const [dappUrl, otherUrl] = await Promise.all([listen(dapp), listen(other)]);
  [anvil, bb, browser] = await Promise.all([startAnvil({ chainId: 1 }), startBlockbookStub(), chromium.launch({ executablePath: CHROMIUM })]);
  rig = await gateway({
    name: 'cors-browser',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, methods: ['eth_chainId', 'eth_blockNumber', 'eth_getBlockByNumber'], upstreams: ['${ETH_URL}'] },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', upstreams: ['${BB_URL}'] },
    ],
    header: { admin: null, jwtAudience: AUDIENCE, cors: { origins: [dappUrl] }, cache: { maxBytes: 8388608, headPollMs: 200 }, health: { intervalMs: 60000, timeoutMs: 1000 }, methodSets: null },
    keys: `keys:
  - { id: plain, sha256: "${sha256(PLAIN)}", rateLimit: 1000/min }
  - id: jwt
    sha256: "${sha256(JWT)}"
    rateLimit: 500/min
    jwt:
      keys:
        - { kid: k1, alg: ES256, pem: ${JSON.stringify(es.publicKey.export({ type: 'spki', format: 'pem' }).toString())} }
`,
    standIns: { ETH_URL: anvil, BB_URL: bb, dapp, other },
  });
  gw = rig.gw;
  await until(async () => (await rawRequest(gw.url('rpc', '/readyz'))).status === 200, 'both chains ready');
  [dappPage, otherPage] = await Promise.all([browser.newPage(), browser.newPage()]);
  await Promise.all([dappPage.goto(`${dappUrl}/`), otherPage.goto(`${otherUrl}/`)]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await rig?.close();
});

/** fetch() run by the page's own script. */
function callFrom(page: Page, url: string, init: { method?: string; headers?: Record<string, string>; body?: string }): Promise<PageAnswer> {
  return page.evaluate(([u, i]) => (window as unknown as { callGateway(u: string, i: unknown): Promise<PageAnswer> }).callGateway(u, i), [url, init] as const);
}

const rpcCall = (method: string, params: unknown[] = []) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });

function token(): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ sub: 'dapp' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuedAt(now).setExpirationTime(now + 300).setAudience(AUDIENCE).sign(es.privateKey);
}

/** What every answer to a listed origin lets the script read: the key's limits and the cache's word. */
function expectReadable(a: PageAnswer, limit: string): void {
  expect(a.failed, 'fetch failed in the browser').toBeUndefined();
  expect(a.headers!['x-ratelimit-limit']).toBe(limit);
  expect(Number(a.headers!['x-ratelimit-remaining'])).toBeLessThan(Number(limit));
  expect(a.headers!['x-ratelimit-reset']).toMatch(/^\d+$/);
  expect(a.headers!['x-cache']).toMatch(/^(HIT|MISS|BYPASS)$/);
}

describe('CORS in chromium: a dapp on another origin calls the gateway (issue 32)', () => {
  it('a key in X-API-Key: the script reads the answer, X-RateLimit-* and X-Cache', async () => {
    const a = await callFrom(dappPage, gw.url('rpc', '/ethereum'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': PLAIN, 'x-request-id': 'dapp-plain-1' },
      body: rpcCall('eth_chainId'),
    });
    expectReadable(a, '1000');
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body!)).toEqual({ jsonrpc: '2.0', id: 1, result: '0x1' });
    expect(a.headers!['x-request-id']).toBe('dapp-plain-1');
  });

  it('a key plus a bearer JWT (Authorization): granted by the preflight, verified, answered', async () => {
    const headers = { 'content-type': 'application/json', 'x-api-key': JWT, authorization: `Bearer ${await token()}` };
    const first = await callFrom(dappPage, gw.url('rpc', '/ethereum'), { method: 'POST', headers, body: rpcCall('eth_getBlockByNumber', ['0x0', false]) });
    expectReadable(first, '500');
    expect(first.status).toBe(200);
    const block = JSON.parse(first.body!) as { result: { number: string; hash: string } };
    expect(block.result.number).toBe('0x0');
    const again = await callFrom(dappPage, gw.url('rpc', '/ethereum'), { method: 'POST', headers, body: rpcCall('eth_getBlockByNumber', ['0x0', false]) });
    expectReadable(again, '500');
    expect(JSON.parse(again.body!)).toEqual(JSON.parse(first.body!));
    // The JWT really is checked: without it the same key is refused (401), and the script reads that too.
    const refused = await callFrom(dappPage, gw.url('rpc', '/ethereum'), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': JWT }, body: rpcCall('eth_chainId') });
    expect(refused.failed).toBeUndefined();
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body!).error.data.reason).toBe('jwt');
  });

  it('Blockbook with a key, a JWT and a cache-buster (`_=`, as jQuery adds): the stand-in gets the parameter, the script reads the answer', async () => {
    bb.clear();
    const url = gw.url('explorer', `/bitcoin/v2/block-index/1?_=${Date.now()}`);
    const a = await callFrom(dappPage, url, { headers: { 'x-api-key': JWT, authorization: `Bearer ${await token()}` } });
    expectReadable(a, '500');
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body!)).toEqual({ blockHash: bb.blockHash(1) });
    expect(bb.requests.map((r) => r.params.map(([k]) => k))).toEqual([['_']]);
  });

  it('an origin cors.origins does not list: no grant, the fetch fails in the browser, nothing reaches the chain', async () => {
    const before = (await rawRequest(gw.url('rpc', '/ethereum'), { method: 'OPTIONS', headers: { origin: 'http://127.0.0.1:1', 'access-control-request-method': 'POST' } })).headers;
    expect(before['access-control-allow-origin']).toBeUndefined();
    expect(before['access-control-allow-headers']).toBeUndefined();
    const headers = { 'content-type': 'application/json', 'x-api-key': JWT, authorization: `Bearer ${await token()}`, 'x-request-id': 'other-origin-1' };
    const a = await callFrom(otherPage, gw.url('rpc', '/ethereum'), { method: 'POST', headers, body: rpcCall('eth_chainId') });
    expect(a.failed).toMatch(/TypeError: Failed to fetch/);
    // A later request's log line is written after the refused one's would have been: none.
    await callFrom(dappPage, gw.url('rpc', '/ethereum'), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': PLAIN, 'x-request-id': 'dapp-after' }, body: rpcCall('eth_chainId') });
    await gw.waitForLog((e) => e.reqId === 'dapp-after');
    expect(gw.lines.filter((l) => l.includes('other-origin-1'))).toEqual([]);
  });
});
