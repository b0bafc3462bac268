// Issue 43, rule 11: the gateway's own JSON-RPC errors carry the client's id
// once the body is read (JSON-RPC 2.0 allows null only where the id could not
// be read): a timeout (a node behind a proxy that answers late), no healthy
// upstream (a closed port), every upstream throttled (two providers that
// answer HTTP 429), over HTTP and over a socket, for single calls with a
// number or a string id and for batches, where each call's slot carries its
// own id and the calls the guard refused keep their own answers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKey, postJson, until, upstreamStatus, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Chain, type Gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';
import { startTweakProxy, type TweakProxy } from '../support/tweak-proxy.ts';
import { PROVIDER, startThrottleStandin, type ThrottleStandin } from '../support/throttle-standin.ts';
import { freePort } from '../support/http.ts';
import { connect, wsUrl, type RpcSocket } from '../support/ws-client.ts';

const KEY = newKey();
/** A key with a rate limit of one call an hour: its second call is refused. */
const LIMITED = newKey();
const ADDR = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

let anvil: Anvil;
let slow: TweakProxy;
let t1: ThrottleStandin;
let t2: ThrottleStandin;
let up: Gateway;
let gw: RunningGateway;


const CHAINS: readonly Chain[] = [
  evmChain('slow', ['SLOW'], { websocket: true, limits: { timeoutMs: 300 } }),
  evmChain('down', ['DOWN'], { websocket: true }),
  evmChain('throttled', ['T1', 'T2'], { websocket: true }),
];

beforeAll(async () => {
  anvil = await startAnvil();
  slow = await startTweakProxy(anvil.url);
  // Every client call (never the polls) is answered long after the chain's 300 ms.
  slow.tweak = () => ({ delayMs: 10_000 });
  [t1, t2] = await Promise.all([startThrottleStandin(anvil.url), startThrottleStandin(anvil.url)]);
  t1.throttle = t2.throttle = () => PROVIDER.alchemy429;
  // Nothing listens there: the upstream is down from its first poll.
  const down = `http://127.0.0.1:${await freePort()}`;
  up = await gateway({
    name: 'issue-43-error-ids',
    chains: CHAINS,
    keys: [
      { id: 'ids', key: KEY },
      { id: 'limited', key: LIMITED, rateLimit: '1/h' },
    ],
    standIns: { anvil, SLOW: slow, T1: t1, T2: t2 },
    env: { DOWN: down },
  });
  gw = up.gw;
  await until(async () => (await upstreamStatus(gw, 'down#0')).state !== 'unknown', 'the closed port polled');
}, 60_000);

afterAll(() => up?.close());

const CASES = [
  { chain: 'slow', what: 'a timeout', code: -32051, status: 504 },
  { chain: 'down', what: 'no healthy upstream', code: -32052, status: 503 },
  { chain: 'throttled', what: 'every upstream throttled', code: -32005, status: 429 },
] as const;

const balance = (id: number | string) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [ADDR, 'latest'] });

/**
 * Before each slow call: the slow node is up. Three timeouts in a row take it out (the circuit breaker), and
 * then the answer would be "no healthy upstream"; its next poll, answered at once, brings it back.
 */
async function slowUp(chain: string): Promise<void> {
  if (chain === 'slow') await until(async () => (await upstreamStatus(gw, 'slow#0')).state === 'up', 'the slow node back up');
}

describe.each(CASES)('rule 11: $what ($chain) answers with the client ids', ({ chain, code, status }) => {
  const post = async (body: unknown) => {
    await slowUp(chain);
    return postJson(gw.url('rpc', `/${chain}`), KEY, JSON.stringify(body));
  };

  it('a single call over HTTP, with a number id and with a string id', async () => {
    for (const id of [7, 'seven-\u00e9']) {
      const a = await post(balance(id));
      expect(a.status, a.text).toBe(status);
      expect(a.json, a.text).toMatchObject({ jsonrpc: '2.0', id, error: { code } });
    }
  }, 30_000);

  // eth_accounts is not in the allowlist: the guard refuses it in its place (-32601).
  it('a batch over HTTP: one error per call, each with its own id, the refused call in its place, no slot for a notification', async () => {
    const a = await post([balance(1), balance('two'), { jsonrpc: '2.0', id: 3, method: 'eth_accounts', params: [] }, { jsonrpc: '2.0', method: 'eth_getBalance', params: [ADDR, 'latest'] }, balance(4)]);
    expect(a.status, a.text).toBe(status);
    expect(Array.isArray(a.json), a.text).toBe(true);
    expect(a.json.map((m: { id: unknown; error: { code: number } }) => [m.id, m.error.code]), a.text).toEqual([
      [1, code],
      ['two', code],
      [3, -32601],
      [4, code],
    ]);
  }, 30_000);

  it('a batch the guard forwards whole over HTTP: one error per call, with its id', async () => {
    const a = await post([balance(11), balance('twelve')]);
    expect(a.status, a.text).toBe(status);
    expect(a.json.map((m: { id: unknown; error: { code: number } }) => [m.id, m.error.code]), a.text).toEqual([
      [11, code],
      ['twelve', code],
    ]);
  }, 30_000);

  it('over a socket: a single call and a batch, each error paired with its call by id', async () => {
    const ws: RpcSocket = await connect(wsUrl(gw.url('rpc', `/${chain}`)), { 'x-api-key': KEY });
    try {
      await slowUp(chain);
      const one = await ws.send(balance('ws-1'), 'ws-1');
      expect(one, JSON.stringify(one)).toMatchObject({ id: 'ws-1', error: { code } });
      await slowUp(chain);
      const many = await ws.batch([balance(21), balance('ws-22')]);
      expect(many.map((m: { id: unknown; error: { code: number } }) => [m.id, m.error.code]), JSON.stringify(many)).toEqual([
        [21, code],
        ['ws-22', code],
      ]);
      expect(ws.strays).toEqual([]);
    } finally {
      await ws.close();
    }
  }, 30_000);
});

describe('rule 11: a rate limit refusal, taken once the body is read', () => {
  it('carries the call\'s id, and a batch\'s refusal one error per call with its id', async () => {
    const url = gw.url('rpc', '/down');
    await postJson(url, LIMITED, JSON.stringify(balance(1)));
    const one = await postJson(url, LIMITED, JSON.stringify(balance('again')));
    expect(one.status, one.text).toBe(429);
    expect(one.json, one.text).toMatchObject({ id: 'again', error: { code: -32005, message: 'Limit exceeded: rate limit' } });
    const many = await postJson(url, LIMITED, JSON.stringify([balance(31), balance('thirty-two')]));
    expect(many.status, many.text).toBe(429);
    expect(many.json.map((m: { id: unknown; error: { code: number } }) => [m.id, m.error.code]), many.text).toEqual([
      [31, -32005],
      ['thirty-two', -32005],
    ]);
  });
});

describe('rule 11: where the body was not read, the id is null', () => {
  it('a request without a key gets id null (the gateway read no id)', async () => {
    const a = await postJson(gw.url('rpc', '/slow'), 'not-a-key', JSON.stringify(balance(5)));
    expect(a.status, a.text).toBe(403);
    expect(a.json.id, a.text).toBeNull();
  });
});
