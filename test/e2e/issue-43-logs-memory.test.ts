// Issue 43 rule 6, through the built gateway: merged eth_getLogs answers
// count against the held-bytes bound (proxy.ts MAX_HELD_BYTES, 256 MiB for
// all requests) and are written from the chunks' buffers, not copied into one.
// Six concurrent ranges of ~100 MB each (10,000 blocks of one 10 KB log,
// split into ten chunks of 1,000 blocks) from a node whose logs are made from
// the block number (test/support/big-logs-node.ts). Before, the six took the
// gateway to 1.2 GiB. Now its peak RSS stays under the bound plus
// MARGIN_MIB, the margin docs/upstreams.md names (the process itself, ~100 MiB;
// chunks being read and joined; answers let go but not yet collected:
// 406-458 MiB measured here, in each case); each call is
// answered complete, byte for byte, or with the documented error for an
// answer past the bound (502, -32053), and at least one is answered complete.
// The same on a cached chain (a gateway of its own: peak RSS is the
// process's), whose answers were held whole for X-Cache and copied into one
// buffer past the bound (kinds/evm/cache-front.ts): now written from the chunks as well.
// And the same ranges each in a client batch, whose calls' answers were held
// uncounted and copied into the batch's answer (pool/batch.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { newKey, EVM_METHODS, type RunningGateway } from './harness.ts';
import { gateway, type Gateway } from './fixture.ts';
import { HEAD, logText, startBigLogsNode, type BigLogsNode } from '../support/big-logs-node.ts';

const KEY = newKey();
const MiB = 1024 * 1024;
/** proxy.ts MAX_HELD_BYTES. */
const BOUND_MIB = 256;
/** What the process may hold beyond the bound (docs/upstreams.md, "Bounds"). */
const MARGIN_MIB = 320;
const CALLS = 6;
const BLOCKS = 10_000;

let node: BigLogsNode;
/** The gateway the case at hand runs against. */
let gw: RunningGateway;
const gateways: Gateway[] = [];

/** A gateway with the one chain, with the cache (`cache`: its settings) or without. */
async function start(name: string, cache: Record<string, unknown> | null): Promise<RunningGateway> {
  const g = await gateway({
    name,
    chains: [{ path: 'big', interface: 'evm-jsonrpc', limits: { timeoutMs: 120000 }, upstreams: [{ url: '${BIG}', maxLogRange: 1000 }] }],
    // The node runs in this process: making six ~100 MB answers holds its loop (and its answers to the polls) for
    // seconds on a loaded host, which a 2 s poll timeout took for a node down (503 instead of the answer).
    header: { admin: null, health: { intervalMs: 1000, timeoutMs: 30_000 }, cache, methodSets: { evm: [...EVM_METHODS, 'eth_getLogs'] } },
    keys: [{ id: 'mem', key: KEY }],
    env: { BIG: node.url },
  });
  gateways.push(g);
  return g.gw;
}

beforeAll(async () => {
  node = await startBigLogsNode();
}, 60_000);

afterAll(async () => {
  for (const g of gateways) await g.close();
  await node?.close();
});

