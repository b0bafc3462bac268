// The key store in Redis against the keys file (issue 22), for bench:extra:
// requests per second with wrk (20 connections), the keys used round-robin,
// for a working set of 1,000 keys and for 100,000. Alone:
//   node bench/keystore.mjs   (builds its own one-chain gateway and upstream)
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisForBench } from './redis-bench.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'bin/gateway.mjs');
const N = 100_000;
const run = async (cmd, args) => (await promisify(execFile)(cmd, args, { encoding: 'utf8' })).stdout;
const keyOf = (i) => `keystore-bench-key-${String(i).padStart(9, '0')}`;

/** The port a process listens on (its one listener), from /proc. */
async function portOf(pid) {
  for (;;) {
    try {
      const listening = readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1).map((l) => l.trim().split(/\s+/)).filter((f) => f[3] === '0A');
      const inodes = new Set(execFileSync('ls', ['-l', `/proc/${pid}/fd`], { encoding: 'utf8' }).split('\n').map((l) => /socket:\[(\d+)\]/.exec(l)?.[1]).filter(Boolean));
      const mine = listening.find((f) => inodes.has(f[9]));
      if (mine) return Number.parseInt(mine[1].split(':')[1], 16);
    } catch {}
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function keystoreFigures(bundle, upstreamUrl, work) {
  mkdirSync(work, { recursive: true });
  const file = join(work, 'keystore.yaml');
  const lines = ['keys:'];
  for (let i = 0; i < N; i++) lines.push(`  - id: k${i}`, `    sha256: "${createHash('sha256').update(keyOf(i)).digest('hex')}"`);
  writeFileSync(file, lines.join('\n') + '\n');
  const scripts = {};
  for (const count of [1000, N]) {
    const list = join(work, `keystore-${count}.txt`);
    writeFileSync(list, Array.from({ length: count }, (_, i) => keyOf(i)).join('\n') + '\n');
    scripts[count] = join(work, `keystore-${count}.lua`);
    writeFileSync(
      scripts[count],
      [
        'local keys = {}',
        `for line in io.lines("${list}") do keys[#keys + 1] = line end`,
        'local i = 0',
        'wrk.method = "POST"',
        `wrk.body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'`,
        'wrk.headers["Content-Type"] = "application/json"',
        'request = function()',
        '  i = i % #keys + 1',
        '  wrk.headers["X-API-Key"] = keys[i]',
        '  return wrk.format()',
        'end',
        '',
      ].join('\n'),
    );
  }
  const redis = await startRedisForBench();
  const rows = [];
  try {
    execFileSync(process.execPath, [CLI, 'keys', 'import', file, '--store', redis.url], { stdio: 'ignore' });
    for (const [store, keys] of [['file', file], ['redis', redis.url]]) {
      const p = spawn(process.execPath, ['--no-memory-reducer', bundle], { cwd: work, env: { PATH: process.env.PATH, GATEWAY_KEYS: keys, UPSTREAM_URL: upstreamUrl, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] });
      const port = await portOf(p.pid);
      for (const count of [1000, N]) {
        const url = `http://127.0.0.1:${port}/chain-000`;
        // Asynchronously: the upstream may live in this very process (bench:extra's).
        await run('wrk', ['-t1', '-c20', '-d3s', '-s', scripts[count], url]);
        const text = await run('wrk', ['-t1', '-c20', '-d5s', '--latency', '-s', scripts[count], url]);
        const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1] ?? 0);
        const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? 0);
        const p99 = /99%\s+([\d.]+\w+)/.exec(text)?.[1] ?? '?';
        rows.push(`${store}, ${count.toLocaleString('en')} keys: ${rps.toFixed(0)} req/s, p99 ${p99}, ${non2xx} non-2xx`);
      }
      p.kill('SIGTERM');
      await new Promise((r) => p.once('exit', r));
    }
  } finally {
    await redis.stop();
  }
  return `key store, wrk 20 connections, keys used round-robin: ${rows.join('; ')}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const work = join(ROOT, '.tmp', 'bench-keystore');
  mkdirSync(work, { recursive: true });
  const manifest = join(work, 'one.yaml');
  writeFileSync(
    manifest,
    'version: 1\nlisteners:\n  rpc: { host: 127.0.0.1, port: "0" }\nkeys: ./keys.yaml\nmethodSets:\n  evm: [eth_blockNumber]\nchains:\n  - { path: chain-000, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["${UPSTREAM_URL}"] }\n',
  );
  execFileSync(process.execPath, [CLI, 'build', manifest, '--out', join(work, 'one.mjs')], { stdio: 'ignore' });
  const answer = '{"jsonrpc":"2.0","id":1,"result":"0x10"}';
  const up = createServer((req, res) => (req.resume(), req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer))));
  await new Promise((r) => up.listen(0, '127.0.0.1', r));
  console.log(await keystoreFigures(join(work, 'one.mjs'), `http://127.0.0.1:${up.address().port}`, work));
  up.closeAllConnections();
  up.close();
}
