// A listener bound: its server, its address, and its open connections for the
// drain (process/drain.ts). A bind that fails names the listener and the address.
import type { Server } from 'node:http';
import type { ListenerSpec } from '../types.ts';
import { Connections } from './drain.ts';

export interface Listening {
  /** null: the admin listener. */
  readonly spec: ListenerSpec | null;
  readonly server: Server;
  readonly connections: Connections;
  readonly host: string;
  readonly port: number;
}

export function parsePort(s: string, where: string): number {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${where}: port '${s}' is not a port number`);
  return n;
}

export function listen(server: Server, host: string, port: number, spec: ListenerSpec | null): Promise<Listening> {
  const connections = new Connections(server);
  return new Promise((ok, fail) => {
    // A worker's bind is done by the cluster primary, and its error says neither the listener nor the host.
    const refused = (err: Error & { code?: string }) => fail(new Error(`listener ${spec?.name ?? 'admin'}: cannot listen on ${host}:${port}: ${err.code ?? err.message}`));
    server.once('error', refused);
    server.listen(port, host, () => {
      server.off('error', refused);
      const a = server.address();
      ok({ spec, server, connections, host, port: typeof a === 'object' && a ? a.port : port });
    });
  });
}
