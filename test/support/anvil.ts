// A real EVM node for the tests and the demo: anvil from npm
// (@foundry-rs/anvil-linux-amd64, pinned), on 127.0.0.1 and a free port.
// Ready when it prints `Listening on 127.0.0.1:PORT` on stdout; that line is
// also where the port comes from (--port 0 lets the OS pick). No sleeps.
// No anvil outlives the process that started it: it is launched through
// util-linux `setpriv --pdeathsig KILL`, so the kernel kills it when its parent
// dies, whatever the cause (SIGKILL included). Where setpriv is missing or
// refused, anvil is started directly and killed on this process's 'exit' and
// on SIGINT/SIGTERM/SIGHUP instead (a SIGKILL then cannot be caught).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
export const ANVIL_BIN = join(dirname(require.resolve('@foundry-rs/anvil-linux-amd64/package.json')), 'bin', 'anvil');

/** How long anvil may take to print its `Listening on` line. */
export const ANVIL_READY_TIMEOUT_MS = 20_000;
/** How long stop() waits after SIGTERM before it sends SIGKILL. */
const STOP_GRACE_MS = 5_000;

export interface JsonRpcResponse {
  jsonrpc: string;
  id: number | string | null;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export interface Anvil {
  /** http://127.0.0.1:PORT */
  readonly url: string;
  readonly port: number;
  readonly chainId: number;
  readonly proc: ChildProcess;
  /** One JSON-RPC call over plain fetch; resolves with the whole response object (result or error). */
  rpc(method: string, params?: unknown[] | Record<string, unknown>): Promise<JsonRpcResponse>;
  /** Mines `blocks` blocks (default 1) with anvil_mine; throws if anvil answers an error. */
  mine(blocks?: number): Promise<void>;
  /** SIGTERM (SIGKILL after 5 s), resolves once the process has exited. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StartAnvilOptions {
  /** --chain-id, default 31337 (anvil's own default). */
  chainId?: number;
  /** A fixed port, e.g. to restart a node where it was; default 0 (free port). */
  port?: number;
  /** Extra anvil arguments (not --host/--port/--chain-id; not --silent/-q, which hide the Listening line). */
  args?: string[];
}

const running = new Set<ChildProcess>();
let hooked = false;

function killAll(): void {
  for (const p of running) {
    try {
      p.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}

let signalsHooked = false;

function hookProcessExit(): void {
  if (!hooked) {
    hooked = true;
    process.on('exit', killAll);
  }
  if (launcher === 'setpriv' || signalsHooked) return;
  signalsHooked = true;
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      killAll();
      // Alone on this signal: keep its default meaning (terminate by it).
      // Otherwise the other listener (the demo, a test runner) decides.
      // Registered first, so the count still includes every `once` listener.
      if (process.listenerCount(sig) === 1) {
        process.off(sig, onSignal);
        process.kill(process.pid, sig);
      }
    };
    process.prependListener(sig, onSignal);
  }
}

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
// STANDIN_ANVIL_LAUNCHER=direct forces the fallback (its tests use it)
let launcher: 'setpriv' | 'direct' = SETPRIV && process.env.STANDIN_ANVIL_LAUNCHER !== 'direct' ? 'setpriv' : 'direct';
/** How anvil is launched: 'setpriv' (dies with its parent, kernel-enforced) or 'direct' (killed on exit and signals). */
export function anvilLauncher(): 'setpriv' | 'direct' {
  return launcher;
}

const HIDES_LISTENING = new Set(['--silent', '-q', '--quiet']);
const OWNED = new Set(['--host', '--port', '-p', '--chain-id']);

export function startAnvil(opts: StartAnvilOptions = {}): Promise<Anvil> {
  const chainId = opts.chainId ?? 31337;
  const extra = opts.args ?? [];
  const bad = extra.find((a) => HIDES_LISTENING.has(a) || OWNED.has(a.split('=')[0]!));
  if (bad !== undefined) {
    return Promise.reject(
      new Error(
        HIDES_LISTENING.has(bad)
          ? `startAnvil: ${bad} hides anvil's 'Listening on' line, which is how readiness and the port are read`
          : `startAnvil: ${bad} is set by startAnvil itself (use the chainId/port options)`,
      ),
    );
  }
  return launch(chainId, opts.port ?? 0, extra).catch((err: Error & { setprivRefused?: boolean }) => {
    if (!err.setprivRefused) throw err;
    launcher = 'direct'; // e.g. a sandbox without prctl: fall back for good
    return launch(chainId, opts.port ?? 0, extra);
  });
}

function launch(chainId: number, port: number, extra: string[]): Promise<Anvil> {
  hookProcessExit();
  const anvilArgs = ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), ...extra];
  const viaSetpriv = launcher === 'setpriv';
  // setpriv execs anvil in place: proc.pid is anvil's own pid
  const proc = viaSetpriv
    ? spawn(SETPRIV!, ['--pdeathsig', 'KILL', '--', ANVIL_BIN, ...anvilArgs], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(ANVIL_BIN, anvilArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(proc);
  const exited = new Promise<void>((r) => {
    const done = (): void => {
      running.delete(proc);
      r();
    };
    proc.once('exit', done);
    proc.once('error', () => {
      // spawn failed (no binary): there will be no 'exit'
      if (proc.pid === undefined) done();
    });
  });

  let output = '';
  let stdoutLine = '';
  return new Promise<Anvil>((resolve, reject) => {
    let settled = false;
    const cleanup = (): void => {
      settled = true;
      clearTimeout(timer);
      proc.stdout!.off('data', onStdout);
      proc.stderr!.off('data', onStderr);
      proc.off('exit', onEarlyExit);
      proc.off('error', onError);
      // keep draining both pipes so anvil never blocks on a full pipe
      proc.stdout!.resume();
      proc.stderr!.resume();
    };
    const fail = (err: Error): void => {
      if (settled) return;
      cleanup();
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`anvil printed no 'Listening on' line within ${ANVIL_READY_TIMEOUT_MS / 1000} s:\n${output}`)), ANVIL_READY_TIMEOUT_MS);
    const onEarlyExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      const err: Error & { setprivRefused?: boolean } = new Error(`anvil exited (${signal ?? code}) before listening:\n${output}`);
      // setpriv itself failed (it says so before exec): retry without it
      if (viaSetpriv && /^setpriv: (?!failed to execute)/m.test(output)) err.setprivRefused = true;
      fail(err);
    };
    const onError = (err: Error): void => fail(new Error(`anvil could not be started (${ANVIL_BIN}): ${err.message}`));
    const onStderr = (c: Buffer): void => {
      output += c.toString();
    };
    const onStdout = (c: Buffer): void => {
      const text = c.toString();
      output += text;
      stdoutLine += text;
      // whole lines only: the port may arrive split across chunks
      const lines = stdoutLine.split('\n');
      stdoutLine = lines.pop()!;
      for (const line of lines) {
        const m = /^Listening on 127\.0\.0\.1:(\d+)\s*$/.exec(line.trim());
        if (m) return ready(Number(m[1]));
      }
    };
    const ready = (port: number): void => {
      cleanup();
      const url = `http://127.0.0.1:${port}`;
      let id = 0;
      const rpc: Anvil['rpc'] = async (method, params = []) => {
        const r = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
        });
        return (await r.json()) as JsonRpcResponse;
      };
      let stopping: Promise<void> | null = null;
      resolve({
        url,
        port,
        chainId,
        proc,
        rpc,
        mine: async (blocks = 1) => {
          const r = await rpc('anvil_mine', [`0x${blocks.toString(16)}`]);
          if (r.error) throw new Error(`anvil_mine: ${r.error.message}`);
        },
        stop: () => {
          stopping ??= (async () => {
            if (proc.exitCode === null && proc.signalCode === null) {
              proc.kill('SIGTERM');
              const force = setTimeout(() => proc.kill('SIGKILL'), STOP_GRACE_MS);
              await exited;
              clearTimeout(force);
            }
            await exited;
          })();
          return stopping;
        },
      });
    };
    proc.stdout!.on('data', onStdout);
    proc.stderr!.on('data', onStderr);
    proc.once('exit', onEarlyExit);
    proc.once('error', onError);
  });
}
