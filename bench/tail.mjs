// `TAIL=1 npm run bench:mix`: issue 33's tail-latency scenario. bench:mix's node and mix (bench/mix.mjs
// hands over its anvil set-up, seeded bodies, background sender, process handling and load generators),
// with three upstreams in front of that one anvil instead of one, one of which answers 5% of its calls
// 200 ms late (bench/tail-proxy.mjs: every 20th call it is sent, health checks aside, so that the gateway
// keeps it in its pool). ~1.7% of the calls that reach a node are then slow, so a p99 without hedging is
// ~200 ms. Targets, each on its own three ports of that proxy, in one run, interleaved:
//   - gateway-hedge-<afterMs>: the gateway (bench/gateway.tail.yaml) with `hedge: { afterMs }`, one
//     target per value of TAIL_HEDGE (default "p95 50": the pool's own 95th percentile, and 50 ms);
//   - gateway: the same manifest without `hedge`;
//   - nginx: ../shared/bench's nginx+njs peer, round-robin over the three (its config with three servers).
// The gateways run without their cache (CACHE=1 keeps it): a cache answers repeated calls from memory and
// hides how late the upstreams are.
//
// First RUNS saturation rounds (wrk, as bench:mix), which set the rate; then RATE_RUNS rounds at RATE (default
// 0.5) times the slowest target's median ok req/s (or TAIL_RPS req/s), sent open-loop by bench/open-loop.mjs, so
// that p99 measures the upstreams' lateness, not a queue (without its cache the gateway serves fewer req/s than
// nginx+njs: a share of nginx+njs's max would overload it). Per round: p50, p99 and every answer checked (a
// non-200 status or an "error" member is an error); the hedges sent, won and capped in that round (the gateway's
// /metrics, gateway_pool_hedges_total) over the requests sent in it; the calls each upstream was sent and the slow
// one held.
// The issue's targets: the hedged gateway's p99 at most a third of nginx+njs's (per round), with hedges at most
// 10% of requests.
//
//   TAIL=1 npm run bench:mix                                   # RUNS=3 DURATION=10, RATE=0.5 RATE_RUNS=3 RATE_DURATION=20
//   TAIL=1 TAIL_HEDGE=p95 TAIL_RPS=3600 RUNS=1 npm run bench:mix   # one hedged gateway, at 3,600 req/s
//
// Knobs of its own: TAIL_HEDGE="p95 50" (afterMs values, one hedged gateway each, four at most) TAIL_SLOW_MS=200
// TAIL_SLOW_EVERY=20 TAIL_RPS (a fixed rate instead of RATE's); bench:mix's RUNS DURATION WARMUP CONNS RATE RATE_RUNS
// RATE_DURATION RATE_CONNS SEED BODIES PIN PROXY_CPU LOAD_CPU BASE_PORT QUIET_* GW_NODE_ARGS OUT_DIR apply (not TARGETS,
// HIT, CLIENT_BATCH, BATCH).
// Ports: BASE_PORT (anvil) and +1 (the proxy's counts), +20.. (the proxy's listeners), +40.. (targets), +50.. (admin).
// Results: tail.tsv, report.md, meta.txt, logs/ in OUT_DIR.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { resolveLine } from './mix-bodies.mjs';

const UPSTREAMS = ['a', 'b', 'c'];
/** The upstream that answers late now and then. */
const SLOW = 'c';

/**
 * Runs the scenario with what bench/mix.mjs hands over (`h`): its knobs (already defaulted and checked),
 * its helpers, and setters for the run directory and the background sender (so that its clean-up on exit
 * and Ctrl-C covers them).
 */
