// Forwarding: one attempt per upstream, retries where they are safe, and the
// answer streamed straight into the client's response. Hot path: change with care.
//
// undici's `pool.stream` writes the upstream body into the writable the
// factory returns and watches it with `finished()`: if the client goes away
// mid-answer the upstream request is aborted and its connection released. A
// plain `body.pipe(res)` would leave the connection paused forever.
import { Writable } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Upstream, UpstreamGroup } from './upstream.ts';

export type FailKind = 'unavailable' | 'timeout' | 'no-upstream' | 'bad-response';

export interface ForwardRequest {
  readonly method: 'GET' | 'POST';
  /** Path and query on the upstream, given the upstream. */
  readonly path: (u: Upstream) => string;
  /** Request headers as a flat [name, value, ...] list (undici takes it as is). */
  readonly headers: string[];
  readonly body: Buffer | string | null;
  /** Safe to send again after a 5xx or timeout (reads). */
  readonly idempotent: boolean;
  readonly retries: number;
  /** Largest answer the gateway will hold in memory when it must rewrite it. */
  readonly maxBuffer: number;
  /**
   * What to do with an answer: stream it straight to the client, buffer it
   * (the caller rewrites it), or treat it as a failed attempt ('bad': a 5xx, or
   * something that is not an answer of this interface) and try another
   * upstream where that is safe.
   */
  readonly classify: (status: number, headers: IncomingHttpHeaders) => 'stream' | 'buffer' | 'bad';
  /** Writes status and headers on the client response before streaming. */
  readonly writeHead: (status: number, headers: IncomingHttpHeaders, u: Upstream) => void;
}

export type ForwardResult =
  | { readonly kind: 'streamed'; readonly upstream: Upstream; readonly status: number }
  | {
      readonly kind: 'buffered';
      readonly upstream: Upstream;
      readonly status: number;
      readonly headers: IncomingHttpHeaders;
      readonly body: Buffer;
    }
  | { readonly kind: 'failed'; readonly fail: FailKind; readonly upstream: Upstream | null }
  /** The client went away, or the answer broke after it had started. */
  | { readonly kind: 'aborted'; readonly upstream: Upstream | null };

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Upstream answer headers as a flat [name, value, ...] list, without hop-by-hop
 * ones and without the upstream's CORS headers: the manifest's CORS policy is
 * the only one clients see.
 */
export function endToEndHeaders(headers: IncomingHttpHeaders, requestId: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || name.startsWith('access-control-') || name === 'x-request-id') continue;
    const v = headers[name];
    if (v !== undefined) out[name] = v;
  }
  out['x-request-id'] = requestId;
  return out;
}

class Discard extends Writable {
  override _write(_c: Buffer, _e: BufferEncoding, cb: (err?: Error | null) => void): void {
    cb();
  }
}

class Collect extends Writable {
  readonly chunks: Buffer[] = [];
  size = 0;
  constructor(private readonly limit: number) {
    super();
  }
  override _write(c: Buffer, _e: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.size += c.length;
    if (this.size > this.limit) return cb(Object.assign(new Error('upstream answer too large'), { code: 'GW_TOO_LARGE' }));
    this.chunks.push(c);
    cb();
  }
}

interface Classified {
  readonly kind: FailKind;
  /** The upstream surely never got the request: safe to send it elsewhere. */
  readonly neverReceived: boolean;
}

function classify(err: unknown): Classified {
  const code = (err as { code?: string }).code ?? '';
  switch (code) {
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { kind: code === 'UND_ERR_CONNECT_TIMEOUT' ? 'timeout' : 'unavailable', neverReceived: true };
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return { kind: 'timeout', neverReceived: false };
    case 'GW_TOO_LARGE':
    case 'HPE_INVALID_CONSTANT':
    case 'HPE_INVALID_STATUS':
    case 'HPE_INVALID_HEADER_TOKEN':
      return { kind: 'bad-response', neverReceived: false };
    default:
      return { kind: 'unavailable', neverReceived: false };
  }
}

