// The Blockbook upstream of bench/ws-blockbook.mjs, in its own process (run
// with `node --import tsx`, forked with IPC): the tests' stand-ins, REST
// (test/support/blockbook-stub.ts, from the spec's examples) and its WebSocket
// API at /websocket (blockbook-socket-standin.ts, as trezor/blockbook's
// server/websocket.go serves it), on 127.0.0.1:<port>. A new block is announced
// at once both ways, as a Blockbook does when its backend connects one: its
// status and block-index name it, and every subscribeNewBlock socket is sent
// it. What the gateway learns it from (its poll, or a push on its upstream
// socket) is the gateway's business: the bench times from here.
//
// Messages from the parent: {block: true} -> {block: height, hash, t} (t: µs of
// CLOCK_MONOTONIC, just before the announcement); {stats: true} -> {stats}
// (the sockets the gateway holds here and what it asked). Sends {ready} first.
import { startBlockbookStub } from '../test/support/blockbook-stub.ts';
import { attachBlockbookSocket } from '../test/support/blockbook-socket-standin.ts';

const now = (): number => Number(process.hrtime.bigint() / 1000n);
const send = (m: object): void => void process.send!(m);

const port = Number(process.argv[2]);
const stub = await startBlockbookStub({ bestHeight: 1000, port });
const socket = attachBlockbookSocket(stub);

/** Height -> when (µs) the first poll (User-Agent chain-gateway-health) reached the upstream while it was the best: the announced ones. */
const polledAt = new Map<number, number>();
let polledTop = stub.bestHeight;
stub.server.on('request', (req) => {
  if (!String(req.headers['user-agent'] ?? '').startsWith('chain-gateway-health')) return;
  const t = now();
  for (let h = polledTop + 1; h <= stub.bestHeight; h++) polledAt.set(h, t);
  polledTop = Math.max(polledTop, stub.bestHeight);
});

process.on('message', (m: { block?: true; stats?: true }) => {
  if (m.block) {
    const height = stub.bestHeight + 1;
    const hash = stub.blockHash(height);
    const t = now();
    stub.setBestHeight(height);
    socket.newBlock(height, hash);
    send({ block: height, hash, t });
  } else if (m.stats) {
    const byRoute: Record<string, number> = {};
    for (const r of stub.requests) {
      const route = r.path.replace(/^\/api\/(v2\/)?/, '').split('/')[0] || 'status';
      byRoute[route] = (byRoute[route] ?? 0) + 1;
    }
    const methods: Record<string, number> = {};
    for (const msg of socket.messages) methods[String(msg.method)] = (methods[String(msg.method)] ?? 0) + 1;
    send({
      stats: {
        socketsOpen: socket.open,
        socketsOpened: socket.opened,
        socketMethods: methods,
        polls: stub.healthChecks.length,
        requests: byRoute,
        polledAt: Object.fromEntries(polledAt),
      },
    });
  }
});
send({ ready: port });
