// A Blockbook stand-in (no real Blockbook runs here), for the tests and the demo.
//
// Routes, parameters and errors follow ../shared/specs/blockbook-endpoints.md
// (itself from trezor/blockbook server/public.go): the v2 routes, the v1 ones
// of Bitcoin-type coins, the unversioned aliases, and the Go ServeMux rules
// (longest prefix wins, anything else under /api/ is the status, a path
// missing its trailing slash or not in clean form is redirected with 301).
// Bodies are the examples of ../shared/specs/blockbook-openapi.yaml and
// blockbook-block-example.json, adapted to a small chain of `bestHeight`
// blocks. Errors are Blockbook's jsonHandler ones: `{"error":"..."}`, HTTP 400
// for public API errors (not-found included), 500 `Internal server error` for
// the rest. Every request is recorded (the gateway's health checks apart).
//
// The chain: block h (0..bestHeight) has hash blockHash(h) and the two
// transactions of the example block, with ids txids(h). Transactions sent with
// sendtx are kept as unconfirmed ones and can be read back with /tx/. A
// transaction put in an address's mempool (addMempoolTx) is listed first on
// page 1 of the address's history, as api/worker.go's GetAddress lists them,
// whatever `from` (which bounds the confirmed history only).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { close, createSafeServer, file, listen, record, type Recorded } from './http.ts';
import { specPath } from './paths.ts';

export interface BlockbookStub {
  /** Base URL including `/api` (http://127.0.0.1:PORT/api), as a manifest's upstream. */
  readonly url: string;
  readonly port: number;
  /** Its HTTP server: a WebSocket stand-in (blockbook-socket-standin.ts) takes its upgrades at /websocket. */
  readonly server: Server;
  /** Requests received, in order (method, path, url, query, params, headers, body); health checks apart. */
  readonly requests: Recorded[];
  /** The gateway's health checks (User-Agent chain-gateway-health/...). */
  readonly healthChecks: Recorded[];
  /** Empties `requests`. */
  clear(): void;
  setBestHeight(n: number): void;
  /** The coin its status names from now on (a node repointed at another chain). */
  setCoin(coin: string): void;
  /** The coin its status names now. */
  readonly coin: string;
  readonly bestHeight: number;
  /** Hash of the block at height h of the stand-in chain (after a reorg, of its new branch). */
  blockHash(h: number): string;
  /** A reorg: the blocks from height `from` up to the best are replaced by others (new hashes, the same transactions). */
  reorg(from: number): void;
  /** An unconfirmed transaction touching `address`, listed first (newest first) on page 1 of its `address/` answer. */
  addMempoolTx(address: string, tx: object): void;
  /** Ids of the transactions in the block at height h. */
  txids(h: number): string[];
  /**
   * The block at height h as getBlock answers it (api/worker.go's GetBlock):
   * page `page` (1-based, sanitized) of `size` transactions. REST asks it of
   * size 1000 (public.go's txsInAPI); the socket stand-in of any size.
   */
  block(h: number, page: number, size: number): Json;
  close(): Promise<void>;
}

export interface BlockbookStubOptions {
  /** Coin name as in Blockbook's status (`Bitcoin`, `Dogecoin`, `Ethereum`, ...); default Bitcoin. */
  coin?: string;
  /** Best block height; default 1000. */
  bestHeight?: number;
  /** A fixed port; default 0 (free port). */
  port?: number;
  /**
   * Big blocks, by height: so many transactions (light ones, each with
   * `padBytes` of hex beside its id, so that a page of them is as big as a
   * real block's), in place of the example block's two.
   */
  bigBlocks?: Record<number, { readonly txs: number; readonly padBytes?: number }>;
}

const CT = 'application/json; charset=utf-8';

interface Json {
  [k: string]: unknown;
}

// ---- the spec's examples ------------------------------------------------------------------

const OPENAPI = parseYaml(readFileSync(specPath('blockbook-openapi.yaml'), 'utf8')) as {
  components: { examples: Record<string, { value: unknown }> };
};
/** A fresh copy of components.examples[name].value. */
function example(name: string): Json;
function example<T>(name: string): T;
function example(name: string): unknown {
  const e = OPENAPI.components.examples[name];
  if (!e) throw new Error(`blockbook-openapi.yaml has no example ${name}`);
  return structuredClone(e.value);
}
const BLOCK_EXAMPLE = JSON.parse(readFileSync(specPath('blockbook-block-example.json'), 'utf8')) as Json & { txs: Json[] };
// docs/api.md leaves `isAddress` out of the coinbase input; Blockbook always
// writes it (no omitempty) and openapi's Vin requires it.
for (const tx of BLOCK_EXAMPLE.txs) {
  for (const vin of tx.vin as Json[]) vin.isAddress ??= Array.isArray(vin.addresses) && vin.addresses.length > 0;
}

