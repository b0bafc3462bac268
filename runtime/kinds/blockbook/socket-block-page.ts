// getBlock by any page size over REST, exactly as websocket.go answers it.
// REST pages a block by a fixed 1000 transactions (public.go's txsInAPI); a
// WebSocket page of size p, page n, covers the transaction indexes
// [(n-1)p, np) (api/worker.go's GetBlock and computePaging), so it is read
// from the REST pages of 1000 that hold them, sliced, and given the paging
// websocket.go gives it. It is never sent on an upstream's socket: a page of
// up to 10,000 transactions with their details can pass what that socket
// takes in one message, and such an answer would close it (its heads and the
// chain's subscriptions with it). Bounded: at most ceil(10000/1000)+1 REST
// pages a message, and at most the merge bound held in all.
import { MAX_MERGE_BYTES } from '../common.ts';

/** What a page needs of its message's context (socket-methods.ts MethodContext): a bounded read through the chain's front. */
export interface PageReader {
  read(rest: string, query: string, maxBytes: number): Promise<{ readonly doc: unknown; readonly bytes: number }>;
}

/** A block's page over REST (public.go's txsInAPI), also the WebSocket's default page size. */
export const REST_BLOCK_PAGE = 1000;
/** server/public.go's maxWebsocketBlockPageSize, maxPageNumber and maxSafePagingOffset. */
const MAX_BLOCK_PAGE_SIZE = 10000;
const MAX_PAGE_NUMBER = 1_000_000;
const MAX_PAGING_OFFSET = 1_000_000_000;

/** A message's page and page size as websocket.go's sanitizePagingParams and GetBlock's `page--` make them: the 0-based page and its size. */
export function blockPaging(page: number, pageSize: number): { readonly index: number; readonly size: number } {
  let size = pageSize < 0 ? REST_BLOCK_PAGE : Math.min(pageSize, MAX_BLOCK_PAGE_SIZE);
  if (size === 0) size = REST_BLOCK_PAGE;
  let p = page < 0 ? 0 : Math.min(page, MAX_PAGE_NUMBER);
  if (p > Math.floor(MAX_PAGING_OFFSET / size)) p = Math.floor(MAX_PAGING_OFFSET / size);
  return { index: Math.max(p - 1, 0), size };
}

/** The REST page (1-based, of 1000) holding transaction index `i`, as REST's own paging clamps it. */
export function restPageOf(i: number): number {
  return Math.min(Math.floor(i / REST_BLOCK_PAGE) + 1, MAX_PAGE_NUMBER);
}

interface RestBlock extends Record<string, unknown> {
  readonly hash: string;
  readonly page: number;
  readonly txCount: number;
  readonly txs?: unknown[];
  readonly addressAliases?: Record<string, unknown>;
}

function restBlock(doc: unknown): RestBlock {
  const b = doc as Partial<RestBlock> | null;
  if (b === null || typeof b !== 'object' || typeof b.hash !== 'string' || !Number.isSafeInteger(b.page) || !Number.isSafeInteger(b.txCount)) throw new Error('block: not a block page');
  return b as RestBlock;
}

/**
 * The WebSocket page (`index`, 0-based, of `size`) of the block whose REST
 * page `firstDoc` is (`firstBytes` long): the page holding the page's first
 * transaction, or REST's last page where that is past the block's end. The
 * other REST pages are read by the block's hash (so that each is of the same
 * block), through the chain's front.
 */
export async function blockPage(firstDoc: unknown, firstBytes: number, index: number, size: number, c: PageReader): Promise<unknown> {
  const first = restBlock(firstDoc);
  const count = first.txCount;
  // computePaging: past the last page is the last page.
  const totalPages = Math.max(Math.trunc((count - 1) / size), 0);
  const k = index * size >= count ? totalPages : index;
  const from = k * size;
  const to = Math.min(from + size, count);
  const pages = new Map<number, RestBlock>([[first.page, first]]);
  let held = firstBytes;
  for (let n = restPageOf(from); to > from && n <= restPageOf(to - 1); n++) {
    if (pages.has(n)) continue;
    if (held >= MAX_MERGE_BYTES) throw overBound();
    // The read's own bound is the rest of the budget, where the layers under the front keep it (a cache may hold a
    // page to its own bound): the sum is checked again here, so what is held stays within the bound and one page.
    const r = await c.read(`block/${encodeURIComponent(first.hash)}`, `page=${n}`, MAX_MERGE_BYTES - held);
    held += r.bytes;
    if (held > MAX_MERGE_BYTES) throw overBound();
    const b = restBlock(r.doc);
    if (b.hash !== first.hash || b.txCount !== count || b.page !== n) throw new Error('block: its pages disagree');
    pages.set(n, b);
  }
  const txs: unknown[] = [];
  for (let n = restPageOf(from); to > from && n <= restPageOf(to - 1); n++) {
    const base = (n - 1) * REST_BLOCK_PAGE;
    const page = pages.get(n)!.txs ?? [];
    txs.push(...page.slice(Math.max(from - base, 0), Math.max(to - base, 0)));
  }
  const { txs: _t, addressAliases: _a, ...out } = first;
  Object.assign(out, { page: k + 1, totalPages: totalPages + 1, itemsOnPage: size });
  // Blockbook's `omitempty`: no transactions, no field.
  if (txs.length > 0) out.txs = txs;
  const aliases = pageAliases(pages.values(), txs);
  if (aliases !== null) out.addressAliases = aliases;
  return out;
}

function overBound(): Error {
  return new Error(`block page over ${MAX_MERGE_BYTES} bytes: ask a smaller pageSize`);
}

/** The address aliases (an EVM coin's) of the addresses the page's transactions name, as GetBlock collects them for its page alone; null: none. */
function pageAliases(pages: Iterable<RestBlock>, txs: readonly unknown[]): Record<string, unknown> | null {
  let all: Record<string, unknown> | null = null;
  for (const p of pages) if (p.addressAliases !== undefined && p.addressAliases !== null) all = { ...(all ?? {}), ...p.addressAliases };
  if (all === null) return null;
  const text = JSON.stringify(txs);
  const out: Record<string, unknown> = {};
  let any = false;
  for (const [address, alias] of Object.entries(all)) {
    if (!text.includes(JSON.stringify(address))) continue;
    out[address] = alias;
    any = true;
  }
  return any ? out : null;
}