export async function runTail(h) {
  const env = process.env;
  const die = (msg) => {
    throw new Error(`TAIL=1: ${msg}`);
  };
  if ((env.HIT ?? '0') !== '0' || Number(env.CLIENT_BATCH ?? 1) > 1 || env.BATCH !== undefined) die('HIT, CLIENT_BATCH and BATCH do not apply');
  const hedges = (env.TAIL_HEDGE ?? 'p95 50').split(/\s+/).filter(Boolean);
  if (hedges.length > 4) die('TAIL_HEDGE: four hedged gateways at most (six targets fit the ports)');
  for (const a of hedges) if (a !== 'p95' && !/^[1-9][0-9]*$/.test(a)) die(`TAIL_HEDGE holds afterMs values: p95 or a positive number of ms, not "${a}"`);
  const SLOW_MS = Number(env.TAIL_SLOW_MS ?? 200);
  const SLOW_EVERY = Number(env.TAIL_SLOW_EVERY ?? 20);
  if (!(SLOW_MS > 0) || !(Number.isInteger(SLOW_EVERY) && SLOW_EVERY >= 2)) die('TAIL_SLOW_MS must be positive and TAIL_SLOW_EVERY an integer of at least 2');
  const CACHE = env.CACHE === '1';
  const RATE = h.RATE ?? 0.5;
  const FIXED_RPS = env.TAIL_RPS === undefined ? null : Number(env.TAIL_RPS);
  if (FIXED_RPS !== null && !(Number.isInteger(FIXED_RPS) && FIXED_RPS > 0)) die('TAIL_RPS must be a positive integer (req/s)');
  const RATE_DURATION = env.RATE_DURATION === undefined ? 20 : h.RATE_DURATION;
  const { RUNS, DURATION, WARMUP, RATE_RUNS, LOAD_CPU, PROXY_CPU, PORTS, OUT_DIR, WORK, ROOT, log } = h;

  // ---- targets and their ports ----
  const base = PORTS.anvil;
  const gateways = [...hedges.map((a) => ({ name: `gateway-hedge-${a === 'p95' ? 'p95' : `${a}ms`}`, hedge: a })), { name: 'gateway', hedge: null }];
  const targets = [...gateways.map((g) => ({ ...g, kind: 'gateway' })), { name: 'nginx', kind: 'nginx', hedge: null }].map((t, i) => ({
    ...t,
    up: UPSTREAMS.map((_, j) => base + 20 + 3 * i + j),
    port: base + 40 + i,
    admin: t.kind === 'gateway' ? base + 50 + i : null,
  }));
  for (const t of targets) t.url = t.kind === 'gateway' ? `http://127.0.0.1:${t.port}/eth/${h.API_KEY}` : `http://127.0.0.1:${t.port}/eth`;

  h.ensureDeps();
  mkdirSync(join(OUT_DIR, 'logs'), { recursive: true });
  mkdirSync(WORK, { recursive: true });
  const RUN = mkdtempSync('/tmp/tail-bench.');
  h.setRun(RUN);
  chmodSync(RUN, 0o755); // nginx's workers (nobody) read gateway.js here
  for (const p of [PORTS.anvil, PORTS.control, ...targets.flatMap((t) => [...t.up, t.port, ...(t.admin ? [t.admin] : [])])]) {
    if (await h.portOpen(p)) die(`127.0.0.1:${p} is already in use; pick another BASE_PORT`);
  }
  if (h.PIN) execFileSync('taskset', ['-a', '-cp', String(LOAD_CPU), String(process.pid)], { stdio: 'ignore' });

  // ---- the gateways: one build per hedge setting ----
  const manifestPath = join(ROOT, 'bench', 'gateway.tail.yaml');
  const manifest = readFileSync(manifestPath, 'utf8');
  const hedgeBlock = /^[ \t]*# hedge:start\n[\s\S]*?^[ \t]*# hedge:end\n/m;
  const cacheBlock = /^# cache:start\n[\s\S]*?^# cache:end\n/m;
  if (!hedgeBlock.test(manifest) || !cacheBlock.test(manifest)) die(`${manifestPath} has no "# hedge:start/end" or "# cache:start/end" block`);
  for (const g of targets.filter((t) => t.kind === 'gateway')) {
    let text = CACHE ? manifest : manifest.replace(cacheBlock, '');
    text = g.hedge === null ? text.replace(hedgeBlock, '') : text.replace(hedgeBlock, (b) => b.replace(/afterMs: [^ }]+/, `afterMs: ${g.hedge}`));
    const file = join(WORK, `${g.name}.yaml`);
    writeFileSync(file, text);
    g.dist = join(ROOT, 'dist', `tail-${g.name}.mjs`);
    try {
      execFileSync(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', file, '--out', g.dist], { cwd: ROOT, stdio: ['ignore', 2, 2] });
    } catch {
      die(`the gateway did not build from ${file}`);
    }
  }
  log(`gateways built from bench/gateway.tail.yaml (cache ${CACHE ? 'on' : 'off'}; hedge ${hedges.join(', ')} and none)`);

  // ---- the node, the mix, the background sender: bench:mix's ----
  const est = targets.length * (WARMUP + 1 + RUNS * (DURATION + 2) + RATE_RUNS * (RATE_DURATION + 3)) + 30;
  log(`targets ${targets.map((t) => t.name).join(', ')}; about ${Math.ceil(est / 60)} min; results in ${OUT_DIR}`);
  h.startProc('anvil', LOAD_CPU, [h.ANVIL_BIN, '--host', '127.0.0.1', '--port', String(PORTS.anvil), '--chain-id', '1', '--block-time', '2', '--silent']);
  await h.waitPort('anvil', PORTS.anvil, 20);
  const rand = h.rng(`${h.SEED}:addresses`);
  const funded = await h.rpc('eth_accounts');
  const addresses = [...funded];
  while (addresses.length < 2000) addresses.push(`0x${[...Array(20)].map(() => Math.floor(rand() * 256).toString(16).padStart(2, '0')).join('')}`);
  h.shuffle(addresses, rand);
  const chain = await h.setupChain(h.rng(`${h.SEED}:history`), addresses, funded);
  log(`node ready: ${chain.contracts.length} contracts, ${chain.history.length} txs of history, head ${chain.head}`);
  const mixRand = h.rng(`${h.SEED}:mix`);
  const oldTxs = h.shuffle([...chain.history], mixRand);
  const oldBlocks = h.shuffle([...chain.blockHashes], mixRand);
  const lines = h.makeBodies(mixRand, { addresses, contracts: chain.contracts, oldTxs, oldBlocks });
  writeFileSync(join(RUN, 'bodies.txt'), lines.join('\n') + '\n');
  const bodiesSha = createHash('sha256').update(lines.join('\n').replace(/"0x[0-9a-f]{64}"/g, '"H"')).digest('hex').slice(0, 12);
  const tracker = h.track(join(RUN, 'state.txt'), funded, addresses, h.rng(`${h.SEED}:sender`), chain.history);
  h.setTracker(tracker);
  await tracker.ready;

  // ---- the three upstreams of every target ----
  const listen = targets.flatMap((t) => UPSTREAMS.map((u, j) => `${t.name}/${u}:${t.up[j]}`)).join(',');
  h.startProc('counter', LOAD_CPU, [process.execPath, join(ROOT, 'bench', 'tail-proxy.mjs')], {
    env: { ...env, UPSTREAM_URL: `http://127.0.0.1:${PORTS.anvil}/`, LISTEN: listen, SLOW, SLOW_MS: String(SLOW_MS), SLOW_EVERY: String(SLOW_EVERY), CONTROL_PORT: String(PORTS.control) },
  });
  await h.waitPort('counter', PORTS.control, 15);
  const counts = async () => (await fetch(`http://127.0.0.1:${PORTS.control}/counts`)).json();

  const git = (args) => spawnSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).stdout.trim();
  const meta = [
    `node ${process.version}, ${spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim()}, ${cpus().length} CPUs,${(/model name\s*:(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8')) ?? [, ''])[1]}`,
    `${execFileSync(h.ANVIL_BIN, ['--version']).toString().split('\n')[0]} (--block-time 2), bench:mix's mix (sha256 ${bodiesSha}, hashes masked)`,
    `TAIL=1 TAIL_HEDGE='${hedges.join(' ')}'${FIXED_RPS === null ? '' : ` TAIL_RPS=${FIXED_RPS}`} TAIL_SLOW_MS=${SLOW_MS} TAIL_SLOW_EVERY=${SLOW_EVERY} CACHE=${CACHE ? 1 : 0} RUNS=${RUNS} DURATION=${DURATION} WARMUP=${WARMUP} CONNS=${h.CONNS} ` +
      `RATE=${RATE} RATE_RUNS=${RATE_RUNS} RATE_DURATION=${RATE_DURATION} RATE_CONNS=${h.RATE_CONNS} SEED=${h.SEED} PIN=${h.PIN ? 1 : 0} PROXY_CPU=${PROXY_CPU} LOAD_CPU=${LOAD_CPU}`,
    `upstreams a, b, c: three ports of bench/tail-proxy.mjs in front of one anvil; ${SLOW} holds every ${SLOW_EVERY}th call it is sent (health checks aside) ${SLOW_MS} ms`,
    `git ${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain', '--untracked-files=no']) ? ' (modified)' : ''}`,
  ].map((l) => `- ${l}`).join('\n');
  writeFileSync(join(OUT_DIR, 'meta.txt'), meta + '\n');

  // ---- targets up, checked, warmed ----
  const keys = join(WORK, 'keys.yaml');
  writeFileSync(keys, `keys:\n  - id: bench\n    sha256: "${createHash('sha256').update(h.API_KEY).digest('hex')}"\n`);
  const upUrl = (t, j) => `http://127.0.0.1:${t.up[j]}/`;
  const smokes = {};
  for (const t of targets) {
    if (t.kind === 'gateway') {
      const genv = { ...env, GATEWAY_KEYS_FILE: keys, HOST: '127.0.0.1', PORT: String(t.port), ADMIN_PORT: String(t.admin), UPSTREAM_A: upUrl(t, 0), UPSTREAM_B: upUrl(t, 1), UPSTREAM_C: upUrl(t, 2) };
      h.startProc(t.name, PROXY_CPU, [process.execPath, '--no-memory-reducer', ...(env.GW_NODE_ARGS ?? '').split(' ').filter(Boolean), t.dist], { env: genv });
      await h.waitPort(t.name, t.port, 30);
    } else {
      mkdirSync(join(RUN, 'tmp'), { recursive: true });
      mkdirSync(join(RUN, 'conf'), { recursive: true });
      copyFileSync(join(h.BENCH_DIR, 'nginx', 'gateway.njs'), join(RUN, 'gateway.js'));
      chmodSync(join(RUN, 'gateway.js'), 0o644);
      const tmpl = readFileSync(join(h.BENCH_DIR, 'nginx', 'peer.conf.tmpl'), 'utf8');
      const one = 'server 127.0.0.1:@UP_PORT@;';
      if (!tmpl.includes(one)) die(`the nginx peer's config has no "${one}" line to make three of`);
      const conf = tmpl
        .replace(one, t.up.map((p) => `server 127.0.0.1:${p};`).join('\n        '))
        .replaceAll('@RUN@', RUN)
        .replaceAll('@PORT@', String(t.port))
        .replaceAll('@KEY@', h.API_KEY)
        .replaceAll('@CHECK@', 'js_content gw.check;')
        .replaceAll('@LOAD_NJS@', `load_module ${h.NJS_SO};`)
        .replaceAll('@NJS_IMPORT@', `js_import gw from ${RUN}/gateway.js;`);
      writeFileSync(join(RUN, 'conf', 'nginx.conf'), conf);
      h.startProc(t.name, PROXY_CPU, ['nginx', '-p', `${RUN}/`, '-e', join(OUT_DIR, 'logs', 'nginx.early.log'), '-c', join(RUN, 'conf', 'nginx.conf')]);
      await h.waitPort(t.name, t.port, 10);
    }
    // every upstream in the pool before the first call: the gateway's health checks and head polls have run
    if (t.kind === 'gateway') await untilPooled(t);
    smokes[t.name] = await smoke(t, lines.slice(0, 100), tracker.state, h.API_KEY);
    log(`${t.name}: smoke ${smokes[t.name]}`);
    if (WARMUP > 0) await h.runWrk(t.url, WARMUP, join(OUT_DIR, 'logs', 'warmup.log'));
  }

  // ---- measuring ----
  const rows = [];
  const COLS = ['phase', 'round', 'target', 'offered_rps', 'ok_rps', 'p50_us', 'p90_us', 'p99_us', 'max_us', 'requests', 'warm', 'errors', 'nulls', 'sockerr',
    'hedges_sent', 'hedges_won', 'hedges_capped', 'up_a', 'up_b', 'up_c', 'held', 'conns', 'lag_p99_us', 'target_cpu', 'cpu_load', 'other_cpu'];
  writeFileSync(join(OUT_DIR, 'tail.tsv'), COLS.join('\t') + '\n');
  async function measure(t, round, offered) {
    // A hedge budget is 10% of the calls of a sliding minute: a hedged gateway's first slice at the rate waits out
    // the minute of its last saturation slice, whose calls would let it hedge more than 10% of its own.
    if (offered !== null && t.hedge !== null && t.maxEnd !== undefined) {
      const wait = t.maxEnd + 61_000 - Date.now();
      if (wait > 0) log(`${t.name}: waiting ${Math.ceil(wait / 1000)} s, a minute after its last saturation slice (its hedge budget)`);
      if (wait > 0) await new Promise((ok) => setTimeout(ok, wait));
    }
    await h.waitQuiet();
    const [c0, m0] = [await counts(), t.admin ? await hedgeCounts(t) : null];
    const s0 = h.scanProcs();
    const k0 = h.coreTicks();
    const t0 = process.hrtime.bigint();
    const res = offered === null ? await h.runWrk(t.url, DURATION, join(OUT_DIR, 'logs', 'wrk.log')) : await h.runOpenLoop(t.url, offered, RATE_DURATION, join(OUT_DIR, 'logs', 'open-loop.log'));
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = h.cpuSplit(s0, h.scanProcs(), seconds);
    const k1 = h.coreTicks();
    if (offered === null) t.maxEnd = Date.now();
    const [c1, m1] = [await counts(), t.admin ? await hedgeCounts(t) : null];
    if (!res) return log(`${t.name}: no result from the load generator (see logs/)`);
    // calls sent to each upstream (health checks aside), and held by the slow one
    const up = Object.fromEntries(UPSTREAMS.map((u) => {
      const [a, b] = [c0[`${t.name}/${u}`], c1[`${t.name}/${u}`]];
      return [u, b.requests - b.health - (a.requests - a.health)];
    }));
    const conns = UPSTREAMS.reduce((n, u) => n + c1[`${t.name}/${u}`].conns - c0[`${t.name}/${u}`].conns, 0);
    const hd = (k) => (m1 && m0 ? m1[k] - m0[k] : '');
    const row = {
      phase: offered === null ? 'max' : 'rate',
      round,
      target: t.name,
      offered_rps: offered ?? '',
      ok_rps: ((res.requests - res.errors) / res.seconds).toFixed(1),
      p50_us: res.p50_us,
      p90_us: res.p90_us,
      p99_us: res.p99_us,
      max_us: res.max_us,
      requests: res.requests,
      warm: res.warm ?? 0,
      errors: res.errors,
      nulls: res.nulls,
      sockerr: res.err_connect + res.err_read + res.err_write + res.err_timeout,
      hedges_sent: hd('sent'),
      hedges_won: hd('won'),
      hedges_capped: hd('capped'),
      up_a: up.a,
      up_b: up.b,
      up_c: up.c,
      held: c1[`${t.name}/${SLOW}`].held - c0[`${t.name}/${SLOW}`].held,
      conns,
      lag_p99_us: res.lag_p99_us ?? '',
      target_cpu: cpu[t.name] ?? 0,
      cpu_load: Math.round((100 * (k1[1].busy - k0[1].busy)) / Math.max(1, k1[1].total - k0[1].total)),
      other_cpu: cpu.other,
    };
    rows.push(row);
    writeFileSync(join(OUT_DIR, 'tail.tsv'), COLS.map((c) => row[c]).join('\t') + '\n', { flag: 'a' });
    const sent = row.requests + row.warm;
    log(
      `${offered === null ? 'max' : `at ${offered} req/s`} round ${round} ${t.name.padEnd(17)} ${row.ok_rps.padStart(8)} ok req/s  p50 ${fmt(row.p50_us / 1000, 2)} ms  p99 ${fmt(row.p99_us / 1000, 2)} ms  ` +
        `errors ${row.errors}  sockerr ${row.sockerr}  ${t.admin && t.hedge ? `hedges ${row.hedges_sent} (${fmt((100 * row.hedges_sent) / sent, 2)}%) won ${row.hedges_won} capped ${row.hedges_capped}  ` : ''}` +
        `upstream a/b/c ${up.a}/${up.b}/${up.c} held ${row.held} (${fmt((100 * row.held) / sent, 2)}% of requests)  upstream conns opened ${conns}  target-cpu ${row.target_cpu}%  other ${row.other_cpu}%`,
    );
  }

  for (let r = 1; r <= RUNS; r++) for (let i = 0; i < targets.length; i++) await measure(targets[(i + r - 1) % targets.length], r, null);
  // The rate every target sustains: a share of the slowest one's max (without its cache the gateway is that one, not nginx+njs)
  const maxes = targets.map((t) => ({ name: t.name, max: h.median(rows.filter((w) => w.target === t.name).map((w) => Number(w.ok_rps))) }));
  const slowest = maxes.reduce((a, b) => (b.max < a.max ? b : a));
  if (!(slowest.max > 0)) die(`${slowest.name} served nothing in the saturation rounds: no rate to set`);
  const offered = FIXED_RPS ?? Math.round(RATE * slowest.max);
  const rateNote = FIXED_RPS !== null ? `TAIL_RPS=${FIXED_RPS}` : `RATE ${RATE} × the slowest target's max, ${slowest.name}'s ${fmt(slowest.max)}`;
  log(`fixed-rate phase: ${offered} req/s (${rateNote})`);
  for (let r = 1; r <= RATE_RUNS; r++) for (let i = 0; i < targets.length; i++) await measure(targets[(i + r - 1) % targets.length], r, offered);
  tracker.stop();

  const text = report({ rows, targets, offered, rateNote, meta, smokes, RATE_RUNS, RATE_DURATION, RUNS, DURATION, SLOW_MS, SLOW_EVERY, median: h.median, loadCpu: LOAD_CPU });
  writeFileSync(join(OUT_DIR, 'report.md'), text);
  for (const t of targets) await h.stopProc(t.name);
  for (const name of ['counter', 'anvil']) await h.stopProc(name);
  console.log('\n' + text + `\n(written to ${OUT_DIR})`);
}