// ---- the stand-in chain -------------------------------------------------------------------

const GENESIS_TIME = 1_700_000_000;
const BLOCK_SECONDS = 600;
const HASH_PREFIX = '000000000000b10c'; // 16 chars, then the height in 48 hex digits
const TX_PREFIXES = BLOCK_EXAMPLE.txs.map((t) => String(t.txid).slice(0, 16)); // then height (46) and index (2)
const BLOCK_FILTER_SCRIPTS = 'taproot';
/** Sent transactions kept (the oldest go first). */
const MEMPOOL_MAX = 10_000;

export const blockbookBlockHash = (h: number): string => HASH_PREFIX + h.toString(16).padStart(48, '0');
/** The hash of block h on the stand-in's `fork`-th branch (reorg()). */
const forkHash = (h: number, fork: number): string => `00000000f0${fork.toString(16).padStart(6, '0')}${h.toString(16).padStart(48, '0')}`;
export const blockbookTxid = (h: number, i: number): string => TX_PREFIXES[i]! + h.toString(16).padStart(46, '0') + i.toString(16).padStart(2, '0');
const blockTime = (h: number): number => GENESIS_TIME + h * BLOCK_SECONDS;

const NETWORKS: Record<string, { shortcut: string; decimals: number; ethereumType?: boolean }> = {
  Bitcoin: { shortcut: 'BTC', decimals: 8 },
  Testnet: { shortcut: 'TEST', decimals: 8 },
  'Bitcoin Testnet': { shortcut: 'TEST', decimals: 8 },
  Litecoin: { shortcut: 'LTC', decimals: 8 },
  Dogecoin: { shortcut: 'DOGE', decimals: 8 },
  Ethereum: { shortcut: 'ETH', decimals: 18, ethereumType: true },
};

