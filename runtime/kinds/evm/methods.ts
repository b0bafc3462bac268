// What the gateway knows of each EVM JSON-RPC method (issues 37 and 45: one
// table of method traits, below every user of it), one row a method: whether
// it is a read or a write, whether its null or 0 may only mean that a node has
// not seen the data yet, whether it reads state at a block, where its block
// parameter is (or its range, or its block hash), where its answer names its
// block, how long the cache may keep it, whether it lives on one upstream
// (filters), whether a pool sends it to every upstream (broadcast), and where
// its params name the contract a key's allow.contracts checks. Every method
// the manifest checker knows (generator/known-methods.ts) has a row; a method
// without one is a write. The guards (a request's idempotent, a key's
// contracts: contracts.ts), the Call (the block it names), the cache
// (kinds/evm/cache-policy.ts: its scope), the pool (its routing, hedges,
// broadcast, learn.ts) and the manifest checker (quorum's writes) all read it,
// and nothing else says these things. Imports nothing of the runtime.

/** Where an answer names its block: 'block' (it is a block: its number and hash), 'tx' (each object in it carries blockNumber and blockHash: transactions, receipts, logs). */
export type Located = 'block' | 'tx';

/**
 * How long the cache may keep an answer (kinds/evm/cache-policy.ts):
 *  - 'constant': forever, it never changes on one chain (the chain id; web3_sha3 of its params);
 *  - 'block': by the block its block parameter names, else (by hash) the block its answer names (`located`);
 *  - 'head': until the chain's head moves;
 *  - null: never kept nor coalesced (writes, answers about the caller, the mempool or the node).
 */
export type CacheScope = 'constant' | 'block' | 'head' | null;

export interface MethodTraits {
  /**
   * It changes nothing on a node, so it may be asked of a second upstream: as
   * a hedge, or again after an answer or a 5xx. false: a write, or a call
   * about state kept on one node (filters, subscriptions), sent once, never
   * hedged.
   */
  readonly read: boolean;
  /** It sends, signs or changes something on a node: sent once, never compared by quorum (generator/validate.ts). */
  readonly write: boolean;
  /**
   * Its answer may be empty only because the node has not seen the data yet:
   * 'null' (a block, transaction, receipt or uncle it does not have), 'count'
   * (a count of 0, or null, at a block it does not have); null: an empty
   * answer is the chain's.
   */
  readonly mayBeEmpty: 'null' | 'count' | null;
  /** It reads state at a block, which a full node may have pruned (archive routing). */
  readonly state: boolean;
  /** Where its block parameter is: a number, a tag, an EIP-1898 object or (eth_getBlockReceipts) a block hash; -1: none. */
  readonly block: number;
  /** Its first parameter is a filter object: a range fromBlock..toBlock (each `latest` when absent), or a blockHash. */
  readonly range: boolean;
  /** Its first parameter is a block hash. */
  readonly byHash: boolean;
  /** Where its answer names its block (null: it names none the gateway reads): the pool learns hashes from it, the cache keeps an answer by hash with it. */
  readonly located: Located | null;
  /** How long the cache may keep or coalesce its answer (its params decide the rest: kinds/evm/cache-policy.ts). */
  readonly cache: CacheScope;
  /**
   * It is about a filter, which lives on the node that made it: 'new' makes
   * one (the answer is its id), 'use' names one by its id (params[0]).
   */
  readonly filter: 'new' | 'use' | null;
  /** It sends a transaction: with the chain's `broadcast: all`, a pool sends it to every usable upstream. */
  readonly broadcast: boolean;
  /**
   * Where its params name the contract or account it reads or calls, which a
   * key's `allow.contracts` list checks (contracts.ts): 'to', the `to` of the
   * transaction object params[0]; 'address', params[0] itself; null: none.
   */
  readonly contract: 'to' | 'address' | null;
}

const READ: MethodTraits = Object.freeze({ read: true, write: false, mayBeEmpty: null, state: false, block: -1, range: false, byHash: false, located: null, cache: null, filter: null, broadcast: false, contract: null });
const WRITE: MethodTraits = Object.freeze({ ...READ, read: false, write: true });

const rows: [string, MethodTraits][] = [];
/** Each of `names` gets a row: `base` with `t` over it. */
const add = (base: MethodTraits, t: Partial<MethodTraits>, names: string): void => {
  const row = Object.freeze({ ...base, ...t });
  for (const n of names.trim().split(/\s+/)) rows.push([n, row]);
};

