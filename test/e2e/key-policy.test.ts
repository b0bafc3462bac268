// Keys locked down (issue 21): allow lists (origins, ips, userAgents, methods,
// contracts), expiry and JWT, end to end on all three interfaces against real
// anvil and the recording stand-ins. Each refusal names its reason in the
// interface's envelope, and never reaches an upstream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPairSync, createHmac, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { newKey, rawRequest, sha256, type RawResponse, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startStandIns, THREE_CHAINS, type StandIns } from './three-chains.ts';

const AUDIENCE = 'chain-gateway-test';
const CONTRACT = '0x00000000000000000000000000000000000000aa';

const K = {
  open: newKey(),
  origin: newKey(),
  ip: newKey(),
  local: newKey(),
  ua: newKey(),
  methods: newKey(),
  contracts: newKey(),
  expired: newKey(),
  jwt: newKey(),
  both: newKey(),
};

const es = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const rs = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = (k: KeyObject): string => k.export({ type: 'spki', format: 'pem' }).toString();
const yamlPem = (k: KeyObject): string => JSON.stringify(pem(k));

let rig: Gateway<{ up: Promise<StandIns> }>;
let up: StandIns;
let gw: RunningGateway;

beforeAll(async () => {
  rig = await gateway({
    name: 'key-policy',
    chains: THREE_CHAINS,
    header: { trustedProxies: ['127.0.0.2'], jwtAudience: AUDIENCE, health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: `keys:
  - { id: open, sha256: "${sha256(K.open)}" }
  - id: origin
    sha256: "${sha256(K.origin)}"
    allow: { origins: ["https://app.acme.io", "https://*.acme.io"] }
  - id: ip
    sha256: "${sha256(K.ip)}"
    allow: { ips: ["10.0.0.0/8", "2001:db8::/32"] }
  - id: local
    sha256: "${sha256(K.local)}"
    allow: { ips: ["127.0.0.1", "127.0.0.2"] }
  - id: ua
    sha256: "${sha256(K.ua)}"
    allow: { userAgents: ["AcmeWallet/"] }
  - id: methods
    sha256: "${sha256(K.methods)}"
    allow: { methods: [eth_blockNumber, eth_chainId, network/status, block] }
  - id: contracts
    sha256: "${sha256(K.contracts)}"
    allow: { contracts: ["${CONTRACT.toUpperCase().replace('0X', '0x')}"] }
  - id: expired
    sha256: "${sha256(K.expired)}"
    expires: "2020-01-01T00:00:00Z"
  - id: jwt
    sha256: "${sha256(K.jwt)}"
    jwt:
      keys:
        - { kid: k1, alg: ES256, pem: ${yamlPem(es.publicKey)} }
        - { kid: k2, alg: RS256, pem: ${yamlPem(rs.publicKey)} }
  - id: both
    sha256: "${sha256(K.both)}"
    allow: { origins: ["https://app.acme.io"], userAgents: ["AcmeWallet/"] }
`,
    standIns: { up: startStandIns() },
  });
  ({ gw, standIns: { up } } = rig);
}, 60_000);

afterAll(() => rig?.close());

// ------------------------------------------------------------------ talking

type Placement = 'header' | 'path' | 'query';
const PLACEMENTS: Placement[] = ['header', 'path', 'query'];

interface Call {
  headers?: Record<string, string>;
  placement?: Placement;
  localAddress?: string;
}

const RPC = (method: string, params: unknown[] = [], id: unknown = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

function evm(key: string, body: string, c: Call = {}): Promise<RawResponse> {
  const p = c.placement ?? 'header';
  const path = p === 'path' ? `/ethereum/${key}` : p === 'query' ? `/ethereum?api_key=${key}` : '/ethereum';
  return rawRequest(gw.url('rpc', path), { body, headers: { ...(p === 'header' ? { 'x-api-key': key } : {}), ...c.headers }, localAddress: c.localAddress });
}

function rosettaCall(key: string, endpoint: string, c: Call = {}): Promise<RawResponse> {
  const p = c.placement === 'path' ? 'header' : (c.placement ?? 'header'); // Rosetta takes the key in the header or the query
  const path = p === 'query' ? `/cardano-preprod/${endpoint}?api_key=${key}` : `/cardano-preprod/${endpoint}`;
  const body = JSON.stringify({ network_identifier: { blockchain: 'cardano', network: 'preprod' }, ...(endpoint === 'block' ? { block_identifier: { index: 1 } } : {}) });
  return rawRequest(gw.url('rpc', path), { body, headers: { ...(p === 'header' ? { 'x-api-key': key } : {}), ...c.headers }, localAddress: c.localAddress });
}

function blockbook(key: string, rest: string, c: Call = {}): Promise<RawResponse> {
  const p = c.placement ?? 'header';
  const path = p === 'path' ? `/bitcoin/${key}/v2/${rest}` : p === 'query' ? `/bitcoin/v2/${rest}?api_key=${key}` : `/bitcoin/v2/${rest}`;
  return rawRequest(gw.url('explorer', path), { headers: { ...(p === 'header' ? { 'x-api-key': key } : {}), ...c.headers }, localAddress: c.localAddress });
}

/** Counts of requests that reached each upstream. */
const reached = () => ({ evm: up.proxy.requests.length, rosetta: up.rosetta.requests.length, bb: up.bb.requests.length });

/** Asserts a request-level refusal in each interface's envelope, and that nothing reached an upstream. */
async function refusedEverywhere(key: string, reason: string, c: Call = {}): Promise<void> {
  const before = reached();
  const status = reason === 'jwt' ? 401 : 403;
  const e = await evm(key, RPC('eth_blockNumber'), c);
  expect(e.status, `evm ${reason}`).toBe(status);
  // The JWT is checked once the body is read (admission's admit step): its refusal carries the call's id (issue 43, rule 11).
  expect(e.json()).toEqual({ jsonrpc: '2.0', id: reason === 'jwt' ? 1 : null, error: { code: -32044, message: "Request not allowed by this key's policy", data: { reason } } });
  const r = await rosettaCall(key, 'network/status', c);
  expect(r.status, `rosetta ${reason}`).toBe(500);
  expect(r.json()).toEqual({ code: 6005, message: "Request not allowed by this key's policy", retriable: false, details: { reason } });
  const b = await blockbook(key, 'block/1', c);
  expect(b.status, `blockbook ${reason}`).toBe(status);
  expect(b.json()).toEqual({ error: "Request not allowed by this key's policy", reason });
  expect(reached(), `${reason}: nothing reached an upstream`).toEqual(before);
}

async function allowedEverywhere(key: string, c: Call = {}): Promise<void> {
  expect((await evm(key, RPC('eth_blockNumber'), c)).status).toBe(200);
  expect((await rosettaCall(key, 'network/status', c)).status).toBe(200);
  expect((await blockbook(key, 'block/1', c)).status).toBe(200);
}

// ------------------------------------------------------------------ request level

describe('key policy: request-level lists, on every interface and key placement', () => {
  it('a key without a policy is served on every interface, in every key placement', async () => {
    for (const placement of PLACEMENTS) await allowedEverywhere(K.open, { placement });
  });

  it('origins: exact or *.domain; a missing Origin is refused', async () => {
    for (const placement of PLACEMENTS) {
      await allowedEverywhere(K.origin, { placement, headers: { origin: 'https://app.acme.io' } });
      await allowedEverywhere(K.origin, { placement, headers: { origin: 'https://eu.acme.io' } });
      await refusedEverywhere(K.origin, 'origin', { placement, headers: { origin: 'https://acme.io.evil.example' } });
      await refusedEverywhere(K.origin, 'origin', { placement });
    }
  });

  it('ips: the socket peer; X-Forwarded-For only from a trusted proxy', async () => {
    for (const placement of PLACEMENTS) {
      await allowedEverywhere(K.local, { placement });
      await refusedEverywhere(K.ip, 'ip', { placement });
    }
    // A client saying it is 10.1.2.3 is not believed...
    await refusedEverywhere(K.ip, 'ip', { headers: { 'x-forwarded-for': '10.1.2.3' } });
    // ...a trusted proxy (127.0.0.2) saying so is: the rightmost untrusted hop counts.
    await allowedEverywhere(K.ip, { localAddress: '127.0.0.2', headers: { 'x-forwarded-for': '203.0.113.9, 10.1.2.3' } });
    await refusedEverywhere(K.ip, 'ip', { localAddress: '127.0.0.2', headers: { 'x-forwarded-for': '10.1.2.3, 203.0.113.9' } });
    await allowedEverywhere(K.ip, { localAddress: '127.0.0.2', headers: { 'x-forwarded-for': '2001:db8::42' } });
  });

  it('userAgents: a substring; a missing User-Agent is refused', async () => {
    for (const placement of PLACEMENTS) {
      await allowedEverywhere(K.ua, { placement, headers: { 'user-agent': 'Mozilla/5.0 AcmeWallet/2.1' } });
      await refusedEverywhere(K.ua, 'user_agent', { placement, headers: { 'user-agent': 'acmewallet/2.1' } });
      await refusedEverywhere(K.ua, 'user_agent', { placement });
    }
  });

  it('lists of different types combine with AND', async () => {
    await allowedEverywhere(K.both, { headers: { origin: 'https://app.acme.io', 'user-agent': 'AcmeWallet/1' } });
    await refusedEverywhere(K.both, 'user_agent', { headers: { origin: 'https://app.acme.io', 'user-agent': 'curl/8' } });
    await refusedEverywhere(K.both, 'origin', { headers: { origin: 'https://other.io', 'user-agent': 'AcmeWallet/1' } });
  });

  it('expires: refused as expired', async () => {
    for (const placement of PLACEMENTS) await refusedEverywhere(K.expired, 'expired', { placement });
  });
});

// ------------------------------------------------------------------ JWT

async function token(o: { kid?: string; key?: KeyObject; alg?: string; exp?: number | null; nbf?: number; aud?: string | null }): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const alg = o.alg ?? 'ES256';
  let t = new SignJWT({ sub: 'acme' }).setProtectedHeader({ alg, kid: o.kid ?? 'k1' }).setIssuedAt(now);
  if (o.exp !== null) t = t.setExpirationTime(o.exp ?? now + 300);
  if (o.nbf !== undefined) t = t.setNotBefore(o.nbf);
  if (o.aud !== null) t = t.setAudience(o.aud ?? AUDIENCE);
  return t.sign(o.key ?? es.privateKey);
}

const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

describe('key policy: JWT', () => {
  const bearer = (t: string) => ({ headers: { authorization: `Bearer ${t}` } });

  it('a token signed with a listed ES256 or RS256 key is accepted, by kid, whatever the key\'s placement', async () => {
    for (const placement of PLACEMENTS) {
      await allowedEverywhere(K.jwt, { ...bearer(await token({})), placement });
      await refusedEverywhere(K.jwt, 'jwt', { placement });
    }
    await allowedEverywhere(K.jwt, bearer(await token({ kid: 'k2', alg: 'RS256', key: rs.privateKey })));
    // Within the 30 s leeway.
    await allowedEverywhere(K.jwt, bearer(await token({ exp: Math.floor(Date.now() / 1000) - 10 })));
  });

  it('missing, expired, not yet valid, without exp, wrong kid, wrong audience: refused (401, reason jwt)', async () => {
    const now = Math.floor(Date.now() / 1000);
    await refusedEverywhere(K.jwt, 'jwt');
    await refusedEverywhere(K.jwt, 'jwt', bearer(await token({ exp: now - 120 })));
    await refusedEverywhere(K.jwt, 'jwt', bearer(await token({ nbf: now + 120 })));
    await refusedEverywhere(K.jwt, 'jwt', bearer(await token({ exp: null })));
    await refusedEverywhere(K.jwt, 'jwt', bearer(await token({ kid: 'k9' })));
    await refusedEverywhere(K.jwt, 'jwt', bearer(await token({ aud: 'another-gateway' })));
    await refusedEverywhere(K.jwt, 'jwt', bearer(await token({ aud: null })));
    // The right key id with the other key's algorithm and signature.
    await refusedEverywhere(K.jwt, 'jwt', bearer(await token({ kid: 'k1', alg: 'RS256', key: rs.privateKey })));
  });

  it('alg none and HS256 signed with the public key as the secret (algorithm confusion): refused', async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { sub: 'acme', aud: AUDIENCE, exp: now + 300 };
    const none = `${b64({ alg: 'none', kid: 'k1' })}.${b64(claims)}.`;
    await refusedEverywhere(K.jwt, 'jwt', bearer(none));
    for (const [kid, pub] of [['k1', es.publicKey], ['k2', rs.publicKey]] as const) {
      const head = `${b64({ alg: 'HS256', kid })}.${b64(claims)}`;
      const sig = createHmac('sha256', pem(pub)).update(head).digest('base64url');
      await refusedEverywhere(K.jwt, 'jwt', bearer(`${head}.${sig}`));
    }
  });
});

