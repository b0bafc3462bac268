// What the JSON-RPC guard decides about a body, shared by its general path
// (evm.ts) and its fast path (evm-fast.ts), so neither imports the other.
import type { BatchMerge, Call } from './call.ts';
import type { Calls } from '../../dispatch.ts';

export type { BatchMerge, MergeSlot } from './call.ts';

export type EvmDecision =
  | {
      readonly kind: 'reply';
      readonly status: number;
      /** '' with status 204. */
      readonly body: string;
      readonly label: string;
      readonly count: number;
    }
  | {
      readonly kind: 'forward';
      readonly body: Buffer | string;
      /** Method name for a single call, 'batch' otherwise; only allowlisted names. */
      readonly label: string;
      /** Items the node will see, for rate limits and metrics. */
      readonly count: number;
      /**
       * false when a call is a write (kinds/evm/methods.ts): a retry could execute it twice. (A call about state on one node,
       * a filter, is not a write: a pool sends it once all the same, as it does every call that is not a read: pool/flow.ts.)
       */
      readonly idempotent: boolean;
      /** false when every forwarded call is a notification: the node answers with no body. */
      readonly answered: boolean;
      /** For batches with refused or invalid items: how to rebuild the answer. */
      readonly merge: BatchMerge | null;
      /** A batch's forwarded calls' methods, in order (credits, usage); null for a single call (its method is the label). */
      readonly methods: readonly string[] | null;
      /** A single call's id in `body`, [idStart, idEnd), as the fast path found it; -1 when not known (the cache finds it). */
      readonly idStart: number;
      readonly idEnd: number;
      /**
       * A single call as it travels (kinds/evm/call.ts): its body is `body`, and it
       * holds what the guard parsed of it (the params it checked, or the
       * whole call), so no layer parses it again; null for a batch.
       */
      readonly call: Call | null;
      /**
       * A batch's forwarded calls, in order, each as it travels (its own
       * bytes of `body`, its id, what the guard read of it: the params on
       * the fast path, the whole call on the general one): the layers that
       * split the batch (the cache, the pool) read them instead of the
       * bytes. Only while the body is `body`; null for a single call.
       */
      readonly calls: readonly Call[] | null;
    };

/** The EVM guard's decision on a call or batch that goes on. */
export type EvmForward = Extract<EvmDecision, { readonly kind: 'forward' }>;

/** What a request made of the guard's decision `d` carries: its one Call, or its batch's. */
export function callsOf(d: EvmForward): Calls<Call> {
  return d.calls === null ? { one: d.call! } : { batch: d.calls };
}
