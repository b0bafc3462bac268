// The builds of multi-process mode (process/cluster.ts rolls the workers onto
// them): a server file's content hashed, copied to a private folder of the
// primary's own (the file a worker runs, and any worker restarted later, is
// that copy), and checked with `node --check` before a worker starts from it.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';

/** The SHA-256 of a file's bytes (hex). */
export function sha256Of(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A build: the server file's content, as the private copy the workers run. */
export interface Build {
  readonly sha256: string;
  readonly file: string;
}

/** The private copies of the builds, in a folder of the primary's own, removed when it exits. */
export class BuildFiles {
  private readonly dir = mkdtempSync(join(tmpdir(), 'gateway-builds-'));
  constructor(private readonly entry: string) {}

  /** The file at the entry path now, and its hash. */
  read(): { bytes: Buffer; sha256: string } {
    const bytes = readFileSync(this.entry);
    return { bytes, sha256: sha256Of(bytes) };
  }

  /** A copy of what read() gave: the build the workers will run. */
  keep({ bytes, sha256 }: { bytes: Buffer; sha256: string }): Build {
    const file = join(this.dir, `${sha256}${extname(this.entry) || '.mjs'}`);
    writeFileSync(file, bytes);
    return { sha256, file };
  }

  drop(b: Build): void {
    rmSync(b.file, { force: true });
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** `node --check` of a copy: null, or the SyntaxError with the line it is on. */
export function syntaxProblem(file: string): Promise<string | null> {
  return new Promise((done) =>
    execFile(process.execPath, ['--check', file], (err, _out, stderr) => {
      if (err === null) return done(null);
      const lines = stderr.split('\n');
      const what = lines.find((l) => /^\w*Error\b/.test(l)) ?? `node --check exited with code ${err.code}`;
      const where = /:(\d+)$/.exec(lines[0] ?? '');
      done(where === null ? what : `${what} (line ${where[1]})`);
    }),
  );
}
