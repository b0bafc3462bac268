// The primary's view of its workers in multi-process mode (process/cluster.ts):
// each worker as a Member (the build it runs, where it is in its life), and
// the questions the admin listener asks them (metrics, status), each answered
// or given up on.
import type { Worker } from 'node:cluster';
import type { Build } from './cluster-builds.ts';
import type { FromWorker, ToWorker } from './cluster-ipc.ts';

/** How long the admin listener waits for a worker's metrics or status. */
const ASK_TIMEOUT_MS = 2_000;

/** A worker, the build it runs, and where it is in its life. */
export class Member {
  ready = false;
  retiring = false;
  /** Why it could not start, as it said. */
  failure: string | null = null;
  manifestSha256: string | null = null;
  /** Its public listeners, `host:port`. */
  addresses: readonly string[] = [];
  /** Resolves once the worker is ready (null), or with why it cannot start. */
  readonly started: Promise<string | null>;
  readonly exited: Promise<void>;
  /** Resolves once a retiring worker has stopped accepting (or exited). */
  readonly closed: Promise<void>;
  settle!: (why: string | null) => void;
  exit!: () => void;
  close!: () => void;

  constructor(
    readonly worker: Worker,
    readonly build: Build,
  ) {
    this.started = new Promise((r) => (this.settle = r));
    this.exited = new Promise((r) => (this.exit = r));
    this.closed = new Promise((r) => (this.close = r));
  }

  get pid(): number {
    return this.worker.process.pid!;
  }

  send(m: ToWorker): void {
    if (this.worker.isConnected()) this.worker.send(m);
  }
}

/** The primary's questions to workers (metrics, status), each answered or given up on. */
export class Asks {
  private next = 0;
  private readonly waiting = new Map<number, { m: Member; done: (a: FromWorker | null) => void }>();

  ask(m: Member, what: 'metrics' | 'status'): Promise<FromWorker | null> {
    const id = this.next++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.settle(id, null), ASK_TIMEOUT_MS);
      this.waiting.set(id, { m, done: (a) => (clearTimeout(timer), resolve(a)) });
      if (m.worker.isConnected()) m.worker.send({ gw: what, id } satisfies ToWorker);
      else this.settle(id, null);
    });
  }

  answer(m: Member, a: FromWorker): void {
    if ('id' in a && this.waiting.get(a.id)?.m === m) this.settle(a.id, a);
  }

  gone(m: Member): void {
    for (const [id, w] of this.waiting) if (w.m === m) this.settle(id, null);
  }

  private settle(id: number, a: FromWorker | null): void {
    const w = this.waiting.get(id);
    if (w === undefined) return;
    this.waiting.delete(id);
    w.done(a);
  }
}
