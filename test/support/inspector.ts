// Looks inside a gateway process without a test hook in the product: the
// process is started with `--inspect=127.0.0.1:0`, says on stderr where its
// inspector listens, and the test speaks the Chrome DevTools Protocol to it
// over a WebSocket (undici's, already a dependency) to force a full GC and
// read figures such as process.memoryUsage().
import type { ChildProcess } from 'node:child_process';
import { WebSocket } from 'undici';

const LISTENING = /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/[\w-]+)/;

/** The inspector's WebSocket URL, from what the process wrote on stderr so far or writes next. */
export function inspectorUrl(proc: ChildProcess, stderrSoFar: readonly string[], timeoutMs = 15_000): Promise<string> {
  const seen = LISTENING.exec(stderrSoFar.join(''));
  if (seen) return Promise.resolve(seen[1]!);
  return new Promise((ok, fail) => {
    let text = stderrSoFar.join('');
    const done = (): void => {
      clearTimeout(timer);
      proc.stderr!.off('data', onData);
      proc.off('exit', onExit);
    };
    const onData = (c: Buffer | string): void => {
      text += c.toString();
      const m = LISTENING.exec(text);
      if (m) {
        done();
        ok(m[1]!);
      }
    };
    const onExit = (): void => {
      done();
      fail(new Error(`the process exited before its inspector listened:\n${text}`));
    };
    const timer = setTimeout(() => {
      done();
      fail(new Error(`no inspector within ${timeoutMs} ms:\n${text}`));
    }, timeoutMs);
    proc.stderr!.on('data', onData);
    proc.once('exit', onExit);
  });
}

export interface Cdp {
  /** One protocol command; resolves with its result, rejects with its error. */
  send<T = unknown>(method: string, params?: Record<string, unknown>): Promise<T>;
  /** Evaluates `expression` in the process and returns its value. */
  evaluate<T = unknown>(expression: string): Promise<T>;
  /** A full garbage collection (HeapProfiler.collectGarbage). */
  collectGarbage(): Promise<void>;
  close(): void;
}

export function connectCdp(url: string): Promise<Cdp> {
  const ws = new WebSocket(url);
  let next = 1;
  const pending = new Map<number, { ok: (v: unknown) => void; fail: (e: Error) => void }>();
  ws.addEventListener('message', (ev) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (msg.id === undefined) return; // an event
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.fail(new Error(`inspector: ${msg.error.message}`));
    else p.ok(msg.result);
  });
  ws.addEventListener('close', () => {
    for (const p of pending.values()) p.fail(new Error('inspector connection closed'));
    pending.clear();
  });
  const send = <T>(method: string, params: Record<string, unknown> = {}): Promise<T> =>
    new Promise<T>((ok, fail) => {
      const id = next++;
      pending.set(id, { ok: ok as (v: unknown) => void, fail });
      ws.send(JSON.stringify({ id, method, params }));
    });
  const cdp: Cdp = {
    send,
    async evaluate<T>(expression: string): Promise<T> {
      const r = await send<{ result: { value?: unknown }; exceptionDetails?: { text: string } }>('Runtime.evaluate', { expression, returnByValue: true });
      if (r.exceptionDetails) throw new Error(`inspector: ${expression}: ${r.exceptionDetails.text}`);
      return r.result.value as T;
    },
    async collectGarbage(): Promise<void> {
      await send('HeapProfiler.collectGarbage');
    },
    close: () => ws.close(),
  };
  return new Promise((ok, fail) => {
    ws.addEventListener('open', () => ok(cdp), { once: true });
    ws.addEventListener('error', () => fail(new Error(`inspector: cannot connect to ${url}`)), { once: true });
  });
}
