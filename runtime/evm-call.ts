// One EVM JSON-RPC call as it crosses the layers (issue 37: one Call, parsed
// once): its method, its id as the client wrote it, its params and the block
// it names (a number, a tag, a hash; for a range, its two ends), read with the
// block-parameter table below, and its method's traits (evm-methods.ts).
//
// It is made from what the guard found (the method and, on the fast path,
// the id's span) where a layer needs more than the bytes: by the cache for a
// call it takes, by a pooled chain's forwarding (chains.ts) for one that has
// no cache, and by the pool for each call of a batch or a body that came
// without one. The params are parsed at most once, when a layer first asks,
// and every later layer reads the same Call from the ForwardRequest (`call`).
// A chain with one upstream and no cache never makes one. Below the cache and
// the pool: it imports only the method traits table and the JSON scanner.
import { traitsOf, type MethodTraits } from './evm-methods.ts';
import { answerSpans, MAX_ANSWER_DEPTH } from './json-scan.ts';
import { blockParamAt } from './evm-methods.ts';

export type BlockRef = number | 'latest' | 'safe' | 'finalized' | 'pending' | { readonly hash: string } | null;


/** Methods whose first parameter is a filter object: fromBlock..toBlock (each `latest` when absent), or blockHash. */
const RANGES: ReadonlySet<string> = new Set(['eth_getLogs']);

/** Methods whose first parameter is a block hash. */
const BY_BLOCK_HASH: ReadonlySet<string> = new Set(['eth_getBlockByHash', 'eth_getBlockTransactionCountByHash', 'eth_getUncleCountByBlockHash', 'eth_getTransactionByBlockHashAndIndex', 'eth_getUncleByBlockHashAndIndex']);

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

export class Call {
  private parsed: unknown = NOT_PARSED;
  private id: string | null;
  private where: Where | null = null;

  /**
   * `body`: the call's own text, exactly as it goes upstream (a layer that
   * sends other bytes makes its request without this Call); `idStart`/`idEnd`:
   * where its id is in it, -1 when not known yet (found when first asked).
   */
  constructor(
    readonly body: Buffer | string,
    readonly method: string,
    idStart = -1,
    idEnd = -1,
  ) {
    this.id = idStart < 0 ? null : bytes(body).toString('utf8', idStart, idEnd);
  }

  /**
   * The call in `body`, parsed, or null when it is not a single call (a
   * batch, or no JSON-RPC call at all): for bodies that come without a Call.
   * `idStart`/`idEnd`: where its id is, where the caller knows.
   */
  static read(body: Buffer | string | null, idStart = -1, idEnd = -1): Call | null {
    if (body === null) return null;
    const b = bytes(body);
    let first = 0;
    while (first < b.length && (b[first] === 0x20 || b[first] === 0x0a || b[first] === 0x0d || b[first] === 0x09)) first++;
    if (b[first] !== 0x7b) return null; // '{': a batch or nothing
    let doc: unknown;
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

  /** The id's JSON text as the client wrote it (a long number keeps its digits); 'null' when it has none. */
  get idJson(): string {
    if (this.id === null) {
      const b = bytes(this.body);
      const spans = answerSpans(b, MAX_ANSWER_DEPTH);
      this.id = spans === null || spans.idStart === -1 ? 'null' : b.toString('utf8', spans.idStart, spans.idEnd);
    }
    return this.id;
  }

  /** The call parsed (once, at the first ask); undefined when its body is not JSON. */
  get doc(): unknown {
    if (this.parsed === NOT_PARSED) {
      try {
        this.parsed = JSON.parse(typeof this.body === 'string' ? this.body : this.body.toString('utf8'));
      } catch {
        this.parsed = undefined;
      }
    }
    return this.parsed;
  }

  get params(): unknown[] {
    const d = this.doc;
    const p = d !== null && typeof d === 'object' ? (d as { params?: unknown }).params : undefined;
    return Array.isArray(p) ? p : [];
  }

  get traits(): MethodTraits {
    return traitsOf(this.method);
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
    return (this.where ??= whereOf(this.method, this.params));
  }
}

function bytes(body: Buffer | string): Buffer {
  return typeof body === 'string' ? Buffer.from(body) : body;
}

function whereOf(method: string, params: unknown[]): Where {
  if (BY_BLOCK_HASH.has(method)) return { at: -1, block: typeof params[0] === 'string' ? { hash: params[0] } : null };
  if (RANGES.has(method)) {
    const f = params[0];
    if (f === null || typeof f !== 'object' || Array.isArray(f)) return { at: -1, block: null };
    const o = f as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
    if (o.blockHash !== undefined) return { at: 0, block: typeof o.blockHash === 'string' ? { hash: o.blockHash } : null };
    return { at: 0, block: blockOf(o.toBlock), from: blockOf(o.fromBlock) };
  }
  const at = blockParamAt(method) ?? -1;
  return { at, block: at >= 0 ? blockOf(params[at]) : null };
}

function blockOf(v: unknown): BlockRef {
  if (v === undefined || v === 'latest') return 'latest';
  if (v === 'safe' || v === 'finalized' || v === 'pending') return v;
  if (v === 'earliest') return 0;
  if (typeof v === 'string') return QUANTITY.test(v) ? Number.parseInt(v, 16) : HASH.test(v) ? { hash: v } : null;
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as { blockNumber?: unknown; blockHash?: unknown };
    if (typeof o.blockHash === 'string') return { hash: o.blockHash };
    if (o.blockNumber !== undefined) return blockOf(o.blockNumber);
  }
  return null;
}
