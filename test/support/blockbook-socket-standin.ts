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
//     {rates} to it.
// It records every socket opened and every message received, and can drop
// every socket (an upstream lost) and refuse new ones.
import { WebSocketServer, type WebSocket } from 'ws';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { startBlockbookStub, type BlockbookStub, type BlockbookStubOptions } from './blockbook-stub.ts';

export interface SocketMessage {
  readonly id: unknown;
  readonly method: unknown;
  readonly params: unknown;
}

interface Peer {
  readonly ws: WebSocket;
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
  close(): void;
}

const MAX_ADDRESSES = 1000;
const MAX_ADDRESSES_NEW_BLOCK_TXS = 100;

export function attachBlockbookSocket(stub: BlockbookStub): BlockbookSocketStandIn {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const peers = new Set<Peer>();
  const messages: SocketMessage[] = [];
  let opened = 0;

  const send = (p: Peer, id: unknown, data: unknown): void => {
    if (p.ws.readyState === p.ws.OPEN) p.ws.send(JSON.stringify({ id, data }));
  };
  const error = (message: string) => ({ error: { message } });

  const onMessage = (p: Peer, raw: string): void => {
    let m: SocketMessage;
    try {
      m = JSON.parse(raw) as SocketMessage;
    } catch {
      // websocket.go closes a socket that sends what it cannot read.
      p.ws.close();
      return;
    }
    messages.push(m);
    const params = (m.params ?? {}) as Record<string, unknown>;
    switch (m.method) {
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
      const p: Peer = { ws, blockId: null, addresses: new Set(), addressId: '', newBlockTxs: false, fiatId: null, fiatCurrency: null };
      peers.add(p);
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
