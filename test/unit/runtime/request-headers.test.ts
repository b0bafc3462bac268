// runtime/request-headers.ts lists every request header the runtime reads, and
// the CORS preflight grants the ones a page's script may set (issue 32). Here
// the TypeScript checker finds every read of a request header in runtime/:
// `req.headers.x`, `req.headers['x']`, `h.x` where `h = req.headers`, a
// parameter some caller passes `req.headers` to, and `req.headers[name]` where
// `name`'s type is a union of literals. A read missing from the table, or one
// whose name the checker cannot see, fails; so does an entry nothing reads.
import { describe, expect, it } from 'vitest';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { ROOT } from '../../e2e/harness.ts';
import { CORS_ALLOW_HEADERS, REQUEST_HEADERS } from '../../../runtime/request-headers.ts';

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? tsFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

interface Read {
  readonly name: string | null;
  readonly at: string;
}

/** Every read of a request header in `files`: its name (null when the checker cannot tell) and where. */
function requestHeaderReads(files: readonly string[]): Read[] {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  const program = ts.createProgram(files, options);
  const checker = program.getTypeChecker();
  const sources = files.map((f) => program.getSourceFile(f)!);

  const calls: ts.CallExpression[] = [];
  const collect = (n: ts.Node): void => {
    if (ts.isCallExpression(n)) calls.push(n);
    ts.forEachChild(n, collect);
  };
  for (const s of sources) collect(s);

  const isIncomingMessage = (t: ts.Type): boolean => {
    const nn = checker.getNonNullableType(t);
    if (nn.isUnion()) return nn.types.some(isIncomingMessage);
    const sym = nn.getSymbol();
    if (sym?.getName() === 'IncomingMessage') return true;
    return (nn.isClassOrInterface() ? checker.getBaseTypes(nn) : []).some(isIncomingMessage);
  };

  // Does `e` evaluate to a request's headers? Memoized by node (false while in progress: a cycle proves nothing).
  const memo = new Map<ts.Node, boolean>();
  const isRequestHeaders = (e: ts.Expression): boolean => {
    while (ts.isParenthesizedExpression(e) || ts.isNonNullExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e)) e = e.expression;
    const known = memo.get(e);
    if (known !== undefined) return known;
    memo.set(e, false);
    const yes = evaluatesToRequestHeaders(e);
    memo.set(e, yes);
    return yes;
  };
  const evaluatesToRequestHeaders = (e: ts.Expression): boolean => {
    if (ts.isPropertyAccessExpression(e) && e.name.text === 'headers') return isIncomingMessage(checker.getTypeAtLocation(e.expression));
    if (!ts.isIdentifier(e)) return false;
    const sym = checker.getSymbolAtLocation(e);
    for (const d of sym?.declarations ?? []) {
      if (ts.isVariableDeclaration(d) && d.initializer !== undefined && isRequestHeaders(d.initializer)) return true;
      if (ts.isParameter(d) && ts.isFunctionLike(d.parent)) {
        const i = d.parent.parameters.indexOf(d);
        for (const c of calls) {
          if (checker.getResolvedSignature(c)?.declaration !== d.parent) continue;
          const arg = c.arguments[i];
          if (arg !== undefined && isRequestHeaders(arg)) return true;
        }
      }
    }
    return false;
  };

  const reads: Read[] = [];
  for (const s of sources) {
    const where = (n: ts.Node) => `${relative(ROOT, s.fileName)}:${s.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
    const visit = (n: ts.Node): void => {
      if (ts.isPropertyAccessExpression(n) && isRequestHeaders(n.expression)) reads.push({ name: n.name.text, at: where(n) });
      else if (ts.isElementAccessExpression(n) && isRequestHeaders(n.expression)) {
        const t = checker.getTypeAtLocation(n.argumentExpression);
        const parts = t.isUnion() ? t.types : [t];
        if (parts.every((p) => p.isStringLiteral())) for (const p of parts) reads.push({ name: (p as ts.StringLiteralType).value, at: where(n) });
        else reads.push({ name: null, at: where(n) });
      } else if (ts.isVariableDeclaration(n) && ts.isObjectBindingPattern(n.name) && n.initializer !== undefined && isRequestHeaders(n.initializer)) {
        for (const b of n.name.elements) {
          const key = b.propertyName ?? b.name;
          reads.push({ name: ts.isIdentifier(key) || ts.isStringLiteral(key) ? key.text : null, at: where(b) });
        }
      }
      ts.forEachChild(n, visit);
    };
    visit(s);
  }
  return reads;
}

describe('request headers the runtime reads (issue 32)', () => {
  const reads = requestHeaderReads(tsFiles(join(ROOT, 'runtime')));

  it('finds the reads it must: the key, the JWT, an aliased read and a parameter fed the request headers', () => {
    const at = (name: string) => reads.filter((r) => r.name === name).map((r) => r.at.split(':')[0]);
    expect(at('x-api-key')).toContain('runtime/admission/admission.ts');
    expect(at('authorization')).toContain('runtime/admission/admission.ts');
    // blockbook.ts: `const h = x.req.headers; h.accept`, and the PASS list read as `x.req.headers[name]`.
    expect(at('accept')).toContain('runtime/kinds/blockbook/module.ts');
    expect(at('if-modified-since')).toContain('runtime/kinds/blockbook/module.ts');
    // key-policy.ts: requestRefusal(p, headers, ...) is called with x.req.headers.
    expect(at('user-agent')).toContain('runtime/keys/key-policy.ts');
  });

  it('every request header read in runtime/ is in REQUEST_HEADERS (so CORS grants what a script may set), under a name the checker can see', () => {
    expect(reads.filter((r) => r.name === null).map((r) => r.at)).toEqual([]);
    const missing = reads.filter((r) => r.name !== null && !(r.name in REQUEST_HEADERS)).map((r) => `${r.name} (${r.at})`);
    expect(missing).toEqual([]);
  });

  it('every entry of REQUEST_HEADERS is still read somewhere', () => {
    const read = new Set(reads.map((r) => r.name));
    expect(Object.keys(REQUEST_HEADERS).filter((n) => !read.has(n))).toEqual([]);
  });

  it('the preflight grants exactly the headers a script sets, sorted', () => {
    expect(CORS_ALLOW_HEADERS).toBe('accept, accept-language, authorization, content-type, if-modified-since, if-none-match, user-agent, x-api-key, x-request-id');
  });
});
