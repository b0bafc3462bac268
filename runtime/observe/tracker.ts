// Requests under way and their end: the count the metrics and the drain read,
// the metrics of each answered request, and its access log line.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessLog } from './access-log.ts';
import type { RouteMetrics } from './metrics.ts';

/** What the tracker reads of a request that is over (an Exchange). */
export interface Ended {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly forward: { cancel(): void } | null;
  readonly start: number;
  readonly written: number;
  readonly metrics: RouteMetrics;
  readonly label: string;
  readonly idJson: string;
  readonly key: { readonly logField: string } | null;
  readonly cacheLog: string;
  readonly upstream: { readonly logFields: string } | null;
}

const NO_KEY_FIELD = ',"keyId":null';
const NO_UPSTREAM_FIELDS = ',"upstream":null,"ms":';

export class RequestTracker {
  inflight = 0;
  /** Set once the server drains: every answer from then on says Connection: close. */
  draining = false;
  private idleWaiters: (() => void)[] = [];

  /** null when the level is above info. */
  constructor(private readonly accessLog: AccessLog | null) {}

  begin(): void {
    this.inflight++;
  }

  /** The response is over (finished, or the client went away): metrics and the access log. */
  done(x: Ended): void {
    this.inflight--;
    const res = x.res;
    const finished = res.writableFinished;
    if (!finished && x.forward !== null) x.forward.cancel();
    const ms = performance.now() - x.start;
    const status = finished ? res.statusCode : 0;
    const label = x.metrics.observe(x.label, status, ms);
    // The fields that come from the manifest and the keys file are JSON text
    // made once; the line itself is made later, off the request path.
    if (this.accessLog !== null) {
      this.accessLog.add(
        x.idJson,
        x.key === null ? NO_KEY_FIELD : x.key.logField,
        label.logFields,
        status,
        x.cacheLog + (x.upstream === null ? NO_UPSTREAM_FIELDS : x.upstream.logFields),
        ms,
        x.req.socket.bytesWritten - x.written,
      );
    }
    if (this.inflight === 0 && this.idleWaiters.length) for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Resolves once no request is under way. */
  idle(): Promise<void> {
    return this.inflight === 0 ? Promise.resolve() : new Promise<void>((r) => this.idleWaiters.push(r));
  }
}
