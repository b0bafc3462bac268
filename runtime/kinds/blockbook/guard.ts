// Blockbook guard: which v2 endpoints are forwarded, with which parameters.
import type { BlockbookErrorName } from './errors.ts';
import { decodeOrNull, isSafeSegment, queryValues } from '../../url.ts';
import { describe, type BlockbookValidator, type ParamKind } from '../../config/validators.ts';
import { DocCall, type DocBlock } from '../doc-call.ts';

/** A chain's parameter check (validate: params): each endpoint's validator from the spec. */
export interface BlockbookParamsCheck {
  readonly endpoints: Readonly<Record<string, BlockbookValidator>>;
}

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

/** `/v2/status`: Blockbook's status, its /api/ index (no parameters, never cached). */
export const STATUS = 'status';

export type BlockbookDecision =
  | { readonly kind: 'error'; readonly name: BlockbookErrorName }
  /** A parameter the endpoint takes, with a value the spec does not allow: HTTP 400, the message names it. */
  | { readonly kind: 'invalid'; readonly parameter: string; readonly message: string }
  | {
      readonly kind: 'forward';
      readonly endpoint: string;
      /** Upstream path below the base, e.g. `/v2/block/1`. */
      readonly path: string;
      /** The call as it travels (kinds/doc-call.ts): the block it names, read or write. */
      readonly call: DocCall;
    };

/** Endpoints that name a block by height: /v2/block/<height>, /v2/block-index/<height>, /v2/rawblock/<height>. */
export const BY_HEIGHT: ReadonlySet<string> = new Set(['block', 'block-index', 'rawblock']);
/** Endpoints that take a block by hash: /v2/block/<hash>, /v2/rawblock/<hash>, /v2/feestats/<hash>. */
const BY_HASH: ReadonlySet<string> = new Set(['block', 'rawblock', 'feestats']);
const HEIGHT = /^\d{1,12}$/;
const HASH = /^[0-9a-fA-F]{64}$/;

/** The block a read's path parameter names (`p`: the parameter, no trailing slash). */
function blockOf(endpoint: string, p: string): DocBlock {
  if (BY_HEIGHT.has(endpoint) && HEIGHT.test(p)) return Number(p);
  if (BY_HASH.has(endpoint) && HASH.test(p)) return { hash: p };
  return null;
}

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
  check: BlockbookParamsCheck | null = null,
): BlockbookDecision {
  const slash = rest.indexOf('/');
  const endpoint = slash === -1 ? rest : rest.slice(0, slash);
  const param = slash === -1 ? '' : rest.slice(slash + 1);

  if (endpoint === 'sendtx') {
    if (!sendtx) return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    // GET or POST, a write: sent once, never hedged, never again after an answer.
    const call = new DocCall(endpoint, null, false);
    if (method === 'POST') {
      return param === '' ? { kind: 'forward', endpoint, path: '/v2/sendtx/', call } : { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    }
    if (method !== 'GET') return { kind: 'error', name: 'GW_BB_METHOD_NOT_ALLOWED' };
    if (!isSafeSegment(param)) return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    return (check === null ? null : paramsInvalid(check, endpoint, param, query)) ?? { kind: 'forward', endpoint, path: `/v2/sendtx/${param}`, call };
  }
  // Blockbook's status, what the WebSocket's getInfo reads (socket-methods.ts): its /api/ index, which Blockbook
  // serves at any path under /api/ no other route takes, so it is asked under /api/v2/ as every forwarded call is.
  if (endpoint === STATUS) {
    if (param !== '') return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
    if (method !== 'GET') return { kind: 'error', name: 'GW_BB_METHOD_NOT_ALLOWED' };
    return { kind: 'forward', endpoint, path: '/v2/status', call: new DocCall(endpoint, null, true) };
  }
  const spec = BLOCKBOOK_ENDPOINTS.get(endpoint);
  if (spec === undefined) return { kind: 'error', name: 'GW_BB_NOT_FOUND' };
  if (method !== 'GET') return { kind: 'error', name: 'GW_BB_METHOD_NOT_ALLOWED' };
  let path: string;
  let block: DocBlock = null;
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
    block = blockOf(endpoint, p);
  }
  if (query !== '') {
    for (const v of queryValues(query, 'page')) if (!isPositiveInt(v)) return { kind: 'error', name: 'GW_BB_BAD_PAGE' };
    for (const v of queryValues(query, 'pageSize')) {
      if (!isPositiveInt(v) || Number(v) > maxPageSize) return { kind: 'error', name: 'GW_BB_BAD_PAGE_SIZE' };
    }
  }
  if (check !== null) {
    const bad = paramsInvalid(check, endpoint, spec.params === 0 ? '' : path.slice(endpoint.length + 5), query);
    if (bad !== null) return bad;
  }
  return { kind: 'forward', endpoint, path, call: new DocCall(endpoint, block, true) };
}

/**
 * The value a parameter's text stands for, as Blockbook reads it; text that
 * is not one stays text, and the schema's type check names it. Integers
 * without sign or leading zeros (stricter than Go's Atoi).
 */
function typed(kind: ParamKind, text: string): unknown {
  switch (kind) {
    case 'integer':
    case 'integer-or-string':
      return /^(0|[1-9][0-9]{0,15})$/.test(text) ? Number(text) : text;
    case 'boolean': {
      // strconv.ParseBool's spellings.
      if (text === 'true' || text === '1' || text === 't' || text === 'T' || text === 'TRUE' || text === 'True') return true;
      if (text === 'false' || text === '0' || text === 'f' || text === 'F' || text === 'FALSE' || text === 'False') return false;
      return text;
    }
    case 'list':
      return text.split(',');
    default:
      return text;
  }
}

/** Each parameter the endpoint takes, path and query, against the endpoint's schema; null when all pass. */
function paramsInvalid(check: BlockbookParamsCheck, endpoint: string, pathValue: string, query: string): BlockbookDecision | null {
  const v = check.endpoints[endpoint];
  if (v === undefined) return null;
  const first: Record<string, unknown> = {};
  const again: [string, unknown][] = [];
  if (v.path !== null) first[v.path] = typed(v.params[v.path]!, decodeOrNull(pathValue) ?? pathValue);
  if (query !== '') {
    for (const [name, text] of new URLSearchParams(query)) {
      // Own names only: `constructor` or `__proto__` is a parameter like any other.
      const kind = Object.hasOwn(v.params, name) ? v.params[name] : undefined;
      // A parameter the endpoint does not take (a cache-buster `_`, a tracking
      // tag, one of a newer Blockbook) is ignored by Blockbook, so it is not
      // checked here and goes on as sent (issue 32). The path parameter's
      // name in the query is one Blockbook does not read either.
      if (kind === undefined || name === v.path) continue;
      if (name in first) again.push([name, typed(kind, text)]);
      else first[name] = typed(kind, text);
    }
  }
  // Blockbook reads a repeated parameter's first value; every value is checked.
  const docs = [first, ...again.map(([name, value]) => ({ ...first, [name]: value }))];
  for (const doc of docs) {
    if (v.validate(doc)) continue;
    const why = describe(v.validate.errors);
    const missing = v.validate.errors?.find((e) => e.keyword === 'required')?.params.missingProperty;
    const name = typeof missing === 'string' ? missing : (why.path.split('/')[1] ?? '');
    const message = typeof missing === 'string' ? 'is required' : why.message;
    return { kind: 'invalid', parameter: name, message: `Invalid parameter '${name}': ${message}` };
  }
  return null;
}
