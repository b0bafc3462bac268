// Loading a large keys file cheaply (issue 22). The YAML a keys file usually
// is (what `gateway keys add` writes, and what ops write by hand: a `keys:`
// list of entries with id, sha256 and a few plain fields, block or flow style)
// is read here line by line from the file's bytes, without a YAML document or
// positions, into a compact table: an entry with nothing but its id and hash
// is one Map slot from the hash (32 bytes, as a latin1 string) to the id.
// Which fields a line may hold, and their kinds, are the schema's (the table
// key-record.ts takes from keys-schema.gen.ts). Anything else (allow lists,
// jwt, anchors, escapes, another top-level key, any problem at all) makes
// the scan give up, and the full parser (key-record.ts, readKeyRecords)
// reads the file and reports its problems with their positions.
//
// The scan takes the file in chunks, so a reload of a million keys can let
// requests through between chunks, and never holds the whole file.

import { FIELDS, LINE_FIELDS, type KeyRecord } from './key-record.ts';

/** One entry as the scan read it: its one-line fields (LINE_FIELDS), typed as YAML reads them. */
export type ScannedEntry = KeyRecord;

const ID = FIELDS.get('id')!.pattern!;
const HEX64 = FIELDS.get('sha256')!.pattern!;
/** A plain scalar we take as it is: no YAML meaning hides in it. */
const PLAIN = /^[A-Za-z0-9_./:+-][A-Za-z0-9_./:+ -]*$/;
/** A plain scalar YAML reads as something other than a string (YAML 1.2 core: null, a boolean, a number). */
export const NOT_STRING = /^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/;

export class GiveUp extends Error {}

/** The latin1 string of a SHA-256 given in hex: the table's key (a flat string of its own, 32 bytes). */
export function binaryOfHex(hex: string): string {
  return Buffer.from(hex, 'hex').toString('latin1');
}

/**
 * A copy of a string that holds nothing else: a value cut out of a line would
 * keep the whole line alive (V8 slices share their parent).
 */
export function own(s: string): string {
  return Buffer.from(s, 'latin1').toString('latin1');
}

/** Whether a plain scalar with these first and last characters could be NOT_STRING (a cheap test before the regex). */
function maybeNotString(first: number, last: number): boolean {
  // First: not a-z, or f, n, t (false, null, true). Last: a digit, a-f, A-F, . l L n N ~ (numbers, hex, .inf, .nan, null, true, false).
  if (first >= 97 && first !== 102 && first !== 110 && first !== 116) return false;
  return (last >= 48 && last <= 57) || (last >= 97 && last <= 102) || (last >= 65 && last <= 70) || last === 46 || last === 108 || last === 76 || last === 110 || last === 78 || last === 126;
}

/** Reads a string as written after `key: ` (quoted without escapes, or plain), or gives up. */
function scalar(v: string): string {
  if (v.length >= 2 && (v[0] === '"' || v[0] === "'")) {
    const q = v[0];
    if (v[v.length - 1] !== q) throw new GiveUp();
    const inner = v.slice(1, -1);
    if (inner.includes(q) || inner.includes('\\')) throw new GiveUp();
    return inner;
  }
  if (!PLAIN.test(v) || v.endsWith(':') || v.includes(': ')) throw new GiveUp();
  // `id: 123` is a number to YAML: the full parser says it is not a string. Most values start
  // with a letter (ids) or end with one that no number, boolean or null ends with (100/s).
  if (maybeNotString(v.charCodeAt(0), v.charCodeAt(v.length - 1)) && NOT_STRING.test(v)) throw new GiveUp();
  return v;
}

/** Strips a trailing ` # comment` outside quotes (quotes are simple here), and spaces. */
function uncomment(v: string): string {
  let quote = '';
  for (let i = 0; i < v.length; i++) {
    const c = v[i];
    if (quote !== '') {
      if (c === quote) quote = '';
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || v[i - 1] === ' ')) return v.slice(0, i).trimEnd();
  }
  return v.trimEnd();
}

/** Splits `a, b, "c"` at top-level commas (no nesting but one [list]). */
function splitFlow(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quote = '';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote !== '') {
      if (c === quote) quote = '';
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === '[') depth++;
    else if (c === ']') depth--;
    else if (c === '{' || c === '}') throw new GiveUp();
    else if (c === ',' && depth === 0) {
      out.push(s.slice(start, i).trim());
      start = i + 1;
    }
  }
  if (depth !== 0 || quote !== '') throw new GiveUp();
  const last = s.slice(start).trim();
  if (last !== '') out.push(last);
  return out;
}

/**
 * One field of an entry, by its kind in the table; anything else (a field
 * twice, one the scan does not read, another shape) gives up. True when the
 * field says more than the key's identity (not id or sha256, not its default).
 */
function setField(e: Partial<ScannedEntry>, key: string, raw: string): boolean {
  const f = LINE_FIELDS.get(key);
  if (f === undefined || (e as Record<string, unknown>)[key] !== undefined) throw new GiveUp();
  const v = raw.trim();
  let value: unknown;
  switch (f.kind) {
    case 'list':
      if (v[0] !== '[' || v[v.length - 1] !== ']') throw new GiveUp();
      value = splitFlow(v.slice(1, -1)).map(scalar);
      break;
    case 'boolean':
      if (v !== 'true' && v !== 'false') throw new GiveUp();
      value = v === 'true';
      break;
    case 'integer':
      if (!/^[0-9]{1,15}$/.test(v)) throw new GiveUp();
      value = Number(v);
      break;
    default:
      value = scalar(v);
  }
  (e as Record<string, unknown>)[key] = value;
  return key !== 'id' && key !== 'sha256' && value !== f.default;
}

