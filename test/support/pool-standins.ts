// The nodes of a pool that disagree (issue 33), as stand-ins in front of one
// anvil that holds the history. Each one answers JSON-RPC (single calls and
// batches) the way a real node in that condition does:
//  - healthy: anvil itself, byte for byte;
//  - laggard: anvil as seen from a node `lag` blocks behind (default 3). Its
//    head is anvil's head N minus `lag`: eth_blockNumber says N-lag; blocks,
//    transactions, receipts and counts above N-lag are null; a tag (latest,
//    pending, safe, finalized) means at most N-lag; a state call at a block
//    above N-lag fails as geth fails it (-32000 `header not found`);
//  - pruned: a full node that keeps the state of its last `keep` blocks
//    (default 16): a state call (eth_getBalance, eth_getTransactionCount,
//    eth_getCode, eth_getStorageAt, eth_call, eth_getProof) whose block, tags
//    and hashes resolved to numbers first, is more than `keep` below the head
//    fails as geth's hash-scheme database fails it: -32000 `missing trie node
//    <state root> (path )` (trie/errors.go, MissingNodeError.Error(); the text
//    operators see in the field, e.g. go-ethereum#17133, blockscout#1593).
//    Blocks, transactions and receipts it answers like anvil.
// The gateway's own polls (User-Agent chain-gateway-health/...) get the very
// same treatment: a laggard shows its lag to the health checks too. The role
// and its depth can be changed while the stand-in runs (steerable). N is read
// from anvil once per HTTP request, so the items of one batch agree.
// No test framework in here: the demo may use it too.
import { Pool } from 'undici';
import { close, createSafeServer, file, listen, parseJson, record, sendJson, type Recorded } from './http.ts';
import { OPEN_GATE, type AnvilGate } from './anvil-gate.ts';

export type PoolRole = 'healthy' | 'laggard' | 'pruned';

export interface PoolStandinOptions {
  readonly role: PoolRole;
  /** The laggard's distance behind anvil's head, in blocks (default 3). */
  readonly lag?: number;
  /** The pruned node's state window: state more than this many blocks below the head is gone (default 16). */
  readonly keep?: number;
  /** Every call to anvil goes through it, so that a change of anvil's chain is atomic for this node (anvil-gate.ts). */
  readonly gate?: Pick<AnvilGate, 'read'>;
  /**
   * Which client the laggard answers as about what is above its head, beyond
   * blocks and state by number (absent: eth_getLogs, eth_getBlockReceipts and
   * eth_feeHistory reach anvil as they are, and state at any block above the
   * head is `header not found`). NODE_TEXTS says what each answers.
   */
  readonly node?: 'geth' | 'anvil';
}

/** What a stand-in answered differently from anvil, by kind: proof that it did its part. */
export interface Alterations {
  /** A block, transaction, receipt or count that anvil has, answered null (laggard). */
  nulls: number;
  /** State calls refused with `header not found` (laggard, a block above its head). */
  headerNotFound: number;
  /** State calls refused with `missing trie node` (pruned). */
  missingTrieNode: number;
  /** eth_blockNumber answered lower, or a tag rewritten to the laggard's head. */
  rewritten: number;
}

export interface PoolStandin {
  /** http://127.0.0.1:PORT (JSON-RPC is POSTed to any path). */
  readonly url: string;
  role: PoolRole;
  /** As PoolStandinOptions.node. */
  node: 'geth' | 'anvil' | undefined;
  lag: number;
  keep: number;
  /** Requests other than the gateway's health checks, in arrival order (capped like the other stand-ins'). */
  readonly requests: (Recorded & { readonly json: unknown })[];
  /** The gateway's health checks, answered like any other request. */
  readonly healthChecks: (Recorded & { readonly json: unknown })[];
  readonly altered: Alterations;
  close(): Promise<void>;
}

/** The six calls that read state at a block, and where their block parameter sits. */
export const STATE_CALLS: Readonly<Record<string, number>> = {
  eth_getBalance: 1,
  eth_getTransactionCount: 1,
  eth_getCode: 1,
  eth_getStorageAt: 2,
  eth_call: 1,
  eth_getProof: 2,
};

/** geth's answer to state at a block it does not have yet (internal/ethapi, errors.go: `header not found`). */
export const HEADER_NOT_FOUND = 'header not found';
/** geth's (hash scheme) answer to state it has pruned: the state root's node is gone. */
export const missingTrieNode = (stateRoot: string): string => `missing trie node ${stateRoot.replace(/^0x/, '')} (path )`;

