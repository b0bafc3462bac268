// A client that sends its body slowly holds its connection no longer than
// limits.bodyTimeoutMs after its headers (runtime/exchange.ts readBody): then
// 408 in the interface's envelope (Rosetta: 500, code 6019), Connection:
// close, and the connection ends. The bound is on the whole body, not between
// its bytes: a byte every 40 ms, which no idle timeout would ever end, is
// ended too. Nothing of such a body reaches an upstream, and a body that is
// slow but ends within the bound is served as any other.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Socket } from 'node:net';
import { newKey, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { startStandIns, type StandIns } from './three-chains.ts';

const KEY = newKey();
const BOUND_MS = 500;
let rig: Gateway<{ up: Promise<StandIns> }>;
let up: StandIns;
let gw: RunningGateway;

beforeAll(async () => {
  const limits = { bodyTimeoutMs: BOUND_MS };
  rig = await gateway({
    name: 'body-timeout',
    chains: [
      { path: 'ethereum', interface: 'evm-jsonrpc', chainId: 1, methods: ['eth_chainId'], upstreams: ['${ETH_URL}'], limits },
      { path: 'cardano-preprod', interface: 'rosetta', network: 'preprod', upstreams: ['${ROSETTA_URL}'], limits },
      { path: 'bitcoin', interface: 'blockbook', listener: 'explorer', sendtx: true, upstreams: ['${BB_URL}'], limits },
    ],
    header: { health: { intervalMs: 60000, timeoutMs: 1000 } },
    keys: [{ id: 'slow', key: KEY }],
    standIns: { up: startStandIns() },
  });
  ({ gw, standIns: { up } } = rig);
}, 60_000);

afterAll(() => rig?.close());

interface Slow {
  /** The answer's status line and headers, lower-cased names. */
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** From the last header byte sent to the answer's first byte. */
  readonly ms: number;
  /** Body bytes the client had sent when the answer came. */
  readonly sent: number;
}

/**
 * Sends a POST's headers with Content-Length `body.length`, then the body one
 * byte every `everyMs` (all of it, or until the answer comes), and reads the
 * answer until the connection ends (`close`: the client asks for that; else
 * the gateway must end it by itself).
 */
function slowPost(port: number, path: string, body: string, everyMs: number, close = false): Promise<Slow> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect(port, '127.0.0.1');
    let t0 = 0;
    let sent = 0;
    let answerMs = -1;
    let sentAtAnswer = 0;
    let text = '';
    let timer: ReturnType<typeof setInterval> | null = null;
    s.setEncoding('latin1');
    s.on('connect', () => {
      s.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${close ? 'Connection: close\r\n' : ''}\r\n`, () => {
        t0 = performance.now();
        timer = setInterval(() => {
          if (sent < body.length && answerMs < 0) s.write(body[sent++]!);
        }, everyMs);
      });
    });
    s.on('data', (d: string) => {
      if (answerMs < 0) {
        answerMs = performance.now() - t0;
        sentAtAnswer = sent;
      }
      text += d;
    });
    s.on('error', () => {});
    s.on('close', () => {
      if (timer !== null) clearInterval(timer);
      const at = text.indexOf('\r\n\r\n');
      if (at < 0) return reject(new Error(`no answer: ${JSON.stringify(text)}`));
      const [line, ...rest] = text.slice(0, at).split('\r\n');
      const headers: Record<string, string> = {};
      for (const h of rest) headers[h.slice(0, h.indexOf(':')).toLowerCase()] = h.slice(h.indexOf(':') + 1).trim();
      resolve({ status: Number(line!.split(' ')[1]), headers, body: text.slice(at + 4), ms: answerMs, sent: sentAtAnswer });
    });
  });
}

/** A body of `n` bytes: JSON that never ends within them (only its first bytes are ever sent). */
const pending = (n: number) => `{"padding":"${'x'.repeat(n)}`;

describe(`a body still arriving ${BOUND_MS} ms after its headers: 408 in the envelope, the connection closed, nothing upstream`, () => {
  it('EVM JSON-RPC: a byte every 40 ms is cut off at the bound (not an idle timeout): 408 with -32600, Connection: close', async () => {
    up.proxy.clear();
    const r = await slowPost(gw.ports.rpc!, '/ethereum', pending(10_000), 40);
    expect(r.status).toBe(408);
    expect(r.headers.connection).toBe('close');
    expect(JSON.parse(r.body)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request: request body not received in time' } });
    // The bound, give or take the sweep's quarter second: a byte every 40 ms kept the connection busy all along.
    expect(r.ms).toBeGreaterThanOrEqual(BOUND_MS - 50);
    expect(r.sent).toBeGreaterThan(5);
    expect(up.proxy.requests).toEqual([]);
    const line = await gw.waitForLog((e) => e.msg === 'request' && e.status === 408 && e.chain === 'ethereum');
    expect(line.keyId).toBe('slow');
  });

  it('Rosetta: 500 with code 6019, retriable, after the bound', async () => {
    const before = up.rosetta.requests.length;
    const r = await slowPost(gw.ports.rpc!, '/cardano-preprod/network/status', pending(10_000), 40);
    expect(r.status).toBe(500);
    expect(r.headers.connection).toBe('close');
    expect(JSON.parse(r.body)).toEqual({ code: 6019, message: 'Request body not received in time', retriable: true });
    expect(r.ms).toBeGreaterThanOrEqual(BOUND_MS - 50);
    expect(up.rosetta.requests.length).toBe(before);
  });

  it("Blockbook (POST sendtx): 408 with Blockbook's {\"error\"} body after the bound", async () => {
    const before = up.bb.requests.length;
    const r = await slowPost(gw.ports.explorer!, '/bitcoin/v2/sendtx/', pending(10_000), 40);
    expect(r.status).toBe(408);
    expect(r.headers.connection).toBe('close');
    expect(JSON.parse(r.body)).toEqual({ error: 'Request body not received in time' });
    expect(r.ms).toBeGreaterThanOrEqual(BOUND_MS - 50);
    expect(up.bb.requests.length).toBe(before);
  });

  it('a body sent slowly that ends within the bound is answered as usual (200, the node reached)', async () => {
    up.proxy.clear();
    const body = '{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}';
    // 47 bytes, one every 5 ms: ~235 ms, under the bound.
    const r = await slowPost(gw.ports.rpc!, '/ethereum', body, 5, true);
    expect(r.status).toBe(200);
    expect(JSON.parse(/\{.*\}/s.exec(r.body)![0])).toEqual({ jsonrpc: '2.0', id: 7, result: '0x1' });
    expect(up.proxy.methodsSeen()).toEqual(['eth_chainId']);
  });
});
