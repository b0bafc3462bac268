// Blockbook's WebSocket API as a stand-in (no real Blockbook runs here), on a
// Blockbook REST stand-in's own server at /websocket, as trezor/blockbook's
// server/websocket.go serves it beside /api: {"id","method","params"} in,
// {"id","data"} out, errors as {"id","data":{"error":{"message"}}}, and a
// method it does not know answered with nothing. What it follows of
// websocket.go:
//   - getInfo (the REST stand-in's coin as its name), getBlockHash and ping,
//     from the REST stand-in's chain;
//   - subscribeNewBlock: each newBlock() to every subscriber, {height, hash,
//     evmData: null}, under its subscribe id;
//   - subscribeAddresses: one set per socket, replaced by each call (at most
//     1,000 addresses, 100 with newBlockTxs), each notification {address, tx}
//     under the id of the call that made the set; a mempool transaction goes
//     to every socket holding its address, a mined one only where newBlockTxs;
//   - subscribeFiatRates: one per socket (a currency, or all), each ticker
//     {rates} to it;
//   - what REST does not answer: longTermFeeRate; getMempoolFilters,
//     getBlockFilter and getBlockFiltersBatch (P, M, zeroedKey; the script
//     type it indexes is 'taproot', another is an error); getBlock of any page
//     size (sanitized as websocket.go does: default 1000, at most 10000);
//     estimateFee, on an EVM coin (coin 'Ethereum') as websocket.go's
//     Ethereum branch answers it (one gas estimate, feeLimit, feePerTx,
//     eip1559), else per block count.
// It records every socket opened and every message received, and can drop
// every socket (an upstream lost), refuse new ones, and leave the methods
// named in `silent` unanswered (a node that went away mid-call), or those
// in `delays` answered late (a slow node), or those held (hold()) answered
// when the test releases them. Each message names the socket it
// came on (its serial, by opening order), each upgrade its URL and headers,
// and `peak` the most sockets open at once; `mempoolExtra` makes
// getMempoolFilters' answer as large as a busy mempool's.
import { createHash } from 'node:crypto';
import { WebSocketServer, type WebSocket } from 'ws';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { startBlockbookStub, type BlockbookStub, type BlockbookStubOptions } from './blockbook-stub.ts';

export interface SocketMessage {
  readonly id: unknown;
  readonly method: unknown;
  readonly params: unknown;
  /** The serial of the socket it came on (1 = the first opened). */
  readonly socket: number;
}

