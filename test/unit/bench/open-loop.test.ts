// bench/open-loop.mjs, the fixed-rate generator of `RATE=0.7 npm run bench:mix`, against a node:http
// server in this process: what it counts as an error, and that it times an answer from the request's
// scheduled send, so that a stall shows in its latency even when the requests wait on the client side.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const dirs: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  await Promise.all(servers.splice(0).map((s) => new Promise((done) => s.close(done))));
});

type Handler = (body: string, req: IncomingMessage, res: ServerResponse) => void;
async function serve(handler: Handler): Promise<number> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => handler(body, req, res));
  });
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return (server.address() as AddressInfo).port;
}

/** Runs the generator to its end; its RESULT line as numbers. */
async function openLoop(port: number, lines: string[], env: Record<string, string>): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'open-loop-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'bodies.txt'), lines.join('\n') + '\n');
  // head 100, two blocks, two txs (newest first), as bench/mix.mjs writes it
  writeFileSync(join(dir, 'state.txt'), ['100', '2', '0xb100', '0xb99', '2', '0xt2', '0xt1', ''].join('\n'));
  const child = spawn(process.execPath, [join(ROOT, 'bench', 'open-loop.mjs')], {
    env: { ...process.env, OL_URL: `http://127.0.0.1:${port}/eth/k`, OL_BODIES: join(dir, 'bodies.txt'), OL_STATE: join(dir, 'state.txt'), OL_API_KEY: 'key-1', OL_WARMUP: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise((done) => child.on('close', done));
  const line = out.split('\n').find((l) => l.startsWith('RESULT '));
  if (code !== 0 || line === undefined) throw new Error(`open-loop exited ${String(code)}: ${out}`);
  return Object.fromEntries(line.slice(7).split(' ').map((kv) => [kv.split('=')[0], Number(kv.split('=')[1])]));
}

const call = (method: string): string => `S {"jsonrpc":"2.0","id":1,"method":"${method}","params":[]}`;

describe('bench/open-loop.mjs', () => {
  it('sends every line in turn at the rate, and counts non-200 answers and error members as errors, null results apart', async () => {
    const seen: string[] = [];
    const keys = new Set<string | undefined>();
    const port = await serve((body, req, res) => {
      seen.push(body);
      keys.add(req.headers['x-api-key'] as string | undefined);
      const method = (JSON.parse(body) as { method: string }).method;
      if (method === 'http500') {
        res.writeHead(500, { 'content-type': 'application/json' });
        return res.end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      if (method === 'fails') return res.end('{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}');
      if (method === 'nothing') return res.end('{"jsonrpc":"2.0","id":1,"result":null}');
      // chunked, in two writes: the parser must join them
      res.write('{"jsonrpc":"2.0","id":1,');
      setImmediate(() => res.end('"result":"0x1"}'));
    });
    const lines = [call('ok'), call('fails'), call('http500'), call('nothing'), 'B 7 2 false', 'T "w1" 2'];
    const r = await openLoop(port, lines, { OL_RATE: '600', OL_SECONDS: '1' });
    expect(r).toMatchObject({ sent: 600, answers: 600, requests: 600, errors: 200, nulls: 100, err_connect: 0, err_read: 0, err_timeout: 0 });
    // in turn: each of the six bodies 100 times (they arrive over several connections, so not in order)
    const counts = new Map<string, number>();
    for (const b of seen) counts.set(b, (counts.get(b) ?? 0) + 1);
    expect(Object.fromEntries(counts)).toEqual(
      Object.fromEntries(
        [
          ...lines.slice(0, 4).map((l) => l.slice(2)),
          '{"jsonrpc":"2.0","id":7,"method":"eth_getBlockByNumber","params":["0x62",false]}',
          '{"jsonrpc":"2.0","id":"w1","method":"eth_getTransactionReceipt","params":["0xt1"]}',
        ].map((b) => [b, 100]),
      ),
    );
    expect([...keys]).toEqual(['key-1']);
  });

  it('counts its error answers by kind: HTTP 429, another status, -32005 in a 200, another JSON-RPC error', async () => {
    const port = await serve((body, _req, res) => {
      const method = (JSON.parse(body) as { method: string }).method;
      const status = method === 'http429' ? 429 : method === 'http503' ? 503 : 200;
      res.writeHead(status, { 'content-type': 'application/json' });
      if (method === 'ok') return res.end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      const code = method === 'other' ? -32000 : -32005;
      res.end(`{"jsonrpc":"2.0","id":1,"error":{"code":${code},"message":"daily request count exceeded, request rate limited"}}`);
    });
    const lines = [call('ok'), call('http429'), call('http503'), call('throttled'), call('other')];
    const r = await openLoop(port, lines, { OL_RATE: '500', OL_SECONDS: '1' });
    expect(r).toMatchObject({ answers: 500, errors: 400, err_http429: 100, err_http_other: 100, err_rpc_32005: 100, err_rpc_other: 100 });
  });

  it('times each answer from its scheduled send: a stall of its only connection shows in p99, not in the time from the wire', async () => {
    let n = 0;
    const port = await serve((_body, _req, res) => {
      const hold = ++n === 200 ? 300 : 0; // the 200th request is answered 300 ms late
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      }, hold);
    });
    const r = await openLoop(port, [call('eth_chainId')], { OL_RATE: '1000', OL_SECONDS: '1', OL_CONNS: '1' });
    expect(r).toMatchObject({ sent: 1000, answers: 1000, errors: 0, conns: 1 });
    // ~300 requests fall due during the stall and wait for the one connection: their latency runs
    // from 0 to 300 ms, so that ~10% of all are over 200 ms; a closed-loop tool would time one slow answer.
    expect(r.p90_us).toBeGreaterThan(100_000);
    expect(r.p99_us).toBeGreaterThan(200_000);
    expect(r.max_us).toBeGreaterThan(290_000);
    expect(r.svc_p99_us).toBeLessThan((r.p99_us ?? 0) / 3);
  });

  it('counts a refused connection against the request it was opened for, once each', async () => {
    const port = await serve(() => {});
    await new Promise((done) => servers.pop()!.close(done)); // nothing listens there now
    const r = await openLoop(port, [call('eth_chainId')], { OL_RATE: '200', OL_SECONDS: '0.5' });
    expect(r).toMatchObject({ sent: 100, answers: 0, err_connect: 100, err_timeout: 0 });
  });
});
