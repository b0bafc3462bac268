// A share of bench/ws.mjs's (or bench/ws-blockbook.mjs's) subscribers, in its own
// process (so that the client side's file descriptors are not the target's):
// forked with IPC, it opens sockets with `ws`, subscribes each to new blocks
// (EVM's newHeads, or Blockbook's subscribeNewBlock), and reports each block once
// every one of its sockets has it: the first and the last receipt, in µs of
// CLOCK_MONOTONIC (process.hrtime on Linux: one clock for every process on the
// host), and the block's hash. Every notification is checked: the socket's own
// subscription id, each socket's blocks in ascending order without a gap, and
// one hash per height across sockets; anything else is counted as an error.
//
// Messages from the parent: {open: {url, count, headers, protocol}} -> {opened,
// failed, error} then, per block, {block, hash, first, last}; {close: true} ->
// {closed, errors}.
import WebSocket from 'ws';

/**
 * How a socket subscribes to new blocks and reads them, by protocol:
 * `subscribed` is the subscription's id from its answer (or null: not the
 * answer), `block` a notification's {n, hash} under that id (or null: not one).
 */
const PROTOCOLS = {
  evm: {
    subscribe: '{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}',
    subscribed: (m) => (m.id === 1 && typeof m.result === 'string' ? m.result : null),
    block: (m, sub) => (m.method === 'eth_subscription' && m.params?.subscription === sub ? { n: Number.parseInt(m.params.result.number, 16), hash: m.params.result.hash } : null),
  },
  // trezor/blockbook server/websocket.go: a notification reuses the subscribe message's id.
  blockbook: {
    subscribe: '{"id":"1","method":"subscribeNewBlock","params":{}}',
    subscribed: (m) => (m.id === '1' && m.data?.subscribed === true ? '1' : null),
    block: (m, sub) => (m.id === sub && Number.isSafeInteger(m.data?.height) && typeof m.data.hash === 'string' ? { n: m.data.height, hash: m.data.hash } : null),
  },
};

const now = () => Number(process.hrtime.bigint() / 1000n);
const sockets = [];
/** Sockets subscribed: a block is reported when this many have it. */
let expected = 0;
const blocks = new Map(); // number -> { got, first, last, hash }
let errors = 0;
const samples = [];
const fail = (what) => {
  errors++;
  if (samples.length < 5) samples.push(what);
};

function openOne(url, headers, protocol) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    let sub = null;
    let lastN = -1;
    ws.on('open', () => ws.send(protocol.subscribe));
    ws.on('message', (data) => {
      const t = now();
      const m = JSON.parse(data.toString());
      if (sub === null) {
        sub = protocol.subscribed(m);
        if (sub === null) {
          fail(`subscribe answered ${data.toString().slice(0, 200)}`);
          ws.terminate();
          return resolve(false);
        }
        sockets.push(ws);
        return resolve(true);
      }
      const got = protocol.block(m, sub);
      if (got === null) return fail(`not our notification: ${data.toString().slice(0, 200)}`);
      const { n, hash } = got;
      if (lastN !== -1 && n !== lastN + 1) fail(`block ${n} after ${lastN}`);
      lastN = n;
      let b = blocks.get(n);
      if (b === undefined) blocks.set(n, (b = { got: 0, first: t, last: t, hash }));
      else if (b.hash !== hash) fail(`block ${n}: hash ${hash} and ${b.hash}`);
      b.got++;
      b.last = t;
      if (b.got === expected) process.send({ block: n, hash, first: b.first, last: b.last });
    });
    ws.on('error', (err) => {
      if (sub === null) {
        fail(`open: ${err.message}`);
        resolve(false);
      }
    });
    ws.on('close', (code) => {
      if (sub === null) return resolve(false);
      if (!closing) fail(`closed by the server: ${code}`);
    });
  });
}

let closing = false;
process.on('message', async (m) => {
  if (m.open) {
    const { url, count, headers, protocol = 'evm' } = m.open;
    let opened = 0;
    let next = 0;
    // 100 handshakes in flight at most.
    await Promise.all(
      Array.from({ length: Math.min(100, count) }, async () => {
        while (next < count) {
          next++;
          if (await openOne(url, headers, PROTOCOLS[protocol])) opened++;
        }
      }),
    );
    expected = opened;
    process.send({ opened, failed: count - opened, error: samples[0] ?? null });
  } else if (m.close) {
    closing = true;
    await Promise.all(
      sockets.map(
        (ws) =>
          new Promise((r) => {
            const t = setTimeout(() => (ws.terminate(), r()), 5000);
            ws.once('close', () => (clearTimeout(t), r()));
            ws.close(1000);
          }),
      ),
    );
    process.send({ closed: sockets.length, errors, samples }, () => process.exit(0));
  }
});
