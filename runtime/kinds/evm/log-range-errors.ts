// What an upstream's eth_getLogs error says about the range it takes
// (docs/upstreams.md, "eth_getLogs ranges"): a block-range cap (kept for that
// upstream: the range is split to it from then on), or too many results for
// this range (this range is split; nothing is kept, since it depends on how
// many logs the blocks hold). Matched on the message and the error's data,
// never on the code alone: -32005 and -32602 mean many other things.
//
// | provider / client | text (code) | source |
// |---|---|---|
// | publicnode (geth forks: BSC, Berachain) | `exceed maximum block range: 50000` (-32701) | answers quoted in user code and deployment notes (search: "exceed maximum block range") |
// | reth | `query exceeds max block range 100000` (-32602), `query exceeds max results 20000` | paradigmxyz/reth `EthFilterError` (crates/rpc/rpc/src/eth/filter.rs) |
// | Infura (live API) | `range 1000000 exceeds limit of 10000` (-32602) | INFURA/infura#237 |
// | Infura (documented) | `query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].` (-32005, data `{from, to, limit}`) | INFURA/infura#237, omni/bridge-ui#214, OffchainLabs/prysm#7827 |
// | Alchemy (too many logs, though it names a 2K range) | `Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [0xc5dc00, 0xc614a7]` (-32602) | bancorprotocol/webapp#523; provider texts quoted in user code |
// | Alchemy free tier | `Under the Free tier plan, you can make eth_getLogs requests with up to a 10 block range. Based on your parameters, this block range should work: [0x1180fca, 0x1180fd3]. ...` (-32600) | lasso-rpc's Alchemy adapter |
// | QuickNode | `eth_getLogs is limited to a 10,000 range` (-32614); the free plan's `eth_getLogs is limited to a 5 range` | OffchainLabs/arbitrum-sdk#609 |
// | 1rpc | `eth_getLogs is limited to 0 - 50 blocks range` (-32602) | quoted in user tests |
// | dRPC free tier | `ranges over 10000 blocks are not supported on freetier` (35) | deployment notes quoting it |
// | Tenderly | `range 9009594 is bigger than range limit 2000` (-32602, in data.payload) | bobanetwork/boba_legacy#827 |
// | Frontier (Moonbeam) | `block range is too wide (maximum 10)` | polkadot-evm/frontier's tests |
// | scroll's geth | `block range is bigger than maxBlockRange` (-32000) | scroll-tech/go-ethereum#529 |
// | others (issue 39) | `block range too large` | |

export type RangeComplaint =
  /** The upstream takes at most `blocks` blocks (null: not said; half the range asked is taken). */
  | { readonly kind: 'limit'; readonly blocks: number | null; readonly suggested: number | null }
  /** This range holds too many logs; `suggested`: the width the upstream proposes, if it does. */
  | { readonly kind: 'results'; readonly suggested: number | null };

/** A cap named in words: the number is its group 1; `k` after it (Alchemy's 2K) multiplies by 1000. */
const LIMITS: readonly RegExp[] = [
  /exceed(?:s|ed)? (?:the )?max(?:imum)? block range:?\s*([\d,]+)/i,
  /range \d+(?:\s*-\s*\d+)? exceeds limit of ([\d,]+)/i,
  /is limited to (?:a |\d+\s*-\s*)?([\d,]+k?) (?:blocks? )?range/i,
  /up to a ([\d,]+k?) block range/i,
  /ranges over ([\d,]+) blocks are not supported/i,
  /block range is too wide \(maximum ([\d,]+)\)/i,
  /is bigger than range limit ([\d,]+)/i,
];
/** A cap that names no number. */
const UNNAMED: readonly RegExp[] = [/block range (?:is )?too (?:large|wide)/i, /range too large/i, /block range is bigger than/i, /exceeds? max(?:imum)? block range/i];
/** Too many logs in the range asked. */
const RESULTS: readonly RegExp[] = [/returned more than [\d,]+ results/i, /exceeds max results/i, /log response size exceeded/i];
/** A suggested range: `[0xa, 0xb]` (Infura, Alchemy), or reth's `retry with the range 3600741-3620740`. */
const SUGGESTED = /\[\s*(0x[0-9a-f]+)\s*,\s*(0x[0-9a-f]+)\s*\]/i;
const SUGGESTED_DECIMAL = /retry with the range (\d+)\s*-\s*(\d+)/i;

function count(s: string): number {
  const k = /k$/i.test(s);
  const n = Number.parseInt(s.replace(/[,kK]/g, ''), 10);
  return Number.isFinite(n) && n > 0 ? (k ? n * 1000 : n) : -1;
}

/** What a JSON-RPC error of an eth_getLogs call says about its range; null: nothing (another error). */
export function rangeComplaint(error: { readonly message?: unknown; readonly data?: unknown }): RangeComplaint | null {
  const message = typeof error.message === 'string' ? error.message : '';
  const data = error.data;
  const text = data === undefined ? message : `${message} ${typeof data === 'string' ? data : JSON.stringify(data)}`;
  const suggested = suggestedWidth(text, data);
  // Results first: Alchemy's "Log response size exceeded" also says "up to a 2K block range", yet it is about this
  // range's logs (a 2K range of busy blocks can exceed it too); read as a cap it would be kept for the upstream.
  if (RESULTS.some((re) => re.test(text))) return { kind: 'results', suggested };
  for (const re of LIMITS) {
    const m = re.exec(text);
    if (m !== null) {
      const n = count(m[1]!);
      if (n > 0) return { kind: 'limit', blocks: n, suggested };
    }
  }
  if (UNNAMED.some((re) => re.test(text))) return { kind: 'limit', blocks: null, suggested };
  return null;
}

/** The width of the range the upstream suggests (Infura's data {from, to}, or `[0xa, 0xb]` in the text); null: none. */
function suggestedWidth(text: string, data: unknown): number | null {
  if (data !== null && typeof data === 'object') {
    const { from, to } = data as { from?: unknown; to?: unknown };
    if (typeof from === 'string' && typeof to === 'string') {
      const w = Number.parseInt(to, 16) - Number.parseInt(from, 16) + 1;
      if (Number.isFinite(w) && w > 0) return w;
    }
  }
  const hex = SUGGESTED.exec(text);
  const m = hex ?? SUGGESTED_DECIMAL.exec(text);
  if (m === null) return null;
  const base = hex === null ? 10 : 16;
  const w = Number.parseInt(m[2]!, base) - Number.parseInt(m[1]!, base) + 1;
  return Number.isFinite(w) && w > 0 ? w : null;
}
