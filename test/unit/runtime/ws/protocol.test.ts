// Issue 45: a second socket protocol is one file and one module field. A toy
// protocol defined here, Blockbook-shaped ({"id","method","params"} answered
// {"id","data"}, its socket at /<chain>/<key>/websocket, its calls REST GETs),
// is put in a module's `socket` field, bound to its route as chains.ts binds
// every chain's (socketOf), and served by ws/ unchanged: a real `ws` client on
// loopback, the real Sockets and Connection, the real admission's admit step
// (AdmitLayer) and usage count. Its calls go into the chain's route handler or
// are answered locally through the chain's top, its pushes are counted there,
// and the per-key limit refuses in its envelope.
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { AdmissionStage, AdmitLayer, RateStep } from '../../../../runtime/admission/admission.ts';
import { MemoryRateLimiter } from '../../../../runtime/admission/ratelimit.ts';
import { socketOf, type Chain, type DispatchTable } from '../../../../runtime/chains.ts';
import type { Exchange, RouteHandler } from '../../../../runtime/exchange.ts';
import { blockbook } from '../../../../runtime/kinds/blockbook/module.ts';
import type { InterfaceModule } from '../../../../runtime/kinds/interface.ts';
import type { ChainSockets, SocketCounts, SocketLink, SocketProtocol, SocketSession } from '../../../../runtime/kinds/socket.ts';
import { parseKeysFile, type KeyLookup } from '../../../../runtime/keys/keys.ts';
import type { Logger } from '../../../../runtime/observe/log.ts';
import { Metrics } from '../../../../runtime/observe/metrics.ts';
import { RequestTracker } from '../../../../runtime/observe/tracker.ts';
import { Usage } from '../../../../runtime/observe/usage.ts';
import { ChainView } from '../../../../runtime/upstreams/chain-view.ts';
import type { BlockbookRouteSpec, WebSocketSpec } from '../../../../runtime/types.ts';
import { Sockets } from '../../../../runtime/ws/sockets.ts';
import { NOTHING } from '../../../../runtime/dispatch.ts';

const KEY = 'toy-protocol-key-0123456789abcdef';
const LOG = { info() {}, warn() {}, error() {}, debug() {}, isLevelEnabled: () => false } as unknown as Logger;
const entry = parseKeysFile(`keys:\n  - id: toy\n    sha256: "${'ab'.repeat(32)}"\n`, 'keys.yaml')[0]!;

// ------------------------------------------------------------------ the toy protocol: this is the "one file"

interface Message {
  readonly id?: unknown;
  readonly method?: unknown;
}

/** The toy chain's side: its sessions subscribed to ticks, and a tick pushed to each (a feed over the chain). */
class ToyChain implements ChainSockets {
  readonly subscribed = new Set<ToySession>();
  constructor(readonly counts: SocketCounts) {}
  connect(link: SocketLink): SocketSession {
    return new ToySession(this, link);
  }
  tick(n: number): void {
    for (const s of this.subscribed) s.tick(n);
  }
}

class ToySession implements SocketSession {
  private tickId: string | null = null;
  constructor(
    private readonly chain: ToyChain,
    private readonly link: SocketLink,
  ) {}

  message(data: Buffer): void {
    const m = JSON.parse(data.toString('utf8')) as Message;
    const id = JSON.stringify(m.id);
    const reply = (status: number, body: Buffer): void => {
      if (status !== 0) this.link.send(status === 200 ? body : `{"id":${id},"data":{"error":${body.toString('utf8')}}}`);
      this.link.settled();
    };
    if (m.method === 'ping') return this.link.local('ping', () => `{"id":${id},"data":{}}`, reply);
    if (m.method === 'subscribeTicks')
      return this.link.local(
        'subscribeTicks',
        () => {
          this.tickId = id;
          this.chain.subscribed.add(this);
          this.chain.counts.subscriptions.ticks!++;
          return `{"id":${id},"data":{"subscribed":true}}`;
        },
        reply,
      );
    // Anything else goes into the chain as a REST call, as Blockbook's socket does: `getInfo` is GET /v2/info.
    const path = `/v2/${String(m.method).replace(/^get/, '').toLowerCase()}`;
    this.link.request({ method: 'GET', path, query: 'details=basic', body: Buffer.alloc(0) }, (status, body) => reply(status, Buffer.from(`{"id":${id},"data":${body.toString('utf8')}}`)));
  }

  tick(n: number): void {
    if (this.link.push('subscribeTicks', Buffer.from(`{"id":${this.tickId},"data":{"tick":${n}}}`))) this.chain.counts.notifications.ticks!++;
  }

  closed(): void {
    if (this.chain.subscribed.delete(this)) this.chain.counts.subscriptions.ticks!--;
  }
}

let toyChain: ToyChain | null = null;
const toy: SocketProtocol<BlockbookRouteSpec> = {
  types: ['ticks'],
  open: (_route, parts) => (toyChain = new ToyChain(parts.counts)),
  // Blockbook's place: `/<chain>/websocket` or `/<chain>/<key>/websocket`.
  keyOf: (rest) => (rest === '/websocket' ? null : (/^\/([^/]+)\/websocket$/.exec(rest)?.[1] ?? undefined)),
  tooManyConnections: (max) => ({ status: 429, body: `{"error":"toy: ${max} socket per key"}` }),
};

// ------------------------------------------------------------------ and the "one module field"

const toyModule: InterfaceModule<'blockbook'> = { ...blockbook, socket: toy };

