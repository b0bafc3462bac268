// A socket's message as an HTTP request to the chain's own flow: the route
// handler, admission, the guard, the cache, the pool and Forward see an
// Exchange as for any POST, and the answer it would write comes back here
// whole. So a call over a socket crosses exactly the seam an HTTP call does.
import { EventEmitter } from 'node:events';
import { Readable } from 'node:stream';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** The request side: the upgrade's headers (key, origin, authorization, address) and one message as its body. */
export class FrameRequest extends Readable {
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;
  readonly httpVersion = '1.1';
  /** The body is all there (a lingering close has nothing to wait for). */
  readonly complete = true;

  constructor(
    readonly headers: IncomingHttpHeaders,
    readonly url: string,
    readonly socket: Socket,
    body: Buffer,
    readonly method = 'POST',
  ) {
    super();
    this.push(body);
    this.push(null);
  }

  override _read(): void {}

  asIncoming(): IncomingMessage {
    return this as unknown as IncomingMessage;
  }
}

/**
 * The response side: collects what the flow writes, and hands the status and
 * body over when it ends. 'close' follows the end, as on a ServerResponse,
 * so the request tracker counts and logs the call. Where the taker finishes
 * the answer itself (a protocol that reads more, or reshapes it: `done`
 * gives a promise of the status it answered with), 'close' waits for that,
 * so the call's line and metrics carry its real outcome and latency.
 */
export class FrameResponse extends EventEmitter {
  statusCode = 200;
  /** The raw header list of writeHead, for an answer written as HTTP (a refused upgrade). */
  headerList: readonly string[] = [];
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  shouldKeepAlive = true;
  private readonly chunks: Buffer[] = [];

  constructor(private readonly done: (status: number, body: Buffer, headers: readonly string[]) => void | Promise<number>) {
    super();
  }

  writeHead(status: number, headers?: readonly string[] | Record<string, unknown>): this {
    this.statusCode = status;
    this.headersSent = true;
    if (Array.isArray(headers)) this.headerList = headers as readonly string[];
    return this;
  }

  write(chunk: Buffer | string): boolean {
    this.chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    return true;
  }

  end(chunk?: Buffer | string): this {
    if (this.writableFinished || this.destroyed) return this;
    if (chunk !== undefined && chunk !== null) this.write(chunk);
    this.writableFinished = true;
    const finished = this.done(this.statusCode, this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks), this.headerList);
    // Only a promise defers it: a taker typed to return nothing may still hand back a value (an arrow's body).
    if (!(finished instanceof Promise)) this.emit('close');
    else {
      const over = (status: number): void => {
        this.statusCode = status;
        this.emit('close');
      };
      // A taker that failed to finish it: the call is over all the same, as the gateway's own fault.
      finished.then(over, () => over(500));
    }
    return this;
  }

  destroy(): this {
    if (this.writableFinished || this.destroyed) return this;
    this.destroyed = true;
    this.done(0, Buffer.alloc(0), []);
    this.emit('close');
    return this;
  }

  asServerResponse(): ServerResponse {
    return this as unknown as ServerResponse;
  }
}
