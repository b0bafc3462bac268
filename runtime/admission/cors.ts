// The manifest's CORS policy, in one place: the headers of answers to
// requests that carry an Origin, and the answer to a preflight.
import type { Exchange } from '../exchange.ts';
import { CORS_ALLOW_HEADERS } from '../request-headers.ts';

/** What a browser dapp may read of an answer: its request id, the cache's word, and its key's limits. */
const EXPOSE = 'x-request-id, x-cache, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, x-credits-used, retry-after';

export class Cors {
  private readonly all: boolean;
  private readonly origins: ReadonlySet<string>;

  constructor(origins: readonly string[]) {
    this.all = origins.includes('*');
    this.origins = new Set(origins);
  }

  /** Adds the headers for an answer to a request from `origin` (none if it is not allowed). */
  add(origin: string, out: string[]): void {
    if (this.all) out.push('access-control-allow-origin', '*', 'access-control-expose-headers', EXPOSE);
    else if (this.origins.has(origin)) out.push('access-control-allow-origin', origin, 'vary', 'origin', 'access-control-expose-headers', EXPOSE);
  }

  /** Answers an OPTIONS request: 204, with the CORS grant if its origin is allowed. */
  preflight(x: Exchange): void {
    x.label = 'preflight';
    const origin = x.req.headers.origin;
    const headers = ['x-request-id', x.id, 'allow', 'GET, POST, OPTIONS'];
    if (origin !== undefined && (this.all || this.origins.has(origin))) {
      headers.push(
        'access-control-allow-origin',
        this.all ? '*' : origin,
        'access-control-allow-methods',
        'GET, POST, OPTIONS',
        // Every header the gateway reads that a script may set (a key's JWT included).
        'access-control-allow-headers',
        CORS_ALLOW_HEADERS,
        'access-control-max-age',
        '600',
      );
      if (!this.all) headers.push('vary', 'origin');
    }
    if (x.cacheTag !== null) headers.push(...x.cacheTag);
    x.res.writeHead(204, headers);
    x.res.end();
  }
}
