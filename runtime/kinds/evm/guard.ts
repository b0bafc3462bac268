// The JSON-RPC allowlist guard. Hot path: change with care.
//
// The rule it keeps: what the node executes is exactly what was checked.
// JSON.parse keeps the last of two duplicate keys, Go's encoding/json (geth)
// also matches keys case-insensitively, serde may reject duplicates, and a
// parser that keeps the first key reads another call. So the raw body is
// forwarded only when it cannot be read two ways: every top-level key of every
// item is one of the four canonical ones, the text has no backslash (no
// escaped key spellings), and no object in it, at any depth, names a key twice
// (`"params"` twice would let such a parser run params nobody checked).
// Anything else is forwarded as a canonical re-serialization of what was
// checked, with unknown keys dropped.
//
// Most bodies never get that far: the fast path (evm-fast.ts) proves in one
// pass over the bytes that a body is plain JSON-RPC whose every call is
// allowed, and then the original bytes go as they are.
import { isUtf8 } from 'node:buffer';
import { rpcErrorJson, type RpcErrorName, RPC_ERRORS } from './errors.ts';
import { scanPlainRpc } from './guard-fast.ts';
import { invalidParamsJson, paramsInvalid, scannedParamsValid, type EvmParamsCheck } from './params.ts';
import type { BatchMerge, EvmDecision, MergeSlot } from './decision.ts';
import { traitsOf } from './methods.ts';

export type { BatchMerge, EvmDecision, MergeSlot } from './decision.ts';
import { hasDuplicateKeys, MAX_ANSWER_DEPTH, MAX_REQUEST_DEPTH, nestsDeeper, skipWs, valueEnd } from '../../jsonrpc/scan.ts';
import { Call, NO_ID } from './call.ts';

interface Item {
  readonly jsonrpc?: unknown;
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: unknown;
}

function isId(v: unknown): boolean {
  return v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
}

function idJsonOf(item: unknown): string {
  if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
    const id = (item as Item).id;
    if (id !== undefined && isId(id)) return JSON.stringify(id);
  }
  return 'null';
}

/** 0 valid and canonical, 1 valid but needs re-serializing, -1 invalid. */
function inspect(v: unknown): -1 | 0 | 1 {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return -1;
  const it = v as Item;
  if (it.jsonrpc !== '2.0' || typeof it.method !== 'string') return -1;
  if (it.id !== undefined && !isId(it.id)) return -1;
  let canonical: -1 | 0 | 1 = 0;
  const p = it.params;
  if (p !== undefined && (p === null || typeof p !== 'object')) {
    if (p !== '') return -1;
    canonical = 1; // params: "" means no params; the node must not see ""
  }
  for (const k in it) {
    if (k !== 'jsonrpc' && k !== 'id' && k !== 'method' && k !== 'params') return 1;
  }
  return canonical;
}

/** Where the id starts in canonicalJson's text, where there is one. */
const ID_AT = '{"jsonrpc":"2.0","id":'.length;

function canonicalJson(it: Item): string {
  let s = '{"jsonrpc":"2.0"';
  if (it.id !== undefined) s += `,"id":${JSON.stringify(it.id)}`;
  s += `,"method":${JSON.stringify(it.method)}`;
  if (it.params !== undefined && it.params !== '') s += `,"params":${JSON.stringify(it.params)}`;
  return s + '}';
}

/** What JSON.parse reads of canonicalJson(it): the same keys and values. */
function canonicalDoc(it: Item): Item {
  const doc: { jsonrpc: string; id?: unknown; method: unknown; params?: unknown } = { jsonrpc: '2.0', method: it.method };
  if (it.id !== undefined) doc.id = it.id;
  if (it.params !== undefined && it.params !== '') doc.params = it.params;
  return doc;
}

function reply(name: RpcErrorName, idJson = 'null', label = 'invalid'): EvmDecision {
  return { kind: 'reply', status: RPC_ERRORS[name].status, body: rpcErrorJson(name, idJson), label, count: 1 };
}

/**
 * Parses and checks one request body. `buf` is already within maxBodyBytes.
 * With `params` (validate: params), every call's params are checked too.
 * The decision carries its Calls (kinds/evm/call.ts): admission charges and counts by them, and the layers read them.
 */
export function checkEvmBody(buf: Buffer, allowed: ReadonlySet<string>, maxBatchSize: number, params: EvmParamsCheck | null = null): EvmDecision {
  const fast = scanPlainRpc(buf, allowed, maxBatchSize);
  if (fast !== null && (params === null || (fast.kind === 'forward' && scannedParamsValid(buf, params, fast.label, fast.methods, fast.call, fast.calls)))) return fast;
  return checkEvmBodyGeneral(buf, allowed, maxBatchSize, null, params);
}

