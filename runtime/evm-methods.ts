// What the gateway knows of each EVM JSON-RPC method (issue 37: one table of
// method traits, below every user of it): whether it is a read, whether its
// null or 0 may only mean that a node has not seen the data yet, whether it
// reads state at a block, whether the cache may keep it, and whether it lives
// on one upstream (filters). Every method the manifest checker knows
// (generator/known-methods.ts) has a row; a method without one is a write.
// Imports nothing of the runtime: the pool, the cache and the guards may all
// read it.

export interface MethodTraits {
  /**
   * It changes nothing on a node, so it may be asked of a second upstream: as
   * a hedge, or again after an answer or a 5xx. false: a write (or a call
   * about state kept on one node), sent once, never hedged.
   */
  readonly read: boolean;
  /**
   * Its answer may be empty only because the node has not seen the data yet:
   * 'null' (a block, transaction, receipt or uncle it does not have), 'count'
   * (a count of 0, or null, at a block it does not have); null: an empty
   * answer is the chain's.
   */
  readonly mayBeEmpty: 'null' | 'count' | null;
  /** It reads state at a block, which a full node may have pruned (archive routing). */
  readonly state: boolean;
  /** The cache may keep or coalesce its answers (cache/policy.ts says for which params, and how long). */
  readonly cacheable: boolean;
  /**
   * It is about a filter, which lives on the node that made it: 'new' makes
   * one (the answer is its id), 'use' names one by its id (params[0]).
   */
  readonly filter: 'new' | 'use' | null;
}

const READ: MethodTraits = { read: true, mayBeEmpty: null, state: false, cacheable: false, filter: null };
const WRITE: MethodTraits = { read: false, mayBeEmpty: null, state: false, cacheable: false, filter: null };

const row = (t: Partial<MethodTraits>): MethodTraits => Object.freeze({ ...READ, ...t });
const CACHED = row({ cacheable: true });
const STATE = row({ state: true });
const STATE_CACHED = row({ state: true, cacheable: true });
const MAYBE_NULL = row({ mayBeEmpty: 'null' });
const MAYBE_NULL_CACHED = row({ mayBeEmpty: 'null', cacheable: true });
const COUNT_CACHED = row({ mayBeEmpty: 'count', cacheable: true });
const NEW_FILTER = row({ read: false, filter: 'new' });
const USE_FILTER = row({ read: false, filter: 'use' });

const rows: [string, MethodTraits][] = [];
const add = (t: MethodTraits, names: string): void => {
  for (const n of names.trim().split(/\s+/)) rows.push([n, t]);
};

// Reads the cache keeps (cache/policy.ts: its block-parameter table and its constants).
add(CACHED, 'eth_chainId net_version web3_sha3 eth_blockNumber eth_gasPrice');
add(STATE_CACHED, 'eth_getBalance eth_getTransactionCount eth_getCode eth_getStorageAt eth_call eth_getProof');
add(
  MAYBE_NULL_CACHED,
  `eth_getBlockByNumber eth_getBlockByHash eth_getTransactionByHash eth_getTransactionReceipt
   eth_getTransactionByBlockHashAndIndex eth_getTransactionByBlockNumberAndIndex
   eth_getUncleByBlockHashAndIndex eth_getUncleByBlockNumberAndIndex`,
);
add(COUNT_CACHED, 'eth_getBlockTransactionCountByNumber eth_getBlockTransactionCountByHash eth_getUncleCountByBlockNumber eth_getUncleCountByBlockHash');
// Other reads.
add(STATE, 'eth_estimateGas eth_createAccessList eth_simulateV1 eth_fillTransaction debug_traceCall debug_storageRangeAt trace_call trace_rawTransaction');
add(MAYBE_NULL, 'eth_getBlockReceipts eth_getHeaderByHash eth_getHeaderByNumber');
add(
  READ,
  `web3_clientVersion net_listening net_peerCount eth_syncing eth_mining eth_hashrate eth_getWork eth_accounts
   eth_coinbase eth_blobBaseFee eth_feeHistory eth_getLogs eth_maxPriorityFeePerGas eth_protocolVersion
   eth_getRawTransactionByHash eth_pendingTransactions
   debug_traceTransaction debug_traceBlockByNumber debug_traceBlockByHash debug_traceBlock debug_getBadBlocks
   debug_getRawBlock debug_getRawHeader debug_getRawReceipts debug_getRawTransaction
   trace_block trace_transaction trace_filter trace_get trace_replayBlockTransactions trace_replayTransaction
   txpool_content txpool_contentFrom txpool_inspect txpool_status admin_peers admin_nodeInfo
   personal_ecRecover personal_listAccounts`,
);
// Filters: made on one node, and known only there.
add(NEW_FILTER, 'eth_newFilter eth_newBlockFilter eth_newPendingTransactionFilter');
add(USE_FILTER, 'eth_getFilterChanges eth_getFilterLogs eth_uninstallFilter');
// Writes: they send, sign or change something on a node. A subscription lives on its node, as a filter does.
add(
  WRITE,
  `eth_sendRawTransaction eth_sendTransaction eth_sendRawTransactionConditional eth_sign eth_signTransaction
   eth_signTypedData eth_signTypedData_v3 eth_signTypedData_v4 personal_sign eth_submitWork eth_submitHashrate
   eth_subscribe eth_unsubscribe admin_addPeer admin_removePeer miner_start miner_stop miner_setEtherbase`,
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

/** Where a method's block parameter is: a number, a tag, an EIP-1898 object or (eth_getBlockReceipts) a block hash. */
const BLOCK_PARAM: ReadonlyMap<string, number> = new Map([
  // state at a block
  ['eth_getBalance', 1],
  ['eth_getTransactionCount', 1],
  ['eth_getCode', 1],
  ['eth_getStorageAt', 2],
  ['eth_call', 1],
  ['eth_getProof', 2],
  ['eth_estimateGas', 1],
  // blocks by number
  ['eth_getBlockByNumber', 0],
  ['eth_getBlockTransactionCountByNumber', 0],
  ['eth_getUncleCountByBlockNumber', 0],
  ['eth_getTransactionByBlockNumberAndIndex', 0],
  ['eth_getUncleByBlockNumberAndIndex', 0],
  // a block's receipts; fee history up to its newest block
  ['eth_getBlockReceipts', 0],
  ['eth_feeHistory', 1],
]);

/** Where `method`'s block parameter is (undefined: it names no block by number or tag): the pool's and the cache's one table. */
export function blockParamAt(method: string): number | undefined {
  return BLOCK_PARAM.get(method);
}
