// What the EVM cache's parts (evm.ts, evm-batch.ts) know of each other.
import type { Exchange } from '../exchange.ts';
import type { EvmDecision } from '../guards/evm.ts';
import type { ForwardRequest } from '../proxy.ts';
import type { FlightMember } from './common.ts';
import type { CacheCore } from './core.ts';
import type { Scope } from './policy.ts';
import type { Call } from '../evm-call.ts';

/** What the EVM route hands its forwarder: the guard's decision on the call or batch. */
export type EvmCall = Extract<EvmDecision, { kind: 'forward' }>;
/** How the route makes the upstream request of a call or batch, as it would without a cache. */
export type BuildRequest = (x: Exchange, d: EvmCall) => ForwardRequest;

export interface EvmFlight {
  readonly method: string;
  readonly scope: Scope;
}

/** The EVM cache, as its batches see it (evm.ts). */
export interface EvmCache {
  readonly core: CacheCore;
  take(m: FlightMember, method: string, b: Buffer, idStart: number, idEnd: number, template: ForwardRequest | null, x: Exchange, d: EvmCall, build: BuildRequest, given?: Call | null): boolean;
}

export const OPEN = Buffer.from('[');
export const COMMA = Buffer.from(',');
export const CLOSE = Buffer.from(']');
