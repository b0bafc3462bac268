// Heads pushed by the nodes (issue 46): one socket per upstream that names
// one (`ws:`, or its kind's default), never one per client, beside the
// poller. Each head the socket announces is a report to the chain view
// (ChainView.pushed), so the served tip, the cache's epoch and every
// subscriber's feed move within milliseconds of the node instead of at the
// next poll. Polls go on as the check and the fallback:
//  - a pushed head counts only once a poll has verified the upstream and the
//    socket serves what that poll found (asked on the socket itself: a ws
//    URL that reaches another chain's node is of no use, and is dropped);
//  - while a socket is down its polls carry the upstream's head, and it is
//    opened again after a bounded, jittered backoff, and subscribes again;
//  - a socket that pushed none of the blocks the polls showed a poll ago is
//    quiet: it is dropped and opened again;
//  - it is pinged every poll interval of its chain, from its last pong: one
//    from which neither the pong nor any byte has come within health.timeoutMs
//    is gone (a half-open connection, the node's side lost without a FIN,
//    passes nothing and closes never), and is dropped and opened again,
//    blocks or none.
// What the socket sends and how its messages read is the kind's
// (probe.ts HeadSocketProbe; EVM: kinds/evm/head-socket.ts, Blockbook:
// kinds/blockbook/socket-upstream.ts); the rest is here, the same for every
// kind. It is the upstream's ONE socket, whoever uses it: a kind's other
// traffic on it (Blockbook's address and fiat subscriptions, socket-hub.ts)
// attaches as a SocketUser (upstream-socket.ts, Upstream.socket) and is
// told each message that is no head news, and when it goes down. Only chains that
// follow heads (a cache, a pool, WebSocket subscribers) open sockets: a chain
// without `ws:` (or, for a kind with a default, without heads) pays nothing.
// The socket's URL is never logged: it holds a provider's key as the http one
// does.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import type { Logger } from '../observe/log.ts';
import type { RouteSpec, UpstreamSpec } from '../types.ts';
import { resolveTemplate } from '../config/env.ts';
import type { ChainView } from './chain-view.ts';
import type { ChainProbe, HeadSocketProbe } from './probe.ts';
import type { SocketUser, UpstreamSocket } from './upstream-socket.ts';
import { HEALTH_AGENT, unreachable, type Upstream, type UpstreamGroup } from './upstream.ts';

/** The first wait before a socket is opened again, and the longest (each failure in a row doubles it; each wait is jittered down to half). */
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 30_000;
/** Largest message a head socket takes (a block header is a few KiB), unless its kind says more: a longer one closes it. */
const MAX_MESSAGE_BYTES = 1 << 20;

/**
 * An upstream's socket URL: its manifest's `ws` (resolved as its `url` is,
 * at start), else its kind's default from its http URL (`fallback`; null:
 * the kind has none, and then no socket). Throws, never echoing the URL, where
 * it is not ws: or wss:.
 */
export function socketUrl(spec: UpstreamSpec, route: RouteSpec, fallback: ((base: URL) => string) | null): string | null {
  if (spec.ws === undefined && fallback === null) return null;
  const where = `chain ${route.path} (${spec.name})`;
  const raw = spec.ws !== undefined ? resolveTemplate(spec.ws, where) : fallback!(new URL(resolveTemplate(spec.url, where)));
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`${where}: upstream ws is not a valid URL`);
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new Error(`${where}: upstream ws must be ws: or wss:`);
  return url.href;
}

/**
 * A socket to an upstream, opened as the gateway opens every one: the
 * upstream's own headers and the gateway's user agent (never a client's), no
 * compression, no redirect, messages of at most `maxPayload` bytes.
 */
export function upstreamWebSocket(u: Upstream, url: string, timeoutMs: number, maxPayload: number): WebSocket {
  return new WebSocket(url, { headers: { ...u.headers, 'user-agent': HEALTH_AGENT }, handshakeTimeout: timeoutMs, maxPayload, perMessageDeflate: false, followRedirects: false });
}

/** Why a socket to an upstream failed, from its status or code alone: an error's message may carry the URL (a provider's key). */
export function socketFailure(err: Error): string {
  const status = /^Unexpected server response: (\d+)$/.exec(err.message)?.[1];
  return status !== undefined ? `HTTP ${status}` : err.message === 'Opening handshake has timed out' ? 'timeout' : unreachable(err);
}

/** A chain as its sockets see it (the poller's PolledChain). */
export interface SocketChain {
  readonly route: RouteSpec;
  readonly group: UpstreamGroup;
  readonly view: ChainView;
  /** Whether it follows its head (a cache, WebSocket subscribers, a pool that rewrites tags); a pool does too. */
  readonly heads: boolean;
  readonly probe: ChainProbe;
  /** How often its upstreams are polled (null: the health interval): its sockets are pinged as often. */
  readonly everyMs: number | null;
}

/** The head sockets of every chain that follows heads, one per upstream with a socket URL. */
export class HeadSockets {
  private readonly sockets = new Map<Upstream, HeadSocket>();

