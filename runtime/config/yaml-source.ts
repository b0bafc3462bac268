// YAML -> plain value, keeping a way back from any YAML path to the line and
// column of its key or its value, so every problem can point at the exact spot.
// The manifest (generator/load.ts) and the keys file (runtime/keys/key-record.ts)
// are both read through it.
import { readFileSync } from 'node:fs';
import { isAlias, isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, visit, type Document, type Node } from 'yaml';

export type YamlPath = readonly (string | number)[];

export interface Position {
  /** 1-based. */
  readonly line: number;
  /** 1-based. */
  readonly col: number;
}

export interface Problem {
  readonly file: string;
  readonly line: number;
  readonly col: number;
  readonly message: string;
  readonly hint?: string;
}

export interface LoadedYaml {
  /** The file name as given (for messages). */
  readonly file: string;
  /** The text as read. */
  readonly text: string;
  /** The plain JS value; null when `syntax` is not empty. */
  readonly value: unknown;
  /** YAML syntax problems (duplicate keys included); when present, `value` is not to be trusted. */
  readonly syntax: readonly Problem[];
  /** Where the key at `path` is (falls back to its value, then to the nearest ancestor found). */
  keyAt(path: YamlPath): Position;
  /** Where the value at `path` is (falls back to its key, then to the nearest ancestor found). */
  valueAt(path: YamlPath): Position;
}

/** Caps alias expansion, so a "billion laughs" file fails instead of eating memory. */
const MAX_ALIAS_COUNT = 100;

export function loadYaml(file: string, text?: string): LoadedYaml {
  const source = text ?? readFileSync(file, 'utf8');
  const lc = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lc, prettyErrors: false, uniqueKeys: true, merge: true });
  const pos = (offset: number): Position => lc.linePos(offset);
  const syntax: Problem[] = [...doc.errors, ...doc.warnings].map((e) => {
    const p = pos(e.pos[0]);
    if (e.code === 'DUPLICATE_KEY') {
      const key = keyNameAt(doc, e.pos[0]);
      return { file, line: p.line, col: p.col, message: `duplicate key${key === undefined ? '' : ` '${key}'`} (keys in one mapping must be unique)` };
    }
    // prettyErrors is off, but keep messages to one line and drop the position, which we print ourselves.
    return { file, line: p.line, col: p.col, message: e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '') };
  });
  let value: unknown = null;
  if (syntax.length === 0) {
    try {
      value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
    } catch (err) {
      // toJS throws on excessive aliases and on merge keys whose source is not a map.
      syntax.push({ file, line: 1, col: 1, message: (err as Error).message });
      value = null;
    }
  }
  const start = (n: unknown): Position | undefined => {
    const r = (n as Node | null | undefined)?.range;
    return r ? pos(r[0]) : undefined;
  };

  // An alias stands for its anchored node: the offending text is written there.
  const deref = (n: unknown): unknown => {
    for (let i = 0; i < MAX_ALIAS_COUNT && isAlias(n); i++) n = n.resolve(doc);
    return n;
  };
  const sameKey = (k: unknown, seg: string | number): boolean => {
    const v = isScalar(k) ? k.value : k;
    return (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') && String(v) === String(seg);
  };
  const isMergeKey = (k: unknown): boolean => isScalar(k) && typeof k.value === 'symbol' && k.value.description === '<<';

  /** The pair for `seg` in a map, looking through `<<` merge keys the way toJS does (own keys first). */
  function pairIn(map: unknown, seg: string | number, depth = 0): { key: unknown; value: unknown } | undefined {
    if (!isMap(map) || depth > MAX_ALIAS_COUNT) return undefined;
    for (const p of map.items) if (isPair(p) && !isMergeKey(p.key) && sameKey(p.key, seg)) return p;
    for (const p of map.items) {
      if (!isPair(p) || !isMergeKey(p.key)) continue;
      const src = deref(p.value);
      const sources = isSeq(src) ? src.items.map(deref) : [src];
      for (const s of sources) {
        const found = pairIn(s, seg, depth + 1);
        if (found) return found;
      }
    }
    return undefined;
  }

  function find(path: YamlPath): { key?: Position; value?: Position; nearest: Position } {
    let node: unknown = doc.contents;
    let nearest = start(node) ?? { line: 1, col: 1 };
    let key: Position | undefined;
    for (const seg of path) {
      // Descend through aliases, but report the last node as written: `rpc: *b` points at `*b`.
      node = deref(node);
      if (isMap(node)) {
        const pair = pairIn(node, seg);
        if (!pair) return { nearest };
        key = start(pair.key);
        node = pair.value;
      } else if (isSeq(node) && /^\d+$/.test(String(seg))) {
        const item = node.items[Number(seg)];
        if (item === undefined) return { nearest };
        key = undefined;
        node = item;
      } else return { nearest };
      nearest = start(node) ?? key ?? nearest;
    }
    return { key, value: start(node), nearest };
  }

  return {
    file,
    text: source,
    value,
    syntax,
    keyAt(path) {
      const f = find(path);
      return f.key ?? f.value ?? f.nearest;
    },
    valueAt(path) {
      const f = find(path);
      return f.value ?? f.key ?? f.nearest;
    },
  };
}

/** The scalar key that starts at `offset`, for naming a duplicate key. */
function keyNameAt(doc: Document, offset: number): string | undefined {
  let name: string | undefined;
  visit(doc, {
    Pair(_, pair) {
      if (isScalar(pair.key) && pair.key.range?.[0] === offset) {
        name = String(pair.key.value);
        return visit.BREAK;
      }
      return undefined;
    },
  });
  return name;
}

export type { Document };