/**
 * What a laggard with `node` answers above its head (measured on anvil 1.7; geth from its source and the
 * execution-apis tests):
 *  - eth_getLogs with a toBlock above its head: geth -32602 `block range extends beyond current head block`
 *    (execution-apis tests/eth_getLogs/filter-error-future-block-range); anvil the logs up to its own head,
 *    and no word of the rest;
 *  - eth_getLogs at a blockHash it does not have: `unknown block` (both);
 *  - state at a {blockHash} it does not have: geth -32000 `header for hash not found`, anvil -32001
 *    `Resource not found`;
 *  - eth_getBlockReceipts above its head: null (both); eth_feeHistory with its newest block above its head:
 *    geth `request beyond head block: requested N, head M`, anvil what it has up to its head.
 */
export const NODE_TEXTS = {
  geth: { beyondHead: 'block range extends beyond current head block', unknownBlock: 'unknown block', hashState: { code: -32000, message: 'header for hash not found' } },
  anvil: { beyondHead: null, unknownBlock: 'unknown block', hashState: { code: -32001, message: 'Resource not found' } },
} as const;

/** Calls naming a block by number (or tag) in their first parameter: null above the laggard's head. */
const BY_NUMBER = new Set(['eth_getBlockByNumber', 'eth_getTransactionByBlockNumberAndIndex', 'eth_getBlockTransactionCountByNumber', 'eth_getUncleCountByBlockNumber', 'eth_getUncleByBlockNumberAndIndex']);
/** Calls naming a block by hash in their first parameter: null when that block is above the laggard's head. */
const BY_BLOCK_HASH = new Set(['eth_getBlockTransactionCountByHash', 'eth_getUncleCountByBlockHash', 'eth_getUncleByBlockHashAndIndex']);
/** Calls whose answer carries its block's number: null when that block is above the laggard's head. */
const CARRIES_NUMBER: Readonly<Record<string, 'number' | 'blockNumber'>> = {
  eth_getBlockByHash: 'number',
  eth_getTransactionByHash: 'blockNumber',
  eth_getTransactionReceipt: 'blockNumber',
  eth_getTransactionByBlockHashAndIndex: 'blockNumber',
};

interface Call {
  readonly jsonrpc?: unknown;
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: unknown;
}
type Answer = Record<string, unknown>;

const hex = (n: number): string => `0x${n.toString(16)}`;
const quantity = (v: unknown): number | null => (typeof v === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(v) ? Number.parseInt(v, 16) : null);

