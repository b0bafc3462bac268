// Issue 43 rule 10, through the built gateway: every chain that allows
// eth_getLogs has the ranges layer, which splits a client batch with an
// eth_getLogs call into its calls; each call's answer is held. An eth_getLogs
// call of a batch answers what the call alone answers, up to a merged range's
// bound (MAX_MERGED_BYTES, docs/upstreams.md), not the 4 MiB a rewritten
// answer may have. Before, on a chain of one upstream with no cap, a range of
// 600 blocks of ~10 KB logs (6 MB, test/support/big-logs-node.ts) answered
// 200 alone and 502 (-32053) in a batch; on a pool, the same.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKey, postJson, EVM_METHODS, type RunningGateway } from './harness.ts';
import { evmChain, gateway, type Gateway } from './fixture.ts';
import { HEAD, logText, startBigLogsNode, type BigLogsNode } from '../support/big-logs-node.ts';

const KEY = newKey();
const BLOCKS = 600;

const nodes: BigLogsNode[] = [];
let rig: Gateway;
let gw: RunningGateway;

beforeAll(async () => {
  for (let i = 0; i < 3; i++) nodes.push(await startBigLogsNode());
  rig = await gateway({
    name: 'issue-43-logs-batch',
    chains: [
      // One node, no cap: a range goes to it whole.
      evmChain('solo', ['SOLO'], { cache: 'off', limits: { timeoutMs: 60000 } }),
      // A pool of two such nodes.
      evmChain('pool', ['POOL_A', 'POOL_B'], { cache: 'off', limits: { timeoutMs: 60000 } }),
      // The same pool with the cache (issue 45, "split once"): the front takes eth_blockNumber, and the rest (the
      // eth_getLogs call) is split by the ranges layer, its merged chunks going to the front's plan as they are.
      evmChain('cachedpool', ['POOL_A', 'POOL_B'], { limits: { timeoutMs: 60000 } }),
    ],
    header: { methodSets: { evm: [...EVM_METHODS, 'eth_getLogs'] }, admin: null, health: { intervalMs: 1000, timeoutMs: 2000 }, cache: { maxBytes: 33554432, headPollMs: 200 } },
    keys: [{ id: 'batch', key: KEY }],
    standIns: { SOLO: nodes[0]!, POOL_A: nodes[1]!, POOL_B: nodes[2]! },
  });
  gw = rig.gw;
}, 60_000);

afterAll(() => rig?.close());

const GET_LOGS = `{"jsonrpc":"2.0","id":7,"method":"eth_getLogs","params":[{"fromBlock":"0x0","toBlock":"0x${(BLOCKS - 1).toString(16)}"}]}`;
const BLOCK_NUMBER = '{"jsonrpc":"2.0","id":8,"method":"eth_blockNumber","params":[]}';

/** The text of the result of the answer that starts at `at` in `text` and ends where `end` is (one JSON-RPC answer whose last key is its result). */
function resultText(text: string, at: number, end: number): string {
  const prefix = '{"jsonrpc":"2.0","id":7,"result":';
  expect(text.startsWith(prefix, at), text.slice(at, at + 100)).toBe(true);
  expect(text[end - 1]).toBe('}');
  return text.slice(at + prefix.length, end - 1);
}

/** Whether two long texts are the same (compared without printing megabytes). */
function same(a: string, b: string): { same: boolean; lengths: string } {
  return { same: a === b, lengths: `${a.length} / ${b.length}` };
}

describe('an eth_getLogs call of a batch answers what the call alone answers (issue 43 rule 10)', () => {
  const want = `[${Array.from({ length: BLOCKS }, (_, n) => logText(n)).join(',')}]`;

  for (const chain of ['solo', 'pool', 'cachedpool']) {
    it(`${chain}: [eth_getLogs of ${BLOCKS} blocks (~6 MB), eth_blockNumber] answers 200, its eth_getLogs item byte for byte the call's own answer`, async () => {
      expect(want.length).toBeGreaterThan(4 * 1024 * 1024);
      const single = await postJson(gw.url('rpc', `/${chain}`), KEY, GET_LOGS);
      expect(single.status, single.text.slice(0, 300)).toBe(200);
      const alone = resultText(single.text, 0, single.text.length);
      expect(same(alone, want)).toEqual({ same: true, lengths: `${want.length} / ${want.length}` });

      const batch = await postJson(gw.url('rpc', `/${chain}`), KEY, `[${GET_LOGS},${BLOCK_NUMBER}]`);
      expect(batch.status, batch.text.slice(0, 300)).toBe(200);
      expect(batch.text.startsWith('[')).toBe(true);
      const item = resultText(batch.text, 1, batch.text.indexOf(',{"jsonrpc":"2.0","id":8'));
      expect(same(item, alone)).toEqual({ same: true, lengths: `${alone.length} / ${alone.length}` });
      const answers = batch.json as { id: number; result?: unknown; error?: unknown }[];
      expect(answers.map((a) => a.id)).toEqual([7, 8]);
      expect(answers[1]).toEqual({ jsonrpc: '2.0', id: 8, result: `0x${HEAD.toString(16)}` });
    }, 120_000);
  }
});
