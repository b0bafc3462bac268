// URL helpers for the request path. One pass, no URL object, no regex:
// everything here runs on every request (change with care).

export interface SplitQuery {
  /** Every api_key value, in order (usually none or one). */
  readonly keys: string[];
  /** The query without api_key parameters, others untouched and in order; '' when empty. */
  readonly rest: string;
}

const NO_KEYS: string[] = [];

/**
 * A request's target cut once: the path (before any '?'), the path's first
 * segment, which names the chain, and, read when asked, the rest of the path
 * and the query. HTTP (server.ts) and WebSocket upgrades (ws/sockets.ts) cut
 * it here, so both find the same chain for the same target.
 */
export class RequestTarget {
  readonly path: string;
  /** The path's first segment (a chain's name); null for a path that does not start with '/'. */
  readonly first: string | null;
  private readonly q: number;
  private readonly slash: number;
  constructor(readonly url: string) {
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const slash = path.indexOf('/', 1);
    this.q = q;
    this.path = path;
    this.slash = slash;
    this.first = path.charCodeAt(0) !== 47 ? null : slash === -1 ? path.slice(1) : path.slice(1, slash);
  }
  /** The path after its first segment: '', '/', '/<key>', '/v2/block/1'... */
  get rest(): string {
    return this.slash === -1 ? '' : this.path.slice(this.slash);
  }
  /** The query, without its '?' ('' for none). */
  get query(): string {
    return this.q === -1 ? '' : this.url.slice(this.q + 1);
  }
}

/**
 * The key a JSON-RPC path carries after its chain: `rest` is the path after
 * `/<chain>`, and only `''`, `/`, `/<key>` and `/<key>/` are a chain's path.
 * null: no key in the path; undefined: not a path of the chain (404). HTTP
 * and WebSocket read it here, so both take the same paths.
 */
export function pathKeyOf(rest: string): string | null | undefined {
  if (rest.length <= 1) return null;
  const end = rest.indexOf('/', 1);
  if (end === -1) return rest.slice(1);
  return end === rest.length - 1 ? rest.slice(1, end) : undefined;
}

export function decodeOrNull(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

const MAYBE_KEY = /api/i;

/**
 * Pulls `api_key` out of a raw query string. A name written with
 * percent-escapes (`api%5Fkey`) or in other case (`API_KEY`) is an api_key
 * too, so a key can't sneak past the check, nor on to an upstream.
 */
export function splitQuery(query: string): SplitQuery {
  if (query === '') return { keys: NO_KEYS, rest: '' };
  if (query.indexOf('%') === -1 && !MAYBE_KEY.test(query)) return { keys: NO_KEYS, rest: query };
  const keys: string[] = [];
  const kept: string[] = [];
  for (const part of query.split('&')) {
    const eq = part.indexOf('=');
    const name = partName(part, eq);
    if (name !== null && name.length === 7 && name.toLowerCase() === 'api_key') {
      const rawValue = eq === -1 ? '' : part.slice(eq + 1);
      // An undecodable value can never be a valid key; keep it as the
      // (invalid) key rather than dropping it silently.
      keys.push(rawValue.indexOf('%') === -1 ? rawValue : (decodeOrNull(rawValue) ?? rawValue));
    } else kept.push(part);
  }
  return { keys: keys.length ? keys : NO_KEYS, rest: kept.length === 0 ? '' : kept.join('&') };
}

/** A query part's name (before its '=' at `eq`, -1: none), decoded; null when it cannot be. */
function partName(part: string, eq: number): string | null {
  const raw = eq === -1 ? part : part.slice(0, eq);
  return raw.indexOf('%') === -1 ? raw : decodeOrNull(raw);
}

/** All values of one query parameter (names compared after decoding). */
export function queryValues(query: string, wanted: string): string[] {
  if (query === '' || query.indexOf(wanted) === -1 && query.indexOf('%') === -1) return [];
  const out: string[] = [];
  for (const part of query.split('&')) {
    const eq = part.indexOf('=');
    if (partName(part, eq) === wanted) {
      const v = eq === -1 ? '' : part.slice(eq + 1);
      out.push(v.indexOf('%') === -1 ? v : (decodeOrNull(v) ?? '\u0000invalid'));
    }
  }
  return out;
}

/**
 * True when a raw path segment stays inside its route once an upstream
 * decodes it: not `.`/`..` (encoded or not), no encoded `/` or `\`.
 */
export function isSafeSegment(seg: string, allowSlash = false): boolean {
  if (seg === '') return false;
  let s = seg;
  if (seg.indexOf('%') !== -1) {
    const d = decodeOrNull(seg);
    if (d === null) return false;
    s = d;
  }
  if (s.indexOf('\\') !== -1 || s.indexOf('\u0000') !== -1) return false;
  if (s.indexOf('/') !== -1) {
    if (!allowSlash) return false;
    for (const piece of s.split('/')) if (piece === '' || piece === '.' || piece === '..') return false;
    return true;
  }
  return s !== '.' && s !== '..';
}
