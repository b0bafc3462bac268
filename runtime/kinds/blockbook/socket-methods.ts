// Blockbook's WebSocket requests that have a REST twin giving the same data
// (trezor/blockbook server/websocket.go beside server/public.go): each message
// becomes its twin's request into the chain (socket.ts sends it through the
// transport, so the route's guard, the chain's admission, cache and pool apply
// as to a REST call), and the twin's answer is shaped as websocket.go shapes
// it. Where the two differ in their defaults (getAccountInfo's details, tokens
// and page size), the WebSocket's are sent explicitly; a block paged by
// another size than REST's is made of REST's pages (socket-block-page.ts).
// What no REST call answers exactly is sent on an upstream's socket instead
// (socket-relay.ts).
// Where a twin needs more than its one request (getInfo's hashes, estimateFee's
// further block counts, the coin's decimals), the rest are the gateway's own
// reads through the chain's front (socket-fetch.ts): the message is admitted
// and counted once, as one call of its twin's endpoint.
import type { BlockbookRouteSpec } from '../../types.ts';
import { blockPage, blockPaging, REST_BLOCK_PAGE, restPageOf } from './socket-block-page.ts';

/** A message's parameters as websocket.go unmarshals them: an object (absent: {}). */
export type Params = Readonly<Record<string, unknown>>;

/** What a method's answer may need beyond its own request. */
export interface MethodContext {
  readonly route: BlockbookRouteSpec;
  /** The gateway's own read of `rest` (after `/v2/`), through the chain's front. */
  get(rest: string, query?: string): Promise<unknown>;
  /** As get, its answer held to at most `maxBytes`: the parsed answer and its length. */
  read(rest: string, query: string, maxBytes: number): Promise<{ readonly doc: unknown; readonly bytes: number }>;
  /** The chain's served tip on a pool (-1 unknown); -1 on one upstream, whose own answer is the chain's. */
  servedTip(): number;
  /** The coin's decimals (Blockbook's status), read once. */
  decimals(): Promise<number>;
}

/** One message's twin: the REST request and how its answer becomes the message's `data` (null: unchanged). */
export interface Twin {
  readonly method: 'GET' | 'POST';
  /** What follows `/v2/`. */
  readonly rest: string;
  readonly query: string;
  readonly body: Buffer;
  /** `bytes`: the length of the answer `doc` was parsed from. */
  readonly shape: ((doc: unknown, c: MethodContext, bytes: number) => unknown) | null;
  /** The message's `data` with no request at all (admitted as a call of the twin's endpoint): what websocket.go answers without asking. */
  readonly local?: string;
}

/** A message refused before any request: its error answer's message. */
export class ParamsError extends Error {}

const EMPTY = Buffer.alloc(0);
/** websocket.go's maxWebsocketEstimateFeeBlocks. */
export const MAX_FEE_BLOCKS = 32;
/** public.go's txsOnPage (a WebSocket account's default page) and txsInAPI (its maximum). */
const TXS_ON_PAGE = 25;
const TXS_IN_API = 1000;
/** An extended public key (xpub, ypub, zpub, tpub, Ltub, dgub...) or an output descriptor: Blockbook reads it as an xpub first. */
const XPUB = /^[A-Za-z]{3}b[1-9A-HJ-NP-Za-km-z]{100,}$/;

export function int(p: Params, name: string): number {
  const v = p[name];
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new ParamsError(`Invalid params: '${name}' must be an integer`);
  return v;
}

export function str(p: Params, name: string): string {
  const v = p[name];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new ParamsError(`Invalid params: '${name}' must be a string`);
  return v;
}

function strs(p: Params, name: string): string[] {
  const v = p[name];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw new ParamsError(`Invalid params: '${name}' must be a list of strings`);
  return v as string[];
}

function ints(p: Params, name: string): number[] {
  const v = p[name];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((n) => typeof n === 'number' && Number.isSafeInteger(n))) throw new ParamsError(`Invalid params: '${name}' must be a list of integers`);
  return v as number[];
}

/** A path segment as sent: nothing in it is read as path or query. */
function segment(s: string, what: string): string {
  if (s === '') throw new ParamsError(`Missing ${what}`);
  return encodeURIComponent(s);
}

/** An address, xpub or output descriptor: its slashes stay (the guard checks each piece). */
function descriptor(s: string): string {
  return segment(s, 'descriptor').replace(/%2F/g, '/');
}

function get(rest: string, q: URLSearchParams | null, shape: Twin['shape']): Twin {
  return { method: 'GET', rest, query: q === null ? '' : q.toString(), body: EMPTY, shape };
}

/** A fiat rates map keeping only `currencies` (lower case; -1 where none), as Blockbook answers a list of them. */
function onlyRates(rates: unknown, currencies: readonly string[]): unknown {
  if (currencies.length === 0 || rates === null || typeof rates !== 'object') return rates;
  const all = rates as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const c of currencies) out[c.toLowerCase()] = all[c.toLowerCase()] ?? -1;
  return out;
}

