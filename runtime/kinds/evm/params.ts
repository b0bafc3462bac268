// JSON-RPC params checked against the OpenRPC document (validate: params).
// Hot path for calls with params: change with care.
//
// The fast path (evm-fast.ts) has already proved the body plain JSON-RPC:
// ASCII, no escapes, canonical keys. Each call's params are then read from
// their own bytes (JSON.parse of the params alone, not the body) and checked
// against the limits and the method's validator; the node gets the original
// bytes, which mean exactly what was checked. A call without params, or with
// `[]`, needs no work at all. Any failure sends the body to the general path
// (evm.ts), which answers each invalid call with -32602 in its place.
import { rpcErrorJson } from './errors.ts';
import { describe, limitsError, type Invalid, type ParamLimits, type ValidateFn, type ValidatorTables } from '../../config/validators.ts';
import { paramSpans } from './guard-fast.ts';
import { hasDuplicateKeys, isWs } from '../../jsonrpc/scan.ts';
import type { Call } from './call.ts';

export interface EvmParamsCheck {
  /** Allowed method -> its validator; null for a method the OpenRPC document does not describe (limits only). */
  readonly methods: ReadonlyMap<string, ValidateFn | null>;
  readonly limits: ParamLimits;
}

/** A chain's check, made once at start: its allowlist's validators. */
export function evmParamsCheck(allowed: ReadonlySet<string>, limits: ParamLimits, tables: ValidatorTables): EvmParamsCheck {
  const methods = new Map<string, ValidateFn | null>();
  for (const m of allowed) methods.set(m, tables.evm[m] ?? null);
  return { methods, limits };
}

const EMPTY: readonly unknown[] = [];

/**
 * The calls the fast path just scanned, `methods` in order (a single call:
 * `label`), all have valid params. False sends the body to the general path.
 * A single call's Call (a batch's, each) is given the params as read here:
 * no layer parses the body for them again.
 */
export function scannedParamsValid(buf: Buffer, check: EvmParamsCheck, label: string, methods: readonly string[] | null, call: Call | null = null, calls: readonly Call[] | null = null): boolean {
  const n = methods === null ? 1 : methods.length;
  const { starts, ends } = paramSpans;
  for (let i = 0; i < n; i++) {
    const s = starts[i]!;
    const validate = check.methods.get(methods === null ? label : methods[i]!);
    if (validate === undefined) return false;
    let params: unknown;
    if (s === -1) params = EMPTY;
    else {
      const e = ends[i]!;
      if (e - s === 2 && buf[s] === 0x5b) {
        params = EMPTY; // `[]`
      } else {
        if (buf[s] !== 0x5b) return false; // by name: the general path explains
        const flat = flatArray(buf, s);
        params = flat ?? JSON.parse((buf as LatinSlice).latin1Slice(s, e));
        if (limitsError(params, check.limits) !== null) return false;
        // An object that names a key twice: the general path sends the node what was checked, re-serialized.
        if (flat === null && hasDuplicateKeys(buf, params, s, e)) return false;
      }
    }
    if (validate !== null && !validate(params)) return false;
    if (call !== null) call.paramsAre(params as readonly unknown[]);
    else if (calls !== null) calls[i]!.paramsAre(params as readonly unknown[]);
  }
  return true;
}

/** Buffer's own latin1 reader, without toString's argument handling (the bytes are ASCII). */
type LatinSlice = Buffer & { latin1Slice(start: number, end: number): string };

/**
 * Params that are a flat array of strings and literals (`["0x...","latest"]`,
 * most calls), read straight from bytes the fast path has proved plain JSON
 * with no escapes (a string's bytes are its text); null for anything else
 * (an object, a nested array, a number), which JSON.parse reads.
 */
function flatArray(b: Buffer, s: number): unknown[] | null {
  const out: unknown[] = [];
  let p = s + 1;
  for (;;) {
    while (isWs(b[p]!)) p++;
    const c = b[p]!;
    if (c === 0x5d && out.length === 0) return out;
    if (c === 0x22) {
      const q = b.indexOf(0x22, p + 1);
      out.push((b as LatinSlice).latin1Slice(p + 1, q));
      p = q + 1;
    } else if (c === 0x74) {
      out.push(true);
      p += 4;
    } else if (c === 0x66) {
      out.push(false);
      p += 5;
    } else if (c === 0x6e) {
      out.push(null);
      p += 4;
    } else return null;
    while (isWs(b[p]!)) p++;
    if (b[p] === 0x5d) return out;
    if (b[p] !== 0x2c) return null;
    p++;
  }
}

/** Why a call's params are invalid, or null. `params` as JSON.parse read them (undefined: absent). */
export function paramsInvalid(check: EvmParamsCheck, method: string, params: unknown): Invalid | null {
  if (params === undefined || params === '') params = EMPTY;
  if (!Array.isArray(params)) return { path: '', message: 'params must be an array: parameters go by position' };
  const over = limitsError(params, check.limits);
  if (over !== null) return over;
  const validate = check.methods.get(method);
  if (validate === undefined || validate === null || validate(params)) return null;
  return describe(validate.errors);
}

/** The -32602 answer to a call with invalid params, with its id (as JSON). */
export function invalidParamsJson(idJson: string, why: Invalid): string {
  return rpcErrorJson('GW_RPC_INVALID_PARAMS', idJson, JSON.stringify({ path: why.path, message: why.message }));
}
