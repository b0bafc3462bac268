// A call the gateway itself makes into a chain's front (the layers under
// admission: a socket feed's fetches), as the client those layers answer: it
// has no key, no headers and no socket, and holds its answer (its request says
// `hold`, so no layer streams to it and its response is never written). Every
// way a layer answers a client (its own answer, a hit, a failure, an upstream
// answer held) ends in `done` or `failed`, once.
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { IncomingMessage } from 'node:http';
import type { Failure, Refused } from '../envelope.ts';
import type { ClientTarget } from '../exchange.ts';
import { nextRequestId } from '../observe/request-id.ts';
import type { KeyEntry } from '../keys/keys.ts';
import type { Cancelable, ForwardResult, Sink } from '../dispatch.ts';
import type { Upstream } from '../upstreams/upstream.ts';

/** No client: no headers to shape an answer by, and a loopback peer. */
const NO_CLIENT = { headers: {}, socket: { remoteAddress: '127.0.0.1' } } as unknown as IncomingMessage;
/** A held call's response, never written. */
const UNWRITTEN: Sink = { destroyed: false, headersSent: false } as Sink;

export class OwnCall implements ClientTarget {
  readonly id = nextRequestId();
  readonly req = NO_CLIENT;
  readonly res = UNWRITTEN;
  readonly key: KeyEntry | null = null;
  upstream: Upstream | null = null;
  cacheTag: readonly string[] | null = null;
  cacheLog = '';
  limitHeaders: readonly string[] | null = null;
  forward: Cancelable | null = null;

  constructor(
    /** The call's method, as a layer that names it reads it. */
    readonly label: string,
    private readonly done: (status: number, body: Buffer) => void,
    private readonly failed: (why: string) => void,
  ) {}

  send(status: number, body: string | Buffer): void {
    this.done(status, typeof body === 'string' ? Buffer.from(body) : body);
  }

  passOn(status: number, _headers: IncomingHttpHeaders, body: Buffer): void {
    this.done(status, body);
  }

  fail(f: Failure): void {
    this.failed(`upstream ${f}`);
  }

  refuse(r: Refused): void {
    this.failed(r.reason);
  }

  internal(err: unknown): void {
    this.failed((err as Error)?.message ?? String(err));
  }

  later(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.internal(err);
    }
  }

  streamHead(): void {
    throw new Error('a held call is never streamed');
  }

  forwarded(r: ForwardResult): void {
    if (r.kind === 'buffered') this.done(r.status, r.body);
    else this.failed(`upstream ${r.kind === 'failed' ? r.fail : r.kind}`);
  }
}
