// The dispatch table: every interface kind of the manifest schema, with its
// module. The mapped type makes the compiler refuse a kind without a module.
import type { Envelope } from '../envelope.ts';
import type { InterfaceKind, ListenerSpec } from '../types.ts';
import { blockbook } from './blockbook/module.ts';
import { evm } from './evm/module.ts';
import type { InterfaceModule } from './interface.ts';
import { rosetta } from './rosetta/module.ts';

export const INTERFACES: { readonly [K in InterfaceKind]: InterfaceModule<K> } = {
  blockbook,
  'evm-jsonrpc': evm,
  rosetta,
};

/**
 * A kind's module. Called with a route's kind in a function generic in the
 * kind (`K`, with the route a `RouteOf<K>`), module and route stay tied
 * together and the compiler checks every call between them.
 */
export function moduleOf<K extends InterfaceKind>(kind: K): InterfaceModule<K> {
  return INTERFACES[kind];
}

/**
 * The envelope for answers that belong to no chain on a listener (an unknown
 * path, a request the parser refused): the envelope of the first module that
 * asks for it (JSON-RPC, whose clients read nothing else); else the plain
 * {"error": ...} of Blockbook, which any client can read. Never Rosetta's,
 * whose 500 for every error would make an unknown path look like a server fault.
 */
export function listenerEnvelope(l: ListenerSpec): Envelope {
  for (const r of l.routes.values()) {
    const m = moduleOf(r.interface);
    if (m.answersStrays) return m.envelope;
  }
  return blockbook.envelope;
}
