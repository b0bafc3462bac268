// The admin status page (issue 24): GET /status.json against /metrics after
// known traffic, and GET / in a real browser (Debian's chromium, driven by
// playwright-core) against a running gateway with two real anvils, one of
// which is killed while the page is open.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { newKey, rawRequest, ROOT, sha256, until, type Built, type RunningGateway } from './harness.ts';
import { gateway } from './fixture.ts';
import { startAnvil, type Anvil } from '../support/anvil.ts';

const CHROMIUM = '/usr/bin/chromium';
const ALICE = newKey();
const BOB = newKey();
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

// eth_chainId: on a chain of two upstreams (a pool) eth_blockNumber is answered from the served tip, with no upstream attempt.
const call = (method = 'eth_chainId') => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] });

interface Setup {
  a: Anvil;
  b: Anvil;
  built: Built;
  gw: RunningGateway;
  close(): Promise<void>;
}

async function setup(name: string): Promise<Setup> {
  const g = await gateway({
    name,
    chains: [
      { path: 'dev', interface: 'evm-jsonrpc', chainId: 31337, methods: ['eth_chainId', 'eth_blockNumber', 'eth_getBalance'], upstreams: ['${A_URL}', { url: '${B_URL}', role: 'fallback' }] },
    ],
    // Health checks every 300 ms, so that a killed node is seen within a second or two.
    header: { health: { intervalMs: 300, timeoutMs: 250 } },
    keys: [{ id: 'alice', key: ALICE }, { id: 'bob', key: BOB }],
    standIns: { A_URL: startAnvil(), B_URL: startAnvil() },
  });
  return { a: g.standIns.A_URL, b: g.standIns.B_URL, built: g.built, gw: g.gw, close: g.close };
}

async function status(gw: RunningGateway): Promise<any> {
  const r = await rawRequest(gw.url('admin', '/status.json'));
  expect(r.status).toBe(200);
  expect(r.headers['content-type']).toBe('application/json');
  return r.json();
}

/** Every sample of a metric in /metrics text whose labels include all of `want` (and pass `keep`). */
function samples(text: string, name: string, want: Record<string, string>, keep: (labels: Record<string, string>) => boolean = () => true): number[] {
  const out: number[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(want).every(([k, v]) => labels[k] === v) && keep(labels as Record<string, string>)) out.push(Number(m[3]));
  }
  return out;
}
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

async function send(gw: RunningGateway, key: string, n: number, method?: string): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await rawRequest(gw.url('rpc', '/dev'), { body: call(method), headers: { 'x-api-key': key } });
    expect(r.status).toBe(200);
  }
}

const bothUp = async (gw: RunningGateway) => (await status(gw)).chains[0].upstreams.every((u: { state: string }) => u.state === 'up');

