// One JSON-RPC call the gateway itself makes through a chain's dispatch (the
// same way a client's call goes upstream: pool, routing, retries, breaker),
// with the answer held whole and parsed. The subscriptions' block and log
// fetches go this way (feed.ts).
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { Dispatch } from '../dispatch.ts';
import type { ForwardResult, ForwardTarget, Sink, Verdict } from '../proxy.ts';
import type { EvmRouteSpec } from '../types.ts';
import type { Upstream } from '../upstream.ts';
import { forwardRequest, isHtml, MAX_MERGE_BYTES } from '../interfaces/common.ts';

const HEADERS = ['content-type', 'application/json'];

/** A failed attempt: a 5xx or an HTML error page; anything else is held for the caller. */
function classify(status: number, h: IncomingHttpHeaders): Verdict {
  return status >= 500 || isHtml(h) ? 'bad' : 'buffer';
}

function rpcPath(u: Upstream): string {
  return u.rpcPath;
}

/**
 * Collects an answer a dispatch writes as a stream (a pool passes a held
 * answer on that way) as well as one it hands over held.
 */
class HeldTarget implements ForwardTarget {
  private readonly chunks: Buffer[] = [];
  destroyed = false;
  headersSent = false;
  readonly res: Sink = this as unknown as Sink;

  constructor(private readonly done: (r: { ok: true; body: Buffer } | { ok: false; why: string }) => void) {}

  streamHead(): void {
    this.headersSent = true;
  }
  write(chunk: Buffer | string): boolean {
    this.chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    return true;
  }
  end(chunk?: Buffer | string): this {
    if (chunk !== undefined) this.write(chunk);
    return this;
  }
  once(): this {
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }

  forwarded(r: ForwardResult): void {
    if (r.kind === 'buffered') return this.done({ ok: true, body: r.body });
    if (r.kind === 'streamed') return this.done({ ok: true, body: Buffer.concat(this.chunks) });
    this.done({ ok: false, why: r.kind === 'failed' ? r.fail : 'aborted' });
  }
}

/** Sends one call (`method`, `params` as JSON text) and resolves with its result, or rejects with why not. */
export function rpcCall(dispatch: Dispatch, route: EvmRouteSpec, method: string, params: string): Promise<unknown> {
  const body = `{"jsonrpc":"2.0","id":1,"method":"${method}","params":${params}}`;
  return new Promise((resolve, reject) => {
    const target = new HeldTarget((r) => {
      if (!r.ok) return reject(new Error(`${method}: upstream ${r.why}`));
      let v: { result?: unknown; error?: { message?: unknown } };
      try {
        v = JSON.parse(r.body.toString('utf8')) as typeof v;
      } catch {
        return reject(new Error(`${method}: the answer is not JSON`));
      }
      if (v === null || typeof v !== 'object' || 'error' in v) return reject(new Error(`${method}: ${String(v?.error?.message ?? 'no result')}`));
      resolve(v.result);
    });
    dispatch(target, forwardRequest(route, 'POST', rpcPath, HEADERS.slice(), body, true, classify, MAX_MERGE_BYTES));
  });
}
