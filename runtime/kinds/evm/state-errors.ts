// The answers a node gives when it no longer has (or does not have yet) the
// state or the block a call asks for. Such an answer is the node's, not the
// chain's: another upstream (an archive node, one further ahead) may answer
// it, so it is never passed to a client while one could (docs/upstreams.md:
// "Pool settings"). Matched on the JSON-RPC error's message, case-insensitive.
//
// Each entry names the client that says it and where the text comes from.
export interface StateGone {
  readonly pattern: RegExp;
  readonly client: string;
  readonly source: string;
}

export const STATE_GONE: readonly StateGone[] = [
  { pattern: /missing trie node/i, client: 'geth (and its forks: bor, bsc, op-geth)', source: 'trie.MissingNodeError: "missing trie node %x (path %x) %v"' },
  { pattern: /historical state .*not available/i, client: 'geth, path-based state scheme', source: 'triedb/pathdb: "historical state %x is not available"' },
  { pattern: /state [^ ]* ?is not available/i, client: 'geth', source: 'core/state: "state %#x is not available" (wrapped after a missing trie node)' },
  { pattern: /header not found/i, client: 'geth', source: 'internal/ethapi: a block number the node has no header for (pruned, or not yet there)' },
  { pattern: /old data not available due to pruning/i, client: 'erigon', source: 'core/state.PrunedError: "old data not available due to pruning"' },
  { pattern: /no state available for block/i, client: 'nethermind', source: 'JsonRpc: "No state available for block <hash>" (-32002, ResourceUnavailable)' },
  { pattern: /state at block #?\d+ is pruned/i, client: 'reth', source: 'ProviderError::StateAtBlockPruned: "state at block #{0} is pruned"' },
  { pattern: /BlockOutOfRangeError/, client: 'anvil', source: 'anvil 1.7 with --prune-history (measured here): "BlockOutOfRangeError: block height is N but requested was M" (-32602)' },
];

/** Whether a JSON-RPC error message says the node lacks the state or block asked for. */
export function isStateGone(message: string): boolean {
  for (const e of STATE_GONE) if (e.pattern.test(message)) return true;
  return false;
}

/**
 * The answers a node gives for a block hash it does not have (not yet, or not
 * on its chain): another upstream, one that has the block, may answer. Only
 * about a call that names its block by hash.
 */
export const UNKNOWN_BLOCK: readonly StateGone[] = [
  { pattern: /header for hash not found/i, client: 'geth', source: 'internal/ethapi StateAndHeaderByNumberOrHash: "header for hash not found"' },
  { pattern: /^unknown block$/i, client: 'geth, anvil', source: 'eth/filters: errUnknownBlock, eth_getLogs at a blockHash it has no header for (anvil 1.7 answers the same, measured here)' },
  { pattern: /^resource not found$/i, client: 'anvil', source: 'anvil 1.7, state at a blockHash it does not have (measured here): -32001 "Resource not found"' },
];

/** The answers a node gives for a range whose end is above its own head: one further ahead may answer. */
export const BEYOND_HEAD: readonly StateGone[] = [
  { pattern: /block range extends beyond current head block/i, client: 'geth, reth', source: 'eth_getLogs with a toBlock above the head, -32602 (execution-apis tests/eth_getLogs/filter-error-future-block-range; reth FilterBlockRangeError::BlockRangeExceedsHead)' },
  { pattern: /request beyond head block/i, client: 'geth', source: 'eth/gasprice: errRequestBeyondHead, eth_feeHistory with a newest block above the head' },
];

/** Whether a message matches one of `list`. */
export function says(list: readonly StateGone[], message: string): boolean {
  for (const e of list) if (e.pattern.test(message)) return true;
  return false;
}

/** Whether a JSON-RPC answer is an error saying the node lacks the state or block asked for. */
export function answerSaysStateGone(body: Buffer): boolean {
  try {
    const doc = JSON.parse(body.toString('utf8')) as { error?: { message?: unknown } } | null;
    return typeof doc?.error?.message === 'string' && isStateGone(doc.error.message);
  } catch {
    return false;
  }
}
