// Blockbook's WebSocket, its parts that need no gateway (issue 46): where the
// socket is on a chain's path and the key it carries, each method's REST twin
// as websocket.go's defaults ask it, what is sent on an upstream socket
// instead (socket-relay.ts), REST's decimal fee in base units, and
// the upstream socket's URL and head hook (against the socket stand-in).
import { describe, expect, it } from 'vitest';
import { blockbookSocket } from '../../../../runtime/kinds/blockbook/socket.ts';
import { baseUnits, ParamsError, TWINS, type MethodContext, type Params } from '../../../../runtime/kinds/blockbook/socket-methods.ts';
import { blockPaging } from '../../../../runtime/kinds/blockbook/socket-block-page.ts';
import { blockbookHeadSocket, blockbookSocketUrl } from '../../../../runtime/kinds/blockbook/socket-upstream.ts';
import { addressKey } from '../../../../runtime/kinds/blockbook/socket-address.ts';
import { upstreamParams } from '../../../../runtime/kinds/blockbook/socket-relay.ts';
import type { BlockbookRouteSpec } from '../../../../runtime/types.ts';

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

  it('refuses bad params before any request', () => {
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
    expect(await t.shape!({ ts: 1, rates: { usd: 2, eur: 3 } }, null as never, 0)).toEqual({ ts: 1, rates: { usd: 2, xyz: -1 } });
    expect(twin('getCurrentFiatRates', { currencies: ['USD'] }).query).toBe('currency=usd');
  });
});

describe('what is sent on an upstream socket', () => {
  it('is what REST cannot answer exactly, rebuilt from the fields websocket.go reads', () => {
    // A block of any page size is REST's (socket-block-page.ts): its answer could close the upstream's socket.
    expect(upstreamParams('getBlock', { id: '5', pageSize: 10000, page: 2 })).toBeNull();
    expect(upstreamParams('getBlock', { id: '5' })).toBeNull();
    expect(upstreamParams('longTermFeeRate', { junk: 1 })).toEqual({});
    expect(upstreamParams('getBlockFiltersBatch', { scriptType: 't', bestKnownBlockHash: 'h', pageSize: 3, M: 7 })).toEqual({ scriptType: 't', M: 7, bestKnownBlockHash: 'h', pageSize: 3 });
    expect(upstreamParams('getBlockFilter', { scriptType: 't', blockHash: 'h' })).toEqual({ scriptType: 't', blockHash: 'h' });
    expect(upstreamParams('getMempoolFilters', { scriptType: 't', fromTimestamp: 5 })).toEqual({ scriptType: 't', fromTimestamp: 5 });
    // A bitcoin-type estimateFee is REST's; one naming an EVM call is its node's.
    expect(upstreamParams('estimateFee', { blocks: [1], specific: { txsize: 200 } })).toBeNull();
    expect(upstreamParams('estimateFee', { blocks: [1], specific: { to: '0xab', data: '0x', other: 1, conservative: false } })).toEqual({ blocks: [1], specific: { to: '0xab', data: '0x', conservative: false } });
    expect(upstreamParams('getAccountInfo', { descriptor: 'x' })).toBeNull();
  });

  it('refuses bad params before any request', () => {
    expect(() => upstreamParams('getMempoolFilters', { scriptType: 't', fromTimestamp: 2 ** 32 })).toThrow(ParamsError);
    expect(() => upstreamParams('getBlockFilter', { scriptType: 5 })).toThrow("Invalid params: 'scriptType' must be a string");
    expect(() => upstreamParams('getBlockFiltersBatch', { pageSize: -1 })).toThrow(ParamsError);
    expect(() => upstreamParams('estimateFee', { blocks: ['1'], specific: { to: '0xab' } })).toThrow(ParamsError);
    expect(() => upstreamParams('estimateFee', { specific: { to: 5 } })).toThrow(ParamsError);
    expect(() => upstreamParams('estimateFee', { blocks: Array.from({ length: 33 }, () => 1), specific: { to: '0xab' } })).toThrow('blocks max 32');
    expect(() => upstreamParams('getBlockFiltersBatch', { scriptType: 't', bestKnownBlockHash: 'h', pageSize: 10001 })).toThrow('pageSize max 10000');
    expect(() => twin('getBlock', { pageSize: 10 })).toThrow('Missing block id');
  });
});

