// Issue 33's consistency oracle: several clients run read-your-writes
// sequences against one JSON-RPC endpoint in front of a pool of nodes that
// share one anvil, while a miner mines and now and then reorganises the top of
// the chain; every answer is judged against anvil itself. The figure it
// returns is the number of answers that no single chain moving forward could
// have given. No test framework in here: the test asserts on the report.
// With `batch`, every call goes as a JSON-RPC batch of two (the call and an
// eth_chainId, as batching clients send them), and the call's item is judged.
//
// A sequence (one client, one at a time; the clients run side by side):
//   1. eth_sendRawTransaction of a transfer signed here;
//   2. eth_getTransactionReceipt, polled until it comes (null meanwhile);
//   3. eth_getTransactionByHash, then its block by number and by hash;
//   4. eth_getBalance at that block, and 20 blocks below the highest block the
//      client has been shown (state a full node keeping 16 blocks has pruned);
//   5. eth_blockNumber, then eth_getBlockByNumber of the number it gave.
//
// How an answer is judged. Each call is bracketed: the very same call is made
// to anvil just before the request is sent and again just after its answer
// came. History only changes in known ways here: heights never go down (the
// miner's reorgs replace the top 2 or 3 blocks with as many new ones, and put
// the transactions they held back at the same heights in the same
// anvil_reorg call), and a replaced block hash never comes back. Every change
// (anvil_mine, anvil_reorg) runs alone behind an AnvilGate that every reader
// of anvil shares (the pool's nodes, this judge), so no one ever sees a
// reorg half done, as no one does on a real node. So when both bracketing
// reads of anvil have data, anvil had that data for the whole time the
// request was in flight, and a consistent pool could have served it. Only
// these count (`Finding.kind`):
//  - null: the answer is null where anvil had the block, transaction or
//    receipt throughout, at a height the same client had already been shown
//    (by a receipt, a block or eth_blockNumber). A receipt still null while
//    the pool's tip is below its block is fine: a consistent chain that has
//    not reached that block yet says so; once the client has been shown that
//    height, no consistent chain may say null about it. eth_blockNumber
//    answers the served tip, and every node has the served tip, so the block
//    it names is always shown and must never be null;
//  - backwards: eth_blockNumber lower than an earlier eth_blockNumber answer
//    to the same client (anvil's own height never goes down in this
//    workload; the miner checks it). A receipt in a block above the served
//    tip is not compared with eth_blockNumber: the served tip is the
//    height all usable nodes have, which may be below a receipt's block;
//  - stateError: an error for a state call (here eth_getBalance at a number)
//    that anvil answered both before and after: `header not found` from a
//    node behind, `missing trie node` from a pruned one, or anything else;
//  - error: an error for any other read that anvil answered both times;
//  - wrong: data that differs from what anvil answered both before and after
//    (when the two agree; a reorg in between leaves either answer possible),
//    or an eth_blockNumber above anvil's head;
//  - stuck: a receipt the endpoint kept answering null for RECEIPT_DEADLINE_MS
//    while anvil had it;
//  - sendError: eth_sendRawTransaction answered with an error (a broadcast to
//    several nodes must count `already known` after a success as success);
//  - transport: no JSON-RPC answer at all (HTTP error, connection failure).
import { isDeepStrictEqual } from 'node:util';
import { keccak256, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import type { Anvil, JsonRpcResponse } from './anvil.ts';
import type { AnvilGate } from './anvil-gate.ts';

export const FINDING_KINDS = ['null', 'backwards', 'stateError', 'error', 'wrong', 'stuck', 'sendError', 'transport'] as const;
export type FindingKind = (typeof FINDING_KINDS)[number];

export interface Finding {
  readonly kind: FindingKind;
  readonly client: number;
  readonly method: string;
  readonly params: readonly unknown[];
  /** What was answered, and what anvil said around it. */
  readonly detail: string;
}

export interface OracleOptions {
  readonly anvil: Anvil;
  /** The gate every reader of this anvil goes through (the pool's nodes too): the miner's changes run alone. */
  readonly gate: AnvilGate;
  /** The endpoint the clients use (the gateway's chain URL, or nginx's). */
  readonly url: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly clients: number;
  readonly sequences: number;
  /** Seeds the miner's timing, its reorgs and their depths. */
  readonly seed: number;
  /** Which funded dev accounts sign: addressIndex first, first + 1, ... (anvil funds 0-9). */
  readonly firstAccount?: number;
  /** Time between the miner's steps, drawn from [min, max] ms (default [200, 300]). */
  readonly mineEveryMs?: readonly [number, number];
  /** Share of the miner's steps that are a reorg of depth 2 or 3 rather than a new block (default 1/6). */
  readonly reorgShare?: number;
  /**
   * Every call sent as a JSON-RPC batch of two, the call and an eth_chainId, as batching clients (ethers v6,
   * viem with `batch: true`) send them; the call's item is judged as a lone call's answer would be.
   */
  readonly batch?: boolean;
}

export interface OracleReport {
  readonly seed: number;
  /** Answers judged (every read, every send, every receipt poll). */
  readonly judged: number;
  readonly findings: readonly Finding[];
  readonly counts: Readonly<Record<FindingKind, number>>;
  readonly sequences: number;
  readonly blocks: number;
  readonly reorgs: number;
  readonly ms: number;
}

export const MNEMONIC = 'test test test test test test test test test test test junk';
const RECEIPT_DEADLINE_MS = 8_000;
const RECEIPT_POLL_MS = 40;
/** How far below the highest block shown the deep balance read goes: past a 16-block state window. */
const DEEP = 20;

const hex = (n: number): string => `0x${n.toString(16)}`;
const quantity = (v: unknown): number => (typeof v === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(v) ? Number.parseInt(v, 16) : -1);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** mulberry32: a small seeded generator, so that a seed replays the miner's choices. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Calls whose answer is state at a block (the block parameter's position). */
const STATE_AT: Readonly<Record<string, number>> = { eth_getBalance: 1, eth_getTransactionCount: 1, eth_getCode: 1, eth_getStorageAt: 2, eth_call: 1, eth_getProof: 2 };

