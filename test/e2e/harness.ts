// Builds a manifest into a server file with the real CLI and runs it as a
// child process, the way ops do. Readiness is the server's own `started` log
// line, which carries the ports it bound (manifests here use port 0).
import { connect } from 'node:net';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { SPEC_METHODS } from '../../generator/known-methods.ts';
import { NO_MEMORY_REDUCER } from '../../runtime/process/node-flags.ts';
import { request as undiciRequest } from 'undici';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

export interface Built {
  readonly dir: string;
  readonly bundle: string;
}

let counter = 0;

/** Writes the manifest into a fresh folder under .tmp/ and runs `gateway build` there. */
export async function buildManifest(name: string, manifest: string): Promise<Built> {
  const dir = join(ROOT, '.tmp', 'e2e', `${name}-${process.pid}-${counter++}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'gateway.yaml'), manifest);
  await run(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', 'gateway.yaml', '--out', 'gateway.mjs'], { cwd: dir });
  return { dir, bundle: join(dir, 'gateway.mjs') };
}

/** A strong random key of the documented shape. */
export function newKey(): string {
  return randomBytes(24).toString('base64url');
}

export function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

export interface KeySpec {
  readonly id: string;
  readonly key: string;
  readonly chains?: readonly string[];
  readonly disabled?: boolean;
  readonly rateLimit?: string;
}

export function keysYaml(keys: readonly KeySpec[]): string {
  const lines = ['keys:'];
  for (const k of keys) {
    lines.push(`  - id: ${k.id}`, `    sha256: "${sha256(k.key)}"`);
    if (k.chains) lines.push(`    chains: [${k.chains.join(', ')}]`);
    if (k.disabled !== undefined) lines.push(`    disabled: ${k.disabled}`);
    if (k.rateLimit) lines.push(`    rateLimit: ${k.rateLimit}`);
  }
  return lines.join('\n') + '\n';
}

export interface RunningGateway {
  readonly proc: ChildProcess;
  /** Port per listener name ('admin' included when configured). */
  readonly ports: Readonly<Record<string, number>>;
  /** Every stdout line so far (JSON log lines). */
  readonly lines: string[];
  readonly stderr: string[];
  url(listener: string, path: string): string;
  /** Resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  readonly exited: Promise<number | null>;
  /** Resolves on the first log line (parsed), past or future, that satisfies `pred`. */
  waitForLog(pred: (entry: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Like waitForLog, but only lines written from now on count. */
  nextLog(pred: (entry: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
}

export interface StartOptions {
  readonly cwd: string;
  readonly bundle: string;
  readonly env?: Record<string, string>;
  /** Another node binary (Node 24 test). */
  readonly node?: string;
  /**
   * Node options before the file: by default the documented command's
   * (`node --no-memory-reducer gateway.mjs`); [] for plain `node gateway.mjs`;
   * null to run the file itself (its `#!` line).
   */
  readonly nodeArgs?: readonly string[] | null;
}

export function startGateway(opts: StartOptions): Promise<RunningGateway> {
  const nodeArgs = opts.nodeArgs === undefined ? [NO_MEMORY_REDUCER] : opts.nodeArgs;
  const [cmd, args] = nodeArgs === null ? [resolve(opts.cwd, opts.bundle), []] : [opts.node ?? process.execPath, [...nodeArgs, opts.bundle]];
  const proc = spawn(cmd, args, {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const stderr: string[] = [];
  const waiters: { pred: (e: Record<string, unknown>) => boolean; resolve: (e: Record<string, unknown>) => void }[] = [];
  let buf = '';
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) !== -1) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      lines.push(line);
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (waiters[i]!.pred(entry)) waiters.splice(i, 1)[0]!.resolve(entry);
      }
    }
  });
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => stderr.push(c));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));

  const waitForLog = (pred: (e: Record<string, unknown>) => boolean, timeoutMs = 15_000, from = 0) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      for (const line of lines.slice(from)) {
        try {
          const e = JSON.parse(line) as Record<string, unknown>;
          if (pred(e)) return resolve(e);
        } catch {
          // not JSON
        }
      }
      const t = setTimeout(() => reject(new Error(`no such log line within ${timeoutMs} ms; stderr: ${stderr.join('')}`)), timeoutMs);
      waiters.push({ pred, resolve: (e) => (clearTimeout(t), resolve(e)) });
      void exited.then((code) => reject(new Error(`gateway exited (${code}): ${stderr.join('')}`)));
    });

  return waitForLog((e) => e.event === 'started').then((started) => {
    const ports: Record<string, number> = {};
    for (const l of started.listeners as { listener: string; port: number }[]) ports[l.listener] = l.port;
    return {
      proc,
      ports,
      lines,
      stderr,
      exited,
      waitForLog,
      nextLog: (pred: (e: Record<string, unknown>) => boolean, timeoutMs?: number) => waitForLog(pred, timeoutMs, lines.length),
      url: (listener: string, path: string) => `http://127.0.0.1:${ports[listener]}${path}`,
      stop: (signal: NodeJS.Signals = 'SIGTERM') => {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
        return exited;
      },
    };
  });
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  json(): any;
}