const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '–');

/** gateway_pool_hedges_total of the chain, by outcome, from the gateway's /metrics. */
async function hedgeCounts(t) {
  const text = await (await fetch(`http://127.0.0.1:${t.admin}/metrics`)).text();
  const out = { sent: 0, won: 0, capped: 0 };
  for (const m of text.matchAll(/^gateway_pool_hedges_total\{([^}]*)\} (\S+)$/gm)) {
    const outcome = /outcome="([^"]+)"/.exec(m[1])?.[1];
    if (outcome in out && /chain="eth"/.test(m[1])) out[outcome] = Number(m[2]);
  }
  return out;
}

/** Waits (30 s at most) until the gateway's three upstreams are up and the pool has a served tip. */
async function untilPooled(t) {
  const end = Date.now() + 30_000;
  let text = '';
  while (Date.now() < end) {
    text = await (await fetch(`http://127.0.0.1:${t.admin}/metrics`)).text();
    const up = [...text.matchAll(/^gateway_upstream_up\{[^}]*chain="eth"[^}]*\} 1$/gm)].length;
    const tip = /^gateway_pool_served_tip\{[^}]*\} (\S+)$/m.exec(text);
    if (up === 3 && tip && Number(tip[1]) >= 0) return;
    await new Promise((ok) => setTimeout(ok, 200));
  }
  throw new Error(`${t.name}: its three upstreams were not all up with a served tip within 30 s`);
}