/** The height an answer is about: the block number in the call, else the one in anvil's data. */
function heightOf(method: string, params: readonly unknown[], data: unknown): number {
  if (method === 'eth_getBlockByNumber') return quantity(params[0]);
  const d = data as { number?: unknown; blockNumber?: unknown } | null;
  return Math.max(quantity(d?.number), quantity(d?.blockNumber));
}

class Client {
  /** The highest block number this client has been shown, by any answer. */
  shown = -1;
  /** Its last eth_blockNumber answer. */
  lastNumber = -1;
  constructor(readonly index: number) {}
  see(n: number): void {
    if (n > this.shown) this.shown = n;
  }
}

export async function runOracle(opts: OracleOptions): Promise<OracleReport> {
  const { anvil, gate } = opts;
  /** anvil's own answer, read when no change is under way. */
  const truth = (method: string, params: readonly unknown[] = []): Promise<JsonRpcResponse> => gate.read(() => anvil.rpc(method, [...params]));
  const rng = seeded(opts.seed);
  const [minMs, maxMs] = opts.mineEveryMs ?? [200, 300];
  const reorgShare = opts.reorgShare ?? 1 / 6;
  const chainId = Number((await truth('eth_chainId')).result);
  const start = quantity((await truth('eth_blockNumber')).result);
  if (start < DEEP + 3) throw new Error(`oracle: anvil needs ${DEEP + 3} blocks of history first (it has ${start}): reorgs of 3 and reads ${DEEP} blocks deep`);
  const findings: Finding[] = [];
  let judged = 0;
  let blocks = 0;
  let reorgs = 0;
  let sequences = 0;
  /** Every transaction the clients signed, by hash: the miner puts them back after a reorg. */
  const raws = new Map<string, Hex>();

  let nextId = 1;
  /** One call to the endpoint under test (with opts.batch, in a batch of two): its JSON-RPC answer, or why there is none. */
  async function viaPool(method: string, params: readonly unknown[]): Promise<JsonRpcResponse | string> {
    try {
      const id = nextId++;
      const call = { jsonrpc: '2.0', id, method, params };
      const res = await fetch(opts.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...opts.headers },
        body: JSON.stringify(opts.batch === true ? [call, { jsonrpc: '2.0', id: nextId++, method: 'eth_chainId', params: [] }] : call),
      });
      const text = await res.text();
      if (res.status !== 200) return `HTTP ${res.status}: ${text.slice(0, 200)}`;
      const doc = JSON.parse(text) as unknown;
      let body = doc as JsonRpcResponse;
      if (opts.batch === true) {
        // The call's own item; the eth_chainId beside it must be this chain's.
        const items = Array.isArray(doc) ? (doc as JsonRpcResponse[]) : [];
        const other = items.find((a) => a?.id === id + 1);
        if (items.length !== 2 || other === undefined || Number(other.result) !== chainId) return `not the batch's answer: ${text.slice(0, 200)}`;
        body = items.find((a) => a?.id === id)!;
      }
      return body !== null && typeof body === 'object' && ('result' in body || 'error' in body) ? body : `not a JSON-RPC answer: ${text.slice(0, 200)}`;
    } catch (err) {
      return `no answer: ${(err as Error).message}`;
    }
  }

  const short = (v: unknown): string => {
    const s = JSON.stringify(v);
    return s === undefined ? 'undefined' : s.length > 160 ? `${s.slice(0, 160)}…` : s;
  };
  const find = (kind: FindingKind, c: Client, method: string, params: readonly unknown[], detail: string): void => {
    findings.push({ kind, client: c.index, method, params, detail });
  };

  /**
   * A read through the pool, bracketed by the same read of anvil, judged
   * (see the top of this file); then what it showed the client is noted.
   */
  async function read(c: Client, method: string, params: readonly unknown[]): Promise<JsonRpcResponse | null> {
    const shownBefore = c.shown;
    const before = await truth(method, params);
    const answer = await viaPool(method, params);
    const after = await truth(method, params);
    judged++;
    if (typeof answer === 'string') {
      find('transport', c, method, params, answer);
      return null;
    }
    const anvilHad = before.error === undefined && after.error === undefined;
    const around = `anvil before ${short(before.result ?? before.error)}, after ${short(after.result ?? after.error)}`;
    if (method === 'eth_blockNumber') {
      const n = quantity(answer.result);
      if (answer.error !== undefined || n < 0) find('error', c, method, params, `answered ${short(answer.error ?? answer.result)}`);
      else {
        if (n < c.lastNumber) find('backwards', c, method, params, `answered ${n} after ${c.lastNumber}; ${around}`);
        if (n > quantity(after.result)) find('wrong', c, method, params, `answered ${n}, above anvil's head; ${around}`);
        c.lastNumber = Math.max(c.lastNumber, n);
        c.see(n);
      }
      return answer;
    }
    if (answer.error !== undefined) {
      if (anvilHad) find(method in STATE_AT ? 'stateError' : 'error', c, method, params, `answered ${short(answer.error)}; ${around}`);
      return answer;
    }
    if (answer.result === null || answer.result === undefined) {
      // anvil had it throughout (see the top), at a height this client was shown
      if (anvilHad && before.result != null && after.result != null) {
        const h = Math.max(heightOf(method, params, before.result), heightOf(method, params, after.result));
        if (h >= 0 && h <= shownBefore) find('null', c, method, params, `answered null at height ${h}, client shown ${shownBefore}; ${around}`);
      }
      return answer;
    }
    if (anvilHad && isDeepStrictEqual(before.result, after.result) && !isDeepStrictEqual(answer.result, before.result)) {
      find('wrong', c, method, params, `answered ${short(answer.result)}; ${around}`);
    }
    if (!(method in STATE_AT)) c.see(heightOf(method, params, answer.result));
    return answer;
  }

  async function sequence(c: Client, account: ReturnType<typeof mnemonicToAccount>, nonce: number): Promise<number> {
    const raw = await account.signTransaction({
      chainId,
      nonce,
      to: account.address,
      value: 0n,
      gas: 21_000n,
      maxFeePerGas: 100_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });
    const hash = keccak256(raw);
    raws.set(hash, raw);
    judged++;
    const sent = await viaPool('eth_sendRawTransaction', [raw]);
    if (typeof sent === 'string') find('transport', c, 'eth_sendRawTransaction', [hash], sent);
    else if (sent.error !== undefined) find('sendError', c, 'eth_sendRawTransaction', [hash], `answered ${short(sent.error)}`);
    else if (sent.result !== hash) find('wrong', c, 'eth_sendRawTransaction', [hash], `answered ${short(sent.result)}`);
    if ((await truth('eth_getTransactionByHash', [hash])).result == null) {
      // it never reached the node: the next sequence signs again with the node's nonce
      return quantity((await truth('eth_getTransactionCount', [account.address, 'pending'])).result);
    }

    type Receipt = { blockNumber: string; blockHash: string };
    let receipt = null as Receipt | null;
    const deadline = Date.now() + RECEIPT_DEADLINE_MS;
    while (receipt === null) {
      const r = await read(c, 'eth_getTransactionReceipt', [hash]);
      receipt = (r?.result as Receipt | null | undefined) ?? null;
      if (receipt !== null) break;
      if (Date.now() > deadline) {
        const had = (await truth('eth_getTransactionReceipt', [hash])).result as Receipt | null;
        if (had === null) throw new Error(`oracle: anvil did not mine ${hash} within ${RECEIPT_DEADLINE_MS} ms (is the miner running?)`);
        find('stuck', c, 'eth_getTransactionReceipt', [hash], `null for ${RECEIPT_DEADLINE_MS} ms; anvil has it in block ${quantity(had.blockNumber)}`);
        return nonce + 1;
      }
      await sleep(RECEIPT_POLL_MS);
    }
    const b = quantity(receipt.blockNumber);
    await read(c, 'eth_getTransactionByHash', [hash]);
    await read(c, 'eth_getBlockByNumber', [hex(b), false]);
    await read(c, 'eth_getBlockByHash', [receipt.blockHash, false]);
    await read(c, 'eth_getBalance', [account.address, hex(b)]);
    if (c.shown - DEEP >= 0) await read(c, 'eth_getBalance', [account.address, hex(c.shown - DEEP)]);
    const tip = await read(c, 'eth_blockNumber', []);
    const x = quantity(tip?.result);
    if (x >= 0) await read(c, 'eth_getBlockByNumber', [hex(x), false]);
    sequences++;
    return nonce + 1;
  }

  async function runClient(i: number): Promise<void> {
    const c = new Client(i);
    const account = mnemonicToAccount(MNEMONIC, { addressIndex: (opts.firstAccount ?? 1) + i });
    let nonce = quantity((await truth('eth_getTransactionCount', [account.address, 'pending'])).result);
    for (let s = 0; s < opts.sequences; s++) nonce = await sequence(c, account, nonce);
  }

  /** Replaces the top `depth` blocks with as many new ones holding the same transactions at the same heights; inside the gate. */
  async function reorg(depth: number): Promise<void> {
    const head = quantity((await anvil.rpc('eth_blockNumber')).result);
    const pairs: [Hex, number][] = [];
    for (let k = head - depth + 1; k <= head; k++) {
      const blk = (await anvil.rpc('eth_getBlockByNumber', [hex(k), false])).result as { transactions: string[] };
      for (const h of blk.transactions) {
        const raw = raws.get(h);
        if (raw === undefined) throw new Error(`oracle: block ${k} holds ${h}, which no client of the oracle signed`);
        pairs.push([raw, k - (head - depth + 1)]);
      }
    }
    const r = await anvil.rpc('anvil_reorg', [depth, pairs]);
    if (r.error) throw new Error(`oracle: anvil_reorg: ${r.error.message}`);
    const now = quantity((await anvil.rpc('eth_blockNumber')).result);
    if (now !== head) throw new Error(`oracle: a reorg moved anvil's head from ${head} to ${now}; the judge assumes heights never go down`);
    reorgs++;
  }

  let running = true;
  const miner = (async () => {
    while (running) {
      await sleep(minMs + Math.floor(rng() * (maxMs - minMs + 1)));
      if (!running) break;
      const depth = rng() < 0.5 ? 2 : 3;
      if (rng() < reorgShare) await gate.exclusive(() => reorg(depth));
      else {
        await gate.exclusive(() => anvil.mine(1));
        blocks++;
      }
    }
  })();
  // its failure is thrown below, once the clients are done; not an unhandled rejection meanwhile
  miner.catch(() => undefined);

  const t0 = Date.now();
  try {
    await Promise.all(Array.from({ length: opts.clients }, (_, i) => runClient(i)));
  } finally {
    running = false;
    await miner;
  }
  const counts = Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])) as Record<FindingKind, number>;
  for (const f of findings) counts[f.kind]++;
  return { seed: opts.seed, judged, findings, counts, sequences, blocks, reorgs, ms: Date.now() - t0 };
}

/** One line for the log: the figure, each kind's count, and what the run did. */
export function describeReport(name: string, r: OracleReport): string {
  const kinds = FINDING_KINDS.filter((k) => r.counts[k] > 0).map((k) => `${k} ${r.counts[k]}`);
  return (
    `${name}: ${r.findings.length} inconsistent of ${r.judged} answers judged` +
    (kinds.length > 0 ? ` (${kinds.join(', ')})` : '') +
    `; ${r.sequences} sequences, ${r.blocks} blocks mined, ${r.reorgs} reorgs, ${(r.ms / 1000).toFixed(1)} s, seed ${r.seed}`
  );
}
