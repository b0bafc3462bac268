// A small EVM node for bench/ab.sh's hit scenario: answers by method, so that
// the gateway's poll (a batch asking for the chain id and the latest,
// finalized, safe and genesis blocks) passes and the chain is up. A node
// answering every request with one fixed body fails that poll: the chain is
// down, and every call gets 503. eth_getBalance answers one balance at any
// block (hit-big fills the cache with it).   node bench/rpc-upstream.mjs PORT
import { createServer } from 'node:http';

const HEAD = 0x100;
const hash = (n) => `0x${n.toString(16).padStart(64, '0')}`;
const block = (n) => ({ number: `0x${n.toString(16)}`, hash: hash(n + 1), parentHash: hash(n), transactions: [] });
const TAGS = { latest: HEAD, safe: HEAD - 32, finalized: HEAD - 64, earliest: 0 };

function answer(call) {
  const id = call?.id ?? null;
  switch (call?.method) {
    case 'eth_chainId': return { jsonrpc: '2.0', id, result: '0x1' };
    case 'net_version': return { jsonrpc: '2.0', id, result: '1' };
    case 'eth_blockNumber': return { jsonrpc: '2.0', id, result: `0x${HEAD.toString(16)}` };
    case 'eth_getBalance': return { jsonrpc: '2.0', id, result: '0xde0b6b3a7640000' };
    case 'eth_getBlockByNumber': {
      const tag = call.params?.[0];
      const n = typeof tag === 'string' && tag.startsWith('0x') ? Number.parseInt(tag, 16) : TAGS[tag];
      return { jsonrpc: '2.0', id, result: n === undefined || n > HEAD ? null : block(n) };
    }
    default: return { jsonrpc: '2.0', id, error: { code: -32601, message: 'the method does not exist' } };
  }
}

createServer((req, res) => {
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    let body;
    try {
      const v = JSON.parse(Buffer.concat(parts).toString());
      body = JSON.stringify(Array.isArray(v) ? v.map(answer) : answer(v));
    } catch {
      body = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}';
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
}).listen(Number(process.argv[2]), '127.0.0.1');
