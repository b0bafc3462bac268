// One Blockbook or Rosetta call as it crosses the layers (issue 37: the
// guard's decision is the object that travels, as kinds/evm/call.ts's Call is for
// EVM): the endpoint, the block it names, and the endpoint's traits. The
// guards (kinds/blockbook/guard.ts, kinds/rosetta/guard.ts) make it of what they have
// read anyway (the path, the parsed body); a pool reads it from the
// request's calls, never the path or the body again. Below the guards and
// the pool: it imports only the seam's Call, which it is.
import type { Call } from '../dispatch.ts';

/** The block a call names: its height, its hash alone (no height beside it), or none. */
export type DocBlock = number | { readonly hash: string } | null;

export class DocCall implements Call {
  /** A document call's bytes are its request's path and body (the request's transport): none of its own, no id. */
  readonly body = null;
  readonly idFrom = -1;
  readonly idTo = -1;
  /** What the guard read of the body stays with the guard: the layers read the endpoint and the block. */
  readonly params = undefined;

  constructor(
    /** Blockbook's endpoint (`block`, `tx`, `sendtx`...) or Rosetta's path (`network/status`, `block`...). */
    readonly endpoint: string,
    readonly block: DocBlock,
    /** A read: safe to hedge, or to ask again of another upstream after an answer. false: a write (Blockbook sendtx, Rosetta construction/submit and call), sent once. */
    readonly read: boolean,
    /** Blockbook: what names the read below the upstream's base (its path and query); with its headers, what the cache's front keys it by. */
    readonly tail?: string,
  ) {}

  get method(): string {
    return this.endpoint;
  }

  get write(): boolean {
    return !this.read;
  }

  /** This call, with what names its read below the upstream's base (Blockbook's tail). */
  withTail(tail: string): DocCall {
    return new DocCall(this.endpoint, this.block, this.read, tail);
  }
}
