// A share of bench/ws.mjs's subscribers, in its own process (so that the client
// side's file descriptors are not the target's): forked with IPC, it opens
// sockets with `ws`, subscribes each to newHeads, and reports each block once
// every one of its sockets has it: the first and the last receipt, in µs of
// CLOCK_MONOTONIC (process.hrtime on Linux: one clock for every process on the
// host), and the block's hash. Every notification is checked: the socket's own
// subscription id, each socket's blocks in ascending order without a gap, and
// one hash per height across sockets; anything else is counted as an error.
//
// Messages from the parent: {open: {url, count, headers}} -> {opened, failed, error}
// then, per block, {block, hash, first, last}; {close: true} -> {closed, errors}.
import WebSocket from 'ws';

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

function openOne(url, headers) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    let sub = null;
    let lastN = -1;
    ws.on('open', () => ws.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}'));
    ws.on('message', (data) => {
      const t = now();
      const m = JSON.parse(data.toString());
      if (sub === null) {
        if (m.id !== 1 || typeof m.result !== 'string') {
          fail(`subscribe answered ${data.toString().slice(0, 200)}`);
          ws.terminate();
          return resolve(false);
        }
        sub = m.result;
        sockets.push(ws);
        return resolve(true);
      }
      if (m.method !== 'eth_subscription' || m.params?.subscription !== sub) return fail(`not our notification: ${data.toString().slice(0, 200)}`);
      const n = Number.parseInt(m.params.result.number, 16);
      const hash = m.params.result.hash;
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
    const { url, count, headers } = m.open;
    let opened = 0;
    let next = 0;
    // 100 handshakes in flight at most.
    await Promise.all(
      Array.from({ length: Math.min(100, count) }, async () => {
        while (next < count) {
          next++;
          if (await openOne(url, headers)) opened++;
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