/** An upgrade the stand-in accepted: what the client asked and sent. */
export interface SocketUpgrade {
  readonly socket: number;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

interface Peer {
  readonly ws: WebSocket;
  readonly serial: number;
  blockId: string | null;
  addresses: Set<string>;
  addressId: string;
  newBlockTxs: boolean;
  fiatId: string | null;
  fiatCurrency: string | null;
}

export interface BlockbookSocketStandIn {
  /** Sockets open now. */
  readonly open: number;
  /** Sockets opened so far. */
  readonly opened: number;
  /** Every message received, in order. */
  readonly messages: SocketMessage[];
  /** Every upgrade accepted, in order. */
  readonly upgrades: SocketUpgrade[];
  /** The most sockets open at once since it was last set (set it to `open` to start counting). */
  peak: number;
  /** Entries getMempoolFilters answers beyond its one (each ~110 bytes): a busy mempool's answer. */
  mempoolExtra: number;
  /** Each open socket's address set. */
  subscriptions(): string[][];
  /** Open sockets holding an address set or a fiat rates subscription (the gateway's carrier of its clients' subscriptions). */
  carriers(): number;
  /** Open sockets subscribed to new blocks. */
  blockSubscribers(): number;
  /** A mempool transaction touching `address`: to each socket holding it. How many sockets got it. */
  mempoolTx(address: string, tx: object): number;
  /** A mined transaction touching `address`: to each socket holding it with newBlockTxs. */
  minedTx(address: string, tx: object): number;
  /** A new block to every subscribeNewBlock socket. */
  newBlock(height: number, hash: string): void;
  /** A fiat rates ticker (all currencies) to every subscribeFiatRates socket. */
  fiat(rates: Record<string, number>): void;
  /** Every socket closed at once (the upstream lost). */
  drop(): void;
  /** While true, an upgrade is answered 503. */
  refuse: boolean;
  /** Methods it records and does not answer. */
  readonly silent: Set<string>;
  /** Methods it answers only after so many milliseconds (a slow node). */
  readonly delays: Map<string, number>;
  /** `method`'s messages from now on are answered only when the returned release is called (then each at once, in order). */
  hold(method: string): () => void;
  close(): void;
}

const MAX_ADDRESSES = 1000;
const MAX_ADDRESSES_NEW_BLOCK_TXS = 100;
/** The filters it serves: BlockFilterScripts, P (BlockGolombFilterP) and M (GetGolombParamM(P)). */
/** blockchain-link asks for this one. */
const FILTER_SCRIPTS = 'taproot-noordinals';
const FILTER = { P: 19, M: 784931, zeroedKey: false };
/** Its fee: 2 gwei a gas on an EVM coin, 12,345 sat a kB elsewhere. */
const EVM_FEE = 2_000_000_000n;
const FEE_PER_KB = 12_345n;

/** A block's filter, made up of its hash. */
export const standInFilter = (hash: string): string => createHash('sha256').update(`filter:${hash}`).digest('hex').slice(0, 40);

export function attachBlockbookSocket(stub: BlockbookStub): BlockbookSocketStandIn {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const peers = new Set<Peer>();
  const messages: SocketMessage[] = [];
  const upgrades: SocketUpgrade[] = [];
  const silent = new Set<string>();
  const delays = new Map<string, number>();
  const held = new Map<string, (() => void)[]>();
  let opened = 0;
  let peak = 0;
  let mempoolExtra = 0;
  /** A block's height by its id (a hash, or a height as a string), or -1. */
  const heightOf = (id: unknown): number => {
    if (typeof id !== 'string') return -1;
    if (/^\d+$/.test(id)) return Number(id) <= stub.bestHeight ? Number(id) : -1;
    for (let h = 0; h <= stub.bestHeight; h++) if (stub.blockHash(h) === id) return h;
    return -1;
  };
  const int = (v: unknown, fallback: number): number => (typeof v === 'number' && Number.isSafeInteger(v) ? v : fallback);

  const send = (p: Peer, id: unknown, data: unknown): void => {
    if (p.ws.readyState === p.ws.OPEN) p.ws.send(JSON.stringify({ id, data }));
  };
  const error = (message: string) => ({ error: { message } });

  const onMessage = (p: Peer, raw: string): void => {
    let m: SocketMessage;
    try {
      m = { ...(JSON.parse(raw) as Omit<SocketMessage, 'socket'>), socket: p.serial };
    } catch {
      // websocket.go closes a socket that sends what it cannot read.
      p.ws.close();
      return;
    }
    messages.push(m);
    if (silent.has(String(m.method))) return;
    const waiting = held.get(String(m.method));
    if (waiting !== undefined) return void waiting.push(() => answerMessage(p, m));
    const delay = delays.get(String(m.method));
    if (delay === undefined) answerMessage(p, m);
    else setTimeout(() => answerMessage(p, m), delay);
  };
  const answerMessage = (p: Peer, m: SocketMessage): void => {
    const params = (m.params ?? {}) as Record<string, unknown>;
    switch (m.method) {
      case 'longTermFeeRate':
        return send(p, m.id, { feePerUnit: '1500', blocks: 1008 });
      case 'getMempoolFilters': {
        if (params.scriptType !== FILTER_SCRIPTS) return send(p, m.id, error(`Unsupported script type ${String(params.scriptType)}`));
        const entries: Record<string, string> = { [stub.blockHash(stub.bestHeight).replace(/^./, 'f')]: standInFilter(`mempool:${int(params.fromTimestamp, 0)}`) };
        const extra = standInFilter('extra');
        for (let i = 0; i < mempoolExtra; i++) entries[i.toString(16).padStart(64, '0')] = extra;
        return send(p, m.id, { ...FILTER, entries });
      }
      case 'getBlockFilter': {
        if (params.scriptType !== FILTER_SCRIPTS) return send(p, m.id, error(`Unsupported script type ${String(params.scriptType)}`));
        const h = heightOf(params.blockHash);
        return send(p, m.id, h < 0 || /^\d+$/.test(String(params.blockHash)) ? error('Block not found') : { ...FILTER, blockFilter: standInFilter(stub.blockHash(h)) });
      }
      case 'getBlockFiltersBatch': {
        if (params.scriptType !== FILTER_SCRIPTS) return send(p, m.id, error(`Unsupported script type ${String(params.scriptType)}`));
        let size = int(params.pageSize, 0);
        if (size > 10000) return send(p, m.id, error('pageSize max 10000'));
        if (size <= 0) size = 1000;
        const from = heightOf(params.bestKnownBlockHash);
        if (from < 0) return send(p, m.id, error('Block not found'));
        const batch: string[] = [];
        for (let h = from + 1; h <= Math.min(stub.bestHeight, from + size); h++) batch.push(`${h}:${stub.blockHash(h)}:${standInFilter(stub.blockHash(h))}`);
        return send(p, m.id, { ...FILTER, blockFiltersBatch: batch });
      }
      case 'getBlock': {
        const h = heightOf(params.id);
        if (h < 0) return send(p, m.id, error('Block not found'));
        // sanitizePagingParams: a negative page size is the default, 0 too, and one over 10000 is 10000.
        let size = int(params.pageSize, 0);
        if (size <= 0) size = 1000;
        return send(p, m.id, stub.block(h, int(params.page, 0), Math.min(size, 10000)));
      }
      case 'estimateFee': {
        const blocks = Array.isArray(params.blocks) ? (params.blocks as number[]) : [];
        if (blocks.length > 32) return send(p, m.id, error('blocks max 32'));
        const specific = (params.specific ?? {}) as Record<string, unknown>;
        if (/^ethereum$/i.test(stub.coin)) {
          // EthereumTypeEstimateGas: a transfer, and 16 a byte of data.
          const data = typeof specific.data === 'string' ? specific.data.replace(/^0x/, '') : '';
          const gas = 21000n + 16n * BigInt(data.length / 2);
          const fee = { feePerUnit: String(EVM_FEE), feeLimit: String(gas), feePerTx: String(EVM_FEE * gas), eip1559: { baseFeePerGas: '1500000000', low: { maxFeePerGas: '1600000000', maxPriorityFeePerGas: '100000000' } } };
          return send(p, m.id, blocks.map(() => fee));
        }
        const txsize = typeof specific.txsize === 'number' ? BigInt(Math.trunc(specific.txsize)) : 0n;
        return send(p, m.id, blocks.map((b) => ({ feePerUnit: String(FEE_PER_KB * BigInt(b)), ...(txsize > 0n ? { feePerTx: String((FEE_PER_KB * BigInt(b) * txsize + 500n) / 1000n) } : {}) })));
      }
      case 'ping':
        return send(p, m.id, {});
      case 'getInfo':
        return send(p, m.id, { name: stub.coin, shortcut: 'BTC', network: 'BTC', decimals: 8, bestHeight: stub.bestHeight, bestHash: stub.blockHash(stub.bestHeight), block0Hash: stub.blockHash(0), testnet: false, version: '0.5.0', backend: {} });
      case 'getBlockHash': {
        const h = typeof params.height === 'number' ? params.height : 0;
        return send(p, m.id, h <= stub.bestHeight ? { hash: stub.blockHash(h) } : error('Block not found'));
      }
      case 'subscribeNewBlock':
        p.blockId = String(m.id);
        return send(p, m.id, { subscribed: true });
      case 'unsubscribeNewBlock':
        p.blockId = null;
        return send(p, m.id, { subscribed: false });
      case 'subscribeAddresses': {
        const list = params.addresses;
        if (!Array.isArray(list)) return send(p, m.id, error('Invalid subscribeAddresses params'));
        const nb = params.newBlockTxs === true;
        const max = nb ? MAX_ADDRESSES_NEW_BLOCK_TXS : MAX_ADDRESSES;
        if (list.length > max) return send(p, m.id, error(`addresses max ${max}`));
        p.addresses = new Set(list as string[]);
        p.addressId = String(m.id);
        p.newBlockTxs = nb;
        return send(p, m.id, { subscribed: true });
      }
      case 'unsubscribeAddresses':
        p.addresses = new Set();
        return send(p, m.id, { subscribed: false });
      case 'subscribeFiatRates':
        p.fiatId = String(m.id);
        p.fiatCurrency = typeof params.currency === 'string' && params.currency !== '' ? params.currency.toLowerCase() : null;
        return send(p, m.id, { subscribed: true });
      case 'unsubscribeFiatRates':
        p.fiatId = null;
        return send(p, m.id, { subscribed: false });
      // Any other method: websocket.go answers nothing.
    }
  };

  const state = {
    refuse: false,
  };
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/websocket' || state.refuse) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      opened++;
      upgrades.push({ socket: opened, url: req.url ?? '', headers: { ...req.headers } });
      const p: Peer = { ws, serial: opened, blockId: null, addresses: new Set(), addressId: '', newBlockTxs: false, fiatId: null, fiatCurrency: null };
      peers.add(p);
      peak = Math.max(peak, peers.size);
      ws.on('message', (d: Buffer) => onMessage(p, d.toString('utf8')));
      ws.on('close', () => peers.delete(p));
    });
  };
  stub.server.on('upgrade', upgrade);

  const notifyTx = (address: string, tx: object, mined: boolean): number => {
    let n = 0;
    for (const p of peers) {
      if (!p.addresses.has(address) || (mined && !p.newBlockTxs)) continue;
      send(p, p.addressId, { address, tx });
      n++;
    }
    return n;
  };

  return {
    get open() {
      return peers.size;
    },
    get opened() {
      return opened;
    },
    messages,
    upgrades,
    get peak() {
      return peak;
    },
    set peak(v: number) {
      peak = v;
    },
    get mempoolExtra() {
      return mempoolExtra;
    },
    set mempoolExtra(v: number) {
      mempoolExtra = v;
    },
    subscriptions: () => [...peers].map((p) => [...p.addresses]),
    carriers: () => [...peers].filter((p) => p.addresses.size > 0 || p.fiatId !== null).length,
    blockSubscribers: () => [...peers].filter((p) => p.blockId !== null).length,
    mempoolTx: (address, tx) => notifyTx(address, tx, false),
    minedTx: (address, tx) => notifyTx(address, tx, true),
    newBlock(height, hash) {
      for (const p of peers) if (p.blockId !== null) send(p, p.blockId, { height, hash, evmData: null });
    },
    fiat(rates) {
      for (const p of peers) {
        if (p.fiatId === null) continue;
        if (p.fiatCurrency === null) send(p, p.fiatId, { rates });
        else if (rates[p.fiatCurrency] !== undefined) send(p, p.fiatId, { rates: { [p.fiatCurrency]: rates[p.fiatCurrency] } });
      }
    },
    drop() {
      for (const p of peers) p.ws.terminate();
    },
    get refuse() {
      return state.refuse;
    },
    silent,
    delays,
    hold(method) {
      held.set(method, []);
      return () => {
        const waiting = held.get(method) ?? [];
        held.delete(method);
        for (const answer of waiting) answer();
      };
    },
    set refuse(v: boolean) {
      state.refuse = v;
    },
    close() {
      stub.server.off('upgrade', upgrade);
      for (const p of peers) p.ws.terminate();
      wss.close();
    },
  };
}

/** A Blockbook REST stand-in with its WebSocket, as one upstream (`url`: its base, for a manifest). */
export interface BlockbookWithSocket {
  readonly bb: BlockbookStub;
  readonly ws: BlockbookSocketStandIn;
  readonly url: string;
  close(): Promise<void>;
}

export async function startBlockbookWithSocket(opts: BlockbookStubOptions = {}): Promise<BlockbookWithSocket> {
  const bb = await startBlockbookStub(opts);
  const ws = attachBlockbookSocket(bb);
  return {
    bb,
    ws,
    url: bb.url,
    close: async () => {
      ws.close();
      await bb.close();
    },
  };
}
