// The seam's types between a route and the layers on the way out: what a
// chain's handler hands on once it has checked and admitted a request.
// Below its users: the interfaces give to it, the cache and chains.ts
// implement it, and it imports only types of lower files.
import type { Exchange } from './exchange.ts';
import type { EvmDecision } from './guards/evm-decision.ts';
import type { ForwardRequest } from './proxy.ts';

/** The guard's decision on an EVM call or batch that goes on. */
export type EvmForward = Extract<EvmDecision, { kind: 'forward' }>;

/**
 * Where a chain's handler sends what it has checked and admitted: upstream
 * through the chain's dispatch (dispatch.ts), or through the cache around it
 * (chains.ts decides which): the handler does not know.
 * EVM: the guard's decision, and how the route makes the upstream request of
 * it (made only when something goes upstream). Rosetta and Blockbook: the
 * request, and what names the read besides its body (the endpoint, or the
 * path and query below the base).
 */
export interface Forwarders {
  readonly 'evm-jsonrpc': (x: Exchange, d: EvmForward, build: (x: Exchange, d: EvmForward) => ForwardRequest) => void;
  readonly rosetta: (x: Exchange, request: ForwardRequest, call: string) => void;
  readonly blockbook: (x: Exchange, request: ForwardRequest, call: string) => void;
}
