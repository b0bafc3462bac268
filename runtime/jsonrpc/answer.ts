// JSON-RPC answers read without recursion (jsonrpc/scan.ts has the scanner
// they use): a batch answer split into its items without building a document
// (a 32 MiB answer costs its bytes, not ten times as much in objects), the
// spans of one answer's id and result, and the Answer every layer that judges
// a held answer reads, scanned once for them all.
import { ANY_DEPTH, BACKSLASH, COLON, COMMA_BYTE, LBRACE, LBRACKET, lastDepth, QUOTE, RBRACE, RBRACKET, scanSeen, skipWs, spells, stringEnd, valueEnd } from './scan.ts';

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
      depth = Math.max(depth, lastDepth());
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
