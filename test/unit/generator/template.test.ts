// `${VAR}` and `${VAR:-default}`: parsed into parts at build time, resolved at start.
import { describe, expect, it } from 'vitest';
import { parseTemplate, templateDefaultValue, TemplateError } from '../../../generator/template.ts';

describe('parseTemplate', () => {
  it('splits literals and variables', () => {
    expect(parseTemplate('http://127.0.0.1:8546')).toEqual({ parts: ['http://127.0.0.1:8546'] });
    expect(parseTemplate('')).toEqual({ parts: [] });
    expect(parseTemplate('${ETH_URL}')).toEqual({ parts: [{ env: 'ETH_URL' }] });
    expect(parseTemplate('${RPC_PORT:-8545}')).toEqual({ parts: [{ env: 'RPC_PORT', default: '8545' }] });
    expect(parseTemplate('Bearer ${T}')).toEqual({ parts: ['Bearer ', { env: 'T' }] });
    expect(parseTemplate('https://${H:-eth.example}/v1/${KEY:-}x')).toEqual({
      parts: ['https://', { env: 'H', default: 'eth.example' }, '/v1/', { env: 'KEY', default: '' }, 'x'],
    });
    // A default may hold ':' and '-' (URLs do).
    expect(parseTemplate('${U:-http://a:1/b-c}')).toEqual({ parts: [{ env: 'U', default: 'http://a:1/b-c' }] });
    // A lone '$' or '{' is literal.
    expect(parseTemplate('a$b{c}')).toEqual({ parts: ['a$b{c}'] });
  });

  it.each([
    ['${', /unclosed/],
    ['http://${HOST', /unclosed/],
    ['${}', /is not \$\{VAR\}/],
    ['${1ABC}', /is not \$\{VAR\}/],
    ['${A-B}', /is not \$\{VAR\}/],
    ['${A:=x}', /is not \$\{VAR\}/],
    ['${ A}', /is not \$\{VAR\}/],
    ['${A:-${B}}', /nested/],
  ])('refuses %s', (s, message) => {
    expect(() => parseTemplate(s)).toThrow(TemplateError);
    expect(() => parseTemplate(s)).toThrow(message);
  });
});

describe('templateDefaultValue', () => {
  it('fills every variable with its default, or gives null when one has none', () => {
    expect(templateDefaultValue(parseTemplate('http://${H:-a}:${P:-1}/x'))).toBe('http://a:1/x');
    expect(templateDefaultValue(parseTemplate('plain'))).toBe('plain');
    expect(templateDefaultValue(parseTemplate('${H:-a}${P}'))).toBeNull();
  });
});
