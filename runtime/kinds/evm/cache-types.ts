// What the EVM cache's parts (evm.ts, evm-batch.ts) know of each other.
import type { ForwardRequest } from '../../dispatch.ts';
import type { FlightMember } from '../../cache/common.ts';
import type { CacheCore } from '../../cache/core.ts';
import type { Scope } from './cache-policy.ts';
import type { Call } from './call.ts';

export interface EvmFlight {
  readonly method: string;
  readonly scope: Scope;
}

/** The EVM cache, as its batches see it (evm.ts). */
export interface EvmCache {
  readonly core: CacheCore;
  take(m: FlightMember, call: Call, request: ForwardRequest, together?: object | null): boolean;
}