export async function startPoolStandin(anvilUrl: string, opts: PoolStandinOptions): Promise<PoolStandin> {
  const origin = new URL(anvilUrl).origin;
  const pool = new Pool(origin, { connections: 32 });
  const requests: PoolStandin['requests'] = [];
  const healthChecks: PoolStandin['healthChecks'] = [];
  const altered: Alterations = { nulls: 0, headerNotFound: 0, missingTrieNode: 0, rewritten: 0 };

  const gate = opts.gate ?? OPEN_GATE;
  /** One POST to anvil, answer read whole, inside the gate. */
  const post = (body: string | Buffer): Promise<{ status: number; body: Buffer }> =>
    gate.read(async () => {
      const r = await pool.request({ path: '/', method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return { status: r.statusCode, body: Buffer.from(await r.body.arrayBuffer()) };
    });
  let nextId = 1;
  /** One call to anvil; its whole answer object. */
  const ask = async (method: string, params: unknown[]): Promise<Answer> => JSON.parse((await post(JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }))).body.toString('utf8')) as Answer;
  /** An item forwarded as it is, with the client's own id. */
  const forward = async (call: Call): Promise<Answer> => JSON.parse((await post(JSON.stringify(call))).body.toString('utf8')) as Answer;

  /** What one HTTP request needs from anvil, asked once and shared by the items of a batch. */
  class Context {
    private headP: Promise<number> | null = null;
    private readonly tags = new Map<string, Promise<number | null>>();
    private readonly hashes = new Map<string, Promise<{ number: number; stateRoot: string } | null>>();
    head(): Promise<number> {
      this.headP ??= ask('eth_blockNumber', []).then((a) => quantity(a.result) ?? 0);
      return this.headP;
    }
    /** The number anvil gives a tag (safe and finalized: its own), null if it has none. */
    tag(t: string): Promise<number | null> {
      let p = this.tags.get(t);
      if (!p) {
        p = ask('eth_getBlockByNumber', [t, false]).then((a) => quantity((a.result as { number?: unknown } | null)?.number));
        this.tags.set(t, p);
      }
      return p;
    }
    block(hash: string): Promise<{ number: number; stateRoot: string } | null> {
      let p = this.hashes.get(hash);
      if (!p) {
        p = ask('eth_getBlockByHash', [hash, false]).then((a) => {
          const b = a.result as { number?: unknown; stateRoot?: unknown } | null;
          const n = quantity(b?.number);
          return n === null ? null : { number: n, stateRoot: String(b!.stateRoot) };
        });
        this.hashes.set(hash, p);
      }
      return p;
    }
  }

  /** The node's own head: anvil's, less the laggard's lag. */
  const headOf = async (ctx: Context): Promise<number> => {
    const n = await ctx.head();
    return stand.role === 'laggard' ? Math.max(0, n - stand.lag) : n;
  };

  /**
   * A block parameter as the node reads it: its number (a tag is at most the
   * node's head), or null when it names a hash anvil does not know or is not
   * one (then anvil's own answer stands). A missing parameter means latest.
   */
  const resolve = async (ref: unknown, ctx: Context): Promise<number | null> => {
    if (ref === undefined || ref === null) ref = 'latest';
    if (typeof ref === 'object' && !Array.isArray(ref)) {
      const o = ref as { blockNumber?: unknown; blockHash?: unknown };
      if (o.blockHash !== undefined) return typeof o.blockHash === 'string' ? ((await ctx.block(o.blockHash))?.number ?? null) : null;
      ref = o.blockNumber;
    }
    if (typeof ref !== 'string') return null;
    const own = await headOf(ctx);
    if (ref === 'latest' || ref === 'pending') return own;
    if (ref === 'earliest') return 0;
    if (ref === 'safe' || ref === 'finalized') {
      const t = await ctx.tag(ref);
      return t === null ? null : Math.min(t, own);
    }
    if (/^0x[0-9a-fA-F]{1,64}$/.test(ref) && ref.length === 66) return (await ctx.block(ref))?.number ?? null;
    return quantity(ref);
  };

  const isTag = (ref: unknown): boolean => ref === undefined || ref === null || (typeof ref === 'string' && !ref.startsWith('0x')) || (typeof ref === 'object' && typeof (ref as { blockNumber?: unknown }).blockNumber === 'string' && !(ref as { blockNumber: string }).blockNumber.startsWith('0x'));

  const error = (call: Call, message: string): Answer => ({ jsonrpc: '2.0', id: call.id ?? null, error: { code: -32000, message } });
  const nothing = (call: Call): Answer => {
    altered.nulls++;
    return { jsonrpc: '2.0', id: call.id ?? null, result: null };
  };
  /** The call with its block parameter (at `at`) set to the number `n`. */
  const withBlock = (call: Call, params: unknown[], at: number, n: number): Call => {
    const p = [...params];
    while (p.length < at) p.push(null); // eth_call's optional block comes after the transaction
    p[at] = hex(n);
    altered.rewritten++;
    return { ...call, params: p };
  };

  async function laggard(call: Call, method: string, params: unknown[], ctx: Context): Promise<Answer> {
    const own = await headOf(ctx);
    if (method === 'eth_blockNumber') {
      altered.rewritten++;
      return { jsonrpc: '2.0', id: call.id ?? null, result: hex(own) };
    }
    if (stand.node !== undefined && (method === 'eth_getLogs' || method === 'eth_getBlockReceipts' || method === 'eth_feeHistory')) return above(call, method, params, own, ctx);
    const at = STATE_CALLS[method];
    if (at !== undefined) {
      const n = await resolve(params[at], ctx);
      if (n === null) return forward(call);
      if (n > own) {
        altered.headerNotFound++;
        const p = params[at] as { blockHash?: unknown } | null | undefined;
        if (stand.node !== undefined && typeof p === 'object' && p !== null && p.blockHash !== undefined) {
          const e = NODE_TEXTS[stand.node].hashState;
          return { jsonrpc: '2.0', id: call.id ?? null, error: { code: e.code, message: e.message } };
        }
        return error(call, HEADER_NOT_FOUND);
      }
      return forward(isTag(params[at]) ? withBlock(call, params, at, n) : call);
    }
    if (BY_NUMBER.has(method)) {
      const n = await resolve(params[0], ctx);
      if (n === null) return forward(call);
      if (n > own) return nothing(call);
      return forward(isTag(params[0]) ? withBlock(call, params, 0, n) : call);
    }
    if (BY_BLOCK_HASH.has(method)) {
      const b = typeof params[0] === 'string' ? await ctx.block(params[0]) : null;
      if (b !== null && b.number > own) return nothing(call);
      return forward(call);
    }
    const field = CARRIES_NUMBER[method];
    if (field !== undefined) {
      const a = await forward(call);
      const n = quantity((a.result as Record<string, unknown> | null | undefined)?.[field]);
      return n !== null && n > own ? nothing(call) : a;
    }
    return forward(call);
  }

  /** eth_getLogs, eth_getBlockReceipts and eth_feeHistory as a laggard with `node` answers them (NODE_TEXTS). */
  async function above(call: Call, method: string, params: unknown[], own: number, ctx: Context): Promise<Answer> {
    const texts = NODE_TEXTS[stand.node!];
    const fail = (code: number, message: string): Answer => {
      altered.rewritten++;
      return { jsonrpc: '2.0', id: call.id ?? null, error: { code, message } };
    };
    if (method === 'eth_getBlockReceipts') {
      const n = await resolve(params[0], ctx);
      if (n !== null && n > own) return nothing(call);
      return forward(n !== null && isTag(params[0]) ? withBlock(call, params, 0, n) : call);
    }
    if (method === 'eth_feeHistory') {
      const n = await resolve(params[1], ctx);
      if (n === null || n <= own) return forward(n !== null && isTag(params[1]) ? withBlock(call, params, 1, n) : call);
      if (stand.node === 'geth') return fail(-32000, `request beyond head block: requested ${n}, head ${own}`);
      return forward(withBlock(call, params, 1, own));
    }
    const f = params[0] as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown } | undefined;
    if (f === undefined || f === null || typeof f !== 'object') return forward(call);
    if (typeof f.blockHash === 'string') {
      const b = await ctx.block(f.blockHash);
      return b !== null && b.number > own ? fail(-32000, texts.unknownBlock) : forward(call);
    }
    const from = await resolve(f.fromBlock, ctx);
    const to = await resolve(f.toBlock, ctx);
    if (from === null || to === null) return forward(call);
    if (to > own && texts.beyondHead !== null) return fail(-32602, texts.beyondHead);
    // anvil: the logs it has, up to its own head (none when the range starts above it); tags are its own head.
    if (to <= own && !isTag(f.fromBlock) && !isTag(f.toBlock)) return forward(call);
    altered.rewritten++;
    if (from > own) return { jsonrpc: '2.0', id: call.id ?? null, result: [] };
    return forward({ ...call, params: [{ ...f, fromBlock: hex(from), toBlock: hex(Math.min(to, own)) }, ...params.slice(1)] });
  }

  async function pruned(call: Call, method: string, params: unknown[], ctx: Context): Promise<Answer> {
    const at = STATE_CALLS[method];
    if (at === undefined) return forward(call);
    const n = await resolve(params[at], ctx);
    const head = await ctx.head();
    if (n === null || head - n <= stand.keep) return forward(call);
    const root = (await ask('eth_getBlockByNumber', [hex(n), false])).result as { stateRoot?: string } | null;
    altered.missingTrieNode++;
    return error(call, missingTrieNode(root?.stateRoot ?? `0x${'0'.repeat(64)}`));
  }

  const answer = (call: Call, ctx: Context): Promise<Answer> => {
    if (call === null || typeof call !== 'object' || typeof call.method !== 'string') return forward(call);
    const params = Array.isArray(call.params) ? (call.params as unknown[]) : [];
    return stand.role === 'laggard' ? laggard(call, call.method, params, ctx) : pruned(call, call.method, params, ctx);
  };

  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const json = parseJson(r.body);
    file({ ...r, json }, requests, healthChecks);
    // healthy, or a body that is not JSON-RPC: anvil's own answer, as it is
    if (stand.role === 'healthy' || json === undefined || json === null || typeof json !== 'object' || (Array.isArray(json) && json.length === 0)) {
      const up = await post(r.body);
      res.writeHead(up.status, { 'content-type': 'application/json', 'content-length': up.body.length }).end(up.body);
      return;
    }
    const ctx = new Context();
    const out = Array.isArray(json) ? await Promise.all((json as Call[]).map((c) => answer(c, ctx))) : await answer(json as Call, ctx);
    sendJson(res, 200, out);
  });
  const url = await listen(server);

  const stand: PoolStandin = {
    url,
    role: opts.role,
    node: opts.node,
    lag: opts.lag ?? 3,
    keep: opts.keep ?? 16,
    requests,
    healthChecks,
    altered,
    close: async () => {
      await close(server);
      await pool.close();
    },
  };
  return stand;
}