/** A ticker (or each of a list) with its rates kept to `currencies`. */
function withRates(doc: unknown, currencies: readonly string[]): unknown {
  if (Array.isArray(doc)) return doc.map((t) => withRates(t, currencies));
  if (doc === null || typeof doc !== 'object') return doc;
  const t = doc as { rates?: unknown };
  return { ...t, rates: onlyRates(t.rates, currencies) };
}

/**
 * A currencies list over REST, which takes one currency: one is asked for
 * itself, several are all asked for and kept to the list (`keep`).
 */
function currencyQuery(q: URLSearchParams, param: string, currencies: readonly string[]): readonly string[] {
  if (currencies.length === 1) q.set(param, currencies[0]!.toLowerCase());
  return currencies.length > 1 ? currencies : [];
}

/** A decimal amount in the coin (Blockbook's REST estimatefee: "0.00002460") in its base units ("2460"). */
export function baseUnits(decimal: string, decimals: number): bigint {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(decimal);
  if (m === null) throw new Error(`not an amount: ${decimal}`);
  const frac = (m[2] ?? '').padEnd(decimals, '0');
  if (frac.length > decimals && /[^0]/.test(frac.slice(decimals))) throw new Error(`more digits than ${decimals} decimals: ${decimal}`);
  return BigInt(m[1]! + frac.slice(0, decimals));
}

function resultOf(doc: unknown): string {
  const r = (doc as { result?: unknown } | null)?.result;
  if (typeof r !== 'string') throw new Error('estimatefee answered no result');
  return r;
}

