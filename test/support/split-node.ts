// One upstream URL behind which the gateway's polls and its calls reach two
// different nodes, as behind a provider's load balancer: the polls
// (User-Agent chain-gateway-health/...) go to `polls`, everything else to
// `calls`. With a node ahead for the polls and one behind for the calls, the
// gateway believes the upstream has blocks that the node answering its calls
// has not: what a pool does with that node's answer ("block range extends
// beyond current head block", "header for hash not found", "Block not found")
// is then under test, whatever the polls said. Paths and queries are passed on
// as they came, to each target's origin (a Blockbook upstream is then the
// split node's URL with /api). No test framework in here.
import { request } from 'undici';
import { close, createSafeServer, isHealthCheck, listen, record } from './http.ts';

export interface SplitNode {
  readonly url: string;
  /** Calls (not polls) passed to the `calls` node so far. */
  calls: number;
  close(): Promise<void>;
}

/** Hop-by-hop and length headers not passed on either way. */
const DROP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host']);

export async function startSplitNode(targets: { readonly polls: string; readonly calls: string }): Promise<SplitNode> {
  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const health = isHealthCheck(r);
    if (!health) split.calls++;
    const origin = new URL(health ? targets.polls : targets.calls).origin;
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(r.headers)) if (typeof v === 'string' && !DROP.has(k)) headers[k] = v;
    const up = await request(`${origin}${r.url}`, { method: r.method as 'GET' | 'POST', headers, body: r.method === 'GET' ? undefined : r.body });
    const body = Buffer.from(await up.body.arrayBuffer());
    const out: Record<string, string> = { 'content-length': String(body.length) };
    for (const [k, v] of Object.entries(up.headers)) if (typeof v === 'string' && !DROP.has(k)) out[k] = v;
    res.writeHead(up.statusCode, out).end(body);
  });
  const url = await listen(server);
  const split: SplitNode = { url, calls: 0, close: () => close(server) };
  return split;
}
