// YAML -> plain value, keeping a way back from any YAML path to the line and
// column of its key or its value, so every problem can point at the exact spot.
import { readFileSync } from 'node:fs';
import { isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';

export type YamlPath = readonly (string | number)[];

export interface Position {
  readonly line: number;
  readonly col: number;
}

export interface Problem {
  readonly file: string;
  readonly line: number;
  readonly col: number;
  readonly message: string;
  readonly hint?: string;
}

export interface LoadedManifest {
  /** The file name as given (for messages). */
  readonly file: string;
  readonly value: unknown;
  /** YAML syntax problems; when present, `value` should not be trusted. */
  readonly syntax: Problem[];
  /** Where the key at `path` is (falls back to its value, then its parent). */
  keyAt(path: YamlPath): Position;
  /** Where the value at `path` is (falls back to its key, then its parent). */
  valueAt(path: YamlPath): Position;
}

export function loadManifest(file: string, text?: string): LoadedManifest {
  const source = text ?? readFileSync(file, 'utf8');
  const lc = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lc, prettyErrors: false, uniqueKeys: true, merge: true });
  const syntax: Problem[] = [...doc.errors, ...doc.warnings].map((e) => {
    const p = lc.linePos(e.pos[0]);
    return { file, line: p.line, col: p.col, message: e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '') };
  });
  let value: unknown = null;
  if (syntax.length === 0) {
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      syntax.push({ file, line: 1, col: 1, message: (err as Error).message });
    }
  }
  const pos = (offset: number): Position => lc.linePos(offset);
  const top = (): Position => (doc.contents && 'range' in doc.contents && doc.contents.range ? pos(doc.contents.range[0]) : { line: 1, col: 1 });

  function find(path: YamlPath): { key?: Node; value?: Node; parent: Position } {
    let node: unknown = doc.contents;
    let parent = top();
    let keyNode: Node | undefined;
    for (let i = 0; i < path.length; i++) {
      const seg = path[i]!;
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && (isScalar(p.key) ? p.key.value : p.key) === seg);
        if (!pair) return { parent };
        keyNode = pair.key as Node;
        if (keyNode?.range) parent = pos(keyNode.range[0]);
        node = pair.value;
      } else if (isSeq(node) && typeof seg === 'number') {
        const item = node.items[seg] as Node | undefined;
        if (!item) return { parent };
        keyNode = undefined;
        if (item.range) parent = pos(item.range[0]);
        node = item;
      } else return { parent };
      if (i === path.length - 1) return { key: keyNode, value: node as Node, parent };
    }
    return { value: node as Node, parent };
  }

  return {
    file,
    value,
    syntax,
    keyAt(path) {
      const f = find(path);
      const n = f.key ?? f.value;
      return n?.range ? pos(n.range[0]) : f.parent;
    },
    valueAt(path) {
      const f = find(path);
      const n = f.value ?? f.key;
      return n?.range ? pos(n.range[0]) : f.parent;
    },
  };
}

export type { Document };