/** Peak resident memory of the gateway process so far, in bytes. */
function peakRss(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${gw.proc.pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** A batch's other call, answered after the range: its answer follows the range's. */
const BLOCK_NUMBER = '{"jsonrpc":"2.0","id":1000,"method":"eth_blockNumber","params":[]}';
const BLOCK_NUMBER_ANSWER = `{"jsonrpc":"2.0","id":1000,"result":"0x${HEAD.toString(16)}"}`;

/** The hash and length of what follows `"result":[` in the whole range's answer, as one node would write it (in a batch: and the rest of the batch's). */
function expected(batch: boolean): { hash: string; length: number } {
  const h = createHash('sha256');
  let length = 0;
  for (let n = 0; n < BLOCKS; n++) {
    const s = (n === 0 ? '' : ',') + logText(n);
    h.update(s);
    length += s.length;
  }
  const tail = batch ? `]},${BLOCK_NUMBER_ANSWER}]` : ']}';
  h.update(tail);
  return { hash: h.digest('hex'), length: length + tail.length };
}

/** One client's range (alone, or in a batch before an eth_blockNumber): its status, and the hash and length of its body past the prefix (or its text, when it is not the answer). */
async function range(id: number, batch: boolean): Promise<{ status: number; prefixOk: boolean; hash: string; length: number; text: string }> {
  const call = `{"jsonrpc":"2.0","id":${id},"method":"eth_getLogs","params":[{"fromBlock":"0x0","toBlock":"0x${(BLOCKS - 1).toString(16)}"}]}`;
  const body = batch ? `[${call},${BLOCK_NUMBER}]` : call;
  const r = await request(gw.url('rpc', '/big'), { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body });
  const prefix = Buffer.from(`${batch ? '[' : ''}{"jsonrpc":"2.0","id":${id},"result":[`);
  const h = createHash('sha256');
  let head = Buffer.alloc(0);
  let length = 0;
  /** Not the answer (an error): kept whole, to be read. */
  const other: Buffer[] = [];
  for await (const chunk of r.body) {
    let c = chunk as Buffer;
    if (head.length < prefix.length) {
      const take = Math.min(prefix.length - head.length, c.length);
      head = Buffer.concat([head, c.subarray(0, take)]);
      c = c.subarray(take);
    }
    if (!prefix.subarray(0, head.length).equals(head)) other.push(c);
    h.update(c);
    length += c.length;
  }
  const prefixOk = head.equals(prefix);
  return { status: r.statusCode, prefixOk, hash: h.digest('hex'), length, text: prefixOk ? '' : Buffer.concat([head, ...other]).toString() };
}

/**
 * Six concurrent ranges of ~100 MB against `gw` (each alone, or each in a
 * batch): each complete or the documented error (a batch's: in the range's
 * slot), the peak RSS under the bound plus the margin.
 */
async function sixRanges(batch = false): Promise<void> {
  const want = expected(batch);
  expect(want.length).toBeGreaterThan(100 * 1000 * 1000);
  const before = peakRss();
  const answers = await Promise.all(Array.from({ length: CALLS }, (_, i) => range(i + 1, batch)));
  const peak = peakRss();
  console.log(`peak RSS ${(before / MiB).toFixed(0)} MiB at start, ${(peak / MiB).toFixed(0)} MiB with the six ranges; complete answers ${answers.filter((a) => a.prefixOk).length}/${CALLS}`);
  let complete = 0;
  for (const a of answers) {
    if (a.prefixOk) {
      expect(a.status).toBe(200);
      expect(a.length).toBe(want.length);
      expect(a.hash).toBe(want.hash);
      complete++;
    } else if (batch) {
      // Past the bound: the range's slot has the error an upstream answer too large to hold gets; the other call is answered.
      expect(a.status, a.text).toBe(200);
      const items = JSON.parse(a.text) as { error?: { code: number } }[];
      expect(items[0]!.error?.code, a.text).toBe(-32053);
      expect(items[1]).toEqual(JSON.parse(BLOCK_NUMBER_ANSWER));
    } else {
      // Past the bound: the answer an upstream answer too large to hold gets (docs/requests.md).
      expect(a.status, a.text).toBe(502);
      expect((JSON.parse(a.text) as { error: { code: number } }).error.code).toBe(-32053);
    }
  }
  expect(complete).toBeGreaterThan(0);
  expect(peak).toBeLessThan((BOUND_MIB + MARGIN_MIB) * MiB);
}

describe('merged eth_getLogs answers and the held-bytes bound (issue 43 rule 6)', () => {
  it(`six concurrent ranges of ~100 MB keep the gateway's peak RSS under ${BOUND_MIB} MiB + ${MARGIN_MIB} MiB; each is complete or the documented 502`, async () => {
    gw = await start('issue-43-logs-memory', null);
    await sixRanges();
  }, 240_000);

  it(`on a cached chain, six concurrent ranges of ~100 MB keep the gateway's peak RSS under ${BOUND_MIB} MiB + ${MARGIN_MIB} MiB; each is complete or the documented 502`, async () => {
    gw = await start('issue-43-logs-memory-cached', { headPollMs: 1000 });
    await sixRanges();
  }, 240_000);

  it(`six concurrent batches, each [a range of ~100 MB, eth_blockNumber], keep the gateway's peak RSS under ${BOUND_MIB} MiB + ${MARGIN_MIB} MiB; each range is complete or the documented -32053`, async () => {
    gw = await start('issue-43-logs-memory-batch', null);
    await sixRanges(true);
  }, 240_000);
});