// ------------------------------------------------------------------ the gateway's parts around it

const LIMITS: WebSocketSpec = { maxConnectionsPerKey: 1, maxSubscriptionsPerConnection: 4, maxInflightPerConnection: 8, maxBufferedBytes: 1 << 20, pingIntervalMs: 30_000 };
const route = { path: 'toy', interface: 'blockbook', websocket: true, limits: { maxBodyBytes: 65_536 } } as unknown as BlockbookRouteSpec;
/** What reached the chain's route handler: the HTTP method, the path after the chain and the query. */
const handled: string[] = [];
const handler: RouteHandler = {
  handle(x: Exchange, rest: string, query: string) {
    handled.push(`${x.req.method} ${rest}?${query}`);
    x.send(200, '{"blockbook":{"coin":"Toy"}}');
  },
  rewrite() {},
};
const keys = { check: (k: string) => (k === KEY ? { ok: true, entry } : { ok: false, reason: 'invalid' }) } as unknown as KeyLookup;
const metrics = new Metrics(() => 0);
const admission = new AdmissionStage(keys, new RateStep(new MemoryRateLimiter(), null, metrics));
const usage = new Usage(null, LOG);
const tracker = new RequestTracker(null);
let server: Server;
let sockets: Sockets;
let chain: Chain;
let url: string;

beforeAll(async () => {
  const socket = socketOf(toyModule, route);
  expect(socket).not.toBeNull();
  chain = {
    route,
    group: { all: [{}] },
    view: new ChainView([]),
    dispatch: () => ({ cancel() {} }),
    top: new AdmitLayer(admission, route.path, usage, null, () => NOTHING),
    socket,
    handler,
    envelope: blockbook.envelope,
    metrics: metrics.route('toy', 'blockbook'),
    cached: false,
  } as unknown as Chain;
  const table = { chains: new Map([['toy', chain]]), envelope: blockbook.envelope } as unknown as DispatchTable;
  sockets = new Sockets({ admission, context: { log: LOG, cors: () => {}, tracker }, log: LOG, limits: LIMITS, jwtAudience: null, noRoute: metrics.route(null, '-') }, [chain], metrics);
  server = createServer();
  server.on('upgrade', (req, s: Socket, head: Buffer) => sockets.upgrade(table, req, s, head, () => {}));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/toy/${KEY}/websocket`;
});

afterAll(async () => {
  await sockets.close();
  await new Promise((r) => server.close(r));
});

/** A client socket with its messages queued in order. */
async function open(): Promise<{ ws: WebSocket; next: () => Promise<unknown> }> {
  const ws = new WebSocket(url);
  const got: unknown[] = [];
  const waiting: ((v: unknown) => void)[] = [];
  ws.on('message', (d, binary) => {
    expect(binary, 'a text frame').toBe(false);
    const v = JSON.parse(String(d)) as unknown;
    const w = waiting.shift();
    if (w !== undefined) w(v);
    else got.push(v);
  });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  return { ws, next: () => (got.length > 0 ? Promise.resolve(got.shift()) : new Promise((r) => waiting.push(r))) };
}

const counted = (method: string) => usage.bucket(entry.id, 'toy').get(method)?.[0] ?? 0;

describe('a second socket protocol: one file and one module field', () => {
  it('serves a toy protocol put in a module\'s socket field: local calls admitted and counted at the chain\'s top, the rest into the route, pushes counted, its own stats', async () => {
    const { ws, next } = await open();
    ws.send('{"id":"a","method":"ping"}');
    expect(await next()).toEqual({ id: 'a', data: {} });
    expect(counted('ping')).toBe(1);

    ws.send('{"id":"b","method":"getInfo","params":{}}');
    expect(await next()).toEqual({ id: 'b', data: { blockbook: { coin: 'Toy' } } });
    // The REST call the protocol named, with the socket's key where the upgrade had it (the path).
    expect(handled).toEqual([`GET /${KEY}/v2/info?details=basic`]);

    ws.send('{"id":"c","method":"subscribeTicks"}');
    expect(await next()).toEqual({ id: 'c', data: { subscribed: true } });
    expect(counted('subscribeTicks')).toBe(1);
    toyChain!.tick(7);
    toyChain!.tick(8);
    expect(await next()).toEqual({ id: 'c', data: { tick: 7 } });
    expect(await next()).toEqual({ id: 'c', data: { tick: 8 } });
    // Each push counted at the chain's top as a call of the method the protocol names.
    expect(counted('subscribeTicks')).toBe(3);
    // The transport's counters are by the protocol's own subscription types.
    expect(toyChain!.counts).toMatchObject({ subscriptions: { ticks: 1 }, notifications: { ticks: 2 } });

    // The per-key limit is the transport's; its refusal is in the protocol's envelope.
    const second = new WebSocket(url);
    const refused = await new Promise<{ status: number; body: string }>((resolve) =>
      second.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      }),
    );
    expect(refused).toEqual({ status: 429, body: '{"error":"toy: 1 socket per key"}' });

    // The socket's close ends its session: the toy's feed lets it go.
    ws.close();
    await new Promise((r) => ws.once('close', r));
    for (const end = Date.now() + 10_000; toyChain!.subscribed.size > 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 5));
    expect(toyChain!.subscribed.size).toBe(0);
    expect(toyChain!.counts.subscriptions).toEqual({ ticks: 0 });
    expect(sockets.openOn(chain)).toBe(0);
  });
});
