// nginx as a plain round-robin load balancer over some upstreams: the peer the
// bench compares the gateway with (bench/mix.mjs runs nginx+njs), reduced to
// what a pool behind a load balancer is: one `upstream` block, each request to
// the next server in turn, nothing else. Debian's nginx (test/support/
// ensure-tools.mjs and .ci/run install it).
//
// It runs as one process (`master_process off`), so that, launched through
// util-linux `setpriv --pdeathsig KILL` as anvil is, it cannot outlive the
// test process; a master's workers would. Ready when its port accepts a
// connection; the port is a free one the OS picked just before.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { PROJECT_ROOT } from './paths.ts';
import { freePort } from './http.ts';

export interface RoundRobin {
  /** http://127.0.0.1:PORT; every path goes to the upstreams as it is. */
  readonly url: string;
  /** SIGTERM (SIGKILL after 5 s); resolves once nginx has exited. Safe to call twice. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 5_000;
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

/** The nginx binary: on PATH, or where Debian puts it (/usr/sbin is not on every user's PATH). */
export function nginxBinary(): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(':').filter(Boolean), '/usr/sbin', '/usr/local/sbin']) {
    const p = join(dir, 'nginx');
    if (existsSync(p)) return p;
  }
  return null;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const sock = connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      ok(true);
    });
    sock.once('error', () => ok(false));
  });
}

let counter = 0;

/** Starts nginx balancing round-robin over `upstreams` (http://127.0.0.1:PORT URLs), keep-alive to each. */
export async function startRoundRobin(upstreams: readonly string[]): Promise<RoundRobin> {
  const bin = nginxBinary();
  if (bin === null) throw new Error('nginx not found: install it (`apt-get install -y nginx`; npm test does it through test/support/ensure-tools.mjs)');
  const dir = join(PROJECT_ROOT, '.tmp', 'nginx', `rr-${process.pid}-${counter++}`);
  mkdirSync(join(dir, 'tmp'), { recursive: true });
  const port = await freePort();
  const servers = upstreams.map((u) => `        server ${new URL(u).host};`).join('\n');
  writeFileSync(
    join(dir, 'nginx.conf'),
    `master_process off;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log error;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path ${dir}/tmp/body;
    proxy_temp_path ${dir}/tmp/proxy;
    fastcgi_temp_path ${dir}/tmp/fastcgi;
    uwsgi_temp_path ${dir}/tmp/uwsgi;
    scgi_temp_path ${dir}/tmp/scgi;
    upstream pool {
${servers}
        keepalive 32;
    }
    server {
        listen 127.0.0.1:${port};
        location / {
            proxy_pass http://pool;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
`,
  );
  const args = ['-p', `${dir}/`, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')];
  const proc: ChildProcess = SETPRIV
    ? spawn(SETPRIV, ['--pdeathsig', 'KILL', '--', bin, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
    : spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  if (!SETPRIV) process.once('exit', () => proc.kill('SIGKILL'));
  let gone = false;
  void exited.then(() => (gone = true));

  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await accepts(port))) {
    const log = (): string => stderr + (existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : '');
    if (gone) throw new Error(`nginx exited before listening:\n${log()}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`nginx did not listen on ${port} within ${READY_TIMEOUT_MS / 1000} s:\n${log()}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  let stopping: Promise<void> | null = null;
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => {
      stopping ??= (async () => {
        if (!gone) {
          proc.kill('SIGTERM');
          const force = setTimeout(() => proc.kill('SIGKILL'), STOP_GRACE_MS);
          await exited;
          clearTimeout(force);
        }
      })();
      return stopping;
    },
  };
}
