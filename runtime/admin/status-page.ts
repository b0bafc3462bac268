// The admin listener's status page (GET /): one static HTML document with its
// style and script inline, so the server file carries it and serves it with no
// file read and no network access (no CDN, no fonts). Everything it shows it
// fetches from /status.json every 2 s and puts into the page with textContent
// and setAttribute only (never innerHTML), so names from the manifest cannot
// inject markup. The charts are a few SVG polylines; no library.
import { createHash } from 'node:crypto';

const STYLE = `
:root { color-scheme: light dark; --fg: #1b1f24; --mute: #667; --line: #d8dce2; --bg: #fff; --up: #1a7f37; --bad: #cf222e; --warn: #9a6700; --plot: #0969da; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --mute: #8b949e; --line: #30363d; --bg: #0d1117; --up: #3fb950; --bad: #f85149; --warn: #d29922; --plot: #58a6ff; } }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 20px; font: 13px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 8px 20px; margin-bottom: 12px; }
h1 { font-size: 18px; margin: 0; }
h2 { font-size: 14px; margin: 18px 0 6px; }
dl { display: flex; gap: 4px 12px; margin: 0; flex-wrap: wrap; }
dt { color: var(--mute); }
dd { margin: 0; font-family: ui-monospace, monospace; }
#updated { color: var(--mute); margin: 0; }
#updated.stale { color: var(--bad); font-weight: 600; }
table { border-collapse: collapse; }
#chains { width: 100%; }
#keys { min-width: 360px; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--mute); font-weight: 500; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.chain td { border-top: 2px solid var(--line); font-weight: 600; }
tr.upstream td:first-child { padding-left: 24px; font-family: ui-monospace, monospace; }
.state { display: inline-block; min-width: 44px; padding: 0 6px; border-radius: 9px; text-align: center; font-weight: 600; color: #fff; background: var(--bad); }
.state.up, .badge.ready { background: var(--up); }
.state.unknown { background: var(--warn); }
.badge { padding: 1px 8px; border-radius: 9px; color: #fff; background: var(--bad); font-weight: 600; }
svg { display: block; width: 240px; height: 30px; border-left: 1px solid var(--line); }
svg polyline { fill: none; stroke: var(--plot); stroke-width: 1.2; vector-effect: non-scaling-stroke; }
svg polygon { fill: var(--plot); opacity: 0.25; }
svg.err polyline { stroke: var(--bad); }
svg.err polygon { fill: var(--bad); }
svg line { stroke: var(--line); vector-effect: non-scaling-stroke; }
.chart { display: flex; align-items: center; gap: 6px; }
.chart span { color: var(--mute); font-size: 11px; min-width: 60px; }
`;

