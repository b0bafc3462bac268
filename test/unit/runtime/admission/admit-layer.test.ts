// Admission's admit step charges and counts a request by the calls it carries
// (issue 45): each of its calls' methods (a JSON-RPC method, a document
// endpoint), whatever kind made them.
import { describe, expect, it } from 'vitest';
import { AdmitLayer, type AdmissionStage } from '../../../../runtime/admission/admission.ts';
import { Call } from '../../../../runtime/kinds/evm/call.ts';
import { DocCall } from '../../../../runtime/kinds/doc-call.ts';
import { NOTHING, type ForwardRequest } from '../../../../runtime/dispatch.ts';
import type { ClientTarget } from '../../../../runtime/exchange.ts';
import type { Bucket, Usage } from '../../../../runtime/observe/usage.ts';

const COSTS: Record<string, number> = { eth_getLogs: 20, eth_call: 5 };

/** The layer over a stage that runs every request's steps (a key with limits), and what it charged, counted and sent on. */
function layer(cost: ((name: string) => number) | null) {
  const charged: number[] = [];
  const sent: ForwardRequest[] = [];
  const bucket: Bucket = new Map();
  const stage = {
    open: () => false,
    admit: <T>(x: ClientTarget, _key: unknown, credits: number, next: (x: ClientTarget, arg: T) => void, arg: T) => {
      charged.push(credits);
      next(x, arg);
    },
  } as unknown as AdmissionStage;
  const usage = { bucket: () => bucket } as unknown as Usage;
  const admit = new AdmitLayer(stage, 'eth', usage, cost, (_x, r) => {
    sent.push(r);
    return NOTHING;
  });
  return { admit, charged, sent, bucket };
}

const client = (label: string) => ({ key: { id: 'k' }, label, forward: null }) as unknown as ClientTarget;

function batch(methods: readonly string[]): ForwardRequest {
  const calls = methods.map((m, i) => new Call(`{"jsonrpc":"2.0","id":${i},"method":"${m}","params":[]}`, m));
  return { calls: { batch: calls }, transport: { body: `[${calls.map((c) => c.body).join(',')}]` } } as unknown as ForwardRequest;
}

describe('AdmitLayer', () => {
  it("charges and counts a batch by its calls' methods, at the manifest's credits", () => {
    const { admit, charged, sent, bucket } = layer((m) => COSTS[m] ?? 1);
    const request = batch(['eth_getLogs', 'eth_call', 'eth_chainId', 'eth_call']);
    admit.front(client('batch'), request);
    expect(charged).toEqual([20 + 5 + 1 + 5]);
    expect(sent).toEqual([request]);
    expect(Object.fromEntries(bucket)).toEqual({ eth_getLogs: [1, 20], eth_call: [2, 10], eth_chainId: [1, 1] });
  });

  it("without credits, a batch costs one per call; a single call or an endpoint is charged and counted by its call's method", () => {
    const plain = layer(null);
    plain.admit.front(client('batch'), batch(['eth_call', 'eth_call', 'eth_chainId']));
    expect(plain.charged).toEqual([3]);
    expect(Object.fromEntries(plain.bucket)).toEqual({ eth_call: [2, 2], eth_chainId: [1, 1] });
    const priced = layer((m) => COSTS[m] ?? 1);
    priced.admit.front(client('eth_getLogs'), { calls: { one: new Call('{}', 'eth_getLogs') }, transport: { body: '{}' } } as unknown as ForwardRequest);
    priced.admit.front(client('/api/v2/address'), { calls: { one: new DocCall('/api/v2/address', null, true) }, transport: { body: null } } as unknown as ForwardRequest);
    expect(priced.charged).toEqual([20, 1]);
    expect(Object.fromEntries(priced.bucket)).toEqual({ eth_getLogs: [1, 20], '/api/v2/address': [1, 1] });
  });
});
