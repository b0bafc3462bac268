// The primary's sums in multi-process mode (issue 47): what a worker gone
// counted stays in the counters and histograms, its gauges go, and a late
// answer from a worker gone is not counted twice. And the order a new worker
// binds its listeners in.
import { describe, expect, it } from 'vitest';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { WorkerMetrics } from '../../../../runtime/process/cluster-metrics.ts';
import { bindOrder, type MetricsJson } from '../../../../runtime/process/cluster-ipc.ts';

/** One worker's registry: a request counter by status, an in-flight gauge, a latency histogram. */
function worker() {
  const registry = new Registry();
  const requests = new Counter({ name: 'gateway_requests_total', help: 'h', labelNames: ['status'] as const, registers: [registry] });
  const inflight = new Gauge({ name: 'gateway_inflight_requests', help: 'h', registers: [registry] });
  const latency = new Histogram({ name: 'gateway_request_duration_seconds', help: 'h', buckets: [0.1, 1], registers: [registry] });
  // A copy, as IPC delivers it (prom-client's objects are live).
  return { requests, inflight, latency, json: async () => structuredClone(await registry.getMetricsAsJSON()) as MetricsJson };
}

const line = (text: string, series: string): number => {
  const l = text.split('\n').find((x) => x.startsWith(`${series} `));
  return l === undefined ? Number.NaN : Number(l.slice(l.lastIndexOf(' ') + 1));
};

describe('WorkerMetrics', () => {
  it('keeps what a retired worker counted in the sums (counters, histograms), not its gauges', async () => {
    const sums = new WorkerMetrics();
    const [a, b] = [worker(), worker()];
    a.requests.labels('200').inc(5);
    a.inflight.set(3);
    a.latency.observe(0.05);
    b.requests.labels('200').inc(2);
    b.inflight.set(1);
    sums.seenFrom(1, await a.json());
    sums.seenFrom(2, await b.json());
    let text = await sums.render();
    expect(line(text, 'gateway_requests_total{status="200"}')).toBe(7);
    expect(line(text, 'gateway_inflight_requests')).toBe(4);
    // Worker 1 answers twice more, then retires with its final counters.
    a.requests.labels('200').inc(2);
    a.requests.labels('503').inc(1);
    a.latency.observe(0.5);
    sums.gone(1, await a.json());
    text = await sums.render();
    expect(line(text, 'gateway_requests_total{status="200"}')).toBe(9);
    expect(line(text, 'gateway_requests_total{status="503"}')).toBe(1);
    expect(line(text, 'gateway_request_duration_seconds_count')).toBe(2);
    expect(line(text, 'gateway_request_duration_seconds_bucket{le="0.1"}')).toBe(1);
    expect(line(text, 'gateway_inflight_requests')).toBe(1);
    // A new worker, then another roll: the sums go on from there.
    const c = worker();
    c.requests.labels('200').inc(1);
    sums.seenFrom(3, await c.json());
    sums.gone(2, await b.json());
    text = await sums.render();
    expect(line(text, 'gateway_requests_total{status="200"}')).toBe(10);
  });

  it('a worker that dies keeps the counters of its last answer; a late answer from a worker gone counts once', async () => {
    const sums = new WorkerMetrics();
    const a = worker();
    a.requests.labels('200').inc(4);
    const before = await a.json();
    sums.seenFrom(1, before);
    a.requests.labels('200').inc(6);
    sums.gone(1);
    expect(line(await sums.render(), 'gateway_requests_total{status="200"}')).toBe(4);
    // Its answer to a scrape asked before it died comes after; and its exit is seen twice.
    sums.seenFrom(1, await a.json());
    sums.gone(1);
    expect(line(await sums.render(), 'gateway_requests_total{status="200"}')).toBe(4);
  });
});

describe('bindOrder', () => {
  it('binds the addresses no worker serves yet first, in their order, then the served ones', () => {
    const list = [
      { host: '127.0.0.1', port: 8545 },
      { host: '127.0.0.1', port: 9200 },
      { host: '0.0.0.0', port: 8080 },
      { host: '127.0.0.1', port: 9201 },
    ];
    expect(bindOrder(list, '127.0.0.1:8545 0.0.0.0:8080').map((a) => a.port)).toEqual([9200, 9201, 8545, 8080]);
    expect(bindOrder(list, undefined)).toEqual(list);
    expect(bindOrder(list, '')).toEqual(list);
  });
});
