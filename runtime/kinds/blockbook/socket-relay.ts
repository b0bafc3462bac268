// Blockbook's WebSocket requests that no REST call can answer exactly
// (longTermFeeRate, the filters, an EVM coin's estimateFee), sent on the
// upstreams' own sockets: the
// ONE socket each upstream has (upstreams/head-sockets.ts, which carries its
// heads and the chain's subscriptions too), never one per client. The message
// is admitted and counted at the chain's top by the session (socket.ts); here
// it is sent under the gateway's own id (the clients' ids would collide on a
// socket all of them share), on the live socket of a usable upstream (the
// pool's view: up, not behind, not throttled, the chain's coin, its socket
// verified; one at or above the chain's served tip first, so that a block the
// chain serves is one it has), and its answer's `data` given back as Blockbook wrote it (its
// own error included: that is the chain's answer). A read waits at most the
// chain's timeoutMs; lost with its socket, or timed out, it is sent once more
// on another usable upstream, then fails. Each exchange is reported to the
// upstream's counters as a forwarded HTTP attempt is (forward-attempts.ts:
// its tally, which the pool's score reads, and its breaker), and the calls go
// to upstreams the score prefers, so a slow or failing socket is left.
// An answer over what the upstream socket takes in one message
// (blockbookHeadSocket.maxMessageBytes) would close that socket: so no block
// page is sent here (socket-block-page.ts reads it from REST), each method's
// parameters are bounded as websocket.go bounds them (docs/websocket.md says
// how big each answer can get), and a method whose answer nothing bounds
// (OWN_SOCKET) goes on a short-lived socket of its own (socket-own.ts), where
// an answer over the bound costs that socket alone and is the client's error.
import type { ChainView } from '../../upstreams/chain-view.ts';
import { socketUrl } from '../../upstreams/head-sockets.ts';
import type { SocketUser, UpstreamSocket } from '../../upstreams/upstream-socket.ts';
import type { Upstream } from '../../upstreams/upstream.ts';
import type { BlockbookRouteSpec } from '../../types.ts';
import { MAX_MERGE_BYTES } from '../common.ts';
import { int, MAX_FEE_BLOCKS, ParamsError, str, type Params } from './socket-methods.ts';
import { Busy, OverBound, OwnSockets } from './socket-own.ts';
import { blockbookSocketUrl } from './socket-upstream.ts';

/** The ids of the gateway's own requests on an upstream socket: this prefix and a sequence number (socket-upstream.ts uses i, b, a, f). */
const ID = 'm';
/** api/worker.go's GetBlockFiltersBatch: at most this many blocks' filters a page, and this many where none is asked. */
const MAX_FILTERS_PAGE = 10000;
const FILTERS_PAGE = 1000;
/**
 * The blocks' filters asked in one message on an upstream socket. A block's
 * filter is bounded by its weight to ~128 KB of hex (a full block of the
 * smallest taproot outputs), so 100 of them stay under 13 MB, far under the
 * socket's 32 MiB; a larger page is asked in pieces.
 */
const FILTERS_CHUNK = 100;
/**
 * The methods whose answer no parameter bounds, sent on a socket of their
 * own, each with what its client can do about an answer over the bound.
 * getMempoolFilters answers every mempool entry since fromTimestamp (~90
 * bytes each), and Blockbook has no paging for it.
 */
const OWN_SOCKET: ReadonlyMap<string, string> = new Map([['getMempoolFilters', 'ask with a later fromTimestamp']]);
/** What only an EVM-type Blockbook reads of estimateFee's `specific`: its gas estimate's call (websocket.go's EthereumTypeEstimateGas). */
const EVM_FEE_FIELDS = ['from', 'to', 'data', 'value'] as const;

/** An optional unsigned integer, as websocket.go's `omitempty` fields read it (absent: left out). */
function optional(out: Record<string, unknown>, p: Params, name: string): void {
  const v = int(p, name);
  if (v < 0) throw new ParamsError(`Invalid params: '${name}' must not be negative`);
  if (v > 0) out[name] = v;
}

/** The filters' common parameters: the script type (Blockbook answers an error for one it does not index) and M. */
function filterParams(p: Params): Record<string, unknown> {
  const out: Record<string, unknown> = { scriptType: str(p, 'scriptType') };
  optional(out, p, 'M');
  return out;
}

/**
 * The parameters a message is sent upstream with, rebuilt from the fields
 * websocket.go reads (nothing else of the client's reaches the node), or
 * null where its REST twin answers it exactly (socket-methods.ts). Throws
 * ParamsError for a field of the wrong type.
 */