/**
 * A key's own checks of each call (its methods and contracts lists): the
 * refused call's error object (JSON text, given the call's id as JSON), or
 * null to let it through.
 */
export type CallCheck = (method: string, params: unknown, idJson: string) => string | null;

/**
 * The general path: any body, with JSON.parse and every rule (exported for
 * tests). With `calls`, every call also passes the key's checks, and what
 * goes upstream is always the canonical re-serialization of what was checked.
 * The decision carries a Call per forwarded call, made of what was parsed
 * here (as on the fast path).
 */
export function checkEvmBodyGeneral(
  buf: Buffer,
  allowed: ReadonlySet<string>,
  maxBatchSize: number,
  calls: CallCheck | null = null,
  params: EvmParamsCheck | null = null,
): EvmDecision {
  // Invalid UTF-8 could decode differently here and at the node.
  if (!isUtf8(buf)) return reply('GW_RPC_PARSE_ERROR');
  // Depth is bounded before the parse: JSON.parse does not recurse, but a
  // megabyte of brackets costs it a few hundred milliseconds, and
  // re-serializing what was checked does recurse. Within the bound, params
  // deeper than maxParamsDepth are one call's fault, not the body's: that
  // call gets -32602 with its id and the path where the limit is crossed
  // (limitsError, whose walk stops at the limit), the others still go.
  if (nestsDeeper(buf, MAX_REQUEST_DEPTH)) return reply('GW_RPC_TOO_DEEP');
  const text = buf.toString('utf8');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return reply('GW_RPC_PARSE_ERROR');
  }
  // A key that checks parameters gets them exactly as checked: never the raw bytes.
  const rawSafe = calls === null && text.indexOf('\\') === -1;
  // The key's checks, then the spec's, one call at a time. The raw bytes may
  // still go: a spec's object is closed (no field in another case for Go to
  // read), and what JSON.parse read, the node reads.
  if (params !== null) calls = withParams(params, calls);

  if (!Array.isArray(doc)) {
    const state = inspect(doc);
    if (state === -1) return reply('GW_RPC_INVALID_REQUEST', idJsonOf(doc));
    const it = doc as Item;
    const method = it.method as string;
    if (!allowed.has(method)) {
      if (it.id === undefined) return { kind: 'reply', status: 204, body: '', label: 'refused', count: 1 };
      return reply('GW_RPC_METHOD_NOT_FOUND', JSON.stringify(it.id), 'refused');
    }
    const denied = calls === null ? null : calls(method, it.params, it.id === undefined ? 'null' : JSON.stringify(it.id));
    if (denied !== null) {
      if (it.id === undefined) return { kind: 'reply', status: 204, body: '', label: 'refused', count: 0 };
      return { kind: 'reply', status: 200, body: denied, label: 'refused', count: 0 };
    }
    const raw = state === 0 && rawSafe && !hasDuplicateKeys(buf, doc);
    const body = raw ? buf : canonicalJson(it);
    return {
      kind: 'forward',
      body,
      label: method,
      count: 1,
      idempotent: !traitsOf(method).write,
      answered: it.id !== undefined,
      merge: null,
      methods: null,
      idStart: -1,
      idEnd: -1,
      // Parsed here: the Call is what was parsed, as the body sent reads (the canonical one has only the four keys).
      call: Call.parsedAs(body, method, raw ? doc : canonicalDoc(it)),
      calls: null,
    };
  }

  const n = doc.length;
  if (n === 0) return reply('GW_RPC_EMPTY_BATCH', 'null', 'batch');
  if (n > maxBatchSize) return { ...reply('GW_RPC_BATCH_TOO_LARGE', 'null', 'batch'), count: n };

  // The merge slots are made only once an item is refused or invalid: a
  // batch the node gets whole needs none.
  let slots: MergeSlot[] | null = null;
  const forwarded: Item[] = [];
  let allCanonical = true;
  let idempotent = true;
  let answered = false;
  for (let i = 0; i < n; i++) {
    const v: unknown = doc[i];
    const state = inspect(v);
    if (state === -1) {
      slots ??= slotsSoFar(forwarded, n);
      slots[i] = { ready: rpcErrorJson('GW_RPC_INVALID_REQUEST', idJsonOf(v)) };
      continue;
    }
    const it = v as Item;
    if (!allowed.has(it.method as string)) {
      slots ??= slotsSoFar(forwarded, n);
      // A refused notification gets no answer, as JSON-RPC requires.
      slots[i] = it.id === undefined ? null : { ready: rpcErrorJson('GW_RPC_METHOD_NOT_FOUND', JSON.stringify(it.id)) };
      continue;
    }
    const denied = calls === null ? null : calls(it.method as string, it.params, it.id === undefined ? 'null' : JSON.stringify(it.id));
    if (denied !== null) {
      slots ??= slotsSoFar(forwarded, n);
      slots[i] = it.id === undefined ? null : { ready: denied };
      continue;
    }
    if (state === 1) allCanonical = false;
    if (traitsOf(it.method as string).write) idempotent = false;
    if (it.id !== undefined) answered = true;
    forwarded.push(it);
    if (slots !== null) slots[i] = forwardedSlot(it);
  }

  if (slots === null) {
    // Every item is forwarded: the original bytes if they cannot be read two ways.
    // (Where they do not split into their calls, which are deeper than an answer may be: re-serialized as any other.)
    const raw = allCanonical && rawSafe && !hasDuplicateKeys(buf, doc) ? rawCalls(buf, forwarded) : null;
    if (raw !== null) return { kind: 'forward', body: buf, label: 'batch', count: n, idempotent, answered, merge: null, methods: methodsOf(forwarded), idStart: -1, idEnd: -1, call: null, calls: raw };
    return canonicalBatch(forwarded, n, idempotent, answered, null);
  }
  if (forwarded.length === 0) {
    const errors = slots.filter((s): s is { ready: string } => s !== null && 'ready' in s).map((s) => s.ready);
    if (errors.length === 0) return { kind: 'reply', status: 204, body: '', label: 'batch', count: n };
    return { kind: 'reply', status: 200, body: `[${errors.join(',')}]`, label: 'batch', count: n };
  }
  return canonicalBatch(forwarded, forwarded.length, idempotent, answered, { slots });
}

