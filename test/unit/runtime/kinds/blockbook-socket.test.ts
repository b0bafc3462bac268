// Blockbook's WebSocket, its parts that need no gateway (issue 46): where the
// socket is on a chain's path and the key it carries, each method's REST twin
// as websocket.go's defaults ask it, REST's decimal fee in base units, and
// the upstream socket's URL and head hook (against the socket stand-in).
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { blockbookSocket } from '../../../../runtime/kinds/blockbook/socket.ts';
import { baseUnits, ParamsError, TWINS, type Params } from '../../../../runtime/kinds/blockbook/socket-methods.ts';
import { blockbookSocketUrl, UpstreamSocket, UpstreamSockets } from '../../../../runtime/kinds/blockbook/socket-upstream.ts';
import { startBlockbookStub } from '../../../support/blockbook-stub.ts';
import { attachBlockbookSocket } from '../../../support/blockbook-socket-standin.ts';
import type { BlockbookRouteSpec } from '../../../../runtime/types.ts';
import type { Upstream } from '../../../../runtime/upstreams/upstream.ts';

const ROUTE = { sendtx: true } as BlockbookRouteSpec;
const XPUB = 'xpub6CUGRUonZSQ4TWtTMmzXdrXDtypWKiKrhko4egpiMZbpiaQL2jkwSB1icqYh2cfDfVxdx4df189oLKnC5fSwqPfgyP3hooxujYzAu3fDVmz';

function twin(method: string, p: Params) {
  return TWINS.get(method)!(p, ROUTE);
}

describe('keyOf', () => {
  it('serves the socket at /websocket and /<key>/websocket only', () => {
    expect(blockbookSocket.keyOf('/websocket')).toBeNull();
    expect(blockbookSocket.keyOf('/k3y/websocket')).toBe('k3y');
    for (const rest of ['', '/', '/k3y', '/k3y/', '/websocket/', '/a/b/websocket', '//websocket', '/k3y/websocketx', '/v2/websocket/x']) expect(blockbookSocket.keyOf(rest), rest).toBeUndefined();
  });
});

