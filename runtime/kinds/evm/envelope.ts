// EVM's failure envelope: each failure the gateway answers itself, as the
// JSON-RPC error object (id null) and status its catalogue names
// (errors.ts). The module answers in it, and the layers that answer one call
// of a batch for the gateway (the pool's batch split, the ranges layer's)
// take their failures from it, with that call's id.
import { envelope, failureNames, policyNames, RESETS_AT, type Envelope, type Failure } from '../../envelope.ts';
import { RPC_ERRORS, RPC_FAILED, rpcErrorJson, type RpcErrorName } from './errors.ts';

const NAMES: Readonly<Record<Failure, RpcErrorName>> = failureNames('GW_RPC', {
  ...policyNames('GW_KEY_POLICY', 'GW_KEY_JWT'),
  ...RPC_FAILED,
  'not-found': 'GW_RPC_NOT_FOUND',
  'method-not-allowed': 'GW_RPC_HTTP_METHOD_NOT_ALLOWED',
});

export const EVM_ENVELOPE: Envelope = envelope(NAMES, (n, reason) => ({
  status: RPC_ERRORS[n].status,
  body: rpcErrorJson(n, 'null', reason === undefined ? undefined : reason === 'quota' ? `{"reason":"quota","resetsAt":"${RESETS_AT}"}` : `{"reason":"${reason}"}`),
}));