describe('GET /status.json on the admin listener', { timeout: 60_000 }, () => {
  let s: Setup;
  beforeAll(async () => {
    s = await setup('status-json');
  }, 60_000);
  afterAll(async () => {
    await s?.close();
  });

  it('names the build: the manifest, its SHA-256 and the version, which the started line also carries', async () => {
    const d = await status(s.gw);
    const manifestText = readFileSync(join(s.built.dir, 'gateway.yaml'), 'utf8');
    expect(d.build).toEqual({ version: VERSION, manifest: 'gateway.yaml', manifestSha256: sha256(manifestText) });
    const started = await s.gw.waitForLog((e) => e.event === 'started');
    expect(started.version).toBe(VERSION);
  });

  it('has one row per chain with its interface, state and upstreams (name, role, state, head, lag)', async () => {
    await until(() => bothUp(s.gw), 'both upstreams up');
    const d = await status(s.gw);
    expect(d.status).toBe('ready');
    expect(d.chains).toHaveLength(1);
    const [c] = d.chains;
    expect(c).toMatchObject({ path: 'dev', listener: 'rpc', interface: 'evm-jsonrpc', state: 'up' });
    expect(c.upstreams.map((u: any) => [u.name, u.role, u.state, typeof u.head, typeof u.lag])).toEqual([
      ['dev#0', 'primary', 'up', 'number', 'number'],
      ['dev#1', 'fallback', 'up', 'number', 'number'],
    ]);
    for (const k of ['rps', 'errorRate', 'requests', 'requestsTotal', 'errorsTotal', 'chart']) expect(c).toHaveProperty(k);
    for (const k of ['p50Ms', 'p99Ms', 'failedShare', 'attempts', 'failed', 'attemptsTotal', 'failedTotal']) expect(c.upstreams[0]).toHaveProperty(k);
    expect(d.chart.stepMs).toBe(5000);
    expect(c.chart.rps).toHaveLength(d.chart.t.length);
    expect(c.chart.errorRate).toHaveLength(d.chart.t.length);
  });

  it('after known traffic, every figure equals its /metrics counter, and the top keys count each key’s credits', async () => {
    const before = await status(s.gw);
    expect(before.topKeys.keys).toEqual([]);
    await send(s.gw, ALICE, 25);
    await send(s.gw, BOB, 7, 'eth_chainId');
    const [d, metrics] = await Promise.all([status(s.gw), rawRequest(s.gw.url('admin', '/metrics')).then((r) => r.text)]);
    const c = d.chains[0];
    const requestsTotal = sum(samples(metrics, 'gateway_requests_total', { chain: 'dev', interface: 'evm-jsonrpc' }));
    expect(requestsTotal).toBe(before.chains[0].requestsTotal + 32);
    expect(c.requestsTotal).toBe(requestsTotal);
    expect(c.errorsTotal).toBe(sum(samples(metrics, 'gateway_requests_total', { chain: 'dev' }, (l) => Number(l.status) >= 500)));
    // While the process is younger than a minute, the window starts at its first copy, taken at zero.
    if (d.windowSeconds < 60) expect(c.requests).toBe(requestsTotal);
    else expect(c.requests).toBeGreaterThanOrEqual(32);
    expect(c.errorRate).toBe(0);
    for (const u of c.upstreams) {
      const labels = { chain: 'dev', upstream: u.name };
      expect(u.attemptsTotal).toBe(sum(samples(metrics, 'gateway_upstream_requests_total', labels)));
      expect(u.failedTotal).toBe(sum(samples(metrics, 'gateway_upstream_requests_total', { ...labels, outcome: 'failed' })));
      expect(u.attemptsTotal).toBe(samples(metrics, 'gateway_upstream_request_duration_seconds_count', labels)[0]);
      expect(u.head).toBe(samples(metrics, 'gateway_upstream_head', labels)[0]);
      expect(u.lag).toBe(samples(metrics, 'gateway_upstream_lag_blocks', labels)[0]);
    }
    // The primary took every call; the fallback none.
    expect(c.upstreams[0].attemptsTotal).toBe(requestsTotal);
    expect(c.upstreams[1].attemptsTotal).toBe(0);
    expect(c.upstreams[0].p50Ms).toBeGreaterThan(0);
    expect(c.upstreams[0].p99Ms).toBeGreaterThanOrEqual(c.upstreams[0].p50Ms);
    expect(c.upstreams[1].p50Ms).toBeNull();
    expect(d.topKeys.keys).toEqual([
      { id: 'alice', credits: 25, calls: 25 },
      { id: 'bob', credits: 7, calls: 7 },
    ]);
    // Key ids only: no key, and no upstream URL, anywhere in the answer.
    const raw = JSON.stringify(d);
    for (const secret of [ALICE, BOB, s.a.url, s.b.url, String(s.a.port)]) expect(raw).not.toContain(secret);
  });

  it('GET / is one self-contained HTML page: no script, style or font from anywhere else', async () => {
    const r = await rawRequest(s.gw.url('admin', '/'));
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(r.headers['content-security-policy']).toContain("default-src 'none'");
    expect(r.text).toMatch(/^<!doctype html>/);
    expect(r.text).not.toMatch(/<script[^>]+src=|<link[^>]+stylesheet|@import|@font-face|url\(/i);
    // What it shows goes in as text (textContent, setAttribute), never parsed as markup.
    expect(r.text).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    // The only absolute URL is the SVG namespace.
    expect([...r.text.matchAll(/https?:\/\/[^\s'"]+/g)].map((m) => m[0])).toEqual(['http://www.w3.org/2000/svg']);
    expect((await rawRequest(s.gw.url('admin', '/'), { method: 'HEAD' })).text).toBe('');
  });
});

describe('the status page in Chromium', { timeout: 90_000 }, () => {
  let s: Setup;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  beforeAll(async () => {
    [s, browser] = await Promise.all([setup('status-page'), chromium.launch({ executablePath: CHROMIUM })]);
    page = await browser.newPage({ viewport: { width: 1680, height: 520 } });
    page.on('console', (m) => void (m.type() === 'error' && problems.push(m.text())));
    page.on('pageerror', (e) => void problems.push(e.message));
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  /** The page's upstream rows as [name, role, state] and its chain rows as [path, interface, state]. */
  const dom = () =>
    page.evaluate(() => {
      const text = (root: Element, field: string) => root.querySelector(`[data-field="${field}"]`)?.textContent ?? null;
      return [...document.querySelectorAll('tbody[data-chain]')].map((b) => ({
        chain: [b.getAttribute('data-chain'), text(b, 'interface'), text(b.querySelector('tr.chain')!, 'state')],
        upstreams: [...b.querySelectorAll('tr[data-upstream]')].map((r) => [r.getAttribute('data-upstream'), text(r, 'role'), text(r, 'state')]),
      }));
    });
  const cell = (upstream: string, field: string) => page.locator(`tr[data-upstream="${upstream}"] [data-field="${field}"]`).textContent();

  it('shows the chains and upstreams /status.json has, and the build', async () => {
    await until(() => bothUp(s.gw), 'both upstreams up');
    await page.goto(s.gw.url('admin', '/'));
    await page.waitForSelector('tr[data-upstream]');
    // Both read the same live state: compare once the page has caught up with it.
    const want = async () => {
      const d = await status(s.gw);
      return d.chains.map((c: any) => ({ chain: [c.path, c.interface, c.state], upstreams: c.upstreams.map((u: any) => [u.name, u.role, u.state]) }));
    };
    const expected = await want();
    expect(expected).toEqual([
      {
        chain: ['dev', 'evm-jsonrpc', 'up'],
        upstreams: [
          ['dev#0', 'primary', 'up'],
          ['dev#1', 'fallback', 'up'],
        ],
      },
    ]);
    await expect.poll(dom, { timeout: 10_000, interval: 100 }).toEqual(expected);
    const d = await status(s.gw);
    expect(await page.textContent('#version')).toBe(VERSION);
    expect(await page.textContent('#manifest')).toBe('gateway.yaml');
    expect(await page.textContent('#sha')).toBe(d.build.manifestSha256);
    expect(await page.textContent('#status')).toBe('ready');
    // A chain of two upstreams is a pool: its served tip and its hedges, as /status.json has them.
    expect(d.chains[0].pool).toMatchObject({ hedges: { sent: 0, won: 0, capped: 0 } });
    expect(d.chains[0].pool.tip).toBeGreaterThanOrEqual(0);
    await expect.poll(() => page.locator('tbody[data-chain="dev"] tr.chain [data-field="hedges"]').textContent(), { timeout: 10_000, interval: 100 }).toBe('hedges 0, won 0');
    expect(await page.locator('tbody[data-chain="dev"] tr.chain [data-field="tip"]').textContent()).toMatch(/^tip \d+$/);
  });

  it('follows traffic: attempts, latency and the top keys come from /status.json', async () => {
    await send(s.gw, ALICE, 30);
    await send(s.gw, BOB, 5);
    await expect.poll(() => cell('dev#0', 'attempts'), { timeout: 10_000, interval: 100 }).toBe('35');
    const d = await status(s.gw);
    const u0 = d.chains[0].upstreams[0];
    expect(u0.attempts).toBe(35);
    expect(await cell('dev#0', 'p50')).toMatch(/ ms$/);
    expect(await page.locator('#keys tr[data-key] [data-field="id"]').allTextContents()).toEqual(['alice', 'bob']);
    expect(await page.locator('#keys tr[data-key] [data-field="credits"]').allTextContents()).toEqual(['30', '5']);
    // The charts: a point once the first 5 s step is copied.
    await until(async () => (await status(s.gw)).chart.t.length > 0, 'a first chart step', 15_000);
    await expect.poll(() => page.locator('tbody[data-chain="dev"] svg.rps polyline').count(), { timeout: 10_000, interval: 100 }).toBeGreaterThan(0);
  });

  it('shows an upstream down within seconds of its node dying, and traffic moving to the fallback', async () => {
    await s.a.stop();
    await expect.poll(() => cell('dev#0', 'state'), { timeout: 10_000, interval: 100 }).toBe('down');
    const badge = page.locator('tr[data-upstream="dev#0"] [data-field="state"]');
    expect(await badge.getAttribute('data-state')).toBe('down');
    expect(await badge.getAttribute('class')).not.toContain(' up');
    expect(await cell('dev#1', 'state')).toBe('up');
    expect((await status(s.gw)).chains[0].upstreams[0].state).toBe('down');
    // The fallback answers now, and the page says so.
    await send(s.gw, ALICE, 10);
    await expect.poll(() => cell('dev#1', 'attempts'), { timeout: 10_000, interval: 100 }).toBe('10');
    mkdirSync(join(ROOT, 'test-results'), { recursive: true });
    await page.screenshot({ path: join(ROOT, 'test-results', 'status-page.png'), fullPage: true });
    expect(problems).toEqual([]);
  });

  it('says its figures are stale once /status.json cannot be read, rather than showing old ones as current', async () => {
    expect(await page.getAttribute('#updated', 'class')).not.toBe('stale');
    expect(await s.gw.stop()).toBe(0);
    await expect.poll(() => page.getAttribute('#updated', 'class'), { timeout: 10_000, interval: 100 }).toBe('stale');
    expect(await page.textContent('#updated')).toMatch(/^stale: cannot read status\.json/);
  });
});