/** The methods with a REST twin, by name: each message's twin, or ParamsError. */
export const TWINS: ReadonlyMap<string, (p: Params, route: BlockbookRouteSpec) => Twin> = new Map<string, (p: Params, route: BlockbookRouteSpec) => Twin>([
  [
    'getInfo',
    () =>
      get('status', null, async (doc, c) => {
        const s = doc as { blockbook?: Record<string, unknown>; backend?: Record<string, unknown> };
        const bb = s.blockbook ?? {};
        const be = s.backend ?? {};
        // On a pool the chain's head is its served tip (what every usable upstream has), whichever answered the status.
        const tip = c.servedTip();
        const height = tip >= 0 ? tip : Number(bb.bestHeight);
        const [genesis, best] = (await Promise.all([c.get('block-index/0'), c.get(`block-index/${height}`)])) as { blockHash?: unknown }[];
        const chain = typeof be.chain === 'string' ? be.chain : '';
        const backend: Record<string, unknown> = {};
        for (const k of ['version', 'subversion', 'consensus_version', 'consensus']) if (be[k] !== undefined && be[k] !== '' && be[k] !== null) backend[k] = be[k];
        return {
          name: bb.coin,
          // The status names the network as websocket.go's getInfo does (is.GetNetwork(): the shortcut unless the
          // coin sets a network of its own); it has no separate shortcut.
          shortcut: bb.network,
          network: bb.network,
          decimals: bb.decimals,
          version: bb.version,
          bestHeight: height,
          bestHash: best?.blockHash,
          block0Hash: genesis?.blockHash,
          // The backend's chain: main (Bitcoin Core; mainnet elsewhere), or test, testnet4, signet, regtest.
          testnet: chain !== '' && chain !== 'main' && chain !== 'mainnet',
          backend,
        };
      }),
  ],
  [
    'getBlockHash',
    (p) => {
      const h = int(p, 'height');
      if (h < 0) throw new ParamsError("Invalid params: 'height' must not be negative");
      return get(`block-index/${h}`, null, (doc) => ({ hash: (doc as { blockHash?: unknown }).blockHash }));
    },
  ],
  [
    'getBlock',
    (p) => {
      const { index, size } = blockPaging(int(p, 'page'), int(p, 'pageSize'));
      // REST pages a block by 1000 transactions, the WebSocket's default; another page size is made of REST's pages
      // (socket-block-page.ts), starting with the one that holds the page's first transaction.
      const restPage = restPageOf(index * size);
      const q = new URLSearchParams();
      if (restPage > 1) q.set('page', String(restPage));
      return get(`block/${segment(str(p, 'id'), 'block id')}`, q, size === REST_BLOCK_PAGE ? null : (doc, c, bytes) => blockPage(doc, bytes, index, size, c));
    },
  ],
  [
    'getAccountInfo',
    (p) => {
      const d = str(p, 'descriptor');
      const q = new URLSearchParams();
      const details = str(p, 'details');
      // websocket.go's defaults, where REST's differ: basic details, derived tokens, 25 a page.
      q.set('details', ['tokens', 'tokenBalances', 'txids', 'txslight', 'txs'].includes(details) ? details : 'basic');
      const tokens = str(p, 'tokens');
      q.set('tokens', tokens === 'used' || tokens === 'nonzero' ? tokens : 'derived');
      const page = int(p, 'page');
      if (page > 0) q.set('page', String(page));
      const size = int(p, 'pageSize');
      q.set('pageSize', String(size > 0 && size <= TXS_IN_API ? size : TXS_ON_PAGE));
      for (const [name, from] of [
        ['from', 'from'],
        ['to', 'to'],
        ['gap', 'gap'],
      ] as const) {
        const v = int(p, from);
        if (v > 0) q.set(name, String(v));
      }
      const contract = str(p, 'contractFilter');
      if (contract !== '') q.set('contract', contract);
      const secondary = str(p, 'secondaryCurrency');
      if (secondary !== '') q.set('secondary', secondary.toLowerCase());
      const protocols = strs(p, 'protocols');
      if (protocols.length > 0) q.set('protocols', protocols.join(','));
      if (p.confirmedNonce === true) q.set('confirmedNonce', 'true');
      // Blockbook reads the descriptor as an xpub first, then as an address: the REST endpoint its form names.
      const kind = XPUB.test(d) || d.includes('(') ? 'xpub' : 'address';
      return get(`${kind}/${kind === 'xpub' ? descriptor(d) : segment(d, 'descriptor')}`, q, null);
    },
  ],
  ['getAccountUtxo', (p) => get(`utxo/${descriptor(str(p, 'descriptor'))}`, null, null)],
  [
    'getBalanceHistory',
    (p) => {
      const q = new URLSearchParams();
      for (const name of ['from', 'to', 'groupBy', 'gap']) {
        const v = int(p, name);
        if (v > 0) q.set(name, String(v));
      }
      const keep = currencyQuery(q, 'fiatcurrency', strs(p, 'currencies'));
      return get(`balancehistory/${descriptor(str(p, 'descriptor'))}`, q, keep.length === 0 ? null : (doc) => withRates(doc, keep));
    },
  ],
  ['getTransaction', (p) => get(`tx/${segment(str(p, 'txid'), 'txid')}`, null, null)],
  ['getTransactionSpecific', (p) => get(`tx-specific/${segment(str(p, 'txid'), 'txid')}`, null, null)],
  [
    'estimateFee',
    (p) => {
      const blocks = ints(p, 'blocks');
      // No block count: websocket.go answers an empty list, asking nothing.
      if (blocks.length === 0) return { ...get('estimatefee', null, null), local: '[]' };
      if (blocks.length > MAX_FEE_BLOCKS) throw new ParamsError(`blocks max ${MAX_FEE_BLOCKS}`);
      const specific = (p.specific ?? {}) as Record<string, unknown>;
      const conservative = typeof specific.conservative === 'boolean' ? specific.conservative : true;
      const txsize = typeof specific.txsize === 'number' ? Math.trunc(specific.txsize) : 0;
      const q = new URLSearchParams({ conservative: String(conservative) });
      return get(`estimatefee/${blocks[0]!}`, q, async (first, c) => {
        // The further block counts: the gateway's own reads, the message counted once.
        const rest = await Promise.all(blocks.slice(1).map((b) => c.get(`estimatefee/${b}`, q.toString())));
        const decimals = await c.decimals();
        return [first, ...rest].map((doc) => {
          const fee = baseUnits(resultOf(doc), decimals);
          return txsize > 0 ? { feePerTx: String((fee * BigInt(txsize) + 500n) / 1000n), feePerUnit: String(fee) } : { feePerUnit: String(fee) };
        });
      });
    },
  ],
  [
    'getCurrentFiatRates',
    (p) => {
      const q = new URLSearchParams();
      const keep = currencyQuery(q, 'currency', strs(p, 'currencies'));
      const token = str(p, 'token');
      if (token !== '') q.set('token', token);
      return get('tickers/', q, keep.length === 0 ? null : (doc) => withRates(doc, keep));
    },
  ],
  [
    'getFiatRatesForTimestamps',
    (p) => {
      const stamps = ints(p, 'timestamps');
      if (stamps.length === 0) throw new ParamsError("Invalid params: 'timestamps' must name at least one");
      const q = new URLSearchParams({ timestamp: stamps.join(',') });
      const keep = currencyQuery(q, 'currency', strs(p, 'currencies'));
      const token = str(p, 'token');
      if (token !== '') q.set('token', token);
      // REST answers the list; the WebSocket wraps it.
      return get('multi-tickers/', q, (doc) => ({ tickers: withRates(doc, keep) }));
    },
  ],
  [
    'getFiatRatesTickersList',
    (p) => {
      const q = new URLSearchParams({ timestamp: String(int(p, 'timestamp')) });
      const token = str(p, 'token');
      if (token !== '') q.set('token', token);
      return get('tickers-list/', q, null);
    },
  ],
  [
    'sendTransaction',
    (p) => {
      const hex = str(p, 'hex');
      if (hex === '') throw new ParamsError('Missing tx blob');
      return { method: 'POST', rest: 'sendtx/', query: '', body: Buffer.from(hex), shape: null };
    },
  ],
]);

/**
 * Methods Blockbook serves that the gateway does not: those outside what it
 * serves (an EVM chain's getContractInfo and rpcCall, subscribeNewTransaction,
 * which Blockbook itself serves only where enabled). Each gets an error answer
 * that says so.
 */
export const NOT_SERVED: ReadonlySet<string> = new Set(['getContractInfo', 'rpcCall', 'subscribeNewTransaction', 'unsubscribeNewTransaction']);
