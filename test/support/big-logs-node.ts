// An EVM node whose every block holds one large log (LOG_BYTES of data), so
// that an eth_getLogs range of a few thousand blocks answers ~100 MB: what a
// memory bound on merged ranges is tried with. Its head is far ahead
// (eth_blockNumber: HEAD), every block exists, and the logs are made from the
// block number alone: a test can compute the whole answer without asking.
// Answers eth_blockNumber, eth_chainId and eth_getLogs by number; counts the
// eth_getLogs it served. No test framework in here.
import { close, createSafeServer, listen, parseJson, readAll } from './http.ts';

export const HEAD = 0x100000;
/** Bytes of each log's data (hex digits). */
export const LOG_BYTES = 10_000;
const DATA = 'ab'.repeat(LOG_BYTES / 2);

/** The log of block n, as the node writes it. */
export function logText(n: number): string {
  return `{"address":"0x0000000000000000000000000000000000000001","topics":[],"data":"0x${DATA}","blockNumber":"0x${n.toString(16)}","logIndex":"0x0","removed":false}`;
}

export interface BigLogsNode {
  readonly url: string;
  /** eth_getLogs answered so far. */
  served: number;
  close(): Promise<void>;
}

export async function startBigLogsNode(): Promise<BigLogsNode> {
  const node = { served: 0 };
  const server = createSafeServer(async (req, res) => {
    const json = parseJson(await readAll(req)) as { id?: unknown; method?: string; params?: { fromBlock?: string; toBlock?: string }[] } | undefined;
    const id = JSON.stringify(json?.id ?? null);
    let result: string;
    if (json?.method === 'eth_blockNumber') result = `"0x${HEAD.toString(16)}"`;
    else if (json?.method === 'eth_chainId') result = '"0x1"';
    else if (json?.method === 'eth_getLogs') {
      const from = Number.parseInt(json.params?.[0]?.fromBlock ?? '', 16);
      const to = Number.parseInt(json.params?.[0]?.toBlock ?? '', 16);
      if (!(from >= 0 && to >= from && to <= HEAD)) {
        const text = `{"jsonrpc":"2.0","id":${id},"error":{"code":-32602,"message":"invalid block range"}}`;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
        return;
      }
      node.served++;
      const parts: string[] = [];
      for (let n = from; n <= to; n++) parts.push(logText(n));
      result = `[${parts.join(',')}]`;
    } else result = 'null';
    const body = Buffer.from(`{"jsonrpc":"2.0","id":${id},"result":${result}}`);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
  });
  const url = await listen(server);
  return Object.assign(node, { url, close: () => close(server) });
}
