#!/usr/bin/env node
// The targets of issue 5, checked against what one `npm run bench` measured.
//
//   node bench/targets.mjs bench/results/<run>/results.tsv [more.tsv ...]
//
// Every figure is a median of per-round ratios: the gateway's req/s (or p99)
// over the peer's in the same round of the same run, so slow drift of a shared
// machine cancels. Several files are pooled (rounds pair within a file).
// `npm run bench` prints the same table after the harness's report, with the
// gateway's RSS per scenario, and writes both beside results.tsv as targets.md.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** What issue 5 asks of a single gateway process pinned to one core. */
export const TARGETS = [
  { scenario: 'small', peer: 'fastify', figure: 'rps', atLeast: 1.4 },
  { scenario: 'small', peer: 'node-stream', figure: 'rps', atLeast: 0.9 },
  { scenario: 'big', peer: 'node-stream', figure: 'rps', atLeast: 0.9 },
  { scenario: 'batch', peer: 'fastify', figure: 'rps', atLeast: 1.2 },
  { scenario: 'small', peer: 'node-stream', figure: 'p99', atMost: 1.5 },
  { scenario: 'big', peer: 'node-stream', figure: 'p99', atMost: 1.5 },
  { scenario: 'batch', peer: 'node-stream', figure: 'p99', atMost: 1.5 },
];

/** Rows of the harness's results.tsv, as objects keyed by its header. */
export function parseResults(text) {
  const [head, ...lines] = text.split('\n').filter((l) => l.trim() !== '');
  if (head === undefined) return [];
  const cols = head.split('\t');
  for (const need of ['scenario', 'round', 'target', 'rps', 'p99_us']) {
    if (!cols.includes(need)) throw new Error(`results.tsv has no "${need}" column (header: ${head})`);
  }
  return lines.map((line) => Object.fromEntries(line.split('\t').map((v, i) => [cols[i], v])));
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  // `+ 0` turns -0 into 0: the sort keeps -0 and 0 in input order, and the
  // median must not depend on it.
  return (s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2) + 0;
}

/**
 * Per-round ratios of `gateway` over `peer` in one scenario. `runs` is a list
 * of row lists, one per results file; rounds pair only within a file. A round
 * where either side served nothing is left out (a stalled slice has no p99).
 */
export function pairedRatios(runs, gateway, peer, scenario, figure) {
  const col = figure === 'p99' ? 'p99_us' : 'rps';
  const out = [];
  for (const rows of runs) {
    const byRound = new Map();
    for (const r of rows) {
      if (r.scenario !== scenario || (r.target !== gateway && r.target !== peer)) continue;
      const round = byRound.get(r.round) ?? {};
      round[r.target === gateway ? 'gw' : 'peer'] = r;
      byRound.set(r.round, round);
    }
    for (const { gw, peer: p } of byRound.values()) {
      if (!gw || !p || !(Number(gw.rps) > 0) || !(Number(p.rps) > 0)) continue;
      out.push(Number(gw[col]) / Number(p[col]));
    }
  }
  return out;
}

/** Median, range and count of per-round ratios; null when no round paired. */
function spread(ratios) {
  if (ratios.length === 0) return null;
  return { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios), rounds: ratios.length };
}

/** Each target with its median ratio, range, number of rounds and verdict (null: not measured). */
export function checkTargets(runs, gateway = 'gateway') {
  return TARGETS.map((t) => {
    const s = spread(pairedRatios(runs, gateway, t.peer, t.scenario, t.figure));
    if (s === null) return { ...t, rounds: 0, median: null, min: null, max: null, met: null };
    return { ...t, ...s, met: t.atLeast !== undefined ? s.median >= t.atLeast : s.median <= t.atMost };
  });
}

export function formatTargets(results, gateway = 'gateway') {
  const lines = [
    `| ${gateway} over the peer, per round | target | median (min–max) | rounds | met? |`,
    '|---|---|---|---:|---|',
  ];
  const what = (r) => `${r.scenario}: ${r.figure === 'p99' ? 'p99' : 'req/s'} ÷ ${r.peer}`;
  for (const r of results.filter((x) => x.median !== null)) {
    const goal = r.atLeast !== undefined ? `≥ ${r.atLeast}` : `≤ ${r.atMost}`;
    lines.push(`| ${what(r)} | ${goal} | ${r.median.toFixed(3)} (${r.min.toFixed(2)}–${r.max.toFixed(2)}) | ${r.rounds} | ${r.met ? 'yes' : '**no**'} |`);
  }
  const missing = results.filter((x) => x.median === null);
  if (missing.length > 0) lines.push('', `Not measured in this run: ${missing.map(what).join('; ')}.`);
  return lines.join('\n');
}

