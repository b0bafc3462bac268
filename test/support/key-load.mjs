// Load from a process of its own (issue 44's fault tests and bench/redis-faults.mjs):
// keep-alive POSTs of one JSON-RPC call, spread over targets (a gateway's URL
// and a key each), paced to `rps` in all, until stdin closes or `durationMs`
// passes. Every answer is checked: a 200 must be `answer` to the byte; a 503
// with -32045 (the key store cannot be asked) is counted as refused; anything
// else is bad. Prints its figures as one JSON line when it stops.
//
//   node key-load.mjs '{"targets":[{"url":"http://...","key":"..."}],"body":"...","answer":"...","rps":200,"concurrency":4}'
//
// Options: durationMs (else until stdin closes), samples: true (each answer's [end time, ms] per target).
import http from 'node:http';

const o = JSON.parse(process.argv[2]);
const agent = new http.Agent({ keepAlive: true, maxSockets: o.concurrency * 2 });
const n = o.targets.length;
const out = {
  requests: 0,
  ok: new Array(n).fill(0),
  refused: new Array(n).fill(0),
  /** Answers that are neither: at most 100 kept, all counted. */
  badCount: 0,
  bad: [],
  /** When each refusal came (Date.now()), at most 10,000. */
  refusedAt: [],
  samples: o.samples ? o.targets.map(() => []) : undefined,
};
let stop = false;
if (o.durationMs) setTimeout(() => (stop = true), o.durationMs);
else process.stdin.on('end', () => (stop = true)).resume();

function one(i) {
  const t = o.targets[i];
  const t0 = performance.now();
  return new Promise((done) => {
    const req = http.request(t.url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-api-key': t.key } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        out.requests++;
        if (out.samples) out.samples[i].push([Date.now(), Math.round((performance.now() - t0) * 100) / 100]);
        if (res.statusCode === 200 && body === o.answer) out.ok[i]++;
        else if (res.statusCode === 503 && body.includes('-32045')) {
          out.refused[i]++;
          if (out.refusedAt.length < 10_000) out.refusedAt.push(Date.now());
        } else {
          out.badCount++;
          if (out.bad.length < 100) out.bad.push({ at: Date.now(), target: i, status: res.statusCode, body: body.slice(0, 200) });
        }
        done();
      });
    });
    req.on('error', (e) => {
      out.requests++;
      out.badCount++;
      if (out.bad.length < 100) out.bad.push({ at: Date.now(), target: i, status: 0, body: e.message });
      done();
    });
    req.end(o.body);
  });
}

// Each worker sends one request at a time, at most one per `every` ms.
const every = (o.concurrency * 1000) / o.rps;
async function worker(w) {
  let next = performance.now();
  for (let k = w; !stop; k += o.concurrency) {
    await one(k % n);
    next += every;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    else next = performance.now();
  }
}

await Promise.all(Array.from({ length: o.concurrency }, (_, w) => worker(w)));
agent.destroy();
process.stdout.write(JSON.stringify(out) + '\n');