/**
 * One HTTP request with the path sent exactly as given: fetch() would
 * normalize `..` and friends, which is what the hostile-path tests need to send.
 */
export function rawRequest(
  url: string,
  opts: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer; localAddress?: string } = {},
): Promise<RawResponse> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        method: opts.method ?? (opts.body !== undefined ? 'POST' : 'GET'),
        path: opts.path ?? u.pathname + u.search,
        headers: { ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}), ...opts.headers },
        agent: false,
        ...(opts.localAddress === undefined ? {} : { localAddress: opts.localAddress }),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

export interface PipelinedAnswer {
  status: number;
  xCache: string;
  /** The body as sent. */
  text: string;
}

/**
 * POSTs every body to `path` pipelined on one connection, in one write (so a
 * gateway reads them in one turn of its event loop), with `key` as X-API-Key,
 * and reads the answers in order (HTTP/1.1 answers pipelined requests in order).
 */
export function pipelinedRequests(port: number, path: string, key: string, bodies: readonly string[]): Promise<PipelinedAnswer[]> {
  const wire = bodies
    .map((b) => `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`)
    .join('');
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const answers: PipelinedAnswer[] = [];
    socket.on('connect', () => socket.write(wire));
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) break;
        const head = buf.toString('latin1', 0, end).split('\r\n');
        const headers = new Map(head.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
        const length = Number(headers.get('content-length'));
        if (!Number.isInteger(length)) return reject(new Error(`an answer without Content-Length: ${head.join(' | ')}`));
        if (buf.length < end + 4 + length) break;
        answers.push({ status: Number(head[0]!.split(' ')[1]), xCache: headers.get('x-cache') ?? '', text: buf.toString('utf8', end + 4, end + 4 + length) });
        buf = buf.subarray(end + 4 + length);
        if (answers.length === bodies.length) {
          socket.end();
          return resolve(answers);
        }
      }
    });
    socket.on('error', reject);
    socket.on('close', () => answers.length < bodies.length && reject(new Error(`connection closed after ${answers.length} of ${bodies.length} answers`)));
  });
}

/** The 30 methods of the interface spec (one list, shared with the generator's catalogue). */
export const EVM_METHODS = SPEC_METHODS;

/** A metric's value in a gateway's /metrics (labels like `{chain="ethereum"}`, '' for none); NaN when absent. */
export async function metricValue(g: RunningGateway, name: string, labels: string): Promise<number> {
  const text = await (await fetch(g.url('admin', '/metrics'))).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Polls `cond` until it holds; throws after `ms` naming `what`. */
export async function until(cond: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms / 1000} s: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A gateway's answer to a POST: status, headers, text, and the text parsed (undefined when it is not JSON). */
export interface JsonAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  readonly json: any;
}

/** POSTs `body` (JSON) to `url` with the API key `key`. */
export async function postJson(url: string, key: string, body: string): Promise<JsonAnswer> {
  const r = await undiciRequest(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });
  const text = await r.body.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.statusCode, headers: r.headers, text, json };
}

/** One upstream's throttle state, as the admin listener's status.json gives it. */
export interface UpstreamThrottleStatus {
  name: string;
  state: string;
  throttledUntil: number | null;
  throttleRun: number;
  throttledTotal: number;
}

/** The upstream `name` from `g`'s status.json (throws when no chain has it). */
export async function upstreamStatus(g: RunningGateway, name: string): Promise<UpstreamThrottleStatus> {
  const doc = (await (await fetch(g.url('admin', '/status.json'))).json()) as { chains: { upstreams: UpstreamThrottleStatus[] }[] };
  for (const c of doc.chains) for (const u of c.upstreams) if (u.name === name) return u;
  throw new Error(`no upstream ${name} in status.json`);
}
