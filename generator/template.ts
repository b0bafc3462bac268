// `${VAR}` and `${VAR:-default}` in manifest strings. Parsed at build time into
// parts; resolved only when the server starts (runtime/config/env.ts).
import type { Template, TemplatePart } from '../runtime/types.ts';

export class TemplateError extends Error {}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Parses `${NAME}` and `${NAME:-default}`; throws TemplateError on a malformed `${`. */
export function parseTemplate(s: string): Template {
  const parts: TemplatePart[] = [];
  let i = 0;
  let lit = '';
  while (i < s.length) {
    const at = s.indexOf('${', i);
    if (at === -1) {
      lit += s.slice(i);
      break;
    }
    lit += s.slice(i, at);
    const end = s.indexOf('}', at + 2);
    if (end === -1) throw new TemplateError(`unclosed '\${' in '${s}'`);
    const body = s.slice(at + 2, end);
    const sep = body.indexOf(':-');
    const name = sep === -1 ? body : body.slice(0, sep);
    if (!NAME.test(name)) throw new TemplateError(`'\${${body}}' is not \${VAR} or \${VAR:-default}`);
    // `${A:-${B}}` would otherwise parse as default "${B" followed by a literal "}".
    if (sep !== -1 && body.includes('${', sep)) throw new TemplateError(`nested '\${' in the default of '\${${name}:-...}' is not supported`);
    if (lit) parts.push(lit);
    lit = '';
    parts.push(sep === -1 ? { env: name } : { env: name, default: body.slice(sep + 2) });
    i = end + 1;
  }
  if (lit) parts.push(lit);
  return { parts };
}

/** The value with every variable at its default, or null if one has none. */
export function templateDefaultValue(t: Template): string | null {
  let out = '';
  for (const p of t.parts) {
    if (typeof p === 'string') out += p;
    else if (p.default !== undefined) out += p.default;
    else return null;
  }
  return out;
}
