// Issue 43, rule 14, at scale: a socket is admitted again at every ping
// interval, but its JWT (which cannot change on a socket) is verified once,
// at the upgrade, and then only when the key it verified against changes;
// each recheck checks its exp against the clock. A real Connection, its
// socket and its server stand-ins; jose's jwtVerify counted.
import { EventEmitter } from 'node:events';
import { generateKeyPairSync } from 'node:crypto';
import type { Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as jose from 'jose';
import { Connection, type SocketChain, type SocketHost } from '../../../../runtime/ws/connection.ts';
import { verifyBearer } from '../../../../runtime/keys/jwt.ts';
import { parseKeysFile, type KeyEntry } from '../../../../runtime/keys/keys.ts';
import type { WebSocket } from 'ws';

vi.mock('jose', async (original) => {
  const m = await original<typeof import('jose')>();
  return { ...m, jwtVerify: vi.fn(m.jwtVerify) };
});
const verifications = (): number => vi.mocked(jose.jwtVerify).mock.calls.length;

const AUDIENCE = 'chain-gateway-test';
const signer = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const pemOf = (k: typeof signer) => JSON.stringify(k.publicKey.export({ type: 'spki', format: 'pem' }).toString());

/** The key's entry, as a keys file load (or a reload: new objects every time) makes it, with `kid` k1 on `pair`'s public key. */
const entryOf = (pair = signer): KeyEntry =>
  parseKeysFile(`keys:\n  - id: signed\n    sha256: "${'ab'.repeat(32)}"\n    jwt:\n      keys:\n        - { kid: k1, alg: ES256, pem: ${pemOf(pair)} }\n`, 'keys.yaml')[0]!;

const tokenFor = (exp: number) =>
  new jose.SignJWT({ sub: 'dapp' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setExpirationTime(exp).setAudience(AUDIENCE).sign(signer.privateKey);

/** A `ws` socket as Connection uses it: it records the close. */
class FakeWs extends EventEmitter {
  closedWith: { code: number; reason: string } | null = null;
  readonly bufferedAmount = 0;
  readonly isPaused = false;
  close(code: number, reason: string): void {
    this.closedWith ??= { code, reason };
  }
  terminate(): void {}
  ping(): void {}
}

/** The entry identify answers with (the keys as now loaded). */
let current: KeyEntry;
const host = {
  admission: { identify: () => current },
  log: { info() {}, error() {}, warn() {} },
  limits: { maxInflightPerConnection: 64, maxBufferedBytes: 1 << 20, maxSubscriptionsPerConnection: 16, pingIntervalMs: 30_000, maxConnectionsPerKey: 100 },
  jwtAudience: AUDIENCE,
} as unknown as SocketHost;
// Its protocol: one that holds nothing (these cases send no message).
const at = { chain: { route: { path: 'live' } }, protocol: { connect: () => ({ message() {}, closed() {} }) }, closed() {} } as unknown as SocketChain;

/** `n` sockets of the key, each upgraded as sockets.ts does: the token verified against the entry, what verified kept. */
async function open(n: number, token: string): Promise<{ c: Connection; ws: FakeWs }[]> {
  const headers = { authorization: `Bearer ${token}` };
  return Promise.all(
    Array.from({ length: n }, async () => {
      const v = await verifyBearer(headers.authorization, current.policy!.jwt!, AUDIENCE);
      expect(v).not.toBeNull();
      const ws = new FakeWs();
      const origin = { headers, url: '/live/key', socket: {} as Socket, rest: '/key', query: '', pathKey: 'key', queryKeys: [] };
      return { c: new Connection(ws as unknown as WebSocket, at, host, current, origin, v), ws };
    }),
  );
}

/** Resolves once `cond` holds (jose's verification is asynchronous), or rejects after 10 s. */
async function until(cond: () => boolean): Promise<void> {
  for (const end = Date.now() + 10_000; !cond(); await new Promise((r) => setTimeout(r, 5))) if (Date.now() > end) throw new Error('condition not met in 10 s');
}

beforeEach(() => {
  current = entryOf();
  vi.mocked(jose.jwtVerify).mockClear();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("rule 14: a socket's JWT at each recheck", () => {
  it('verifies the signature of N sockets N times (at the upgrade) over two ping intervals and a reload that keeps the key, each socket taking up the reloaded entry', async () => {
    const N = 20;
    const sockets = await open(N, await tokenFor(Math.floor(Date.now() / 1000) + 3600));
    expect(verifications()).toBe(N);
    for (const { c } of sockets) c.recheck();
    for (const { c } of sockets) c.recheck();
    // A reload: every object new, the same public key under the same kid.
    current = entryOf();
    for (const { c } of sockets) c.recheck();
    // Anything a recheck started would have called jwtVerify by now (it is called before its first await).
    expect(verifications()).toBe(N);
    for (const { c, ws } of sockets) {
      expect(ws.closedWith).toBeNull();
      expect(c.key).toBe(current);
    }
  });

  it("closes with 1008 (jwt) at the first recheck after the token's exp (30 s of leeway), by the clock alone", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const now = Math.floor(Date.now() / 1000);
    const [s] = await open(1, await tokenFor(now + 60));
    vi.setSystemTime((now + 60 + 29) * 1000);
    s!.c.recheck();
    expect(s!.ws.closedWith).toBeNull();
    vi.setSystemTime((now + 60 + 30) * 1000);
    s!.c.recheck();
    expect(s!.ws.closedWith).toEqual({ code: 1008, reason: "refused by the key's policy: jwt" });
    expect(verifications()).toBe(1);
  });

  it('verifies the token again when a reload puts another public key under its kid, and closes with 1008 (jwt)', async () => {
    const [s] = await open(1, await tokenFor(Math.floor(Date.now() / 1000) + 3600));
    s!.c.recheck();
    expect(verifications()).toBe(1);
    const before = s!.c.key;
    current = entryOf(other);
    s!.c.recheck();
    expect(verifications()).toBe(2);
    await until(() => s!.ws.closedWith !== null);
    expect(s!.ws.closedWith).toEqual({ code: 1008, reason: "refused by the key's policy: jwt" });
    expect(s!.c.key).toBe(before);
  });
});