const SCRIPT = `
'use strict';
const WINDOW = 15 * 60 * 1000, W = 180, H = 30, SVG = 'http://www.w3.org/2000/svg';
const $ = (id) => document.getElementById(id);
function el(tag, cls, text, field) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (field) e.setAttribute('data-field', field);
  return e;
}
const dash = (v, f) => (v === null || v === undefined ? '–' : f(v));
const num = (v) => dash(v, (x) => x.toLocaleString('en'));
const ms = (v) => dash(v, (x) => (x < 10 ? x.toFixed(1) : Math.round(x)) + ' ms');
const pct = (v) => dash(v, (x) => (x * 100).toFixed(x > 0 && x < 0.01 ? 2 : 1) + '%');
const rate = (v) => dash(v, (x) => (x < 10 ? x.toFixed(2) : Math.round(x)) + '/s');
function state(s) {
  const e = el('span', 'state ' + (s === 'up' ? 'up' : s === 'unknown' ? 'unknown' : 'bad'), s, 'state');
  e.setAttribute('data-state', s);
  return e;
}
// An upstream's state, and while it is throttled, until when it takes no client traffic (and how many throttles in a row).
function upState(u) {
  const box = el('span');
  box.append(state(u.state));
  if (u.throttledUntil !== null && u.throttledUntil !== undefined) {
    const run = u.throttleRun > 1 ? ' (' + u.throttleRun + ' in a row)' : '';
    box.append(el('span', 'state bad', 'throttled until ' + new Date(u.throttledUntil).toLocaleTimeString() + run, 'throttledUntil'));
  }
  return box;
}
// Where selection by score ranks an upstream, and the window's figures that put it there (upstream-score.ts);
// one only probed is told the band it is out of: the best score of its role (primaries, or fallbacks) among those up.
function why(u, all) {
  if (u.rank === null || u.rank === undefined) return '–';
  const w = u.window;
  const head = '#' + u.rank + (u.preferred ? ' preferred' : ' probed only');
  if (w === null || u.score === null) return head + ' · no calls yet';
  const f = (x) => (x < 10 ? x.toFixed(1) : String(Math.round(x)));
  let best = null;
  for (const o of all) if (o.role === u.role && o.state === 'up' && o.score !== null && (best === null || o.score < best)) best = o.score;
  const band = u.preferred || best === null ? '' : ' · out of the band: over 1.5 × the best score (' + f(best) + ') to come in, 2 × to stay';
  return head + ' · score ' + f(u.score) + ' = ' + f(Math.max(5, w.latencyMs)) + ' ms' + (w.latencyMs < 5 ? ' (at least 5)' : '') + ' × (1 + 20 × ' + pct(w.errorRate) + ' errors + 20 × ' + pct(w.throttleRate) + ' throttled)' +
    (w.lag !== null && w.lag > 1 ? ' × (1 + 0.5 × ' + (w.lag - 1) + ' blocks behind)' : '') + ' · over ' + w.calls + ' calls in ' + w.seconds + ' s' + band;
}
// Each value covers its step (t - step, t]: drawn as a flat segment over it, filled down to zero.
function chart(t, step, values, now, cls, label, f) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('class', cls);
  let max = 0;
  for (const v of values) if (v !== null && v > max) max = v;
  const top = max > 0 ? max : 1;
  const base = document.createElementNS(SVG, 'line');
  for (const [k, v] of [['x1', 0], ['x2', W], ['y1', H - 0.5], ['y2', H - 0.5]]) base.setAttribute(k, v);
  svg.append(base);
  const x = (ms) => Math.max(0, W - ((now - ms) / WINDOW) * W).toFixed(1);
  let pts = [];
  const flush = () => {
    if (pts.length) {
      const area = document.createElementNS(SVG, 'polygon');
      area.setAttribute('points', pts[0].split(',')[0] + ',' + H + ' ' + pts.join(' ') + ' ' + pts[pts.length - 1].split(',')[0] + ',' + H);
      const line = document.createElementNS(SVG, 'polyline');
      line.setAttribute('points', pts.join(' '));
      svg.append(area, line);
    }
    pts = [];
  };
  values.forEach((v, i) => {
    if (v === null) return flush();
    const y = (H - 1 - (v / top) * (H - 2)).toFixed(1);
    pts.push(x(t[i] - step) + ',' + y, x(t[i]) + ',' + y);
  });
  flush();
  const title = document.createElementNS(SVG, 'title');
  title.textContent = label + ', last 15 min; peak ' + f(max);
  svg.append(title);
  const box = el('div', 'chart');
  box.append(svg, el('span', '', 'peak ' + f(max)));
  return box;
}
function row(cls, cells) {
  const tr = el('tr', cls);
  for (const c of cells) {
    const td = el('td', c.n ? 'n' : '');
    if (c.node) td.append(c.node);
    else td.append(el('span', '', c.text, c.field));
    tr.append(td);
  }
  return tr;
}
function render(d) {
  const status = $('status');
  status.textContent = d.status;
  status.className = 'badge ' + d.status;
  $('version').textContent = d.build.version;
  $('manifest').textContent = d.build.manifest;
  $('sha').textContent = d.build.manifestSha256;
  // Each Redis-backed store and its state (none without Redis).
  const redis = $('redis');
  redis.replaceChildren();
  for (const [part, s] of Object.entries(d.redis)) {
    const e = el('span', '', part + ' ');
    e.setAttribute('data-redis', part);
    e.append(state(s));
    redis.append(e, ' ');
  }
  if (redis.childNodes.length === 0) redis.textContent = 'not used';
  const table = $('chains');
  for (const b of [...table.tBodies]) b.remove();
  for (const c of d.chains) {
    const body = el('tbody');
    body.setAttribute('data-chain', c.path);
    body.setAttribute('data-listener', c.listener);
    body.append(row('chain', [
      { text: c.path + ' (' + c.listener + ')', field: 'chain' }, { text: c.interface, field: 'interface' }, { node: state(c.state) },
      { text: c.pool ? 'tip ' + num(c.pool.tip) : '', field: 'tip', n: 1 },
      { text: c.websocket ? 'sockets ' + num(c.websocket.connections) : '', field: 'sockets', n: 1 }, {}, {},
      { text: c.pool ? 'hedges ' + num(c.pool.hedges.sent) + ', won ' + num(c.pool.hedges.won) : '', field: 'hedges', n: 1 },
      { text: rate(c.rps), field: 'rps', n: 1 }, { text: pct(c.errorRate), field: 'errorRate', n: 1 },
      { node: chart(d.chart.t, d.chart.stepMs, c.chart.rps, d.now, 'rps', 'requests per second', rate) },
      { node: chart(d.chart.t, d.chart.stepMs, c.chart.errorRate, d.now, 'err', 'error rate (5xx)', pct) },
      { text: c.selection === 'weighted' ? 'weighted round-robin' : 'by score', field: 'selection' }, {},
    ]));
    for (const u of c.upstreams) {
      const tr = row('upstream', [
        { text: u.name, field: 'name' }, { text: u.role, field: 'role' }, { node: upState(u) },
        { text: num(u.head), field: 'head', n: 1 }, { text: num(u.lag), field: 'lag', n: 1 },
        { text: ms(u.p50Ms), field: 'p50', n: 1 }, { text: ms(u.p99Ms), field: 'p99', n: 1 },
        { text: pct(u.failedShare), field: 'failedShare', n: 1 }, { text: num(u.attempts), field: 'attempts', n: 1 }, {}, {}, {},
        { text: why(u, c.upstreams), field: 'rank' }, { text: rate(u.pollsPerSecond), field: 'polls', n: 1 },
      ]);
      tr.setAttribute('data-upstream', u.name);
      body.append(tr);
    }
    table.append(body);
  }
  $('day').textContent = d.topKeys.day;
  const keys = $('keys').tBodies[0];
  keys.replaceChildren();
  d.topKeys.keys.forEach((k, i) => {
    const tr = row('', [{ text: i + 1, n: 1 }, { text: k.id, field: 'id' }, { text: num(k.credits), field: 'credits', n: 1 }, { text: num(k.calls), field: 'calls', n: 1 }]);
    tr.setAttribute('data-key', k.id);
    keys.append(tr);
  });
  if (d.topKeys.keys.length === 0) keys.append(row('', [{ text: 'no calls with a key today' }]));
  const u = $('updated');
  u.textContent = 'updated ' + new Date(d.now).toLocaleTimeString() + ' · figures over the last ' + Math.round(d.windowSeconds) + ' s · up ' + d.uptimeSeconds + ' s';
  u.className = '';
}
function poll() {
  fetch('status.json', { cache: 'no-store' })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error('HTTP ' + r.status))))
    .then(render, (err) => {
      const u = $('updated');
      u.textContent = 'stale: cannot read status.json (' + err.message + ')';
      u.className = 'stale';
    })
    .finally(() => setTimeout(poll, 2000));
}
poll();
`;

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gateway status</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>Gateway status</h1>
<span id="status" class="badge">loading</span>
<dl>
<dt>version</dt><dd id="version"></dd>
<dt>manifest</dt><dd id="manifest"></dd>
<dt>sha256</dt><dd id="sha"></dd>
<dt>Redis</dt><dd id="redis"></dd>
</dl>
<p id="updated">loading…</p>
</header>
<main>
<h2>Chains and upstreams</h2>
<table id="chains">
<thead><tr><th>Chain / upstream</th><th>Interface / role</th><th>State</th><th class="n">Head</th><th class="n">Lag</th><th class="n">p50 (1 min)</th><th class="n">p99 (1 min)</th><th class="n">Failed (1 min)</th><th class="n">Req/s · attempts (1 min)</th><th class="n">Errors (1 min)</th><th>Requests/s, 15 min</th><th>Error rate, 15 min</th><th>Rank · score (why)</th><th class="n">Polls/s</th></tr></thead>
</table>
<h2>Top keys by credits today (<span id="day"></span> UTC, this process)</h2>
<table id="keys">
<thead><tr><th class="n">#</th><th>Key id</th><th class="n">Credits</th><th class="n">Calls</th></tr></thead>
<tbody></tbody>
</table>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;

const sha = (s: string): string => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;

/** The page and its headers, made on first use: nothing is spent on it until someone asks. */
let page: { readonly body: Buffer; readonly headers: readonly string[] } | null = null;

export function statusPage(): { readonly body: Buffer; readonly headers: readonly string[] } {
  if (page === null) {
    const body = Buffer.from(HTML);
    // Only this page's own script and style run; it talks to its own origin only.
    const csp = `default-src 'none'; script-src ${sha(SCRIPT)}; style-src ${sha(STYLE)}; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
    page = {
      body,
      headers: ['content-type', 'text/html; charset=utf-8', 'content-length', String(body.length), 'content-security-policy', csp, 'cache-control', 'no-cache', 'x-content-type-options', 'nosniff'],
    };
  }
  return page;
}