export function upstreamParams(method: string, p: Params): Record<string, unknown> | null {
  switch (method) {
    case 'longTermFeeRate':
      return {};
    case 'getMempoolFilters': {
      const out = filterParams(p);
      const from = int(p, 'fromTimestamp');
      if (from < 0 || from > 0xffffffff) throw new ParamsError("Invalid params: 'fromTimestamp' must be a uint32");
      out.fromTimestamp = from;
      return out;
    }
    case 'getBlockFilter':
      return { ...filterParams(p), blockHash: str(p, 'blockHash') };
    case 'getBlockFiltersBatch': {
      // worker.go's GetBlockFiltersBatch refuses more, with this message: refused here, it reaches no upstream.
      if (int(p, 'pageSize') > MAX_FILTERS_PAGE) throw new ParamsError(`pageSize max ${MAX_FILTERS_PAGE}`);
      const out = { ...filterParams(p), bestKnownBlockHash: str(p, 'bestKnownBlockHash') };
      optional(out, p, 'pageSize');
      return out;
    }
    case 'estimateFee': {
      const s = p.specific;
      if (s === null || typeof s !== 'object' || Array.isArray(s)) return null;
      const specific = s as Record<string, unknown>;
      if (!EVM_FEE_FIELDS.some((f) => specific[f] !== undefined)) return null;
      // An EVM-type Blockbook's answer (gas limit, fee per transaction, EIP-1559 levels) is its node's, which REST's estimatefee does not give.
      const out: Record<string, unknown> = {};
      for (const f of EVM_FEE_FIELDS) {
        const v = str(specific, f);
        if (v !== '') out[f] = v;
      }
      for (const f of ['conservative', 'txsize'] as const) if (specific[f] !== undefined) out[f] = specific[f];
      if (out.conservative !== undefined && typeof out.conservative !== 'boolean') throw new ParamsError("Invalid params: 'conservative' must be a boolean");
      if (out.txsize !== undefined && (typeof out.txsize !== 'number' || !Number.isFinite(out.txsize))) throw new ParamsError("Invalid params: 'txsize' must be a number");
      const blocks = p.blocks ?? [];
      if (!Array.isArray(blocks) || !blocks.every((b) => Number.isSafeInteger(b))) throw new ParamsError("Invalid params: 'blocks' must be a list of integers");
      if (blocks.length > MAX_FEE_BLOCKS) throw new ParamsError(`blocks max ${MAX_FEE_BLOCKS}`);
      return { blocks, specific: out };
    }
  }
  return null;
}

/** The methods that are always sent upstream (their names are credits' too). */
export const UPSTREAM_ONLY = ['longTermFeeRate', 'getMempoolFilters', 'getBlockFilter', 'getBlockFiltersBatch'] as const;
/** Every method a message may be sent upstream as: admitted and counted as a call of its own name. */
export const UPSTREAM_METHODS = [...UPSTREAM_ONLY, 'estimateFee'] as const;

interface Waiter {
  readonly done: (data: unknown) => void;
  readonly fail: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** The gateway's requests on one upstream's socket, beside its heads and the chain's subscriptions: attached once, for good. */
class Relay implements SocketUser {
  private readonly waiting = new Map<string, Waiter>();

  constructor(private readonly socket: UpstreamSocket) {
    socket.attach(this);
  }

  ask(id: string, method: string, params: object, timeoutMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (!this.socket.send(JSON.stringify({ id, method, params }))) return reject(new Error('not live'));
      // A slow answer is given up, not the socket: it carries heads and subscriptions that are fine. Its late answer is dropped.
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error('no answer in time'));
      }, timeoutMs).unref();
      this.waiting.set(id, { done: resolve, fail: reject, timer });
    });
  }

  message(m: Record<string, unknown>): void {
    const w = typeof m.id === 'string' ? this.waiting.get(m.id) : undefined;
    if (w === undefined) return;
    this.waiting.delete(m.id as string);
    clearTimeout(w.timer);
    w.done(m.data);
  }

  down(): void {
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.fail(new Error('its socket was lost'));
    }
    this.waiting.clear();
  }
}

/**
 * Why a message's answer could not be made, with the HTTP status its
 * access-log line and metrics carry: 503, no upstream socket live, or none
 * free in time; 504, none answered in time; 502, the upstream's answer is
 * more than the gateway holds (as an HTTP answer over its bound fails).
 */
export class RelayFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A chain's requests on its upstreams' sockets. */
export class UpstreamCalls {
  private readonly relays = new Map<Upstream, Relay>();
  private readonly own: OwnSockets;
  /** The OWN_SOCKET messages under way, by method and parameters: an identical one joins the exchange. */
  private readonly flights = new Map<string, Promise<unknown>>();
  private seq = 0;
  private turn = 0;

  constructor(
    route: BlockbookRouteSpec,
    private readonly upstreams: readonly Upstream[],
    private readonly view: ChainView,
    private readonly timeoutMs: number,
  ) {
    // The chain's upstreams are its manifest's, in order (chains.ts): each one's socket is where its shared one is.
    const urls = new Map<Upstream, string>();
    route.upstreams.forEach((spec, i) => {
      const url = socketUrl(spec, route, blockbookSocketUrl);
      if (url !== null && upstreams[i] !== undefined) urls.set(upstreams[i]!, url);
    });
    this.own = new OwnSockets(urls, MAX_MERGE_BYTES);
  }

