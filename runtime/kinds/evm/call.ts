// One EVM JSON-RPC call as it crosses the layers (issue 37: one Call, parsed
// once; issue 45: it is the seam's Call, dispatch.ts): its method, its id as
// the client wrote it, its params and the block it names (a number, a tag, a
// hash; for a range, its two ends), read with the method table
// (kinds/evm/methods.ts: where its block parameter is), and its method's
// traits.
//
// The guard makes one (kinds/evm/guard*.ts) for every call it lets through:
// made of what it found (the method, the id's span) and of what it parsed
// anyway (the params it checked with validate: params, or the whole call on
// its general path). Where the guard parsed nothing (its fast path with
// validate: off), the body is parsed when a layer first asks, once. For a
// batch it makes one per call, each with its own bytes of the body that goes
// upstream, and the cache and the pool split the batch with those. Every
// layer reads the same Call from the request's calls (kinds/evm/pool-call.ts
// callOf); a layer that sends other bytes (a rewritten call, a range's chunk)
// makes a Call of them. Below the guard, the cache and the pool: it imports
// only the method traits table, the JSON scanner and the seam's types.
import { traitsOf, type MethodTraits } from './methods.ts';
import { firstByte, MAX_ANSWER_DEPTH } from '../../jsonrpc/scan.ts';
import { answerOf } from '../../jsonrpc/answer.ts';
import type { Call as SeamCall } from '../../dispatch.ts';

export type BlockRef = number | 'latest' | 'safe' | 'finalized' | 'pending' | { readonly hash: string } | null;


const QUANTITY = /^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,12})$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;

/** The block a call is about, as the table reads its params. */
interface Where {
  /** Where the block parameter is (-1: none); for a range, where its filter object is. */
  readonly at: number;
  /** The block the call is about; for a range, its upper end (toBlock) or its blockHash. */
  readonly block: BlockRef;
  /** A range's lower end (eth_getLogs' fromBlock); undefined for a call about one block. */
  readonly from?: BlockRef;
}

const NOT_PARSED = Symbol('not parsed');

/** A Call's id start when the guard found it has none (a notification of a batch). */
export const NO_ID = -2;

/** A single call's id start once its body was scanned and has none. */
const ID_NONE = -3;

/** Where the id starts in a call the gateway writes itself (`{"jsonrpc":"2.0","id":...`). */
export const ID_AT = '{"jsonrpc":"2.0","id":'.length;

/** Bodies parsed whole by a Call, in this process (for tests: a call is parsed at most once, by the guard or here). */
export const callParses = { count: 0 };

/** How a client batch's answer is put back together where the guard answered some of its calls itself (refused, invalid). */
export interface BatchMerge {
  /** One entry per request item, in order. */
  readonly slots: readonly MergeSlot[];
}
/** Either a ready answer object (the gateway's own error, or an answer from the cache: JSON text) or the id (as JSON) of a forwarded call. */
export type MergeSlot = { readonly ready: string | Buffer } | { readonly forwardedId: string } | null;

export class Call implements SeamCall {
  /**
   * The merge plan of the client batch this call came in, where the guard
   * answered some of its calls itself (every call of the batch holds the
   * same): the cache's front puts the batch's answer together with it. null:
   * a single call, or a batch the node gets whole.
   */
  merge: BatchMerge | null = null;
  private parsed: unknown = NOT_PARSED;
  /** The params as the guard read them, where it read them without the rest of the body (null: from the body). */
  private given: readonly unknown[] | null = null;
  private id: string | null = null;
  private where: Where | null = null;

  /**
   * `body`: the call's own text, exactly as it goes upstream (a layer that
   * sends other bytes makes its request without this Call); `idStart`/`idEnd`:
   * where its id is in it, -1 when not known yet (found when first asked),
   * NO_ID for a call of a batch that has none (a notification).
   * Nothing is read of the body until a layer asks.
   */
  constructor(
    readonly body: Buffer | string,
    readonly method: string,
    private idStart = -1,
    private idEnd = -1,
  ) {}

  /**
   * The call in `body`, parsed, or null when it is not a single call (a
   * batch, or no JSON-RPC call at all): for bodies that come without a Call.
   * `idStart`/`idEnd`: where its id is, where the caller knows.
   */
  static read(body: Buffer | string | null, idStart = -1, idEnd = -1): Call | null {
    if (body === null) return null;
    const b = bytes(body);
    if (firstByte(b) !== 0x7b) return null; // '{': a batch or nothing
    let doc: unknown;
    callParses.count++;
    try {
      doc = JSON.parse(b.toString('utf8'));
    } catch {
      return null;
    }
    const method = doc !== null && typeof doc === 'object' ? (doc as { method?: unknown }).method : undefined;
    if (typeof method !== 'string') return null;
    const c = new Call(body, method, idStart, idEnd);
    c.parsed = doc;
    return c;
  }

  /**
   * A call whose body a layer has parsed already (the guard's general path):
   * `doc` is what JSON.parse reads of `body`; `idStart`/`idEnd` as for the
   * constructor.
   */
  static parsedAs(body: Buffer | string, method: string, doc: unknown, idStart = -1, idEnd = -1): Call {
    const c = new Call(body, method, idStart, idEnd);
    c.parsed = doc;
    return c;
  }

  /** The params, as the guard read them from their own bytes (validate: params): the body need not be parsed for them. */
  paramsAre(params: readonly unknown[]): void {
    this.given = params;
  }