/**
 * The gateway against every peer in the run, pair by pair: for each scenario,
 * the median of per-round ratios of req/s and of p99 (min–max). `direct` (wrk
 * straight at the fake node) is the load side's ceiling, not a peer, and other
 * gateway rows (cluster or many-chain builds) are not peers of this one.
 */
export function peerRatios(runs, gateway = 'gateway') {
  const rows = runs.flat();
  const scenarios = [...new Set(rows.map((r) => r.scenario))];
  const peers = [...new Set(rows.map((r) => r.target))].filter((t) => t !== 'direct' && t !== gateway && !t.startsWith('gateway'));
  return peers.map((peer) => ({
    peer,
    scenarios: scenarios.map((scenario) => ({
      scenario,
      rps: spread(pairedRatios(runs, gateway, peer, scenario, 'rps')),
      p99: spread(pairedRatios(runs, gateway, peer, scenario, 'p99')),
    })),
  }));
}

export function formatPeerRatios(table, gateway = 'gateway') {
  if (table.length === 0) return `No peers to compare ${gateway} with.`;
  const scenarios = table[0].scenarios.map((s) => s.scenario);
  const cell = (f) => (f === null ? '–' : `${f.median.toFixed(2)} (${f.min.toFixed(2)}–${f.max.toFixed(2)})`);
  const lines = [
    `| ${gateway} ÷ peer | ${scenarios.map((s) => `${s}: req/s | ${s}: p99`).join(' | ')} |`,
    `|---|${scenarios.map(() => '---:|---:').join('|')}|`,
  ];
  for (const { peer, scenarios: figs } of table) lines.push(`| ${peer} | ${figs.map((f) => `${cell(f.rps)} | ${cell(f.p99)}`).join(' | ')} |`);
  return lines.join('\n');
}

/**
 * "Memory flat" from RSS samples of one gateway process (or its primary and
 * workers, summed), taken once a second over its whole life in one scenario:
 * the largest RSS in the last third of that life against the largest in the
 * middle third (the first third holds start-up and warm-up). Flat: at most 10%
 * more.
 */
export function rssVerdict(samplesMiB) {
  const n = samplesMiB.length;
  if (n < 6) return { samples: n, middle: null, last: null, max: null, flat: null };
  const third = Math.floor(n / 3);
  const middle = Math.max(...samplesMiB.slice(third, n - third));
  const last = Math.max(...samplesMiB.slice(n - third));
  return { samples: n, middle, last, max: Math.max(...samplesMiB), flat: last <= middle * 1.1 };
}

export function formatRss(byScenario) {
  const lines = ['| scenario | RSS max, middle third of the run | RSS max, last third | largest | samples | flat (≤ +10%)? |', '|---|---:|---:|---:|---:|---|'];
  for (const [scenario, v] of byScenario) {
    if (v.flat === null) lines.push(`| ${scenario} | – | – | – | ${v.samples} | too few samples |`);
    else lines.push(`| ${scenario} | ${v.middle.toFixed(1)} MiB | ${v.last.toFixed(1)} MiB | ${v.max.toFixed(1)} MiB | ${v.samples} | ${v.flat ? 'yes' : '**no**'} |`);
  }
  return lines.join('\n');
}

function main(files) {
  if (files.length === 0) {
    console.error('usage: node bench/targets.mjs <results.tsv> [more.tsv ...]');
    return 2;
  }
  let runs;
  try {
    runs = files.map((f) => parseResults(readFileSync(f, 'utf8')));
  } catch (err) {
    console.error(`bench/targets.mjs: ${err.message}`);
    return 1;
  }
  const gateways = [...new Set(runs.flat().map((r) => r.target).filter((t) => t.startsWith('gateway')))];
  if (gateways.length === 0) {
    console.error('bench/targets.mjs: no gateway rows in ' + files.join(', '));
    return 1;
  }
  const pooled = files.length > 1 ? `, ${files.length} runs pooled` : '';
  const text = gateways
    .map((g) => `${formatTargets(checkTargets(runs, g), g)}\n\n${g} over each peer, pair by pair (req/s: above 1 is faster; p99: below 1 is lower):\n\n${formatPeerRatios(peerRatios(runs, g), g)}`)
    .join('\n\n');
  console.log(`Issue 5's targets (medians of per-round ratios${pooled}):\n\n${text}`);
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main(process.argv.slice(2));