  /**
   * One read on a usable upstream whose socket is live, once more on another
   * if that one is lost or silent: the answer's `data`. An OWN_SOCKET method
   * goes on a socket of its own, joined by identical ones meanwhile.
   */
  call(method: string, params: object): Promise<unknown> {
    const hint = OWN_SOCKET.get(method);
    if (hint === undefined) return this.attempts(method, (u) => this.relayOf(u).ask(`${ID}${++this.seq}`, method, params, this.timeoutMs));
    const key = `${method} ${JSON.stringify(params)}`;
    let flight = this.flights.get(key);
    if (flight === undefined) {
      flight = this.attempts(method, (u) => this.own.ask(u, method, params, this.timeoutMs), hint).finally(() => this.flights.delete(key));
      this.flights.set(key, flight);
    }
    return flight;
  }

  /**
   * Sends by `send` to a usable upstream, once more to another where it got
   * no answer. Each exchange is reported as a forwarded attempt is: its
   * latency and outcome to the upstream's tally (the score's window), a
   * failure to its breaker. An answer over the bound is the error (with
   * `hint`), asked nowhere else: any upstream's would be as large.
   */
  private async attempts(method: string, send: (u: Upstream) => Promise<unknown>, hint = ''): Promise<unknown> {
    let tried: Upstream | null = null;
    let busy = false;
    for (let attempt = 0; attempt < 2; attempt++) {
      const u = this.pick(tried);
      if (u === null) break;
      tried = u;
      // A message sent is a request of the upstream's rateLimit as an HTTP call is (pick passes over one without room).
      u.budget?.spend();
      const sent = performance.now();
      try {
        const data = await send(u);
        u.tally.observe(performance.now() - sent, true);
        u.markSuccess();
        return data;
      } catch (err) {
        if (err instanceof OverBound) throw new RelayFailure(502, `${method}: answer over ${MAX_MERGE_BYTES} bytes: ${hint}`);
        // Waiting for a place is no exchange with the upstream: nothing to report.
        busy = err instanceof Busy;
        if (busy) continue;
        u.tally.observe(performance.now() - sent, false);
        u.markFailure();
      }
    }
    if (tried === null) throw new RelayFailure(503, `${method}: no upstream socket is live`);
    if (busy) throw new RelayFailure(503, `${method}: no upstream had a socket free for it in time: ask again later`);
    throw new RelayFailure(504, `${method}: the upstream did not answer`);
  }

  private relayOf(u: Upstream): Relay {
    let relay = this.relays.get(u);
    if (relay === undefined) this.relays.set(u, (relay = new Relay(u.socket!)));
    return relay;
  }

  /**
   * getBlockFiltersBatch of up to 10,000 blocks, asked FILTERS_CHUNK blocks a
   * message, each from the last block the one before named: what one message
   * of that pageSize answers (websocket.go's P, M and zeroedKey of the first
   * piece), without any upstream answer near the socket's bound. The node's
   * error is the answer; all the pieces together are held to the merge bound.
   */
  async filtersBatch(params: Readonly<Record<string, unknown>>): Promise<unknown> {
    const want = typeof params.pageSize === 'number' ? params.pageSize : FILTERS_PAGE;
    let after = params.bestKnownBlockHash;
    let head: object | null = null;
    const batch: string[] = [];
    let bytes = 0;
    while (batch.length < want) {
      const size = Math.min(FILTERS_CHUNK, want - batch.length);
      const data = await this.call('getBlockFiltersBatch', { ...params, bestKnownBlockHash: after, pageSize: size });
      const got = (data as { blockFiltersBatch?: unknown } | null)?.blockFiltersBatch;
      if (!Array.isArray(got) || !got.every((e) => typeof e === 'string')) return data;
      head ??= data as object;
      for (const e of got as string[]) bytes += e.length;
      if (bytes > MAX_MERGE_BYTES) throw new RelayFailure(502, `getBlockFiltersBatch: over ${MAX_MERGE_BYTES} bytes: ask a smaller pageSize`);
      batch.push(...(got as string[]));
      if (got.length < size) break;
      // Each entry is `height:hash:filter`: the next piece starts after the last block.
      after = (got.at(-1) as string).split(':')[1];
    }
    return { ...head, blockFiltersBatch: batch };
  }

  /**
   * A usable upstream whose socket is live, other than `not`: one at or above
   * the served tip where there is one (a block the chain serves, or its
   * filter, is then never "not found"), of those the pool's score prefers
   * where there is one (upstream-score.ts: these calls feed it), taken in
   * turn so that the calls spread.
   */
  private pick(not: Upstream | null): Upstream | null {
    const live = this.upstreams.filter((u) => u !== not && u.usable && u.socket?.live === true);
    const atTip = live.filter((u) => (u.view.head ?? -1) >= this.view.tip);
    const near = atTip.length > 0 ? atTip : live;
    const preferred = near.filter((u) => u.score === null || u.score.preferred);
    const from = preferred.length > 0 ? preferred : near;
    return from.length === 0 ? null : from[this.turn++ % from.length]!;
  }
}