// ------------------------------------------------------------------ call level

describe('key policy: methods and contracts, per call', () => {
  it('JSON-RPC: a method outside the key\'s list is answered in its place (HTTP 200, -32044, reason method), the rest forwarded', async () => {
    for (const placement of PLACEMENTS) {
      expect((await evm(K.methods, RPC('eth_chainId', [], 1), { placement })).json()).toMatchObject({ result: '0x1' });
      expect((await evm(K.methods, RPC('eth_gasPrice', [], 1), { placement })).json()).toMatchObject({ error: { code: -32044, data: { reason: 'method' } } });
    }
    const before = up.proxy.requests.length;
    const one = await evm(K.methods, RPC('eth_getBalance', [CONTRACT, 'latest'], 7));
    expect(one.status).toBe(200);
    expect(one.json()).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32044, message: "Request not allowed by this key's policy", data: { reason: 'method' } } });
    expect(up.proxy.requests.length).toBe(before);
    const batch = await evm(K.methods, `[${RPC('eth_blockNumber', [], 1)},${RPC('eth_gasPrice', [], 2)},${RPC('eth_chainId', [], 3)}]`);
    expect(batch.status).toBe(200);
    const answers = batch.json() as { id: number; result?: string; error?: { code: number; data: { reason: string } } }[];
    expect(answers.map((a) => a.id)).toEqual([1, 2, 3]);
    expect(answers[0]!.result).toMatch(/^0x/);
    expect(answers[1]!.error).toMatchObject({ code: -32044, data: { reason: 'method' } });
    expect(answers[2]!.result).toBe('0x1');
    // Only the two allowed calls reached the node.
    const sent = up.proxy.requests.slice(before).flatMap((r) => (Array.isArray(r.json) ? r.json : [r.json]) as { method: string }[]);
    expect(sent.map((c) => c.method).sort()).toEqual(['eth_blockNumber', 'eth_chainId']);
  });

  it('Rosetta and Blockbook: the list holds endpoint names; another endpoint is refused (reason method)', async () => {
    const before = reached();
    expect((await rosettaCall(K.methods, 'network/status')).status).toBe(200);
    expect((await rosettaCall(K.methods, 'block')).status).toBe(200);
    const r = await rosettaCall(K.methods, 'network/options');
    expect(r.status).toBe(500);
    expect(r.json()).toMatchObject({ code: 6005, details: { reason: 'method' } });
    const b = await blockbook(K.methods, 'block/1');
    expect(b.status).toBe(200);
    const t = await blockbook(K.methods, `tx/${up.bb.txids(1)[0]}`);
    expect(t.status).toBe(403);
    expect(t.json()).toEqual({ error: "Request not allowed by this key's policy", reason: 'method' });
    const after = reached();
    expect(after.rosetta - before.rosetta).toBe(2);
    expect(after.bb - before.bb).toBe(1);
  });

  it('contracts: eth_call to a listed contract (any case) passes, another or none is refused (reason contract), and what was checked is what the node gets', async () => {
    const before = up.proxy.requests.length;
    const ok = await evm(K.contracts, RPC('eth_call', [{ to: CONTRACT, data: '0x' }, 'latest'], 1));
    expect(ok.json()).toMatchObject({ id: 1, result: '0x' });
    for (const tx of [{ to: '0x' + 'bb'.repeat(20), data: '0x' }, { data: '0x00' }]) {
      const no = await evm(K.contracts, RPC('eth_call', [tx, 'latest'], 2));
      expect(no.status).toBe(200);
      expect(no.json()).toMatchObject({ id: 2, error: { code: -32044, data: { reason: 'contract' } } });
    }
    expect((await evm(K.contracts, RPC('eth_getBalance', ['0x' + 'cc'.repeat(20), 'latest'], 3))).json()).toMatchObject({ error: { data: { reason: 'contract' } } });
    expect((await evm(K.contracts, RPC('eth_blockNumber', [], 4))).json()).toMatchObject({ result: expect.stringMatching(/^0x/) });
    // Duplicate keys: whatever a node's parser would take, the node gets the canonical call that was checked.
    const tricky = `{"jsonrpc":"2.0","id":5,"method":"eth_call","params":[{"to":"0x${'bb'.repeat(20)}"},"latest"],"params":[{"to":"${CONTRACT}"},"latest"]}`;
    await evm(K.contracts, tricky);
    // Another spelling of "to", which geth would also read: refused.
    const cased = await evm(K.contracts, `{"jsonrpc":"2.0","id":6,"method":"eth_call","params":[{"to":"${CONTRACT}","TO":"0x${'bb'.repeat(20)}"},"latest"]}`);
    expect(cased.json()).toMatchObject({ id: 6, error: { code: -32044, data: { reason: 'contract' } } });
    const got = up.proxy.requests.slice(before).map((r) => r.body.toString('utf8'));
    expect(got.every((b) => !b.includes('bb'.repeat(20)))).toBe(true);
    expect(got).toHaveLength(3);
  });
});
