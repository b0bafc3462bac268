// What the cache keeps of Rosetta and Blockbook answers, as data for the core
// (doc.ts applies them). The EVM rules are policy.ts.
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { DocRules, Keep } from './doc.ts';
import { BY_HEIGHT } from '../kinds/blockbook/guard.ts';
import { isBlockId } from '../kinds/rosetta/guard.ts';

const KEEP_HEAD: Keep = { kind: 'head' };

/**
 * Rosetta: a block (/block) and a transaction in a block (/block/transaction),
 * forever once the block is final and, named by hash only, once its hash is
 * known canonical; until the head moves before that. /block with no
 * identifier is the tip: until the head moves. Nothing else is kept
 * (balances, coins, the mempool and the network's status follow the head or
 * the mempool): those reads are only coalesced. Construction and submit
 * endpoints never take part.
 */
export const ROSETTA_RULES: DocRules = {
  key: (x, t, doc) => (t.idempotent ? `${doc.endpoint}\n${x.req.headers.accept ?? ''}\n${t.body as string}` : null),
  mayLast: (endpoint) => endpoint === 'block' || endpoint === 'block/transaction',
  keep(endpoint, sent, body): Keep | null {
    if (endpoint !== 'block' && endpoint !== 'block/transaction') return null;
    let req: { block_identifier?: { index?: unknown; hash?: unknown }; transaction_identifier?: { hash?: unknown } };
    let ans: { block?: { block_identifier?: unknown } | null; transaction?: { transaction_identifier?: { hash?: unknown } } | null };
    try {
      req = JSON.parse(sent) as typeof req;
      ans = JSON.parse(body.toString('utf8')) as typeof ans;
    } catch {
      return null;
    }
    if (endpoint === 'block') {
      const id = ans?.block?.block_identifier;
      if (!isBlockId(id)) return null; // no block in the answer: nothing to keep
      const want = req.block_identifier ?? {};
      if ((want.index !== undefined && want.index !== id.index) || (want.hash !== undefined && want.hash !== id.hash)) return null;
      if (want.index === undefined && want.hash === undefined) return KEEP_HEAD;
      return { kind: 'block', number: id.index, hash: id.hash, byNumber: want.index !== undefined };
    }
    const want = req.block_identifier;
    const tx = req.transaction_identifier?.hash;
    if (!isBlockId(want) || typeof tx !== 'string' || ans?.transaction?.transaction_identifier?.hash !== tx) return null;
    return { kind: 'block', number: want.index, hash: want.hash, byNumber: false };
  },
};

/**
 * Blockbook: blocks (by height or hash, raw or not), a height's block hash
 * (the endpoints that name a block by height: kinds/blockbook/guard.ts BY_HEIGHT),
 * and transactions in a block, each until the next block: every block and
 * transaction answer carries a confirmation count that grows with the head.
 * A transaction still in the mempool is never kept, and nothing is final
 * (nothing goes to the shared tier). Only plain reads take part: never
 * sendtx, never a conditional request (If-None-Match, If-Modified-Since).
 */
export const BLOCKBOOK_RULES: DocRules = {
  key(x, t, doc) {
    const h = x.req.headers;
    const tail = doc.tail;
    if (t.method !== 'GET' || tail === undefined || doc.endpoint === 'sendtx' || h['if-none-match'] !== undefined || h['if-modified-since'] !== undefined) return null;
    // Identical: the same upstream URL and the same headers that shape the answer.
    return `${tail}\n${h['accept-encoding'] ?? ''}\n${h.accept ?? ''}\n${h['accept-language'] ?? ''}`;
  },
  mayLast: () => false,
  keep(endpoint, _sent, body, headers: IncomingHttpHeaders): Keep | null {
    if (BY_HEIGHT.has(endpoint)) return KEEP_HEAD;
    if (endpoint !== 'tx' || headers['content-encoding'] !== undefined) return null;
    try {
      const tx = JSON.parse(body.toString('utf8')) as { confirmations?: unknown };
      return typeof tx?.confirmations === 'number' && tx.confirmations >= 1 ? KEEP_HEAD : null;
    } catch {
      return null;
    }
  },
};
