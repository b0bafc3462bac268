// A real EVM node for the tests: anvil from npm (@foundry-rs/anvil-linux-amd64),
// on 127.0.0.1 and a free port. Ready when it prints its `Listening on` line.
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
export const ANVIL_BIN = join(dirname(require.resolve('@foundry-rs/anvil-linux-amd64/package.json')), 'bin', 'anvil');

export interface Anvil {
  readonly url: string;
  readonly port: number;
  readonly chainId: number;
  readonly proc: ChildProcess;
  rpc(method: string, params?: unknown[]): Promise<{ jsonrpc: string; id: number; result?: unknown; error?: { code: number; message: string } }>;
  mine(blocks?: number): Promise<void>;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

export function startAnvil(opts: { chainId?: number; port?: number; args?: string[] } = {}): Promise<Anvil> {
  const chainId = opts.chainId ?? 31337;
  const proc = spawn(ANVIL_BIN, ['--host', '127.0.0.1', '--port', String(opts.port ?? 0), '--chain-id', String(chainId), ...(opts.args ?? [])], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  const exited = new Promise<void>((r) => proc.once('exit', () => (running.delete(proc), r())));
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`anvil printed no 'Listening on' line within 20 s:\n${output}`));
    }, 20_000);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`anvil exited (${code}) before listening:\n${output}`));
    });
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /Listening on 127\.0\.0\.1:(\d+)/.exec(output);
      if (!m) return;
      clearTimeout(timer);
      proc.stdout!.off('data', onData);
      proc.stdout!.resume(); // keep draining so anvil never blocks on a full pipe
      proc.stderr!.resume();
      const port = Number(m[1]);
      const url = `http://127.0.0.1:${port}`;
      let id = 0;
      const rpc: Anvil['rpc'] = async (method, params = []) => {
        const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }) });
        return (await r.json()) as Awaited<ReturnType<Anvil['rpc']>>;
      };
      resolve({
        url,
        port,
        chainId,
        proc,
        rpc,
        mine: async (blocks = 1) => {
          await rpc('anvil_mine', [`0x${blocks.toString(16)}`]);
        },
        stop: async () => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
          await exited;
        },
      });
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  });
}
