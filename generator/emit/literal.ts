// One way to write values into generated code, so output is stable and safe:
// JSON text, with U+2028/U+2029 escaped (legal in JSON, not in older JS).
import type { Template } from '../../runtime/types.ts';

export function lit(v: unknown): string {
  return JSON.stringify(v).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** The TypeScript type of a JSON Schema scalar type (string, integer, number, boolean); undefined for any other. */
export function scalarType(type: unknown): string | undefined {
  return type === 'string' || type === 'boolean' ? type : type === 'integer' || type === 'number' ? 'number' : undefined;
}

/** A Template as a TS object literal. */
export function templateLit(t: Template): string {
  return `{ parts: ${lit(t.parts)} }`;
}

/** Object literal from ordered [key, valueCode] pairs; keys are quoted only when needed. */
export function objectLit(entries: readonly (readonly [string, string])[], indent = ''): string {
  if (entries.length === 0) return '{}';
  const inner = indent + '  ';
  const body = entries.map(([k, v]) => `${inner}${/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? k : lit(k)}: ${v},`).join('\n');
  return `{\n${body}\n${indent}}`;
}
