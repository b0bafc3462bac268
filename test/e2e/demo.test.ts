// Not on fixture.ts: `npm run demo` builds and starts its gateway itself, and that is what this file tests.
// `npm run demo`, the README's first command: builds gateway.yaml, starts anvil
// behind every EVM chain and the stand-ins behind the others, and prints one
// ready-to-paste curl line per interface and key placement. Every printed
// line is sent here as written, and the README's tour shows exactly what it
// prints; Ctrl-C (SIGINT) stops everything it started.
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rawRequest, ROOT } from './harness.ts';
import { fencedBlocks } from '../support/doc-links.ts';

interface Curl {
  url: string;
  headers: Record<string, string>;
  body?: string;
  comment: string;
}

function parseCurl(line: string): Curl {
  const [cmd, comment = ''] = line.split(/\s+#\s+/);
  const tokens = [...cmd!.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
  const out: Curl = { url: '', headers: {}, comment };
  for (let i = 1; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t === '-s') continue;
    if (t === '-H') {
      const [k, ...v] = tokens[++i]!.split(':');
      out.headers[k!.trim().toLowerCase()] = v.join(':').trim();
    } else if (t === '-d') out.body = tokens[++i]!;
    else if (t === '|') break;
    else out.url = t;
  }
  return out;
}

describe('npm run demo', () => {
  it('brings the whole gateway up, every printed curl line works, and Ctrl-C stops it all', { timeout: 120_000 }, async () => {
    const demo = spawn('npm', ['run', 'demo'], { cwd: ROOT, env: { ...process.env, RPC_PORT: '0', EXPLORER_PORT: '0', ADMIN_PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    let stdout = '';
    demo.stderr!.setEncoding('utf8').on('data', (c: string) => (out += c));
    const exited = new Promise<number | null>((r) => demo.once('exit', (code) => r(code)));
    onTestFinished(() => {
      try {
        process.kill(-demo.pid!, 'SIGKILL'); // only if something above failed and left it running
      } catch {
        // already gone
      }
    });
    await new Promise<void>((ok, fail) => {
      demo.stdout!.setEncoding('utf8').on('data', (c: string) => {
        out += c;
        stdout += c;
        if (/Ctrl-C stops[^\n]*\n/.test(stdout)) ok();
      });
      void exited.then((code) => fail(new Error(`demo exited (${code}):\n${out}`)));
    });
    const key = /demo key \(shown once\): (\S+)/.exec(out)![1]!;
    const lines = out.split('\n').filter((l) => l.startsWith('curl '));
    expect(lines.length).toBeGreaterThanOrEqual(12);
    let placements = 0;
    for (const line of lines) {
      const c = parseCurl(line);
      if (c.url.includes(key) || c.headers['x-api-key'] === key) placements++;
      const r = await rawRequest(c.url, { method: c.body !== undefined ? 'POST' : 'GET', headers: c.headers, body: c.body });
      if (c.url.includes('/metrics')) {
        expect(r.text).toContain('gateway_requests_total');
      } else if (c.comment.includes('4002')) {
        expect(r.status).toBe(500);
        expect(r.json().code).toBe(4002);
      } else if (line.includes('eth_accounts')) {
        expect(r.json().error.code).toBe(-32601);
      } else if (c.comment.includes('-32602')) {
        expect(r.json().error).toMatchObject({ code: -32602, data: { path: '/0' } });
      } else {
        expect(r.status, line).toBe(200);
      }
    }
    expect(placements).toBeGreaterThanOrEqual(9);
    // The README shows what the demo prints, with the default ports and <key> for the key of the run.
    const port = (path: string) => new URL(parseCurl(lines.find((l) => l.includes(path))!).url).port;
    let printed = stdout.slice(stdout.indexOf('gateway is up.'), stdout.indexOf('\n', stdout.indexOf('Ctrl-C stops')) + 1).replaceAll(key, '<key>');
    for (const [path, standard] of [['/ethereum', '8545'], ['/bitcoin', '8080'], ['/metrics', '9100']] as const) {
      printed = printed.replaceAll(`127.0.0.1:${port(path)}/`, `127.0.0.1:${standard}/`);
    }
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(fencedBlocks(readme, 'text').find((b) => b.startsWith('gateway is up.')), 'README.md has the demo output').toBe(printed);
    const urls = lines.map((l) => parseCurl(l).url);
    // Ctrl-C in a terminal signals the whole foreground process group.
    process.kill(-demo.pid!, 'SIGINT');
    await exited;
    // Nothing it started still answers.
    for (const u of urls) await expect(rawRequest(u)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
