// Blockbook guard: which v2 endpoints are forwarded, with which parameters.
import type { BlockbookErrorName } from '../errors/blockbook.ts';
import { isSafeSegment, queryValues } from '../url.ts';

/**
 * Blockbook v2 read endpoints (shared/specs/blockbook-endpoints.md) and how
 * many path parameters each takes. `slash`: the parameter may be an output
 * descriptor, which can hold `/`.
 */
export const BLOCKBOOK_ENDPOINTS: ReadonlyMap<string, { readonly params: 0 | 1; readonly slash: boolean }> = new Map([
  ['address', { params: 1, slash: false }],
  ['balancehistory', { params: 1, slash: true }],
  ['block', { params: 1, slash: false }],
  ['block-filters', { params: 0, slash: false }],
  ['block-index', { params: 1, slash: false }],
  ['contract', { params: 1, slash: false }],
  ['estimatefee', { params: 1, slash: false }],
  ['feestats', { params: 1, slash: false }],
  ['multi-tickers', { params: 0, slash: false }],
  ['rawblock', { params: 1, slash: false }],
  ['tickers', { params: 0, slash: false }],
  ['tickers-list', { params: 0, slash: false }],
  ['tx', { params: 1, slash: false }],
  ['tx-specific', { params: 1, slash: false }],
  ['utxo', { params: 1, slash: true }],
  ['xpub', { params: 1, slash: true }],
]);

export type BlockbookDecision =
  | { readonly kind: 'error'; readonly name: BlockbookErrorName }
  | { readonly kind: 'forward'; readonly endpoint: string; /** Upstream path below the base, e.g. `/v2/block/1`. */ readonly path: string };

function isPositiveInt(s: string): boolean {
  if (s.length === 0 || s.length > 9 || s.charCodeAt(0) === 48) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/**
 * `rest` is the path after `v2/`, e.g. `block/123` or `tickers/`.
 * `query` is the raw query without api_key.
 */
export function checkBlockbook(
  method: string,
  rest: string,
  query: string,
  sendtx: boolean,
  maxPageSize: number,
): BlockbookDecision {
  const slash = rest.indexOf('/');
  const endpoint = slash === -1 ? rest : rest.slice(0, slash);
  const param = slash === -1 ? '' : rest.slice(slash + 1);

  if (endpoint === 'sendtx') {
    if (!sendtx) return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    if (method === 'POST') {
      return param === '' ? { kind: 'forward', endpoint, path: '/v2/sendtx/' } : { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    }
    if (method !== 'GET') return { kind: 'error', name: 'GW_BB_METHOD_NOT_ALLOWED' };
    return isSafeSegment(param) ? { kind: 'forward', endpoint, path: `/v2/sendtx/${param}` } : { kind: 'error', name: 'GW_BB_NOT_FOUND' };
  }
  const spec = BLOCKBOOK_ENDPOINTS.get(endpoint);
  if (spec === undefined) return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
  if (method !== 'GET') return { kind: 'error', name: 'GW_BB_METHOD_NOT_ALLOWED' };
  let path: string;
  if (spec.params === 0) {
    if (param !== '') return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    path = `/v2/${endpoint}/`;
  } else {
    // One trailing slash is tolerated, as Blockbook does.
    const p = param.endsWith('/') ? param.slice(0, -1) : param;
    if (!isSafeSegment(p, spec.slash) || (!spec.slash && p.indexOf('/') !== -1)) return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    if (spec.slash && p.indexOf('/') !== -1) {
      for (const piece of p.split('/')) if (!isSafeSegment(piece)) return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    }
    path = `/v2/${endpoint}/${p}`;
  }
  if (query !== '') {
    for (const v of queryValues(query, 'page')) if (!isPositiveInt(v)) return { kind: 'error', name: 'GW_BB_BAD_PAGE' };
    for (const v of queryValues(query, 'pageSize')) {
      if (!isPositiveInt(v) || Number(v) > maxPageSize) return { kind: 'error', name: 'GW_BB_BAD_PAGE_SIZE' };
    }
  }
  return { kind: 'forward', endpoint, path };
}
