// Rosetta guard: the endpoint must be one of the Rosetta API's, and the body's
// network_identifier must name the network this path serves.
import { isUtf8 } from 'node:buffer';
import { rosettaErrorJson, type RosettaErrorName } from './errors.ts';
import type { RosettaNetwork } from '../../types.ts';
import { MAX_REQUEST_DEPTH, nestsDeeper } from '../../jsonrpc/scan.ts';
import { describe, limitsError, type Invalid, type ParamLimits, type ValidateFn } from '../../config/validators.ts';
import { DocCall, type DocBlock } from '../doc-call.ts';

/** A chain's body check (validate: params): each endpoint's validator from the spec, and the limits. */
export interface RosettaBodyCheck {
  readonly endpoints: ReadonlyMap<string, ValidateFn>;
  readonly limits: ParamLimits;
}

/**
 * Every path of the Rosetta API 1.5.1 (shared/specs/rosetta-api.json), and
 * whether its request requires `network_identifier`. A test keeps this in step
 * with the spec.
 */
export const ROSETTA_ENDPOINTS: ReadonlyMap<string, { readonly needsNetwork: boolean; readonly idempotent: boolean }> =
  new Map([
    ['network/list', { needsNetwork: false, idempotent: true }],
    ['network/status', { needsNetwork: true, idempotent: true }],
    ['network/options', { needsNetwork: true, idempotent: true }],
    ['block', { needsNetwork: true, idempotent: true }],
    ['block/transaction', { needsNetwork: true, idempotent: true }],
    ['mempool', { needsNetwork: true, idempotent: true }],
    ['mempool/transaction', { needsNetwork: true, idempotent: true }],
    ['account/balance', { needsNetwork: true, idempotent: true }],
    ['account/coins', { needsNetwork: true, idempotent: true }],
    ['construction/derive', { needsNetwork: true, idempotent: true }],
    ['construction/preprocess', { needsNetwork: true, idempotent: true }],
    ['construction/metadata', { needsNetwork: true, idempotent: true }],
    ['construction/payloads', { needsNetwork: true, idempotent: true }],
    ['construction/combine', { needsNetwork: true, idempotent: true }],
    ['construction/parse', { needsNetwork: true, idempotent: true }],
    ['construction/hash', { needsNetwork: true, idempotent: true }],
    ['construction/submit', { needsNetwork: true, idempotent: false }],
    ['call', { needsNetwork: true, idempotent: false }],
    ['events/blocks', { needsNetwork: true, idempotent: true }],
    ['search/transactions', { needsNetwork: true, idempotent: true }],
  ]);

export type RosettaDecision =
  | { readonly kind: 'reply'; readonly body: string }
  /** `call`: the call as it travels (kinds/doc-call.ts): the block its block_identifier names, read or write. */
  | { readonly kind: 'forward'; readonly body: string; readonly call: DocCall };

function fail(name: RosettaErrorName, details?: Record<string, unknown>): RosettaDecision {
  return { kind: 'reply', body: rosettaErrorJson(name, details) };
}

/**
 * Checks one Rosetta request body. The body forwarded is always a
 * re-serialization of what was checked, so duplicate keys cannot show the node
 * another network than the one the gateway approved.
 */
export function checkRosettaBody(buf: Buffer, endpoint: string, network: RosettaNetwork, check: RosettaBodyCheck | null = null): RosettaDecision {
  if (!isUtf8(buf)) return fail('GW_ROSETTA_INVALID_JSON');
  // Nested past the limit: refused before a parse.
  if (check !== null && nestsDeeper(buf, check.limits.maxParamsDepth)) {
    if (nestsDeeper(buf, MAX_REQUEST_DEPTH)) return fail('GW_ROSETTA_TOO_DEEP', { max_depth: MAX_REQUEST_DEPTH });
    return invalid({ path: '', message: `nested deeper than ${check.limits.maxParamsDepth} levels (limits.maxParamsDepth)` });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(buf.toString('utf8'));
  } catch {
    return fail('GW_ROSETTA_INVALID_JSON');
  }
  // The body is re-serialized below, and JSON.stringify recurses.
  if (nestsDeeper(buf, MAX_REQUEST_DEPTH)) return fail('GW_ROSETTA_TOO_DEEP', { max_depth: MAX_REQUEST_DEPTH });
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    return fail('GW_ROSETTA_INVALID_REQUEST', { reason: 'the request body must be a JSON object' });
  }
  const needsNetwork = ROSETTA_ENDPOINTS.get(endpoint)?.needsNetwork ?? true;
  const ni = (doc as { network_identifier?: unknown }).network_identifier;
  if (ni === undefined && !needsNetwork) return valid(doc, endpoint, check);
  if (ni === null || typeof ni !== 'object' || Array.isArray(ni)) {
    return fail('GW_ROSETTA_INVALID_REQUEST', { reason: 'network_identifier must be an object with blockchain and network' });
  }
  const { blockchain, network: requested } = ni as { blockchain?: unknown; network?: unknown };
  if (typeof blockchain !== 'string' || typeof requested !== 'string') {
    return fail('GW_ROSETTA_INVALID_REQUEST', {
      reason: 'network_identifier.blockchain and network_identifier.network must be strings',
    });
  }
  // Client text is never echoed back: it might carry a key.
  if (blockchain !== 'cardano') {
    return fail('GW_ROSETTA_INVALID_BLOCKCHAIN', { message: "This gateway serves the 'cardano' blockchain" });
  }
  if (requested !== network) {
    return fail('GW_ROSETTA_NETWORK_NOT_FOUND', {
      message: `This path serves the '${network}' network`,
      served_network: network,
    });
  }
  return valid(doc, endpoint, check);
}

/** The body to forward when it passes the endpoint's schema and the limits (always, with validate: off). */
function valid(doc: unknown, endpoint: string, check: RosettaBodyCheck | null): RosettaDecision {
  if (check !== null) {
    const over = limitsError(doc, check.limits);
    if (over !== null) return invalid(over);
    const validate = check.endpoints.get(endpoint);
    if (validate !== undefined && !validate(doc)) return invalid(describe(validate.errors));
  }
  return { kind: 'forward', body: JSON.stringify(doc), call: new DocCall(endpoint, blockOf(doc), ROSETTA_ENDPOINTS.get(endpoint)?.idempotent ?? false) };
}

/** The block a request's block_identifier names: its index, else its hash when that is all it gives; null: none. */
function blockOf(doc: unknown): DocBlock {
  const b = (doc as { block_identifier?: unknown }).block_identifier;
  if (b === null || typeof b !== 'object') return null;
  const { index, hash } = b as { index?: unknown; hash?: unknown };
  if (typeof index === 'number' && Number.isSafeInteger(index) && index >= 0) return index;
  return typeof hash === 'string' && index === undefined ? { hash } : null;
}

function invalid(why: Invalid): RosettaDecision {
  return fail('GW_ROSETTA_INVALID_BODY', { path: why.path, message: why.message });
}

/** Is an upstream error body a Rosetta Error: {code, message, retriable, ...}? */
export function isRosettaError(v: unknown): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const e = v as { code?: unknown; message?: unknown; retriable?: unknown };
  return Number.isInteger(e.code) && typeof e.message === 'string' && typeof e.retriable === 'boolean';
}

/** A Rosetta BlockIdentifier: a block's index and hash. */
export function isBlockId(v: unknown): v is { index: number; hash: string } {
  const b = v as { index?: unknown; hash?: unknown } | null | undefined;
  return typeof b?.index === 'number' && Number.isSafeInteger(b.index) && b.index >= 0 && typeof b.hash === 'string' && b.hash !== '';
}