describe('REST twins', () => {
  it("getAccountInfo asks an xpub's or an address's endpoint with the WebSocket's defaults", () => {
    const a = twin('getAccountInfo', { descriptor: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq' });
    expect(a.rest).toBe('address/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq');
    expect(Object.fromEntries(new URLSearchParams(a.query))).toEqual({ details: 'basic', tokens: 'derived', pageSize: '25' });
    const x = twin('getAccountInfo', { descriptor: XPUB, details: 'txs', tokens: 'used', page: 2, pageSize: 5000, from: 10, contractFilter: 'c', secondaryCurrency: 'USD', gap: 30 });
    expect(x.rest).toBe(`xpub/${XPUB}`);
    expect(Object.fromEntries(new URLSearchParams(x.query))).toEqual({ details: 'txs', tokens: 'used', page: '2', pageSize: '25', from: '10', gap: '30', contract: 'c', secondary: 'usd' });
    // An output descriptor keeps its slashes (each piece checked by the guard), the rest escaped.
    expect(twin('getAccountUtxo', { descriptor: "wpkh([5c9e228d/84'/0'/0']xpubX/0/*)" }).rest).toBe("utxo/wpkh(%5B5c9e228d/84'/0'/0'%5DxpubX/0/*)");
  });

  it('refuses what REST cannot answer the same, and bad params, before any request', () => {
    expect(() => twin('getBlock', { id: '5', pageSize: 10 })).toThrow(ParamsError);
    expect(twin('getBlock', { id: '5', pageSize: 1000, page: 2 })).toMatchObject({ rest: 'block/5', query: 'page=2' });
    expect(() => twin('getBlockHash', { height: -1 })).toThrow(ParamsError);
    expect(() => twin('getBlockHash', { height: '5' })).toThrow("Invalid params: 'height' must be an integer");
    expect(() => twin('getTransaction', {})).toThrow('Missing txid');
    expect(() => twin('getTransaction', { txid: 'a/b' })).not.toThrow();
    expect(twin('getTransaction', { txid: 'a/b' }).rest).toBe('tx/a%2Fb');
    expect(() => twin('estimateFee', { blocks: Array.from({ length: 33 }, (_, i) => i + 1) })).toThrow('blocks max 32');
  });

  it('sends sendTransaction as the POST of its hex to sendtx/', () => {
    const t = twin('sendTransaction', { hex: '0200ab' });
    expect(t).toMatchObject({ method: 'POST', rest: 'sendtx/', query: '' });
    expect(t.body.toString()).toBe('0200ab');
  });

  it('keeps several fiat currencies to those asked, -1 where none', async () => {
    const t = twin('getCurrentFiatRates', { currencies: ['USD', 'xyz'] });
    expect(t.query).toBe('');
    expect(await t.shape!({ ts: 1, rates: { usd: 2, eur: 3 } }, null as never)).toEqual({ ts: 1, rates: { usd: 2, xyz: -1 } });
    expect(twin('getCurrentFiatRates', { currencies: ['USD'] }).query).toBe('currency=usd');
  });
});

describe('baseUnits', () => {
  it("reads REST's decimal amount in the coin's base units", () => {
    expect(baseUnits('0.00002460', 8)).toBe(2460n);
    expect(baseUnits('0.0000246', 8)).toBe(2460n);
    expect(baseUnits('1', 8)).toBe(100000000n);
    expect(baseUnits('0.000000001000000000', 18)).toBe(1000000000n);
    expect(() => baseUnits('0.000000001', 8)).toThrow();
    expect(() => baseUnits('-1', 8)).toThrow();
  });
});

describe('the upstream socket URL', () => {
  it("is the base's host with /websocket in place of /api", () => {
    const u = (origin: string, basePath: string) => ({ origin, basePath }) as Upstream;
    expect(blockbookSocketUrl(u('https://btc1.trezor.io', '/api'))).toBe('wss://btc1.trezor.io/websocket');
    expect(blockbookSocketUrl(u('http://127.0.0.1:9130', '/btc/api'))).toBe('ws://127.0.0.1:9130/btc/websocket');
  });
});

describe('estimateFee with no block count', () => {
  it('is answered [] without a request, as websocket.go does', () => {
    expect(twin('estimateFee', {})).toMatchObject({ rest: 'estimatefee', local: '[]' });
  });
});

describe("the upstream socket's head hook", () => {
  it("reports each block the upstream's socket announces, as {height, hash}", async () => {
    const bb = await startBlockbookStub({ bestHeight: 10 });
    const ws = attachBlockbookSocket(bb);
    onTestFinished(async () => {
      ws.close();
      await bb.close();
    });
    const lost: string[] = [];
    const s = new UpstreamSocket({ origin: `http://127.0.0.1:${bb.port}`, basePath: '/api', headers: {} } as unknown as Upstream, () => lost.push('lost'));
    const heads: [number, string][] = [];
    await s.onHead((h, hash) => heads.push([h, hash]));
    expect(ws.messages.map((m) => m.method)).toEqual(['subscribeNewBlock']);
    ws.newBlock(11, bb.blockHash(11));
    ws.newBlock(12, bb.blockHash(12));
    await vi.waitFor(() => expect(heads).toEqual([[11, bb.blockHash(11)], [12, bb.blockHash(12)]]));
    // The upstream gone: told once; closed by the gateway: not told.
    ws.drop();
    await vi.waitFor(() => expect(lost).toEqual(['lost']));
    s.close();
    expect(lost).toEqual(['lost']);
  });
});

describe("a chain's upstream sockets", () => {
  it('are one per upstream, shared by its holders, closed with the last, and forgotten (every holder told) when lost', async () => {
    const bb = await startBlockbookStub({ bestHeight: 10 });
    const ws = attachBlockbookSocket(bb);
    onTestFinished(async () => {
      ws.close();
      await bb.close();
    });
    const u = { origin: `http://127.0.0.1:${bb.port}`, basePath: '/api', headers: {} } as unknown as Upstream;
    const told: string[] = [];
    const hub = { lost: () => told.push('hub') };
    const heads = { lost: () => told.push('heads') };
    const sockets = new UpstreamSockets();
    const a = sockets.acquire(u, hub);
    expect(sockets.acquire(u, heads)).toBe(a);
    await a.ready;
    expect(ws.opened).toBe(1);
    sockets.release(u, hub);
    expect(sockets.size).toBe(1);
    ws.drop();
    await vi.waitFor(() => expect(told).toEqual(['heads']));
    expect(sockets.size).toBe(0);
    const b = sockets.acquire(u, hub);
    expect(b).not.toBe(a);
    await b.ready;
    sockets.release(u, hub);
    await vi.waitFor(() => expect(ws.open).toBe(0));
    expect(ws.opened).toBe(2);
  });
});