describe('getBlock of any page size, from REST', () => {
  /** A block of `count` transactions as REST pages it by 1000 (api/worker.go's computePaging), its reads recorded. */
  function restBlock(count: number, hash = 'h1') {
    const reads: string[] = [];
    const page = (n: number) => {
      const last = Math.max(Math.ceil(count / 1000), 1);
      const p = Math.min(Math.max(n, 1), last);
      const txs = Array.from({ length: Math.min(count - (p - 1) * 1000, 1000) }, (_, i) => ({ txid: `t${(p - 1) * 1000 + i}` }));
      return { page: p, totalPages: last, itemsOnPage: 1000, hash, height: 7, txCount: count, ...(txs.length > 0 ? { txs } : {}) };
    };
    const c = {
      read: async (rest: string, query: string) => {
        reads.push(`${rest}?${query}`);
        const doc = page(Number(new URLSearchParams(query).get('page')));
        return { doc, bytes: JSON.stringify(doc).length };
      },
    } as unknown as MethodContext;
    return { reads, c, page };
  }
  /** websocket.go's page `page` of `size` of a block of `count` transactions, asked as a client asks it. */
  async function ws(count: number, page: number, pageSize: number) {
    const b = restBlock(count);
    const t = twin('getBlock', { id: '7', page, pageSize });
    const first = b.page(Number(new URLSearchParams(t.query).get('page') ?? 1));
    const out = (await t.shape!(first, b.c, JSON.stringify(first).length)) as { page: number; totalPages: number; itemsOnPage: number; txs?: { txid: string }[] };
    return { out, ids: (out.txs ?? []).map((x) => Number(x.txid.slice(1))), reads: b.reads };
  }
  const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

  it('sanitizes page and pageSize as websocket.go does', () => {
    expect(blockPaging(0, 0)).toEqual({ index: 0, size: 1000 });
    expect(blockPaging(-3, -1)).toEqual({ index: 0, size: 1000 });
    expect(blockPaging(2, 20000)).toEqual({ index: 1, size: 10000 });
    expect(blockPaging(5_000_000, 10000)).toEqual({ index: 99_999, size: 10000 });
  });

  it("answers a page of 10,000 of a 12,500-transaction block: REST's pages of 1000 that hold it, sliced, with websocket.go's paging", async () => {
    const a = await ws(12_500, 1, 10000);
    expect(a.out).toMatchObject({ page: 1, totalPages: 2, itemsOnPage: 10000, txCount: 12_500, hash: 'h1' });
    expect(a.ids).toEqual(range(0, 10000));
    // The first of the ten pages came with the twin's request; the other nine by the block's hash.
    expect(a.reads).toEqual(range(2, 11).map((n) => `block/h1?page=${n}`));
    const b = await ws(12_500, 2, 10000);
    expect(b.out).toMatchObject({ page: 2, totalPages: 2, itemsOnPage: 10000 });
    expect(b.ids).toEqual(range(10000, 12_500));
  });

  it('reads at most ceil(10000/1000)+1 REST pages for an unaligned page, and a page past the end is the last', async () => {
    const a = await ws(30_000, 2, 9999);
    expect(a.ids).toEqual(range(9999, 19_998));
    expect(a.reads.length + 1).toBe(11);
    const past = await ws(2500, 9, 700);
    expect(past.out).toMatchObject({ page: 4, totalPages: 4, itemsOnPage: 700 });
    expect(past.ids).toEqual(range(2100, 2500));
    const small = await ws(2, 1, 5);
    expect(small.out).toMatchObject({ page: 1, totalPages: 1, itemsOnPage: 5 });
    expect(small.ids).toEqual([0, 1]);
    expect(small.reads).toEqual([]);
  });

  it('refuses a page whose REST pages disagree on the block', async () => {
    const b = restBlock(3000);
    const other = restBlock(3000, 'h2');
    const t = twin('getBlock', { id: '7', page: 1, pageSize: 3000 });
    await expect(t.shape!(b.page(1), other.c, 10)).rejects.toThrow('block: its pages disagree');
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
  it("is the base's host with /websocket in place of /api, without the URL's credentials (they go as headers)", () => {
    expect(blockbookSocketUrl(new URL('https://btc1.trezor.io/api'))).toBe('wss://btc1.trezor.io/websocket');
    expect(blockbookSocketUrl(new URL('http://u:p@127.0.0.1:9130/btc/api/'))).toBe('ws://127.0.0.1:9130/btc/websocket');
  });
});

describe('estimateFee with no block count', () => {
  it('is answered [] without a request, as websocket.go does', () => {
    expect(twin('estimateFee', {})).toMatchObject({ rest: 'estimatefee', local: '[]' });
  });
});

describe("the upstream socket's head messages", () => {
  const read = (m: object) => blockbookHeadSocket.read({} as BlockbookRouteSpec, m as Record<string, unknown>);
  it("reads getInfo's coin as the probe names it, subscribeNewBlock's answer and each block; the rest is the carrier's", () => {
    expect(blockbookHeadSocket.hello({} as BlockbookRouteSpec).map((m) => JSON.parse(m).method)).toEqual(['getInfo', 'subscribeNewBlock']);
    expect(read({ id: 'i', data: { name: 'Bitcoin', shortcut: 'BTC' } })).toEqual({ identity: 'coin Bitcoin' });
    expect(read({ id: 'i', data: { error: { message: 'nope' } } })).toEqual({ refused: 'nope' });
    expect(read({ id: 'b', data: { subscribed: true } })).toEqual({ subscribed: true });
    expect(read({ id: 'b', data: { height: 12, hash: 'ab' } })).toEqual({ head: 12, hash: 'ab' });
    expect(read({ id: 'b', data: { height: -1, hash: 'ab' } })).toBeNull();
    expect(read({ id: 'a1', data: { address: 'x', tx: {} } })).toBeNull();
  });
});

describe('addressKey', () => {
  it('matches addresses as Blockbook does: bech32 in either case, 0x in any, base58 and xpubs as written', () => {
    const segwit = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
    const taproot = 'bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297';
    expect(addressKey(segwit.toUpperCase())).toBe(segwit);
    expect(addressKey(taproot.toUpperCase())).toBe(taproot);
    expect(addressKey(segwit)).toBe(segwit);
    // Mixed case is no bech32; a bad checksum is no bech32 either: both are left as written.
    expect(addressKey('bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdQ')).toBe('bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdQ');
    expect(addressKey('BC1QAR0SRRR7XFKVY5L643LYDNW9RE59GTZZWF5MDA')).toBe('BC1QAR0SRRR7XFKVY5L643LYDNW9RE59GTZZWF5MDA');
    expect(addressKey('0x52908400098527886E0F7030069857D2E4169EE7')).toBe('0x52908400098527886e0f7030069857d2e4169ee7');
    expect(addressKey('1BoatSLRHtKNngkdXEeobR76b53LETtpyT')).toBe('1BoatSLRHtKNngkdXEeobR76b53LETtpyT');
    expect(addressKey(XPUB)).toBe(XPUB);
  });
});
