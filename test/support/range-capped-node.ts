// A node in front of anvil whose eth_getLogs takes only ranges up to a cap,
// and refuses wider ones with a provider's own text (runtime/kinds/evm/log-range-errors.ts
// cites where each comes from), or fails every eth_getLogs as a load balancer
// in front of a broken node does. Everything else goes to anvil unchanged.
// Records the range of every eth_getLogs that reached it, and which it refused.
import { request } from 'undici';
import { close, createSafeServer, listen, parseJson, readAll } from './http.ts';

/** How the node refuses a range wider than its cap, as each provider answers. */
export type CapText = 'publicnode' | 'infura-range' | 'infura-results' | 'alchemy' | 'alchemy-size' | 'quicknode' | 'reth';

export interface LogsSeen {
  readonly from: number | string | undefined;
  readonly to: number | string | undefined;
  readonly refused: boolean;
}

export interface RangeCappedNode {
  readonly url: string;
  /** Most blocks it takes (null: no cap). */
  cap: number | null;
  text: CapText;
  /** Every eth_getLogs answered with a 503 HTML page. */
  failLogs: boolean;
  /** Run before each eth_getLogs is answered (a block mined while a split range is out); null: none. */
  before: (() => Promise<void>) | null;
  /** Every eth_getLogs that reached it, in order (numbers where the range was numeric, else the tag as sent). */
  readonly logs: LogsSeen[];
  close(): Promise<void>;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

/** The provider's refusal of [from, to] at cap `k`. */
export function refusal(text: CapText, from: number, to: number, k: number): { code: number; message: string; data?: unknown } {
  const width = to - from + 1;
  switch (text) {
    case 'publicnode':
      return { code: -32701, message: `exceed maximum block range: ${k}` };
    case 'infura-range':
      return { code: -32602, message: `range ${width} exceeds limit of ${k}` };
    case 'infura-results':
      return {
        code: -32005,
        message: `query returned more than 10000 results. Try with this block range [${hex(from)}, ${hex(from + k - 1)}].`,
        data: { from: hex(from), limit: 10000, to: hex(from + k - 1) },
      };
    case 'alchemy':
      return {
        code: -32600,
        message: `Under the Free tier plan, you can make eth_getLogs requests with up to a ${k} block range. Based on your parameters, this block range should work: [${hex(from)}, ${hex(from + k - 1)}]. Upgrade to PAYG for expanded block range.`,
      };
    // Alchemy's too-many-logs answer: it names a 2K block range too, and suggests a range that holds fewer logs.
    case 'alchemy-size':
      return {
        code: -32602,
        message: `Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [${hex(from)}, ${hex(from + k - 1)}]`,
      };
    case 'quicknode':
      return { code: -32614, message: `eth_getLogs is limited to a ${k.toLocaleString('en-US')} range` };
    case 'reth':
      return { code: -32602, message: `query exceeds max block range ${k}` };
  }
}

function blockOf(v: unknown, head: number): number | string | undefined {
  if (v === undefined || v === 'latest') return v === undefined ? undefined : 'latest';
  if (v === 'earliest') return 0;
  if (typeof v === 'string' && /^0x[0-9a-f]+$/i.test(v)) return Number.parseInt(v, 16);
  return typeof v === 'string' ? v : head;
}

export async function startRangeCappedNode(anvilUrl: string, opts: { cap?: number | null; text?: CapText } = {}): Promise<RangeCappedNode> {
  const logs: LogsSeen[] = [];
  const node = {
    cap: opts.cap ?? null,
    text: opts.text ?? 'publicnode',
    failLogs: false,
    before: null as (() => Promise<void>) | null,
  };
  const forward = async (body: Buffer): Promise<{ status: number; body: Buffer }> => {
    const up = await request(anvilUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: up.statusCode, body: Buffer.from(await up.body.arrayBuffer()) };
  };
  const server = createSafeServer(async (req, res) => {
    const body = await readAll(req);
    const json = parseJson(body) as { id?: unknown; method?: unknown; params?: unknown[] } | undefined;
    if (json !== undefined && !Array.isArray(json) && json.method === 'eth_getLogs') {
      const f = (json.params?.[0] ?? {}) as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
      const from = blockOf(f.fromBlock, -1);
      const to = blockOf(f.toBlock, -1);
      if (node.before !== null) await node.before();
      if (node.failLogs) {
        logs.push({ from, to, refused: true });
        const page = '<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>';
        res.writeHead(503, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(page) }).end(page);
        return;
      }
      if (node.cap !== null && f.blockHash === undefined) {
        // A tag counts as the node's head (as a node resolves it before it checks the range).
        let head = -1;
        if (typeof from !== 'number' || typeof to !== 'number') {
          const h = (parseJson((await forward(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'))).body) as { result: string }).result;
          head = Number.parseInt(h, 16);
        }
        const a = typeof from === 'number' ? from : head;
        const b = typeof to === 'number' ? to : head;
        if (b - a + 1 > node.cap) {
          logs.push({ from, to, refused: true });
          const text = JSON.stringify({ jsonrpc: '2.0', id: json.id ?? null, error: refusal(node.text, a, b, node.cap) });
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
          return;
        }
      }
      logs.push({ from, to, refused: false });
    }
    const up = await forward(body);
    res.writeHead(up.status, { 'content-type': 'application/json', 'content-length': up.body.length }).end(up.body);
  });
  const url = await listen(server);
  return Object.assign(node, { url, logs, close: () => close(server) });
}