  /** `intervalMs`: the health interval (a chain's own where it has none); `timeoutMs`: a check's, for the upgrade and each ping's pong. */
  constructor(chains: readonly SocketChain[], { intervalMs, timeoutMs }: { readonly intervalMs: number; readonly timeoutMs: number }, log: Logger) {
    for (const c of chains) {
      const kind = c.probe.socket;
      // A chain that does not follow heads polls for health alone: a pushed head would serve nothing.
      if (kind === undefined || !(c.heads || c.group.all.length > 1)) continue;
      // The group holds the route's upstreams in the manifest's order (chains.ts).
      c.route.upstreams.forEach((spec, i) => {
        const url = socketUrl(spec, c.route, kind.defaultUrl);
        const u = c.group.all[i]!;
        if (url === null) return;
        const s = new HeadSocket(c.route, c.view, u, url, kind, c.everyMs ?? intervalMs, timeoutMs, log);
        this.sockets.set(u, s);
        u.socket = s;
      });
    }
  }

  start(): void {
    for (const s of this.sockets.values()) s.open();
  }

  stop(): void {
    for (const s of this.sockets.values()) s.stop();
  }

  /** A poll of `u` found its head at `n` (NaN: no usable height). */
  polled(u: Upstream, n: number): void {
    if (this.sockets.size > 0 && !Number.isNaN(n)) this.sockets.get(u)?.polled(n);
  }
}

/** One upstream's socket: open, verified and subscribed, or waiting to be opened again. */
class HeadSocket implements UpstreamSocket {
  private ws: WebSocket | null = null;
  private readonly users = new Set<SocketUser>();
  private retry: NodeJS.Timeout | null = null;
  /** The next ping, or the wait for the pong of the one out (one timer at a time). */
  private beat: NodeJS.Timeout | null = null;
  /** Pongs had, in all: a pong read in the turn a wait for it ends is seen. */
  private pongs = 0;
  /** The connection under the open socket: what it has read tells a peer still sending from one gone. */
  private wire: Socket | null = null;
  private wait = FIRST_RETRY_MS;
  private stopped = false;
  /** What the socket says it serves, and whether its subscription was taken: all three, and it is live. */
  private identity = '';
  private genesis = '';
  private subscribed = false;
  private on = false;
  /** The highest head it pushed since it opened (-1: none). */
  private last = -1;
  /** A head a poll showed that it had not pushed (-1: none): still not pushed at the next poll, it is quiet. */
  private awaited = -1;
  /** Why it closed, for the log line. */
  private reason = '';
  /** A failure was logged since it was last live: the ones after it, until it is live again, are not. */
  private told = false;

  constructor(
    private readonly route: RouteSpec,
    private readonly view: ChainView,
    private readonly u: Upstream,
    private readonly url: string,
    private readonly kind: HeadSocketProbe,
    private readonly everyMs: number,
    private readonly timeoutMs: number,
    private readonly log: Logger,
  ) {
    u.view.socket = 'down';
  }

  open(): void {
    if (this.stopped) return;
    const ws = upstreamWebSocket(this.u, this.url, this.timeoutMs, this.kind.maxMessageBytes ?? MAX_MESSAGE_BYTES);
    this.ws = ws;
    this.reason = '';
    ws.on('upgrade', (res: IncomingMessage) => {
      this.wire = res.socket;
    });
    ws.on('open', () => {
      for (const m of this.kind.hello(this.route)) ws.send(m);
      this.heartbeat(ws);
    });
    ws.on('pong', () => {
      if (ws !== this.ws) return;
      this.pongs++;
      clearTimeout(this.beat!);
      this.heartbeat(ws);
    });
    ws.on('message', (data: Buffer, binary: boolean) => {
      if (!binary && ws === this.ws) this.message(data.toString());
    });
    ws.on('error', (err: Error) => {
      this.reason ||= socketFailure(err);
    });
    ws.on('close', (code: number) => this.closed(ws, code));
  }

  stop(): void {
    this.stopped = true;
    if (this.retry !== null) clearTimeout(this.retry);
    if (this.beat !== null) clearTimeout(this.beat);
    this.ws?.terminate();
    this.ws = null;
  }

  get live(): boolean {
    return this.on;
  }

  attach(user: SocketUser): void {
    this.users.add(user);
  }

  detach(user: SocketUser): void {
    this.users.delete(user);
  }

  send(text: string): boolean {
    if (!this.on) return false;
    this.ws!.send(text);
    return true;
  }

  /**
   * A poll found the upstream's head at `n`: one a poll showed before that
   * the socket still has not pushed makes it quiet. One that told what it
   * serves before the polls verified the upstream is verified now.
   */
  polled(n: number): void {
    if (!this.on) this.verify();
    if (!this.on || n <= this.last) {
      this.awaited = -1;
      return;
    }
    if (this.awaited >= 0 && this.last < this.awaited) {
      this.drop('quiet', 'warn', { missed: this.awaited });
      return;
    }
    this.awaited = n;
  }