/** Go's strconv.Atoi, as Blockbook reads numbers: optional sign, digits, int range. */
function atoi(s: string | null): number | null {
  if (s === null || !/^[+-]?\d+$/.test(s)) return null;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : null;
}
/** Go's strconv.ParseBool. */
function parseBool(s: string): boolean | null {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(s)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(s)) return false;
  return null;
}
/** Go's path.Clean for URL paths, keeping a trailing slash the way ServeMux does. */
function cleanPath(p: string): string {
  if (p === '') return '/';
  const abs = p.startsWith('/') ? p : `/${p}`;
  const out: string[] = [];
  for (const seg of abs.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  let np = `/${out.join('/')}`;
  if (abs.endsWith('/') && np !== '/') np += '/';
  return np;
}
function decodePath(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

class ApiError extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}
const notFoundBlock = (): never => {
  throw new ApiError('Block not found');
};

type Handler = (arg: string, q: URLSearchParams, r: Recorded) => unknown;

export async function startBlockbookStub(opts: BlockbookStubOptions = {}): Promise<BlockbookStub> {
  let coin = opts.coin ?? 'Bitcoin';
  const net = NETWORKS[coin] ?? { shortcut: coin.replace(/[^A-Za-z]/g, '').slice(0, 4).toUpperCase(), decimals: 8 };
  let best = opts.bestHeight ?? 1000;
  const requests: Recorded[] = [];
  const healthChecks: Recorded[] = [];
  /** txid -> raw hex of transactions sent through sendtx (the mempool). */
  const mempool = new Map<string, string>();
  /** address -> its unconfirmed transactions (addMempoolTx), newest first. */
  const addressMempool = new Map<string, Json[]>();

  /** Height of a block id (height or hash), or null: GetBlock's lookup. */
  /** Where each reorg() replaced the chain: the i-th from that height on (to the next one's) is branch i + 1. */
  const forks: number[] = [];
  /** A block's hash on the chain now: that of the newest branch that replaced its height, else the first branch's. */
  const hashOf = (h: number): string => {
    for (let i = forks.length - 1; i >= 0; i--) if (h >= forks[i]!) return forkHash(h, i + 1);
    return blockbookBlockHash(h);
  };
  const heightOf = (id: string): number | null => {
    const n = atoi(id);
    if (n !== null) return n >= 0 && n <= best ? n : null;
    const m = /^[0-9a-f]{16}([0-9a-f]{48})$/.exec(id);
    if (!m) return null;
    const h = Number.parseInt(m[1]!, 16);
    // A hash of a branch the chain left is no block of it.
    return Number.isSafeInteger(h) && h <= best && hashOf(h) === id ? h : null;
  };
  const blockOrThrow = (id: string): number => heightOf(id) ?? notFoundBlock();

  const txAt = (h: number, i: number): Json => {
    const t = structuredClone(BLOCK_EXAMPLE.txs[i]!);
    return { ...t, txid: blockbookTxid(h, i), blockHash: hashOf(h), blockHeight: h, confirmations: best - h + 1, blockTime: blockTime(h) };
  };
  /** A confirmed transaction by id: [height, index], or null. */
  const findTx = (txid: string): [number, number] | null => {
    if (!/^[0-9a-f]{64}$/.test(txid)) return null;
    const i = TX_PREFIXES.indexOf(txid.slice(0, 16));
    if (i === -1 || Number.parseInt(txid.slice(62), 16) !== i) return null;
    const h = Number.parseInt(txid.slice(16, 62), 16);
    return Number.isSafeInteger(h) && h <= best ? [h, i] : null;
  };
  const unconfirmedTx = (txid: string, hex: string): Json => ({
    ...example('BitcoinTransactionUnconfirmed'),
    txid,
    hex,
    blockTime: Math.floor(Date.now() / 1000),
  });
  const txOrThrow = (txid: string): Json => {
    const at = findTx(txid);
    if (at) return txAt(...at);
    const hex = mempool.get(txid);
    if (hex !== undefined) return unconfirmedTx(txid, hex);
    throw new ApiError(`Transaction '${txid}' not found`);
  };
  /** Transactions of an address / xpub: those of block 1 (or 0), newest first. */
  const accountTxids = (): string[] => txids(Math.min(1, best)).reverse();
  const big = opts.bigBlocks ?? {};
  /** A big block's i-th transaction id. */
  const bigTxid = (h: number, i: number): string => `b16b10c${h.toString(16).padStart(25, '0')}${i.toString(16).padStart(32, '0')}`;
  const txids = (h: number): string[] => (big[h] === undefined ? BLOCK_EXAMPLE.txs.map((_, i) => blockbookTxid(h, i)) : Array.from({ length: big[h].txs }, (_, i) => bigTxid(h, i)));

  const rawBlockHex = (h: number): string => {
    const header = Buffer.alloc(80);
    header.writeInt32LE(0x20000000, 0);
    Buffer.from(hashOf(Math.max(0, h - 1)), 'hex').reverse().copy(header, 4);
    Buffer.from(String(BLOCK_EXAMPLE.merkleRoot), 'hex').reverse().copy(header, 36);
    header.writeUInt32LE(blockTime(h), 68);
    header.writeUInt32LE(Number.parseInt(String(BLOCK_EXAMPLE.bits), 16), 72);
    header.writeUInt32LE(h, 76);
    return `${header.toString('hex')}${BLOCK_EXAMPLE.txs.length.toString(16).padStart(2, '0')}`;
  };

  const status = (): Json => {
    const s = example<{ blockbook: Json; backend: Json }>('Status');
    return {
      blockbook: {
        ...s.blockbook,
        coin,
        network: net.shortcut,
        host: 'blockbook-stand-in',
        bestHeight: best,
        lastBlockTime: new Date(blockTime(best) * 1000).toISOString(),
        mempoolSize: mempool.size,
        decimals: net.decimals,
        about: 'Blockbook stand-in for chain-gateway tests (shapes from blockbook-openapi.yaml).',
      },
      backend: { ...s.backend, blocks: best, headers: best, bestBlockHash: hashOf(best) },
    };
  };

  const pageParam = (q: URLSearchParams): number => Math.max(1, atoi(q.get('page')) ?? 1);
  const account = (addr: string, q: URLSearchParams, base: Json): Json => {
    const details = q.get('details') ?? 'txids';
    let pageSize = atoi(q.get('pageSize')) ?? 0;
    if (pageSize <= 0 || pageSize > 1000) pageSize = 1000;
    // The account's confirmed history is block 1's (or 0's); `from` past it leaves none.
    const all = (atoi(q.get('from')) ?? 0) > Math.min(1, best) ? [] : accountTxids();
    const totalPages = Math.max(1, Math.ceil(all.length / pageSize));
    const page = Math.min(pageParam(q), totalPages);
    const slice = all.slice((page - 1) * pageSize, page * pageSize);
    const { txids: _t, transactions: _tr, page: _p, totalPages: _tp, itemsOnPage: _i, ...rest } = base;
    const unconfirmed = addressMempool.get(addr) ?? [];
    const out: Json = { ...rest, address: addr, txs: all.length + unconfirmed.length, ...(unconfirmed.length > 0 ? { unconfirmedTxs: unconfirmed.length } : {}) };
    if (details === 'basic' || details === 'tokens' || details === 'tokenBalances') return out;
    Object.assign(out, { page, totalPages, itemsOnPage: pageSize });
    // GetAddress: the mempool's first on page 1, each marked isOwn where it touches the address, then the page held to pageSize.
    const first = page === 1 ? unconfirmed : [];
    const own = (io: Json): Json => (Array.isArray(io.addresses) && io.addresses.includes(addr) ? { ...io, isOwn: true } : io);
    if (details === 'txs' || details === 'txslight') {
      const pending = first.map((t) => ({ ...t, vin: ((t.vin ?? []) as Json[]).map(own), vout: ((t.vout ?? []) as Json[]).map(own) }));
      out.transactions = [...pending, ...slice.map((id) => txOrThrow(id))].slice(0, pageSize);
    } else out.txids = [...first.map((t) => t.txid as string), ...slice].slice(0, pageSize);
    return out;
  };
  const boolParam = (q: URLSearchParams, name: string): boolean | null => {
    const v = q.get(name);
    if (v === null || v === '') return null;
    const b = parseBool(v);
    if (b === null) throw new ApiError(`Parameter '${name}' cannot be converted to boolean`);
    return b;
  };
  const ratesFor = (rates: Record<string, number>, currency: string | null): Record<string, number> =>
    currency ? { [currency.toLowerCase()]: rates[currency.toLowerCase()] ?? -1 } : rates;
  const sendTx = (hex: string): Json => {
    if (hex.length === 0) throw new ApiError('Missing tx blob');
    if (!/^([0-9a-fA-F]{2})+$/.test(hex)) throw new ApiError('TX decode failed');
    const raw = Buffer.from(hex, 'hex');
    const txid = Buffer.from(createHash('sha256').update(createHash('sha256').update(raw).digest()).digest()).reverse().toString('hex');
    mempool.set(txid, hex.toLowerCase());
    if (mempool.size > MEMPOOL_MAX) mempool.delete(mempool.keys().next().value!);
    return { result: txid };
  };

  // ---- handlers, by Blockbook's handler names ----
  const apiIndex: Handler = () => status();
  const apiBlockIndex: Handler = (id) => {
    const n = atoi(id);
    if (n === null || n < 0) return { blockHash: hashOf(best) }; // no height: the best block
    if (n > best) notFoundBlock();
    return { blockHash: hashOf(n) };
  };
  /** computePaging of a big block: Blockbook's paging, and its transactions from..to. */
  const bigBlock = (h: number, page: number, size: number): Json => {
    const count = big[h]!.txs;
    const pad = 'ab'.repeat(Math.ceil((big[h]!.padBytes ?? 0) / 2));
    const totalPages = Math.max(Math.trunc((count - 1) / size), 0);
    let k = Math.max(page - 1, 0);
    if (k * size >= count) k = totalPages;
    const from = k * size;
    const to = Math.min(from + size, count);
    const txs = Array.from({ length: to - from }, (_, i) => ({ txid: bigTxid(h, from + i), blockHash: hashOf(h), blockHeight: h, confirmations: best - h + 1, blockTime: blockTime(h), value: '0', fees: '0', ...(pad === '' ? {} : { hex: pad }) }));
    return { page: k + 1, totalPages: totalPages + 1, itemsOnPage: size, hash: hashOf(h), height: h, confirmations: best - h + 1, time: blockTime(h), txCount: count, ...(txs.length > 0 ? { txs } : {}) };
  };
  const block = (h: number, page: number, size: number): Json => (big[h] === undefined ? { ...smallBlock(h), itemsOnPage: size } : bigBlock(h, page, size));
  const apiBlock: Handler = (id, q) => block(blockOrThrow(id), pageParam(q), 1000);
  const smallBlock = (h: number): Json => {
    const { nextBlockHash: _n, previousBlockHash: _p, ...b } = BLOCK_EXAMPLE;
    return {
      ...b,
      page: 1, // 2 transactions, 1000 a page: any page is sanitized to the only one
      totalPages: 1,
      itemsOnPage: 1000,
      hash: hashOf(h),
      ...(h > 0 ? { previousBlockHash: hashOf(h - 1) } : {}),
      ...(h < best ? { nextBlockHash: hashOf(h + 1) } : {}),
      height: h,
      confirmations: best - h + 1,
      time: blockTime(h),
      txCount: BLOCK_EXAMPLE.txs.length,
      txs: BLOCK_EXAMPLE.txs.map((_, i) => txAt(h, i)),
    };
  };
  const apiBlockRaw: Handler = (id) => ({ hex: rawBlockHex(blockOrThrow(id)) });
  const apiFeeStats: Handler = (id) => {
    blockOrThrow(id);
    return { ...example('FeeStats'), txCount: BLOCK_EXAMPLE.txs.length };
  };
  const apiBlockFilters: Handler = (_id, q) => {
    // apiBlockFilters, check for check
    const lastN = atoi(q.get('lastN')) ?? 0;
    let from = atoi(q.get('from')) ?? 0;
    let to = atoi(q.get('to')) ?? 0;
    const scriptType = q.get('scriptType') ?? '';
    if (scriptType !== BLOCK_FILTER_SCRIPTS) throw new ApiError(`Invalid scriptType ${scriptType}. Use ${BLOCK_FILTER_SCRIPTS}`);
    if (lastN === 0 && from === 0 && to === 0) throw new ApiError('Missing parameters');
    if (from > to) throw new ApiError('Invalid parameters - from > to');
    if (lastN > 0) {
      to = best;
      from = to - lastN + 1;
    } else if (to === 0) to = best;
    // a height past the tip: GetBlockHash fails, which is no public error
    if (from < 0 || to > best) throw new ApiError('Internal server error', 500);
    if (to - from + 1 > 10_000) throw new ApiError('Requested range is above 10000 blocks');
    const blockFilters: Record<string, { blockHash: string; filter: string }> = {};
    for (let h = Math.max(0, from); h <= to; h++) {
      blockFilters[String(h)] = { blockHash: hashOf(h), filter: createHash('sha256').update(`filter:${h}`).digest('hex').slice(0, 40) };
    }
    return { P: 19, M: 784931, zeroedKey: false, blockFilters };
  };
  const apiTx: Handler = (txid, q) => {
    if (txid.length === 0) throw new ApiError('Missing txid');
    const spending = q.get('spending');
    if (spending !== null && spending !== '' && parseBool(spending) === null) throw new ApiError("Parameter 'spending' cannot be converted to boolean");
    return txOrThrow(txid);
  };
  const apiTxSpecific: Handler = (txid) => {
    if (txid.length === 0) throw new ApiError('Missing txid');
    const tx = txOrThrow(txid);
    const h = typeof tx.blockHeight === 'number' && tx.blockHeight >= 0 ? tx.blockHeight : null;
    const native = example('TransactionSpecific');
    return {
      ...native,
      txid,
      hex: typeof tx.hex === 'string' ? tx.hex : `0200000001${txid}`,
      ...(h === null
        ? { blockhash: undefined, height: undefined, confirmations: 0, blocktime: undefined, time: undefined }
        : { blockhash: hashOf(h), height: h, confirmations: best - h + 1, time: blockTime(h), blocktime: blockTime(h) }),
    };
  };
  const apiRawTx: Handler = (txid) => {
    if (txid.length === 0) throw new ApiError('Missing txid');
    const tx = txOrThrow(txid);
    return typeof tx.hex === 'string' ? tx.hex : `02000000000101${txid}`;
  };
  const apiAddress: Handler = (addr, q) => {
    if (addr.length === 0) throw new ApiError('Missing address');
    return account(addr, q, example('BitcoinAddressTxids'));
  };
  const apiXpub: Handler = (xpub, q) => {
    if (xpub.length === 0) throw new ApiError('Missing xpub');
    const base = example('XpubAddress');
    const out = account(xpub, q, base);
    const tokens = q.get('tokens') ?? 'nonzero';
    if (tokens === 'used' || tokens === 'derived' || tokens === 'nonzero') out.tokens = base.tokens;
    out.usedTokens = base.usedTokens;
    return out;
  };
  const apiUtxo: Handler = (desc, q) => {
    const onlyConfirmed = boolParam(q, 'confirmed') ?? false;
    if (desc.length === 0) throw new ApiError('Missing address');
    const [unconf, conf] = example<Json[]>('UtxoList');
    const h = Math.max(0, best - 46);
    const list: Json[] = [
      { ...unconf!, txid: blockbookTxid(best, 1), lockTime: best },
      { ...conf!, txid: blockbookTxid(h, 0), height: h, confirmations: best - h + 1, ...(best - h + 1 <= 100 ? { coinbase: true } : { coinbase: undefined }) },
    ];
    return onlyConfirmed ? list.filter((u) => (u.confirmations as number) > 0) : list;
  };
  const apiBalanceHistory: Handler = (desc, q) => {
    const ts = (name: string): number | null => {
      const v = q.get(name);
      if (v === null || v === '') return null;
      const n = atoi(v);
      if (n === null) throw new ApiError('Internal server error', 500); // strconv error: not a public one
      return n;
    };
    const from = ts('from');
    const to = ts('to');
    if (desc.length === 0) return [];
    const fiat = q.get('fiatcurrency');
    return example<(Json & { time: number; rates: Record<string, number> })[]>('BalanceHistoryAllRates')
      .filter((p) => (from === null || from === 0 || p.time >= from) && (to === null || to === 0 || p.time <= to))
      .map((p) => ({ ...p, rates: ratesFor(p.rates, fiat) }));
  };
  const apiEstimateFee: Handler = (b, q) => {
    if (b.length === 0) throw new ApiError("Missing parameter 'number of blocks'");
    const blocks = atoi(b);
    if (blocks === null) throw new ApiError("Parameter 'number of blocks' is not a number");
    boolParam(q, 'conservative');
    const sat = Math.max(1000, Math.round(2460 * (6 / Math.max(1, blocks)))); // per kB, lower for later targets
    return { result: (sat / 10 ** 8).toFixed(8) };
  };
  const apiTickers: Handler = (_x, q) => {
    const currency = q.get('currency');
    const t = example<{ ts: number; rates: Record<string, number> }>('FiatTickerAll');
    const block = q.get('block');
    const stamp = q.get('timestamp');
    if (block) t.ts = blockTime(blockOrThrow(block));
    else if (stamp) {
      const n = atoi(stamp);
      if (n === null) throw new ApiError("Parameter 'timestamp' is not a valid Unix timestamp.");
      t.ts = n;
    }
    return { ts: t.ts, rates: ratesFor(t.rates, currency) };
  };
  const apiMultiTickers: Handler = (_x, q) => {
    const stamps = q.get('timestamp');
    if (!stamps) throw new ApiError("Parameter 'timestamp' is missing.");
    const list = stamps.split(',').map((s) => {
      const n = atoi(s);
      if (n === null) throw new ApiError("Parameter 'timestamp' does not contain a valid Unix timestamp.");
      return n;
    });
    const rates = example<{ rates: Record<string, number> }>('FiatTickerAll').rates;
    return list.map((ts) => ({ ts, rates: ratesFor(rates, q.get('currency')) }));
  };
  const apiAvailableVsCurrencies: Handler = (_x, q) => {
    const n = atoi(q.get('timestamp'));
    if (n === null) throw new ApiError('Parameter "timestamp" is not a valid Unix timestamp.');
    return { ...example('TickersList'), ts: n };
  };
  const apiContract: Handler = (contract) => {
    if (contract.length === 0) throw new ApiError('Missing contract');
    return { ...example('ContractInfo'), contract, blockHeight: best };
  };
  const apiSendTx: Handler = (hex, _q, r) => sendTx(r.method === 'POST' ? r.body.toString('utf8') : hex);

  // ---- Blockbook's ServeMux (server/public.go) ----
  const v2: Record<string, Handler> = {
    'block-index': apiBlockIndex,
    'block-filters': apiBlockFilters,
    'tx-specific': apiTxSpecific,
    tx: apiTx,
    address: apiAddress,
    xpub: apiXpub,
    utxo: apiUtxo,
    block: apiBlock,
    rawblock: apiBlockRaw,
    sendtx: apiSendTx,
    estimatefee: apiEstimateFee,
    feestats: apiFeeStats,
    balancehistory: apiBalanceHistory,
    tickers: apiTickers,
    'multi-tickers': apiMultiTickers,
    'tickers-list': apiAvailableVsCurrencies,
    contract: apiContract,
  };
  const unversioned = ['block-index', 'block-filters', 'tx-specific', 'tx', 'address', 'xpub', 'utxo', 'block', 'rawblock', 'sendtx', 'estimatefee', 'balancehistory'];
  const v1 = ['block-index', 'tx-specific', 'tx', 'address', 'utxo', 'block', 'sendtx', 'estimatefee'];
  /** pattern (a subtree: ends with '/') -> [handler, route name] */
  const routes = new Map<string, [Handler, string]>();
  for (const [name, h] of Object.entries(v2)) routes.set(`/api/v2/${name}/`, [h, name]);
  for (const name of unversioned) routes.set(`/api/${name}/`, [v2[name]!, name]);
  routes.set('/api/rawtx/', [apiRawTx, 'rawtx']);
  if (!net.ethereumType) for (const name of v1) routes.set(`/api/v1/${name}/`, [v2[name]!, name]);
  routes.set('/api/', [apiIndex, '']);
  const patterns = [...routes.keys()].sort((a, b) => b.length - a.length);

  const send = (res: ServerResponse, status: number, body: unknown): void => {
    if (res.headersSent || res.destroyed) return;
    const text = `${JSON.stringify(body)}\n`; // Go's json.Encoder ends with a newline
    res.writeHead(status, { 'content-type': CT, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const redirect = (res: ServerResponse, location: string): void => {
    const text = `<a href="${location}">Moved Permanently</a>.\n\n`;
    res.writeHead(301, { location, 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };

  const server = createSafeServer(
    async (req, res) => {
      const r = await record(req);
      file(r, requests, healthChecks);
      // Go's ServeMux matches the escaped path: not clean -> 301 to the clean
      // one; longest subtree pattern wins; '/x' of a '/x/' subtree -> 301 '/x/'.
      const raw = r.path;
      const query = r.query ? `?${r.query}` : '';
      const clean = cleanPath(raw);
      if (clean !== raw) return redirect(res, clean + query);
      if (routes.has(`${raw}/`)) return redirect(res, `${raw}/${query}`);
      const pattern = patterns.find((p) => raw.startsWith(p));
      if (!pattern) {
        const text = '404 page not found\n';
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      // handlers read the decoded path: xpub/utxo take all after 'xpub/' or
      // 'utxo/' (descriptors hold slashes), the others what follows the last '/'
      const [handler, name] = routes.get(pattern)!;
      const path = decodePath(raw);
      const arg = name === 'xpub' || name === 'utxo' ? path.slice(path.lastIndexOf(`${name}/`) + name.length + 1) : path.slice(path.lastIndexOf('/') + 1);
      try {
        send(res, 200, handler(arg, new URLSearchParams(r.query), r));
      } catch (err) {
        if (err instanceof ApiError) send(res, err.status, { error: err.message });
        else throw err;
      }
    },
    (res) => send(res, 500, { error: 'Internal server error' }),
  );
  const base = await listen(server, opts.port ?? 0);
  const { port } = server.address() as { port: number };
  return {
    url: `${base}/api`,
    port,
    server,
    requests,
    healthChecks,
    clear: () => void requests.splice(0),
    setCoin: (c) => {
      coin = c;
    },
    get coin() {
      return coin;
    },
    setBestHeight: (n) => {
      if (!Number.isSafeInteger(n) || n < 0) throw new Error(`setBestHeight: ${n} is not a block height`);
      best = n;
    },
    get bestHeight() {
      return best;
    },
    blockHash: hashOf,
    reorg(from) {
      if (!Number.isSafeInteger(from) || from < 1 || from > best) throw new Error(`reorg: ${from} is not a block of the chain`);
      forks.push(from);
    },
    addMempoolTx(address, tx) {
      addressMempool.set(address, [structuredClone(tx) as Json, ...(addressMempool.get(address) ?? [])]);
    },
    txids,
    block,
    close: () => close(server),
  };
}
