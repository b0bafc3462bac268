// A Blockbook stand-in (no real Blockbook runs here). Routes and error shapes
// follow shared/specs/blockbook-endpoints.md and blockbook-openapi.yaml:
// JSON bodies, `{"error": "..."}` with HTTP 400 for not-found and bad
// parameters, 500 for internal errors. Every request is recorded.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { close, createServer, listen, record, sendJson, type Recorded } from './http.ts';
import { SHARED_SPECS } from './paths.ts';

export interface BlockbookStub {
  /** Base URL including `/api`, as the manifest's upstream. */
  readonly url: string;
  readonly requests: Recorded[];
  clear(): void;
  setBestHeight(h: number): void;
  close(): Promise<void>;
}

const CT = 'application/json; charset=utf-8';
const EXAMPLE = JSON.parse(readFileSync(join(SHARED_SPECS, 'blockbook-block-example.json'), 'utf8')) as Record<string, unknown>;
const hashOf = (h: number) => h.toString(16).padStart(64, '0');

export async function startBlockbookStub(opts: { coin?: string; bestHeight?: number } = {}): Promise<BlockbookStub> {
  const coin = opts.coin ?? 'Bitcoin';
  let best = opts.bestHeight ?? 1000;
  const requests: Recorded[] = [];
  const err = (res: Parameters<typeof sendJson>[0], status: number, error: string) => sendJson(res, status, { error }, CT);
  const heightOf = (id: string): number | null => {
    if (/^\d+$/.test(id)) return Number(id) <= best ? Number(id) : null;
    if (/^[0-9a-f]{64}$/.test(id)) {
      const h = Number.parseInt(id, 16);
      return h <= best ? h : null;
    }
    return null;
  };

  const server: Server = createServer(async (req, res) => {
    const r = await record(req);
    if (!String(r.headers['user-agent'] ?? '').startsWith('chain-gateway-health')) requests.push(r);
    const q = new URLSearchParams(r.query);
    const parts = r.path.split('/').filter(Boolean); // ['api', 'v2', 'block', '1']
    if (parts[0] !== 'api') return err(res, 404, 'Not found');
    const [, version, endpoint, param] = parts;
    if (version === undefined || version === 'status' || (version !== 'v2' && version !== 'v1')) {
      return sendJson(res, 200, {
        blockbook: { coin, network: coin === 'Bitcoin' ? 'BTC' : coin, host: 'stand-in', version: '0.4.0', gitCommit: 'stand-in', buildTime: '2024-01-01T00:00:00+00:00', syncMode: true, initialSync: false, inSync: true, bestHeight: best, lastBlockTime: '2024-01-01T00:00:00Z', inSyncMempool: true, lastMempoolTime: '2024-01-01T00:00:00Z', mempoolSize: 0, decimals: 8, dbSize: 1024, about: 'Blockbook stand-in for tests' },
        backend: { chain: 'main', blocks: best, headers: best, bestBlockHash: hashOf(best), difficulty: '1', sizeOnDisk: 1024, version: '250000', subversion: '/Satoshi:25.0.0/', protocolVersion: '70016' },
      }, CT);
    }
    if (endpoint === 'sendtx') {
      const hex = r.method === 'POST' ? r.body.toString('utf8').trim() : (param ?? '');
      if (!/^[0-9a-fA-F]+$/.test(hex)) return err(res, 400, 'Missing tx blob');
      return sendJson(res, 200, { result: hashOf(hex.length) }, CT);
    }
    if (r.method !== 'GET') return err(res, 400, 'Method not allowed');
    switch (endpoint) {
      case 'block': {
        const h = param === undefined ? null : heightOf(param);
        if (h === null) return err(res, 400, 'Block not found');
        const page = Number(q.get('page') ?? '1');
        return sendJson(res, 200, { ...EXAMPLE, page, height: h, hash: hashOf(h), previousBlockHash: hashOf(Math.max(0, h - 1)), confirmations: best - h + 1, ...(h < best ? { nextBlockHash: hashOf(h + 1) } : { nextBlockHash: undefined }) }, CT);
      }
      case 'block-index': {
        const h = param === undefined ? null : heightOf(param);
        return h === null ? err(res, 400, 'Block not found') : sendJson(res, 200, { blockHash: hashOf(h) }, CT);
      }
      case 'rawblock': {
        const h = param === undefined ? null : heightOf(param);
        return h === null ? err(res, 400, 'Block not found') : sendJson(res, 200, { hex: '00'.repeat(80) }, CT);
      }
      case 'tx':
      case 'tx-specific': {
        const tx = (EXAMPLE.txs as Record<string, unknown>[])[0]!;
        if (param !== tx.txid) return err(res, 400, `Transaction '${param}' not found`);
        return sendJson(res, 200, endpoint === 'tx' ? tx : { txid: tx.txid, hex: '0100' }, CT);
      }
      case 'address':
      case 'xpub': {
        const page = Number(q.get('page') ?? '1');
        const pageSize = Number(q.get('pageSize') ?? '1000');
        return sendJson(res, 200, { page, totalPages: 1, itemsOnPage: pageSize, address: param, balance: '0', totalReceived: '0', totalSent: '0', unconfirmedBalance: '0', unconfirmedTxs: 0, txs: 0 }, CT);
      }
      case 'utxo':
        return sendJson(res, 200, [{ txid: hashOf(1), vout: 0, value: '1000', height: 1, confirmations: best }], CT);
      case 'balancehistory':
        return sendJson(res, 200, [{ time: 1700000000, txs: 1, received: '1000', sent: '0', sentToSelf: '0', rates: { usd: 1 } }], CT);
      case 'estimatefee':
        return /^\d+$/.test(param ?? '') ? sendJson(res, 200, { result: '0.00002460' }, CT) : err(res, 400, "Parameter 'number of blocks' is not a number");
      case 'feestats':
        return sendJson(res, 200, { txCount: 1, totalFeesSat: '1000', averageFeePerKb: 1000, decilesFeePerKb: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] }, CT);
      case 'tickers':
        return sendJson(res, 200, { ts: 1700000000, rates: { usd: 7914.5 } }, CT);
      case 'multi-tickers':
        return sendJson(res, 200, [{ ts: 1700000000, rates: { usd: 7914.5 } }], CT);
      case 'tickers-list':
        return sendJson(res, 200, { ts: 1700000000, available_currencies: ['usd', 'eur'] }, CT);
      case 'block-filters':
        return sendJson(res, 200, { P: 19, M: 784931, zeroedKey: false, blockFilters: {} }, CT);
      case 'contract':
        return sendJson(res, 200, { contract: param, name: 'Stand-in', symbol: 'STD', decimals: 18 }, CT);
      default:
        return err(res, 400, `Unknown endpoint '${endpoint}'`);
    }
  });
  const base = await listen(server);
  return {
    url: `${base}/api`,
    requests,
    clear: () => void requests.splice(0),
    setBestHeight: (h) => void (best = h),
    close: () => close(server),
  };
}
