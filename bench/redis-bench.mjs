// A redis-server on a free loopback port for bench:extra (the Debian package, as the tests use).
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:net';

export async function startRedisForBench() {
  const port = await new Promise((ok) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => ok(p));
    });
  });
  const bin = execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
  const proc = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((ok) => proc.stdout.on('data', (c) => String(c).includes('Ready to accept') && ok()));
  return { url: `redis://127.0.0.1:${port}`, stop: () => new Promise((ok) => (proc.once('exit', ok), proc.kill('SIGTERM'))) };
}
