// One Blockbook or Rosetta call as it crosses the layers (issue 37: the
// guard's decision is the object that travels, as kinds/evm/call.ts's Call is for
// EVM): the endpoint, the block it names, and the endpoint's traits. The
// guards (kinds/blockbook/guard.ts, kinds/rosetta/guard.ts) make it of what they have
// read anyway (the path, the parsed body); a pool reads it from the
// ForwardRequest (`doc`), never the path or the body again. Below the guards
// and the pool: it imports nothing.

/** The block a call names: its height, its hash alone (no height beside it), or none. */
export type DocBlock = number | { readonly hash: string } | null;

export interface DocCall {
  /** Blockbook's endpoint (`block`, `tx`, `sendtx`...) or Rosetta's path (`network/status`, `block`...). */
  readonly endpoint: string;
  readonly block: DocBlock;
  /** A read: safe to hedge, or to ask again of another upstream after an answer. false: a write (Blockbook sendtx, Rosetta construction/submit and call), sent once. */
  readonly read: boolean;
  /** Blockbook: what names the read below the upstream's base (its path and query); with its headers, what the cache's front keys it by. */
  readonly tail?: string;
}
