// JSON read without recursion. JSON.parse is iterative in V8, but
// JSON.stringify and any walk over a parsed document recurse, so a body nested
// a few thousand levels deep overflows the stack. These scanners bound nesting
// before anything recursive runs, and read any value's extent from its bytes
// without building a document at all: what jsonrpc/answer.ts reads JSON-RPC
// answers with (a batch answer's items, one answer's spans, the Answer).

/** Nesting allowed in a request body (serde_json, which anvil and reth use, stops at 128 too). */
export const MAX_REQUEST_DEPTH = 128;
/** Nesting allowed in an upstream answer the gateway parses to rewrite (Rosetta /network/options, a batch-wide error). */
export const MAX_ANSWER_DEPTH = 512;
/** Nesting allowed in an upstream answer a layer only locates the id, result or error of: any (a call trace may be deep; the scan does not recurse). */
export const ANY_DEPTH = 1 << 20;

/**
 * A test's eye on the whole-text scans of calls and answers (the fast scan,
 * answerSpans, splitBatchAnswer), told the scan's name and the text:
 * test/support/count-parses.mjs sets it on globalThis before the gateway
 * loads. Read once, here: in service it is absent, and each scan pays one
 * test of a constant.
 */
export const scanSeen = (globalThis as { readonly [k: symbol]: unknown })[Symbol.for('chain-gateway.scan')] as ((scan: string, text: Buffer) => void) | undefined;

/** JSON's punctuation bytes (jsonrpc/answer.ts reads with them too). */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const LBRACKET = 0x5b;
export const RBRACKET = 0x5d;
export const LBRACE = 0x7b;
export const RBRACE = 0x7d;
export const COMMA_BYTE = 0x2c;
export const COLON = 0x3a;

/**
 * Does the JSON text nest deeper than `limit`? Counts brackets outside
 * strings; it does not validate (the caller parses, or already has).
 */
export function nestsDeeper(b: Buffer, limit: number): boolean {
  let depth = 0;
  const n = b.length;
  for (let i = 0; i < n; i++) {
    const c = b[i]!;
    if (c === QUOTE) {
      for (i++; i < n; i++) {
        const s = b[i]!;
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === LBRACKET || c === LBRACE) {
      if (++depth > limit) return true;
    } else if (c === RBRACKET || c === RBRACE) depth--;
  }
  return false;
}

/**
 * Does the JSON text name a key twice in one object, at any depth? `doc` is
 * what JSON.parse made of `b[start, end)`: JSON.parse keeps the last of two
 * keys, Go's encoding/json does too, serde refuses the text, and a parser that
 * keeps the first reads another call out of the same bytes. So text with a
 * duplicate key is never forwarded as it came, nor cached by what JSON.parse
 * read. It compares the members the text has (colons outside strings: in JSON
 * a colon outside a string separates a key from its value) with those of the
 * parsed document, without recursion. The text must be valid JSON (it parsed).
 */
export function hasDuplicateKeys(b: Buffer, doc: unknown, start = 0, end = b.length): boolean {
  let inText = 0;
  for (let i = start; i < end; i++) {
    const c = b[i]!;
    if (c === QUOTE) {
      for (i++; i < end; i++) {
        const s = b[i]!;
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === COLON) inText++;
  }
  let parsed = 0;
  const stack: unknown[] = [doc];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
      continue;
    }
    for (const k of Object.keys(v)) {
      parsed++;
      stack.push((v as Record<string, unknown>)[k]);
    }
  }
  return parsed !== inText;
}

/** Whether `c` is a JSON white-space byte (or, for a string, a char code). */
export function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The index of the first byte at or after `p` that is not JSON white space. */
export function skipWs(b: Buffer, p: number): number {
  const n = b.length;
  while (p < n && isWs(b[p]!)) p++;
  return p;
}

/** The first byte of `body` that is not JSON white space (-1: none): '[' (0x5b) for a batch, '{' (0x7b) for one call. */
export function firstByte(body: Buffer | string): number {
  if (typeof body !== 'string') return body[skipWs(body, 0)] ?? -1;
  let i = 0;
  while (i < body.length && isWs(body.charCodeAt(i))) i++;
  return i < body.length ? body.charCodeAt(i) : -1;
}

/** A JSON array's punctuation, for an array written from the parts it holds (a batch's answers, a range's logs). */
export const OPEN = Buffer.from('[');
export const COMMA = Buffer.from(',');
export const CLOSE = Buffer.from(']');

const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;

