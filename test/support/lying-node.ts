// A node that lies about balances, in front of an anvil: it answers
// eth_getBalance of the addresses it is told to lie about with the real
// balance plus one wei, in single calls and in every item of a batch alike
// (as a node with a corrupt state database, or a malicious provider, would);
// every other call, and every other address, gets anvil's own answer. It
// records the calls that reached it (the gateway's health checks apart).
// No test framework in here.
import { Pool } from 'undici';
import { close, createSafeServer, file, listen, parseJson, record, sendJson, type Recorded } from './http.ts';

export interface LyingNode {
  /** http://127.0.0.1:PORT (JSON-RPC is POSTed to any path). */
  readonly url: string;
  /** Requests other than the gateway's health checks, in arrival order. */
  readonly requests: (Recorded & { readonly json: unknown })[];
  readonly healthChecks: (Recorded & { readonly json: unknown })[];
  /** Balances answered wrong so far. */
  lies: number;
  close(): Promise<void>;
}

interface Call {
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: unknown;
}

/** The balance the liar gives: the real one plus one wei. */
export function lieAbout(balance: string): string {
  return `0x${(BigInt(balance) + 1n).toString(16)}`;
}

/** A node in front of `anvilUrl` that lies about the balances of `addresses` (any case). */
export async function startLyingNode(anvilUrl: string, addresses: readonly string[]): Promise<LyingNode> {
  const pool = new Pool(new URL(anvilUrl).origin, { connections: 16 });
  const lied = new Set(addresses.map((a) => a.toLowerCase()));
  const requests: LyingNode['requests'] = [];
  const healthChecks: LyingNode['healthChecks'] = [];

  const ask = async (call: Call): Promise<Record<string, unknown>> => {
    const r = await pool.request({ path: '/', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(call) });
    return (await r.body.json()) as Record<string, unknown>;
  };
  const answer = async (call: Call): Promise<Record<string, unknown>> => {
    const a = await ask(call);
    const params = Array.isArray(call.params) ? (call.params as unknown[]) : [];
    if (call.method === 'eth_getBalance' && typeof params[0] === 'string' && lied.has(params[0].toLowerCase()) && typeof a.result === 'string') {
      node.lies++;
      return { ...a, result: lieAbout(a.result) };
    }
    return a;
  };

  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const json = parseJson(r.body);
    file({ ...r, json }, requests, healthChecks);
    if (json === undefined || json === null || typeof json !== 'object' || (Array.isArray(json) && json.length === 0)) {
      return sendJson(res, 200, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'invalid request' } });
    }
    sendJson(res, 200, Array.isArray(json) ? await Promise.all((json as Call[]).map(answer)) : await answer(json as Call));
  });
  const url = await listen(server);
  const node: LyingNode = {
    url,
    requests,
    healthChecks,
    lies: 0,
    close: async () => {
      await close(server);
      await pool.close();
    },
  };
  return node;
}
