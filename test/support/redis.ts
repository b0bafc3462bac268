// A real redis-server (Debian package, installed by .ci/run) on 127.0.0.1 and
// a free port, ready when it says so.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { freePort } from './http.ts';

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly proc: ChildProcess;
  stop(): Promise<void>;
}

export function redisServerPath(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('redis-server is not installed: apt-get install -y redis-server (.ci/run does this)');
  }
}

/** `args`: more of redis-server's options (`--enable-debug-command local` for DEBUG SLEEP). */
export async function startRedis(port?: number, args: readonly string[] = []): Promise<RedisServer> {
  const p = port ?? (await freePort());
  const proc = spawn(redisServerPath(), ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let out = '';
  await new Promise<void>((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`redis-server not ready in 10 s:\n${out}`)), 10_000);
    proc.once('exit', (code) => {
      clearTimeout(t);
      fail(new Error(`redis-server exited (${code}):\n${out}`));
    });
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('Ready to accept connections')) {
        clearTimeout(t);
        ok();
      }
    });
  });
  proc.stdout!.resume();
  proc.stderr!.resume();
  return {
    url: `redis://127.0.0.1:${p}`,
    port: p,
    proc,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}
