// The dispatch table: every interface kind of the manifest schema, with its
// module. The mapped type makes the compiler refuse a kind without a module.
import type { Envelope } from '../envelope.ts';
import type { RouteHandler } from '../exchange.ts';
import type { InterfaceKind, ListenerSpec, RouteSpec } from '../types.ts';
import { blockbook } from './blockbook.ts';
import { evm } from './evm.ts';
import type { InterfaceModule, RouteServices } from './interface.ts';
import { rosetta } from './rosetta.ts';

export const INTERFACES: { readonly [K in InterfaceKind]: InterfaceModule<K> } = {
  blockbook,
  'evm-jsonrpc': evm,
  rosetta,
};

/**
 * The envelope for answers that belong to no chain on a listener (an unknown
 * path, a request the parser refused): JSON-RPC where the listener serves an
 * EVM chain, whose clients read nothing else; else Blockbook's plain
 * {"error": ...}, which any client can read. Never Rosetta's, whose 500 for
 * every error would make an unknown path look like a server fault.
 */
export function listenerEnvelope(l: ListenerSpec): Envelope {
  for (const r of l.routes.values()) if (r.interface === 'evm-jsonrpc') return evm.envelope;
  return blockbook.envelope;
}

/** A chain's module. (TypeScript cannot tie a route's kind to its module's through the union; the table above can.) */
export function moduleOf<R extends RouteSpec>(route: R): InterfaceModule<R['interface']> {
  return INTERFACES[route.interface] as unknown as InterfaceModule<R['interface']>;
}

export function routeHandler(route: RouteSpec, services: RouteServices): RouteHandler {
  return (moduleOf(route).handler as (r: RouteSpec, s: RouteServices) => RouteHandler)(route, services);
}