  private message(text: string): void {
    let m: unknown;
    try {
      m = JSON.parse(text);
    } catch {
      return;
    }
    if (m === null || typeof m !== 'object') return;
    const news = this.kind.read(this.route, m as Record<string, unknown>);
    if (news === null) {
      // Another user's: only while live (what a socket not yet verified says is not the chain's).
      if (this.on) for (const u of this.users) u.message(m as Record<string, unknown>);
      return;
    }
    if ('head' in news) {
      if (!this.on) this.verify();
      if (news.head > this.last) this.last = news.head;
      this.view.pushed(this.u.view, { identity: this.identity, genesis: this.genesis, number: news.head, hash: news.hash });
      return;
    }
    if ('refused' in news) {
      this.drop('refused', 'warn', { answer: news.refused.slice(0, 200) });
      return;
    }
    if ('identity' in news) this.identity = news.identity;
    else if ('genesis' in news) this.genesis = news.genesis;
    else this.subscribed = true;
    this.verify();
  }

  /** Once it told what it serves: on another chain than the polls verified, it is dropped; subscribed on the right one, it is live. */
  private verify(): void {
    const v = this.u.view;
    if (this.identity === '' || !v.verified) return;
    if (this.identity !== v.identity || (v.genesis !== '' && this.genesis !== '' && this.genesis.toLowerCase() !== v.genesis.toLowerCase())) {
      this.drop('wrong_chain', 'error', { serves: this.identity, expected: v.identity });
      return;
    }
    if (!this.subscribed || this.on) return;
    this.on = true;
    this.u.view.socket = 'up';
    // Blocks the polls knew when it subscribed are not news it owes: only the ones after are held against it.
    if (v.head !== null && v.head > this.last) this.last = v.head;
    this.told = false;
    this.wait = FIRST_RETRY_MS;
    this.log.info({ event: 'upstream_socket_open', chain: this.route.path, upstream: this.u.name }, 'upstream head socket subscribed');
  }

  /**
   * A ping an interval from now (from the open, or the last pong): from its
   * first, whether or not the socket is verified yet, so one that completed its
   * upgrade and then lost its peer is not held forever.
   */
  private heartbeat(ws: WebSocket): void {
    this.beat = setTimeout(() => {
      ws.ping();
      this.awaitPong(this.wire?.bytesRead ?? 0);
    }, this.everyMs);
    this.beat.unref();
  }

  /**
   * The pong must come within timeoutMs, as a poll's answer must, else the
   * socket is dropped; bytes read meanwhile wait as long again: a long message
   * (a Blockbook answer of megabytes on a slow link) holds the pong behind it,
   * and a peer still sending is not gone.
   */
  private awaitPong(read: number): void {
    const pongs = this.pongs;
    const ws = this.ws;
    this.beat = setTimeout(() => {
      // The verdict after this turn's input is read (setImmediate runs after the poll phase; timers run before it): a
      // pong or bytes that came while this process was busy (a long task, a loaded host) are not taken for silence.
      setImmediate(() => {
        if (this.pongs !== pongs || this.ws !== ws) return;
        const now = this.wire?.bytesRead ?? 0;
        if (now > read) this.awaitPong(now);
        else this.drop('no_pong', 'warn', { waitedMs: this.timeoutMs });
      });
    }, this.timeoutMs);
    this.beat.unref();
  }

  /** Closes it at once (no closing handshake: a quiet peer would hold it), to be opened again after the backoff. */
  private drop(why: 'quiet' | 'refused' | 'wrong_chain' | 'no_pong', level: 'warn' | 'error', fields: Record<string, unknown>): void {
    const ws = this.ws;
    if (ws === null) return;
    // Once per run of failures: a ws URL on another chain, tried again every 30 s, is one line, not one a try.
    if (!this.told) this.log[level]({ event: `upstream_socket_${why}`, chain: this.route.path, upstream: this.u.name, ...fields }, `upstream head socket: ${why.replace('_', ' ')}, closed`);
    this.reason = why;
    this.told = true;
    ws.terminate();
  }

  private closed(ws: WebSocket, code: number): void {
    if (ws !== this.ws) return;
    this.ws = null;
    if (this.beat !== null) clearTimeout(this.beat);
    this.beat = null;
    this.wire = null;
    const was = this.on;
    this.on = false;
    this.u.view.socket = 'down';
    this.subscribed = false;
    this.identity = '';
    this.genesis = '';
    this.last = -1;
    this.awaited = -1;
    if (was) for (const u of this.users) u.down();
    if (this.stopped) return;
    // Bounded and jittered: sockets of many upstreams dropped together (a provider's outage) do not come back at once.
    const ms = Math.round(this.wait * (0.5 + Math.random() / 2));
    this.wait = Math.min(MAX_RETRY_MS, this.wait * 2);
    if (was || !this.told) {
      this.log.warn(
        { event: 'upstream_socket_down', chain: this.route.path, upstream: this.u.name, reason: this.reason || `closed (${code})`, retryMs: ms },
        'upstream head socket down: its polls carry its head',
      );
      this.told = true;
    }
    this.retry = setTimeout(() => {
      this.retry = null;
      this.open();
    }, ms);
    this.retry.unref();
  }
}
