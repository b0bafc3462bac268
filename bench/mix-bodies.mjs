// The lines of `npm run bench:mix`'s bodies file as JSON bodies, for the code that sends them
// itself (bench/mix.mjs's smoke check, bench/open-loop.mjs); bench/mix.lua does the same in Lua.
//   S <json>                 a fixed body
//   B <id> <k> <full>        eth_getBlockByNumber of the head known now minus k
//   H <id> <k>               eth_getBlockByHash of the k-th newest block known now (1: the head)
//   T <id> <k>               eth_getTransactionReceipt of the k-th newest tx sent by the background sender
import { readFileSync } from 'node:fs';

const hex = (n) => `0x${n.toString(16)}`;

/** A line of the bodies file as the JSON body to send now, given the chain's state ({ head, blocks, txs }, newest first). */
export function resolveLine(line, state) {
  if (line[0] === 'S') return line.slice(2);
  const [kind, id, k, full] = line.split(' ');
  const n = Number(k);
  if (kind === 'B') return `{"jsonrpc":"2.0","id":${id},"method":"eth_getBlockByNumber","params":["${hex(Math.max(0, state.head - n))}",${full}]}`;
  if (kind === 'H') return `{"jsonrpc":"2.0","id":${id},"method":"eth_getBlockByHash","params":["${state.blocks[Math.min(n, state.blocks.length) - 1]}",false]}`;
  return `{"jsonrpc":"2.0","id":${id},"method":"eth_getTransactionReceipt","params":["${state.txs[Math.min(n, state.txs.length) - 1]}"]}`;
}

/**
 * The state file bench/mix.mjs rewrites (by rename) as blocks come: the head, the count and hashes of
 * the newest blocks, the count and hashes of the newest txs. null while it is not there or not complete.
 */
export function readState(path) {
  let lines;
  try {
    lines = readFileSync(path, 'utf8').split('\n');
  } catch {
    return null;
  }
  const head = Number(lines[0]);
  const nb = Number(lines[1]) || 0;
  const blocks = lines.slice(2, 2 + nb);
  const nt = Number(lines[2 + nb]) || 0;
  const txs = lines.slice(3 + nb, 3 + nb + nt);
  return Number.isInteger(head) && blocks.length > 0 && txs.length > 0 ? { head, blocks, txs } : null;
}