  /** The id's JSON text as the client wrote it (a long number keeps its digits); 'null' when it has none. */
  get idJson(): string {
    if (this.id === null) this.id = this.idFrom < 0 ? 'null' : bytes(this.body).toString('utf8', this.idStart, this.idEnd);
    return this.id;
  }

  /**
   * Where the id starts in the body's bytes (-1: it has none): as the guard
   * found it, else read of the body's spans (the one reader of a JSON-RPC
   * object's id, result and error: jsonrpc/answer.ts) at the first ask, kept.
   */
  get idFrom(): number {
    if (this.idStart === -1) {
      const spans = answerOf(bytes(this.body)).spansWithin(MAX_ANSWER_DEPTH);
      if (spans === null || spans.idStart === -1) this.idStart = ID_NONE;
      else {
        this.idStart = spans.idStart;
        this.idEnd = spans.idEnd;
      }
    }
    return this.idStart < 0 ? -1 : this.idStart;
  }

  /** Where the id ends in the body's bytes (past it; -1: it has none). */
  get idTo(): number {
    return this.idFrom < 0 ? -1 : this.idEnd;
  }

  /** A notification: a call of a batch the guard found without an id (the node answers nothing for it). */
  get notification(): boolean {
    return this.idStart === NO_ID;
  }

  /** The call parsed (once, at the first ask); undefined when its body is not JSON. */
  get doc(): unknown {
    if (this.parsed === NOT_PARSED) {
      callParses.count++;
      try {
        this.parsed = JSON.parse(typeof this.body === 'string' ? this.body : this.body.toString('utf8'));
      } catch {
        this.parsed = undefined;
      }
    }
    return this.parsed;
  }

  /** The params by position ([] when by name or none); not to be changed (copy them to rewrite). */
  get params(): readonly unknown[] {
    if (this.given !== null) return this.given;
    const d = this.doc;
    const p = d !== null && typeof d === 'object' ? (d as { params?: unknown }).params : undefined;
    return Array.isArray(p) ? p : [];
  }

  get traits(): MethodTraits {
    return traitsOf(this.method);
  }

  get write(): boolean {
    return traitsOf(this.method).write;
  }

  get at(): number {
    return this.whereAbout().at;
  }

  get block(): BlockRef {
    return this.whereAbout().block;
  }

  get from(): BlockRef | undefined {
    return this.whereAbout().from;
  }

  private whereAbout(): Where {
    return (this.where ??= whereOf(this.traits, this.params));
  }
}

function bytes(body: Buffer | string): Buffer {
  return typeof body === 'string' ? Buffer.from(body) : body;
}

function whereOf(t: MethodTraits, params: readonly unknown[]): Where {
  if (t.byHash) return { at: -1, block: typeof params[0] === 'string' ? { hash: params[0] } : null };
  if (t.range) {
    const f = params[0];
    if (f === null || typeof f !== 'object' || Array.isArray(f)) return { at: -1, block: null };
    const o = f as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
    if (o.blockHash !== undefined) return { at: 0, block: typeof o.blockHash === 'string' ? { hash: o.blockHash } : null };
    return { at: 0, block: rangeEndOf(o.toBlock), from: rangeEndOf(o.fromBlock) };
  }
  const at = t.block;
  return { at, block: at >= 0 ? blockOf(params[at]) : null };
}

/**
 * The block a block parameter names, as geth reads it (rpc.BlockNumberOrHash),
 * or null when it names none, or names one that another reading could take
 * for another block: the one reader of block parameters, for the pool (which
 * routes by it) and the cache (kinds/evm/cache-policy.ts: how long an answer is kept).
 *  - absent: `latest`; the tags as they are, `earliest` block 0;
 *  - a quantity: hex digits of either case (geth's hexutil takes both, so
 *    `0xA` and `0xa` name the same block), no leading zero (`0x010` is
 *    refused by geth), at most 13 digits;
 *  - a 32-byte hash, as a string or EIP-1898 `{blockHash[, requireCanonical]}`;
 *  - EIP-1898 `{blockNumber[, requireCanonical]}`: a tag or a quantity.
 * An object with both blockHash and blockNumber is null (geth refuses it:
 * "cannot specify both BlockHash and BlockNumber, choose one or the other"),
 * and so is one with any other key: Go matches keys case-insensitively (and
 * folds K and ſ), so a key JSON.parse does not read as blockNumber may be the
 * block to the node.
 */
export function blockOf(v: unknown): BlockRef {
  if (v === undefined) return 'latest';
  if (typeof v === 'string') return blockNamed(v) ?? (HASH.test(v) ? { hash: v } : null);
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return null;
  let number: unknown;
  let hash: unknown;
  const o = v as Record<string, unknown>;
  for (const k in o) {
    if (k === 'blockNumber') number = o[k];
    else if (k === 'blockHash') hash = o[k];
    else if (k !== 'requireCanonical') return null;
  }
  if (hash !== undefined) return number === undefined && typeof hash === 'string' && HASH.test(hash) ? { hash } : null;
  return typeof number === 'string' ? blockNamed(number) : null;
}

/** A range's end (eth_getLogs' fromBlock, toBlock: rpc.BlockNumber, never a hash): absent is `latest`. */
function rangeEndOf(v: unknown): BlockRef {
  return v === undefined ? 'latest' : typeof v === 'string' ? blockNamed(v) : null;
}

/** A tag or a quantity (rpc.BlockNumber); null for anything else. */
function blockNamed(v: string): BlockRef {
  if (v === 'latest' || v === 'safe' || v === 'finalized' || v === 'pending') return v;
  if (v === 'earliest') return 0;
  return QUANTITY.test(v) ? Number.parseInt(v, 16) : null;
}
