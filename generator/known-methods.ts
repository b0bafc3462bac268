// Method names a manifest is checked against for spelling: the 30 the
// interface spec allows plus other standard Ethereum JSON-RPC names. A name
// outside this list is still accepted (a chain may allow its own methods)
// unless it is a near miss of one of these.
import { WRITES } from '../runtime/kinds/evm/methods.ts';

export const SPEC_METHODS = [
  'web3_clientVersion', 'web3_sha3', 'net_version', 'net_listening', 'eth_syncing', 'eth_mining', 'eth_gasPrice',
  'eth_blockNumber', 'eth_chainId', 'eth_getBalance', 'eth_getStorageAt', 'eth_getTransactionCount',
  'eth_getBlockTransactionCountByHash', 'eth_getBlockTransactionCountByNumber', 'eth_getUncleCountByBlockHash',
  'eth_getUncleCountByBlockNumber', 'eth_getCode', 'eth_sendRawTransaction', 'eth_call', 'eth_estimateGas',
  'eth_getBlockByHash', 'eth_getBlockByNumber', 'eth_getTransactionByHash', 'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex', 'eth_getTransactionReceipt', 'eth_getUncleByBlockHashAndIndex',
  'eth_getUncleByBlockNumberAndIndex', 'eth_getWork', 'eth_getProof',
] as const;

export const KNOWN_METHODS: ReadonlySet<string> = new Set<string>([
  ...SPEC_METHODS,
  'eth_accounts', 'eth_blobBaseFee', 'eth_coinbase', 'eth_createAccessList', 'eth_feeHistory', 'eth_getFilterChanges',
  'eth_getFilterLogs', 'eth_getLogs', 'eth_getBlockReceipts', 'eth_hashrate', 'eth_maxPriorityFeePerGas',
  'eth_newBlockFilter', 'eth_newFilter', 'eth_newPendingTransactionFilter', 'eth_protocolVersion', 'eth_sendTransaction',
  'eth_sign', 'eth_signTransaction', 'eth_signTypedData_v4', 'eth_submitHashrate', 'eth_submitWork', 'eth_subscribe',
  'eth_uninstallFilter', 'eth_unsubscribe', 'eth_simulateV1', 'eth_fillTransaction', 'net_peerCount',
  'debug_traceTransaction', 'debug_traceCall', 'debug_traceBlockByNumber', 'debug_traceBlockByHash',
  'trace_block', 'trace_call', 'trace_transaction', 'trace_filter', 'txpool_content', 'txpool_status',
  'admin_peers', 'admin_nodeInfo', 'personal_sign',
  // More of the execution-apis spec and the common client namespaces.
  'eth_getHeaderByHash', 'eth_getHeaderByNumber', 'eth_getRawTransactionByHash', 'eth_pendingTransactions',
  'eth_sendRawTransactionConditional', 'eth_signTypedData', 'eth_signTypedData_v3',
  'debug_getBadBlocks', 'debug_getRawBlock', 'debug_getRawHeader', 'debug_getRawReceipts', 'debug_getRawTransaction',
  'debug_storageRangeAt', 'debug_traceBlock', 'trace_get', 'trace_rawTransaction', 'trace_replayBlockTransactions',
  'trace_replayTransaction', 'txpool_inspect', 'txpool_contentFrom', 'personal_ecRecover', 'personal_listAccounts',
  'admin_addPeer', 'admin_removePeer', 'miner_start', 'miner_stop', 'miner_setEtherbase',
]);

/**
 * Methods `quorum` cannot compare, and why. Writes: a transaction or a
 * signature is sent once, never asked of two nodes to compare (the method
 * table's writes: runtime/kinds/evm/methods.ts). About one node: the answer differs from node to node by design (a
 * filter or subscription id, a node's peers, pool or version), so two
 * upstreams would never agree.
 */
export const NOT_COMPARABLE: ReadonlyMap<string, 'write' | 'node'> = new Map<string, 'write' | 'node'>([
  ...[...WRITES].map((m) => [m, 'write'] as const),
  ...[
    'eth_newFilter', 'eth_newBlockFilter', 'eth_newPendingTransactionFilter', 'eth_getFilterChanges', 'eth_getFilterLogs',
    'eth_uninstallFilter', 'eth_subscribe', 'eth_unsubscribe', 'web3_clientVersion', 'net_peerCount', 'admin_peers',
    'admin_nodeInfo', 'txpool_content', 'txpool_contentFrom', 'txpool_inspect', 'txpool_status',
  ].map((m) => [m, 'node'] as const),
]);