// Reads the cache keeps forever: the chain's own constants.
add(READ, { cache: 'constant' }, 'eth_chainId net_version web3_sha3');
// The head itself: until it moves.
add(READ, { cache: 'head' }, 'eth_blockNumber eth_gasPrice');
// State at a block: the block parameter's place, kept by that block.
add(READ, { state: true, block: 1, cache: 'block', contract: 'address' }, 'eth_getBalance eth_getTransactionCount eth_getCode');
add(READ, { state: true, block: 1, cache: 'block', contract: 'to' }, 'eth_call');
add(READ, { state: true, block: 2, cache: 'block', contract: 'address' }, 'eth_getStorageAt eth_getProof');
// Blocks, transactions and uncles by a block's number: kept by that block.
add(READ, { mayBeEmpty: 'null', block: 0, located: 'block', cache: 'block' }, 'eth_getBlockByNumber');
add(READ, { mayBeEmpty: 'null', block: 0, located: 'tx', cache: 'block' }, 'eth_getTransactionByBlockNumberAndIndex');
add(READ, { mayBeEmpty: 'null', block: 0, cache: 'block' }, 'eth_getUncleByBlockNumberAndIndex');
add(READ, { mayBeEmpty: 'count', block: 0, cache: 'block' }, 'eth_getBlockTransactionCountByNumber eth_getUncleCountByBlockNumber');
// By a block's hash: kept by the block the answer names where it names one (a block can be reorged out, and some
// nodes keep answering for it), else until the head moves.
add(READ, { mayBeEmpty: 'null', byHash: true, located: 'block', cache: 'block' }, 'eth_getBlockByHash');
add(READ, { mayBeEmpty: 'null', byHash: true, located: 'tx', cache: 'block' }, 'eth_getTransactionByBlockHashAndIndex');
add(READ, { mayBeEmpty: 'null', byHash: true, cache: 'head' }, 'eth_getUncleByBlockHashAndIndex');
add(READ, { mayBeEmpty: 'count', byHash: true, cache: 'head' }, 'eth_getBlockTransactionCountByHash eth_getUncleCountByBlockHash');
// By a transaction's hash: kept by the block the answer names (a transaction not yet in a block never).
add(READ, { mayBeEmpty: 'null', located: 'tx', cache: 'block' }, 'eth_getTransactionByHash eth_getTransactionReceipt');
// Other reads.
add(READ, { state: true, block: 1, contract: 'to' }, 'eth_estimateGas');
add(READ, { state: true }, 'eth_createAccessList eth_simulateV1 eth_fillTransaction debug_traceCall debug_storageRangeAt trace_call trace_rawTransaction');
add(READ, { mayBeEmpty: 'null', block: 0, located: 'tx' }, 'eth_getBlockReceipts');
add(READ, { mayBeEmpty: 'null' }, 'eth_getHeaderByHash eth_getHeaderByNumber');
add(READ, { block: 1 }, 'eth_feeHistory');
add(READ, { range: true, located: 'tx' }, 'eth_getLogs');
add(
  READ,
  {},
  `web3_clientVersion net_listening net_peerCount eth_syncing eth_mining eth_hashrate eth_getWork eth_accounts
   eth_coinbase eth_blobBaseFee eth_maxPriorityFeePerGas eth_protocolVersion
   eth_getRawTransactionByHash eth_pendingTransactions
   debug_traceTransaction debug_traceBlockByNumber debug_traceBlockByHash debug_traceBlock debug_getBadBlocks
   debug_getRawBlock debug_getRawHeader debug_getRawReceipts debug_getRawTransaction
   trace_block trace_transaction trace_filter trace_get trace_replayBlockTransactions trace_replayTransaction
   txpool_content txpool_contentFrom txpool_inspect txpool_status admin_peers admin_nodeInfo
   personal_ecRecover personal_listAccounts`,
);
// Filters and subscriptions: made on one node, and known only there (not writes, not reads either).
add(READ, { read: false, filter: 'new' }, 'eth_newFilter eth_newBlockFilter eth_newPendingTransactionFilter');
add(READ, { read: false, filter: 'use' }, 'eth_getFilterChanges eth_getFilterLogs eth_uninstallFilter');
add(READ, { read: false }, 'eth_subscribe eth_unsubscribe');
// Writes: they send, sign or change something on a node.
add(WRITE, { broadcast: true }, 'eth_sendRawTransaction');
add(
  WRITE,
  {},
  `eth_sendTransaction eth_sendRawTransactionConditional eth_sign eth_signTransaction
   eth_signTypedData eth_signTypedData_v3 eth_signTypedData_v4 personal_sign eth_submitWork eth_submitHashrate
   admin_addPeer admin_removePeer miner_start miner_stop miner_setEtherbase`,
);

/** Every method the gateway knows, with its traits. */
export const METHOD_TRAITS: ReadonlyMap<string, MethodTraits> = new Map(rows);

/** A method's traits; a method the table does not know is a write (never hedged, never sent twice). */
export function traitsOf(method: string): MethodTraits {
  return METHOD_TRAITS.get(method) ?? WRITE;
}

const named = (p: (t: MethodTraits) => boolean): ReadonlySet<string> => new Set([...METHOD_TRAITS].filter(([, t]) => p(t)).map(([m]) => m));

/** Methods that read state at a block: a full node may have pruned it (archive routing). */
export const STATE_METHODS = named((t) => t.state);
/** Methods whose null (or empty) answer about data not yet final may only mean that this node has not seen it yet. */
export const MAY_BE_EMPTY = named((t) => t.mayBeEmpty === 'null');
/** Counts whose 0 about a block above an upstream's finalized block may only mean that node has not seen it yet. */
export const COUNTS = named((t) => t.mayBeEmpty === 'count');
/** Methods that send, sign or change something on a node. */
export const WRITES = named((t) => t.write);
/** Methods whose params name a contract or account, which a key's `allow.contracts` list checks. */
export const CONTRACT_METHODS = named((t) => t.contract !== null);