/** `key: value` on one line, or gives up. */
function pair(s: string): [string, string] {
  const colon = s.indexOf(':');
  if (colon <= 0 || (s.length > colon + 1 && s[colon + 1] !== ' ')) throw new GiveUp();
  return [s.slice(0, colon).trim(), s.slice(colon + 1)];
}

/**
 * The scan of one keys file, fed in chunks (so the file is never held whole);
 * `onEntry` is called once per complete entry, already checked for shape (id,
 * hash); what is left to check (duplicates, rates) is the caller's.
 */
/** Where an entry is in the file (byte offsets), for the CLI's edits in place. */
export interface EntrySpan {
  /** Its first line's start. */
  readonly start: number;
  /** Just after its last line (its newline included). */
  end: number;
  /** Written as one flow mapping `- { ... }`. */
  readonly flow: boolean;
  /** Its `disabled:` line, if it has one. */
  disabled: readonly [number, number] | null;
  /** The indentation of its fields. */
  readonly indent: number;
}

export class KeyScan {
  private state: 'top' | 'list' = 'top';
  /** The list's indentation: -1 before its first entry, -2 for `keys: []`. */
  listIndent = -1;
  private entry: Partial<ScannedEntry> | null = null;
  /** The entry being read has a field beyond its identity. */
  private extra = false;
  private entryIndent = -1;
  private span: EntrySpan | null = null;
  /** The start of a line the last chunk cut, and its offset in the file. */
  private rest = '';
  private restAt = 0;
  /** The line being read: its offsets. */
  private lineStart = 0;
  private lineEnd = 0;

  constructor(
    /** `identityOnly`: the entry has nothing but its id and hash (fields at their defaults aside). */
    private readonly onEntry: (e: ScannedEntry, span: EntrySpan | null, identityOnly: boolean) => void,
    /** Record where each entry is (the CLI; not the server). */
    private readonly spans = false,
  ) {}

  /** Reads a chunk of the file (latin1: any byte over 0x7e makes the scan give up). Throws GiveUp when the full parser must read the file. */
  feed(chunk: string): void {
    const text = this.rest + chunk;
    const base = this.restAt;
    let start = 0;
    for (;;) {
      const nl = text.indexOf('\n', start);
      if (nl === -1) break;
      this.lineStart = base + start;
      this.lineEnd = base + nl + 1;
      this.line(text.slice(start, text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl));
      start = nl + 1;
    }
    this.rest = text.slice(start);
    this.restAt = base + start;
  }

  /** The end of the file. */
  end(): void {
    this.lineStart = this.restAt;
    this.lineEnd = this.restAt + this.rest.length;
    if (this.rest !== '') this.line(this.rest.endsWith('\r') ? this.rest.slice(0, -1) : this.rest);
    this.rest = '';
    this.finishEntry();
    // `keys:` with nothing under it is null, not a list: the full parser says so.
    if (this.state !== 'list' || this.listIndent === -1) throw new GiveUp();
  }

  private line(raw: string): void {
    // Bytes over 0x7f (UTF-8 text) or a tab: the full parser's business.
    for (let i = 0; i < raw.length; i++) {
      const c = raw.charCodeAt(i);
      if (c > 0x7e || c === 0x09) throw new GiveUp();
    }
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed[0] === '#') return;
    if (trimmed === '---' || trimmed === '...' || trimmed[0] === '%') throw new GiveUp();
    const indent = raw.length - raw.trimStart().length;
    const text = uncomment(trimmed);
    if (this.state === 'top') {
      if (indent !== 0) throw new GiveUp();
      if (text === 'keys:') {
        this.state = 'list';
        return;
      }
      if (text === 'keys: []') {
        this.state = 'list';
        this.listIndent = -2; // nothing may follow
        return;
      }
      throw new GiveUp();
    }
    if (this.listIndent === -2) throw new GiveUp();
    if (text.startsWith('- ') || text === '-') {
      if (this.listIndent === -1) this.listIndent = indent;
      if (indent !== this.listIndent) throw new GiveUp();
      this.finishEntry();
      const rest = text.slice(1).trim();
      this.entry = {};
      this.entryIndent = indent + 2;
      if (rest === '') throw new GiveUp();
      if (this.spans) this.span = { start: this.lineStart, end: this.lineEnd, flow: rest[0] === '{', disabled: null, indent: indent + 2 };
      if (rest[0] === '{') {
        if (rest[rest.length - 1] !== '}') throw new GiveUp();
        for (const part of splitFlow(rest.slice(1, -1))) {
          const [k, v] = pair(part);
          if (setField(this.entry, k, v)) this.extra = true;
        }
        this.finishEntry();
        return;
      }
      const [k, v] = pair(rest);
      if (setField(this.entry, k, v)) this.extra = true;
      return;
    }
    // A field of the current block entry, at its indentation.
    if (this.entry === null || indent !== this.entryIndent) throw new GiveUp();
    const [k, v] = pair(text);
    if (setField(this.entry, k, v)) this.extra = true;
    if (this.span !== null) {
      this.span.end = this.lineEnd;
      if (k === 'disabled') this.span.disabled = [this.lineStart, this.lineEnd];
    }
  }

  private finishEntry(): void {
    const e = this.entry;
    if (e === null) return;
    this.entry = null;
    const span = this.span;
    this.span = null;
    if (typeof e.id !== 'string' || !ID.test(e.id) || typeof e.sha256 !== 'string' || !HEX64.test(e.sha256)) throw new GiveUp();
    const extra = this.extra;
    this.extra = false;
    this.onEntry(e as ScannedEntry, span, !extra);
  }
}