/**
 * Sends one request upstream, retrying on another upstream where safe.
 * Never throws: every outcome is a ForwardResult.
 */
/**
 * Sends one request upstream, retrying on another upstream where safe, and
 * calls `done` once with the outcome. Callback-based, one object per request:
 * this runs for every call (change with care).
 */
export function forward(
  group: UpstreamGroup,
  req: ForwardRequest,
  res: ServerResponse,
  onCircuitOpen: (u: Upstream) => void,
  done: (r: ForwardResult) => void,
): void {
  new Attempt(group, req, res, onCircuitOpen, done).next();
}

class Attempt {
  private tried: Set<Upstream> | null = null;
  private last: ForwardResult | null = null;
  private attempt = 0;
  private u: Upstream | null = null;
  private canRetry = false;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private mode: 'stream' | 'buffer' | 'retry' = 'stream';
  private sink: Collect | null = null;
  private bad = false;

  constructor(
    private readonly group: UpstreamGroup,
    private readonly req: ForwardRequest,
    private readonly res: ServerResponse,
    private readonly onCircuitOpen: (u: Upstream) => void,
    private readonly done: (r: ForwardResult) => void,
  ) {}

  private fail(u: Upstream): void {
    if (u.markFailure()) this.onCircuitOpen(u);
  }

  next(): void {
    const { group, req, tried } = this;
    const u = tried === null ? group.pick(null) : group.pickRetry(tried);
    if (u === null) return this.done(this.last ?? { kind: 'failed', fail: 'no-upstream', upstream: null });
    this.u = u;
    this.canRetry = this.attempt < req.retries && group.hasOther(u, tried);
    this.attempt++;
    this.mode = 'stream';
    this.sink = null;
    this.bad = false;
    const headers = u.headerList.length ? req.headers.concat(u.headerList) : req.headers;
    u.pool.stream({ path: req.path(u), method: req.method, headers, body: req.body }, this.factory, this.finished);
  }

  /** undici calls this with the answer's status and headers; returns where the body goes. */
  private readonly factory = (data: { statusCode: number; headers: unknown }): Writable => {
    const { req, res } = this;
    const status = (this.status = data.statusCode);
    const headers = (this.headers = data.headers as IncomingHttpHeaders);
    let verdict = req.classify(status, headers);
    if (verdict === 'bad') {
      if (this.canRetry && req.idempotent) {
        this.mode = 'retry';
        return new Discard();
      }
      this.bad = true;
      verdict = 'buffer'; // the caller decides what the client may see of it
    }
    if (verdict === 'stream') {
      if (res.destroyed) return new Discard();
      req.writeHead(status, headers, this.u!);
      return res;
    }
    this.mode = 'buffer';
    return (this.sink = new Collect(req.maxBuffer));
  };

  private readonly finished = (err: Error | null): void => {
    const u = this.u!;
    const { req, res } = this;
    if (err) {
      if (res.headersSent || res.destroyed) return this.done({ kind: 'aborted', upstream: u });
      const c = classify(err);
      this.fail(u);
      this.last = { kind: 'failed', fail: c.kind, upstream: u };
      if (this.canRetry && (req.idempotent || c.neverReceived)) {
        (this.tried ??= new Set()).add(u);
        return this.next();
      }
      return this.done(this.last);
    }
    if (this.mode === 'retry') {
      this.fail(u);
      (this.tried ??= new Set()).add(u);
      this.last = { kind: 'failed', fail: 'unavailable', upstream: u };
      return this.next();
    }
    if (this.bad) this.fail(u);
    else u.markSuccess();
    if (this.mode === 'buffer') {
      const s = this.sink;
      const body = s === null ? Buffer.alloc(0) : s.chunks.length === 1 ? s.chunks[0]! : Buffer.concat(s.chunks);
      return this.done({ kind: 'buffered', upstream: u, status: this.status, headers: this.headers, body });
    }
    this.done(res.destroyed && !res.writableFinished ? { kind: 'aborted', upstream: u } : { kind: 'streamed', upstream: u, status: this.status });
  };
}
