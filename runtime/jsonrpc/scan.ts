// JSON read without recursion. JSON.parse is iterative in V8, but
// JSON.stringify and any walk over a parsed document recurse, so a body nested
// a few thousand levels deep overflows the stack. These scanners bound nesting
// before anything recursive runs, and split a batch answer into its items
// without building a document at all: a 32 MiB answer costs its bytes, not
// ten times as much in objects.

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

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const COMMA_BYTE = 0x2c;
const COLON = 0x3a;

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
function stringEnd(b: Buffer, p: number): number {
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

/** One item of a batch answer: its bytes, and its `id` as canonical JSON text (null: none, or not a valid id). */
export interface AnswerItem {
  readonly start: number;
  readonly end: number;
  readonly id: string | null;
}

/**
 * Splits a JSON-RPC batch answer (an array of objects) into its items, with
 * each item's top-level `id`. Null if the text is not a JSON array of
 * objects, nests more than `maxDepth` deep, or an item names `id` twice (it
 * could be read two ways).
 */
export function splitBatchAnswer(b: Buffer, maxDepth: number): AnswerItem[] | null {
  if (scanSeen !== undefined) scanSeen('splitBatchAnswer', b);
  let p = skipWs(b, 0);
  if (b[p] !== LBRACKET) return null;
  const items: AnswerItem[] = [];
  p = skipWs(b, p + 1);
  if (b[p] === RBRACKET) return skipWs(b, p + 1) === b.length ? items : null;
  for (;;) {
    const start = p;
    if (b[p] !== LBRACE) return null;
    let id: string | null = null;
    let seenId = false;
    p = skipWs(b, p + 1);
    if (b[p] !== RBRACE) {
      for (;;) {
        const ks = p;
        p = memberEnd(b, p, maxDepth - 2);
        if (p === -1) return null;
        if (keyIs(b, ks, keyClose, 'id')) {
          if (seenId) return null;
          seenId = true;
          id = canonicalId(b, valueStart, p);
        }
        p = skipWs(b, p);
        if (b[p] === RBRACE) break;
        if (b[p] !== COMMA_BYTE) return null;
        p = skipWs(b, p + 1);
      }
    }
    p++;
    items.push({ start, end: p, id });
    p = skipWs(b, p);
    if (b[p] === RBRACKET) break;
    if (b[p] !== COMMA_BYTE) return null;
    p = skipWs(b, p + 1);
  }
  return skipWs(b, p + 1) === b.length ? items : null;
}

/** Where the member memberEnd read last has its key's closing quote, and its value's first byte. */
let keyClose = 0;
let valueStart = 0;

/**
 * One object member, `"key": value`, at `p` (its key's opening quote): the
 * index past its value, or -1 when it is not one (or its value nests deeper
 * than `maxDepth`); its key's closing quote and its value's start are left in
 * keyClose and valueStart. What splitBatchAnswer and answerSpans each read.
 */
function memberEnd(b: Buffer, p: number, maxDepth: number): number {
  if (b[p] !== QUOTE) return -1;
  const ke = stringEnd(b, p + 1);
  if (ke === -1) return -1;
  let q = skipWs(b, ke + 1);
  if (b[q] !== COLON) return -1;
  q = skipWs(b, q + 1);
  keyClose = ke;
  valueStart = q;
  return valueEnd(b, q, maxDepth);
}

/** The key string [q, e] (quotes included) means `word`, escapes decoded. */
function keyIs(b: Buffer, q: number, e: number, word: string): boolean {
  if (e - q - 1 === word.length && spells(b, q + 1, word)) return true;
  const esc = b.indexOf(BACKSLASH, q);
  if (esc === -1 || esc > e) return false;
  return JSON.parse(b.toString('utf8', q, e + 1)) === word;
}

/** A JSON-RPC id (string, number or null) as canonical JSON text; null for anything else. */
function canonicalId(b: Buffer, s: number, e: number): string | null {
  const c = b[s];
  if (c === LBRACKET || c === LBRACE || c === 0x74 || c === 0x66) return null;
  const v: unknown = JSON.parse(b.toString('utf8', s, e));
  if (typeof v === 'number' && !Number.isFinite(v)) return null;
  return JSON.stringify(v);
}

/** Where the parts of one JSON-RPC answer object are: [start, end) spans, -1 when absent. */
export interface AnswerSpans {
  readonly idStart: number;
  readonly idEnd: number;
  readonly resultStart: number;
  readonly resultEnd: number;
  readonly hasError: boolean;
  /** The deepest its values nest (0: only scalars and empty containers): answerSpans(b, d) reads it for every d above this. */
  readonly depth: number;
}

/**
 * The spans of `id` and `result` in one JSON-RPC answer (a JSON object), and
 * whether it has an `error`. Null if it is not one JSON object, nests deeper
 * than `maxDepth`, or names a key twice that the gateway reads.
 */
export function answerSpans(b: Buffer, maxDepth: number): AnswerSpans | null {
  if (scanSeen !== undefined) scanSeen('answerSpans', b);
  let p = skipWs(b, 0);
  if (b[p] !== LBRACE) return null;
  let idStart = -1;
  let idEnd = -1;
  let resultStart = -1;
  let resultEnd = -1;
  let hasError = false;
  let depth = 0;
  p = skipWs(b, p + 1);
  if (b[p] !== RBRACE) {
    for (;;) {
      const ks = p;
      p = memberEnd(b, p, maxDepth - 1);
      if (p === -1) return null;
      if (deepest > depth) depth = deepest;
      const ke = keyClose;
      const vs = valueStart;
      const key = keyIs(b, ks, ke, 'id') ? 1 : keyIs(b, ks, ke, 'result') ? 2 : keyIs(b, ks, ke, 'error') ? 3 : 0;
      if (key === 1) {
        if (idStart !== -1) return null;
        idStart = vs;
        idEnd = p;
      } else if (key === 2) {
        if (resultStart !== -1) return null;
        resultStart = vs;
        resultEnd = p;
      } else if (key === 3) hasError = true;
      p = skipWs(b, p);
      if (b[p] === RBRACE) break;
      if (b[p] !== COMMA_BYTE) return null;
      p = skipWs(b, p + 1);
    }
  }
  if (skipWs(b, p + 1) !== b.length) return null;
  return { idStart, idEnd, resultStart, resultEnd, hasError, depth };
}

/**
 * An answer held whole, as the layers that judge it read it (a pool's
 * isAnswer and judge, the cache's keep, a batch's or a range's merge): its
 * spans found by one scan, at the first ask, whatever depth each reader
 * allows. answerOf gives every layer the same one for the same bytes, so an
 * answer is scanned once however many layers judge it (a held answer's bytes
 * are never changed in place: a layer that changes an answer makes new ones).
 */
export class Answer {
  private s: AnswerSpans | null | undefined = undefined;

  constructor(readonly body: Buffer) {}

  /** The spans of one JSON-RPC answer object, at any depth; null: it is not one. */
  get spans(): AnswerSpans | null {
    if (this.s === undefined) this.s = answerSpans(this.body, ANY_DEPTH);
    return this.s;
  }

  /** The spans, for a reader that takes answers nesting at most `maxDepth` deep (as answerSpans(body, maxDepth)). */
  spansWithin(maxDepth: number): AnswerSpans | null {
    const s = this.spans;
    return s !== null && s.depth < maxDepth ? s : null;
  }
}

const answers = new WeakMap<Buffer, Answer>();

/** The Answer of `body`: made at the first ask, the same one for every later layer (let go with the bytes). */
export function answerOf(body: Buffer): Answer {
  let a = answers.get(body);
  if (a === undefined) answers.set(body, (a = new Answer(body)));
  return a;
}

/** A JSON-RPC QUANTITY as a number (-1 when it is not one that fits). */
export function quantity(v: unknown): number {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,13}$/.test(v)) return -1;
  return Number.parseInt(v, 16);
}
