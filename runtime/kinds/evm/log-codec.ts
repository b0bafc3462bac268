// eth_getLogs ranges' codec (kinds/evm/log-ranges.ts is the layer): pure
// functions of blocks and bytes, no I/O. A range in chunks (splitRange, and a
// cached chain's widen), the chunks' logs merged into one answer under the
// client's id (mergedParts, mergeLogs) or trimmed to a range (trimLogs), what a
// node's answer says (resultText, errorOf), and what X-Cache says of a merged one.
import type { CacheSays } from '../../dispatch.ts';
import { CLOSE, COMMA, isWs, MAX_ANSWER_DEPTH, OPEN, quantity } from '../../jsonrpc/scan.ts';
import { answerOf, splitBatchAnswer } from '../../jsonrpc/answer.ts';

const TAIL = Buffer.from(']}');

/**
 * Splits [from, to] into chunks of at most `width` blocks; `aligned`: each
 * chunk but the first starts at a multiple of the width, so that overlapping
 * ranges share their inner chunks (a cached chain's: the cache keeps each).
 */
export function splitRange(from: number, to: number, width: number, aligned = false): { from: number; to: number }[] {
  const out: { from: number; to: number }[] = [];
  const w = Number.isFinite(width) && width >= 1 ? Math.floor(width) : to - from + 1;
  for (let a = from; a <= to; ) {
    const end = Math.min(to, aligned ? a - (a % w) + w - 1 : a + w - 1);
    out.push({ from: a, to: end });
    a = end + 1;
  }
  return out;
}


/**
 * A cached chain's split: an edge chunk that is part of a final aligned
 * chunk asks for the whole of it (kept, and shared with every range that
 * overlaps it); the logs outside the client's range are dropped (trimLogs).
 */
export function widen(chunks: { from: number; to: number }[], w: number, isFinal: (block: number) => boolean): void {
  const first = chunks[0]!;
  const a = first.from - (first.from % w);
  if (a !== first.from && isFinal(a + w - 1)) chunks[0] = { from: a, to: first.to };
  const last = chunks[chunks.length - 1]!;
  const b = last.to - (last.to % w) + w - 1;
  if (b !== last.to && isFinal(b)) chunks[chunks.length - 1] = { from: last.from, to: b };
}

/**
 * The merged answer's parts, in the chunks' order (each node answers its
 * chunk by block, then log index): the answer of one node asked for the whole
 * range, under the client's id. The chunks' logs are views of their own
 * buffers: written as they are, nothing is copied.
 */
export function mergedParts(idJson: string, results: readonly Buffer[]): Buffer[] {
  const parts: Buffer[] = [Buffer.from(`{"jsonrpc":"2.0","id":${idJson},"result":[`)];
  let any = false;
  for (const r of results) {
    const inner = arrayInner(r);
    if (inner.length === 0) continue;
    if (any) parts.push(COMMA);
    parts.push(inner);
    any = true;
  }
  parts.push(TAIL);
  return parts;
}

/** mergedParts as one buffer (a short answer: a range wholly above the head). */
export function mergeLogs(idJson: string, results: readonly Buffer[]): Buffer {
  return Buffer.concat(mergedParts(idJson, results));
}

/**
 * The logs of an answer's result (a JSON array's text) whose blockNumber is
 * within [from, to], each with its bytes as it came; null when one cannot be
 * read.
 */
export function trimLogs(result: Buffer, from: number, to: number): Buffer | null {
  const items = splitBatchAnswer(result, MAX_ANSWER_DEPTH);
  if (items === null) return null;
  const parts: Buffer[] = [OPEN];
  for (const it of items) {
    const log = result.subarray(it.start, it.end);
    let n: number;
    try {
      n = quantity((JSON.parse(log.toString('utf8')) as { blockNumber?: unknown }).blockNumber);
    } catch {
      return null;
    }
    if (n < 0) return null;
    if (n < from || n > to) continue;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(log);
  }
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

/** A JSON array's text without its brackets and the blanks inside them. */
function arrayInner(a: Buffer): Buffer {
  let s = 0;
  let e = a.length;
  while (s < e && a[s] !== 0x5b) s++;
  while (e > s && a[e - 1] !== 0x5d) e--;
  s++;
  e--;
  while (s < e && isWs(a[s]!)) s++;
  while (e > s && isWs(a[e - 1]!)) e--;
  return a.subarray(s, Math.max(s, e));
}

/** A JSON-RPC answer's result, as its text (null: an error, or not JSON-RPC): read of its Answer, whose spans are read once. */
export function resultText(body: Buffer): string | null {
  const spans = answerOf(body).spansWithin(MAX_ANSWER_DEPTH);
  return spans === null || spans.hasError || spans.resultStart === -1 ? null : body.toString('utf8', spans.resultStart, spans.resultEnd);
}

/** A JSON-RPC answer's error object (null: none, or not JSON). */
export function errorOf(body: Buffer): Record<string, unknown> | null {
  try {
    const e = (JSON.parse(body.toString('utf8')) as { error?: unknown }).error;
    return e !== null && typeof e === 'object' && !Array.isArray(e) ? (e as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * What X-Cache says of the merged answer, as of a client's batch
 * (docs/cache.md): hit (every chunk from memory), coalesced (none sent for
 * it, some joined calls in flight), miss (some went to a node); undefined
 * when the cache took part in no chunk.
 */
export function cacheSays(c: Readonly<Record<'hit' | 'coalesced' | 'miss' | 'none', number>>): CacheSays | undefined {
  if (c.hit + c.coalesced + c.miss === 0) return undefined;
  return c.miss + c.none > 0 ? 'miss' : c.coalesced > 0 ? 'coalesced' : 'hit';
}