/**
 * A batch forwarded as the canonical re-serialization of its calls, with a
 * Call per call: its own bytes of the body (a view of the
 * body's bytes), its id's span in them, and what JSON.parse reads of them
 * (canonicalDoc), so no layer parses it again.
 */
function canonicalBatch(forwarded: readonly Item[], count: number, idempotent: boolean, answered: boolean, merge: BatchMerge | null): EvmDecision {
  const methods = methodsOf(forwarded);
  const texts = forwarded.map(canonicalJson);
  const body = `[${texts.join(',')}]`;
  const b = Buffer.from(body);
  const calls: Call[] = [];
  let at = 1;
  for (let k = 0; k < forwarded.length; k++) {
    const it = forwarded[k]!;
    const end = at + Buffer.byteLength(texts[k]!);
    // The id, where there is one, comes right after '{"jsonrpc":"2.0","id":' (canonicalJson).
    const idEnd = it.id === undefined ? NO_ID : ID_AT + Buffer.byteLength(JSON.stringify(it.id));
    const c = Call.parsedAs(b.subarray(at, end), methods[k]!, canonicalDoc(it), it.id === undefined ? NO_ID : ID_AT, idEnd);
    c.merge = merge;
    calls.push(c);
    at = end + 1;
  }
  return { kind: 'forward', body, label: 'batch', count, idempotent, answered, merge, methods, idStart: -1, idEnd: -1, call: null, calls };
}

/**
 * A Call per call of a batch forwarded as its own bytes (`buf`, every call of
 * it forwarded, each parsed here as `forwarded`): each its own bytes of `buf`
 * (its id's span is found when first asked); null when the bytes do not split.
 */
function rawCalls(buf: Buffer, forwarded: readonly Item[]): Call[] | null {
  const calls: Call[] = [];
  let p = skipWs(buf, 0) + 1; // past '['
  for (const it of forwarded) {
    const s = skipWs(buf, p);
    const e = valueEnd(buf, s, MAX_ANSWER_DEPTH);
    if (e === -1) return null;
    const id = it.id === undefined ? NO_ID : -1;
    calls.push(Call.parsedAs(buf.subarray(s, e), it.method as string, it, id, id));
    p = skipWs(buf, e) + 1; // past ',' (or the closing ']')
  }
  return calls;
}

/** A call check that asks the key's own check (if any), then refuses invalid params. */
function withParams(check: EvmParamsCheck, calls: CallCheck | null): CallCheck {
  return (method, params, idJson) => {
    const denied = calls === null ? null : calls(method, params, idJson);
    if (denied !== null) return denied;
    const why = paramsInvalid(check, method, params);
    return why === null ? null : invalidParamsJson(idJson, why);
  };
}

function methodsOf(items: readonly Item[]): string[] {
  return items.map((it) => it.method as string);
}

function forwardedSlot(it: Item): MergeSlot {
  return it.id === undefined ? null : { forwardedId: JSON.stringify(it.id) };
}

/** The slots of a batch whose first `forwarded.length` items were all forwarded. */
function slotsSoFar(forwarded: readonly Item[], n: number): MergeSlot[] {
  const slots: MergeSlot[] = new Array(n);
  for (let k = 0; k < forwarded.length; k++) slots[k] = forwardedSlot(forwarded[k]!);
  return slots;
}
