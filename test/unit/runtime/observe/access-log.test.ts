// The access log makes its lines from pieces of JSON made once: each line must
// be exactly the JSON that pino's format and JSON.stringify would give.
import { afterEach, describe, expect, it, vi } from 'vitest';
import fc from 'fast-check';
import { AccessLog } from '../../../../runtime/observe/access-log.ts';

interface Rec {
  reqId: string;
  keyId: string | null;
  chain: string;
  method: string;
  status: number;
  upstream: string | null;
  ms: number;
  bytes: number;
  time: number;
}

/** The line as JSON.stringify writes it, field by field (the format docs/observability.md documents). */
function expected(r: Rec): string {
  const line = {
    level: 'info',
    time: new Date(r.time).toISOString(),
    reqId: r.reqId,
    keyId: r.keyId,
    chain: r.chain,
    method: r.method,
    status: r.status,
    upstream: r.upstream,
    ms: Math.round(r.ms * 1000) / 1000,
    bytes: r.bytes,
    msg: 'request',
  };
  return JSON.stringify(line) + '\n';
}

function record(log: AccessLog, r: Rec): void {
  vi.setSystemTime(r.time);
  log.add(
    JSON.stringify(r.reqId),
    `,"keyId":${JSON.stringify(r.keyId)}`,
    `,"chain":${JSON.stringify(r.chain)},"method":${JSON.stringify(r.method)},"status":`,
    r.status,
    `,"upstream":${JSON.stringify(r.upstream)},"ms":`,
    r.ms,
    r.bytes,
  );
}

function collect(): { log: AccessLog; chunks: string[] } {
  const chunks: string[] = [];
  return { log: new AccessLog((text) => chunks.push(text)), chunks };
}

const base: Rec = {
  reqId: '0193a1b2-c3d4-8e5f-a6b7-000000000001',
  keyId: 'acme-wallet',
  chain: 'ethereum',
  method: 'eth_blockNumber',
  status: 200,
  upstream: 'ethereum#0',
  ms: 1.25,
  bytes: 251,
  time: Date.UTC(2026, 10, 23, 12, 0, 0, 5),
};

afterEach(() => {
  vi.useRealTimers();
});

describe('access log lines', () => {
  it('writes each recorded request as one JSON line, byte for byte what JSON.stringify gives', () => {
    vi.useFakeTimers();
    const { log, chunks } = collect();
    const recs: Rec[] = [
      base,
      { ...base, ms: 0, bytes: 0, status: 0, upstream: null },
      { ...base, ms: 12, time: base.time + 1 },
      { ...base, ms: 7.5415, bytes: 2 ** 40 },
      { ...base, ms: 0.0004, keyId: null },
      { ...base, ms: 1.1, reqId: 'client "id" \\ with quotes' },
      { ...base, keyId: 'clé-ünïcode-鍵', method: 'refused', status: 403 },
      { ...base, ms: 99999.9995, status: 504 },
    ];
    for (const r of recs) record(log, r);
    log.flush();
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toBe(recs.map(expected).join(''));
  });

  it('agrees with JSON.stringify for any durations, sizes, statuses, ids and names', () => {
    vi.useFakeTimers();
    const printable = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 128 });
    const rec = fc.record({
      reqId: printable,
      keyId: fc.option(fc.string({ unit: 'grapheme', maxLength: 40 })),
      chain: fc.string({ maxLength: 30 }),
      method: fc.string({ maxLength: 40 }),
      status: fc.integer({ min: 0, max: 599 }),
      upstream: fc.option(fc.string({ maxLength: 30 })),
      ms: fc.double({ min: 0, max: 1e7, noNaN: true }),
      bytes: fc.maxSafeNat(),
      time: fc.integer({ min: 0, max: Date.UTC(2200, 0, 1) }),
    });
    fc.assert(
      fc.property(fc.array(rec, { minLength: 1, maxLength: 50 }), (recs) => {
        const { log, chunks } = collect();
        for (const r of recs) record(log, r);
        log.flush();
        expect(chunks.join('')).toBe(recs.map(expected).join(''));
      }),
      { numRuns: 300 },
    );
  });

  it('hands the lines over after 10 ms at the latest, or at once when 1024 are waiting', () => {
    vi.useFakeTimers();
    const { log, chunks } = collect();
    record(log, base);
    expect(chunks).toHaveLength(0);
    vi.advanceTimersByTime(10);
    expect(chunks).toHaveLength(1);
    for (let i = 0; i < 1024; i++) record(log, { ...base, bytes: i });
    expect(chunks).toHaveLength(2);
    expect(chunks[1]!.split('\n')).toHaveLength(1025);
    log.flush();
    expect(chunks).toHaveLength(2); // nothing left: no empty write
  });
});