/** Each of the sample bodies once: 200, a JSON-RPC result, the request's id. "ok n/n" or what went wrong first. */
async function smoke(t, lines, state, apiKey) {
  let good = 0;
  let first = '';
  for (const line of lines) {
    const req = JSON.parse(resolveLine(line, state));
    let why = '';
    try {
      const r = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey }, body: JSON.stringify(req) });
      const body = await r.text();
      let j = null;
      try {
        j = JSON.parse(body);
      } catch {}
      if (r.status !== 200) why = `HTTP ${r.status} ${body.slice(0, 120)}`;
      else if (!j || j.jsonrpc !== '2.0' || !('result' in j)) why = `not a JSON-RPC result: ${body.slice(0, 120)}`;
      else if (j.id !== req.id) why = `id ${JSON.stringify(j.id)} for ${JSON.stringify(req.id)}`;
    } catch (err) {
      why = err.message;
    }
    if (why === '') good++;
    else if (first === '') first = `${req.method}: ${why}`;
  }
  return good === lines.length ? `ok ${good}/${lines.length}` : `**${lines.length - good} of ${lines.length} wrong**: ${first.replaceAll('|', '\\|')}`;
}

function report({ rows, targets, offered, rateNote, meta, smokes, RATE_RUNS, RATE_DURATION, RUNS, DURATION, SLOW_MS, SLOW_EVERY, median, loadCpu }) {
  const ms = (us) => fmt(us / 1000, 2);
  const pct = (a, b) => (b > 0 ? `${fmt((100 * a) / b, 2)}%` : '–');
  const of = (phase, t) => rows.filter((r) => r.phase === phase && r.target === t.name);
  const maxLines = ['| target | ok req/s (median) | p50 ms | p99 ms | error answers | socket errors | smoke |', '|---|---:|---:|---:|---:|---:|---|'];
  for (const t of targets) {
    const rs = of('max', t);
    const med = (c) => median(rs.map((r) => Number(r[c])));
    maxLines.push(`| ${t.name} | ${fmt(med('ok_rps'))} | ${ms(med('p50_us'))} | ${ms(med('p99_us'))} | ${rs.reduce((a, r) => a + r.errors, 0)} | ${rs.reduce((a, r) => a + r.sockerr, 0)} | ${smokes[t.name]} |`);
  }
  const lines = [
    '| target | ok req/s | p50 ms | p99 ms (median) | p99 min–max | max ms | error answers | socket errors | hedges sent ÷ requests | hedges won / capped | hedges wanted (sent + capped) ÷ requests | calls to a / b / c | held by c ÷ requests | connections opened to a, b, c | target CPU% | load core % | other CPU% (max) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const summary = {};
  for (const t of targets) {
    const rs = of('rate', t);
    if (rs.length === 0) continue;
    const sum = (c) => rs.reduce((a, r) => a + Number(r[c] || 0), 0);
    const med = (c) => median(rs.map((r) => Number(r[c])));
    const sent = sum('requests') + sum('warm');
    const p99s = rs.map((r) => Number(r.p99_us));
    summary[t.name] = { hedgeShare: t.admin ? sum('hedges_sent') / sent : null, errors: sum('errors') + sum('sockerr') };
    lines.push(
      `| ${t.name} | ${fmt(med('ok_rps'))} | ${ms(med('p50_us'))} | ${ms(med('p99_us'))} | ${ms(Math.min(...p99s))}–${ms(Math.max(...p99s))} | ${ms(med('max_us'))} | ${sum('errors')} | ${sum('sockerr')} | ` +
        `${t.admin ? `${pct(sum('hedges_sent'), sent)} (${sum('hedges_sent')})` : '–'} | ${t.admin ? `${sum('hedges_won')} / ${sum('hedges_capped')}` : '–'} | ` +
        `${t.admin ? pct(sum('hedges_sent') + sum('hedges_capped'), sent) : '–'} | ${sum('up_a')} / ${sum('up_b')} / ${sum('up_c')} | ` +
        `${pct(sum('held'), sent)} (${sum('held')}) | ${sum('conns')} | ${fmt(med('target_cpu'))} | ${fmt(med('cpu_load'))} | ${fmt(Math.max(...rs.map((r) => Number(r.other_cpu))))} |`,
    );
  }
  /** Per-round ratios of a's column over b's, in the fixed-rate rounds. */
  const perRound = (a, b, col) => {
    const out = [];
    for (let r = 1; r <= RATE_RUNS; r++) {
      const x = rows.find((w) => w.phase === 'rate' && w.round === r && w.target === a);
      const y = rows.find((w) => w.phase === 'rate' && w.round === r && w.target === b);
      if (x && y && Number(y[col]) > 0) out.push(Number(x[col]) / Number(y[col]));
    }
    return out;
  };
  const ratioText = (xs) => (xs.length ? `${fmt(median(xs), 3)} (${fmt(Math.min(...xs), 3)}–${fmt(Math.max(...xs), 3)})` : '–');
  const verdict = (v) => (v === null ? 'not measured' : v ? 'met' : '**missed**');
  const check = ['| target | goal | measured | met? |', '|---|---|---:|---|'];
  for (const t of targets.filter((x) => x.hedge !== null)) {
    const p = perRound(t.name, 'nginx', 'p99_us');
    check.push(`| ${t.name} p99 ÷ nginx+njs p99, per round | ≤ 0.333 | ${ratioText(p)} | ${verdict(p.length ? median(p) <= 1 / 3 : null)} |`);
    const s = summary[t.name]?.hedgeShare ?? null;
    check.push(`| ${t.name} hedges sent ÷ requests | ≤ 10% | ${s === null ? '–' : `${fmt(100 * s, 2)}%`} | ${verdict(s === null ? null : s <= 0.1)} |`);
  }
  const plain = perRound('gateway', 'nginx', 'p99_us');
  check.push(`| gateway (no hedge) p99 ÷ nginx+njs p99, per round | (information) | ${ratioText(plain)} | – |`);
  const errors = targets.reduce((a, t) => a + (summary[t.name]?.errors ?? 0), 0);
  check.push(`| error answers and socket errors, every target (an error is never a result) | 0 | ${errors} | ${verdict(errors === 0)} |`);
  return (
    `# bench:mix TAIL=1 (issue 33: tail latency) ${new Date().toISOString()}\n\n${meta}\n\n` +
    `Three upstreams per target in front of one anvil; c holds every ${SLOW_EVERY}th call it is sent ${SLOW_MS} ms (health checks aside), ` +
    `so ~${fmt(100 / SLOW_EVERY / 3, 2)}% of the calls that reach a node are slow when the three share them evenly.\n\n` +
    `Saturation (wrk, ${RUNS} round(s) of ${DURATION} s; sets the rate):\n\n${maxLines.join('\n')}\n\n` +
    `At a fixed offered rate: ${fmt(offered)} req/s (${rateNote}), ${RATE_RUNS} round(s) of ${RATE_DURATION} s per target, ` +
    `interleaved, sent open-loop by bench/open-loop.mjs on core ${loadCpu} (latency from each request's scheduled send; after 1 s at the rate, not recorded ` +
    `but counted in the hedges and calls). p50, p99, max: medians over rounds; counts pool the rounds. Requests: the answers recorded and the warm-up second's.\n\n` +
    `${lines.join('\n')}\n\nThe issue's targets:\n\n${check.join('\n')}\n`
  );
}