/** `p` is just past an opening quote: the index of the closing quote, or -1. */
export function stringEnd(b: Buffer, p: number): number {
  const n = b.length;
  while (p < n) {
    const c = b[p]!;
    if (c === QUOTE) return p;
    if (c < 0x20) return -1;
    if (c === BACKSLASH) {
      const e = b[p + 1];
      if (e === 0x75) {
        if (!HEX[b[p + 2]!] || !HEX[b[p + 3]!] || !HEX[b[p + 4]!] || !HEX[b[p + 5]!]) return -1;
        p += 6;
        continue;
      }
      if (e !== QUOTE && e !== BACKSLASH && e !== 0x2f && e !== 0x62 && e !== 0x66 && e !== 0x6e && e !== 0x72 && e !== 0x74) return -1;
      p += 2;
      continue;
    }
    p++;
  }
  return -1;
}

export function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

function scalarEnd(b: Buffer, p: number): number {
  const c = b[p];
  if (c === QUOTE) {
    const e = stringEnd(b, p + 1);
    return e === -1 ? -1 : e + 1;
  }
  if (c === 0x74) return spells(b, p, 'true') ? p + 4 : -1;
  if (c === 0x66) return spells(b, p, 'false') ? p + 5 : -1;
  if (c === 0x6e) return spells(b, p, 'null') ? p + 4 : -1;
  if (b[p] === 0x2d) p++;
  if (b[p] === 0x30) p++;
  else if (isDigit(b[p])) while (isDigit(b[p])) p++;
  else return -1;
  if (b[p] === 0x2e) {
    p++;
    if (!isDigit(b[p])) return -1;
    while (isDigit(b[p])) p++;
  }
  if (b[p] === 0x65 || b[p] === 0x45) {
    p++;
    if (b[p] === 0x2b || b[p] === 0x2d) p++;
    if (!isDigit(b[p])) return -1;
    while (isDigit(b[p])) p++;
  }
  return p;
}

/** The bytes at `s` spell `word`. */
export function spells(b: Buffer, s: number, word: string): boolean {
  for (let i = 0; i < word.length; i++) if (b[s + i] !== word.charCodeAt(i)) return false;
  return true;
}

/** One key of an object at `p` (a string, then a colon): the index after the colon, or -1. */
function keyEnd(b: Buffer, p: number): number {
  if (b[p] !== QUOTE) return -1;
  const e = stringEnd(b, p + 1);
  if (e === -1) return -1;
  p = skipWs(b, e + 1);
  return b[p] === COLON ? skipWs(b, p + 1) : -1;
}

/** The deepest nesting of the last value valueEnd read whole: what answerSpans tells its Answer. */
let deepest = 0;

/** How deep the last value valueEnd read whole nests (jsonrpc/answer.ts's answerSpans reads it after each member). */
export function lastDepth(): number {
  return deepest;
}

/**
 * Any JSON value at `p`: the index past it, or -1 if it is not valid JSON or
 * nests more than `maxDepth` containers. Containers are tracked on an
 * explicit stack, not by recursion.
 */
export function valueEnd(b: Buffer, p: number, maxDepth: number): number {
  const stack: number[] = []; // 0: in an array, 1: in an object
  deepest = 0;
  for (;;) {
    p = skipWs(b, p);
    const c = b[p];
    if (c === LBRACKET || c === LBRACE) {
      const close = c === LBRACKET ? RBRACKET : RBRACE;
      p = skipWs(b, p + 1);
      if (b[p] === close) p++;
      else {
        if (stack.length >= maxDepth) return -1;
        if (stack.push(c === LBRACKET ? 0 : 1) > deepest) deepest = stack.length;
        if (c === LBRACE && (p = keyEnd(b, p)) === -1) return -1;
        continue;
      }
    } else if ((p = scalarEnd(b, p)) === -1) return -1;
    // A value is complete: close what it completes, or move to the next one.
    for (;;) {
      if (stack.length === 0) return p;
      p = skipWs(b, p);
      const inObject = stack[stack.length - 1] === 1;
      if (b[p] === COMMA_BYTE) {
        p = skipWs(b, p + 1);
        if (inObject && (p = keyEnd(b, p)) === -1) return -1;
        break;
      }
      if (b[p] !== (inObject ? RBRACE : RBRACKET)) return -1;
      stack.pop();
      p++;
    }
  }
}

/** A JSON-RPC QUANTITY as a number (-1 when it is not one that fits). */
export function quantity(v: unknown): number {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,13}$/.test(v)) return -1;
  return Number.parseInt(v, 16);
}
