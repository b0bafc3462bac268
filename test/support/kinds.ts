// Each interface kind as the tests and the demo meet it, in one table keyed by
// InterfaceKind: a kind the schema adds is asked for its row by the compiler
// (issue 45: "a fourth interface is one new folder"). Its folder under
// runtime/kinds/ and its error catalogue (test/unit/runtime/kinds/kinds.test.ts
// checks the folder and the docs against them), the node or stand-in that
// serves a chain of it (bin/demo.ts, the Kubernetes pod test), and a first
// call to such a chain (the pod test's check that it answers).
import type { InterfaceKind, RosettaNetwork } from '../../runtime/types.ts';
import { RPC_ERRORS } from '../../runtime/kinds/evm/errors.ts';
import { BLOCKBOOK_ERRORS } from '../../runtime/kinds/blockbook/errors.ts';
import { ROSETTA_ERRORS } from '../../runtime/kinds/rosetta/errors.ts';
import { startAnvil } from './anvil.ts';
import { startBlockbookStub } from './blockbook-stub.ts';
import { startRosettaStub } from './rosetta-stub.ts';

/** What a chain of the manifest says of what its upstream must serve (the fields of each kind that name it). */
export interface KindChain {
  readonly chainId?: number;
  readonly network?: RosettaNetwork;
  readonly coin?: string;
}

/** A running node or stand-in: where its API is, and how to stop it. */
export interface RunningStandIn {
  readonly url: string;
  stop(): Promise<unknown>;
}

export interface KindSupport {
  /** Its folder under runtime/kinds/ (module.ts, guard.ts, errors.ts). */
  readonly folder: string;
  /** Its error catalogue, which docs/errors.md lists in a table under a heading that names the kind. */
  readonly errors: Readonly<Record<string, unknown>>;
  /** A node or stand-in serving a chain of the kind, on 127.0.0.1. */
  standIn(chain: KindChain): Promise<RunningStandIn>;
  /** A call any key of the chain may make, to see it answer: the path below the chain's, and the body (none: a GET). */
  firstCall(chain: KindChain): { readonly path: string; readonly body?: string };
}

export const KINDS: { readonly [K in InterfaceKind]: KindSupport } = {
  'evm-jsonrpc': {
    folder: 'evm',
    errors: RPC_ERRORS,
    // anvil from npm, with the chain's id (31337, anvil's own, where the manifest names none).
    standIn: async (c) => {
      const a = await startAnvil({ chainId: c.chainId ?? 31337 });
      return { url: a.url, stop: () => a.stop() };
    },
    firstCall: () => ({ path: '', body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' }),
  },
  blockbook: {
    folder: 'blockbook',
    errors: BLOCKBOOK_ERRORS,
    standIn: async (c) => {
      const b = await startBlockbookStub(c.coin === undefined ? {} : { coin: c.coin });
      return { url: b.url, stop: () => b.close() };
    },
    firstCall: () => ({ path: '/v2/block/1' }),
  },
  rosetta: {
    folder: 'rosetta',
    errors: ROSETTA_ERRORS,
    standIn: async (c) => {
      const r = await startRosettaStub({ network: c.network! });
      return { url: r.url, stop: () => r.close() };
    },
    firstCall: (c) => ({ path: '/network/status', body: JSON.stringify({ network_identifier: { blockchain: 'cardano', network: c.network } }) }),
  },
};
