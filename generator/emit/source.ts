// One way to write a generated TypeScript file with ts-morph, so that every
// generated file reads alike: two-space indents, LF, single quotes, trailing commas.
import { IndentationText, NewLineKind, Project, QuoteKind, type SourceFile } from 'ts-morph';

/** A project in memory, to create the generated file in. */
export function generatedProject(): Project {
  return new Project({
    useInMemoryFileSystem: true,
    manipulationSettings: { indentationText: IndentationText.TwoSpaces, newLineKind: NewLineKind.LineFeed, quoteKind: QuoteKind.Single, useTrailingCommas: true },
  });
}

/** The file's text, formatted, with a blank line before each declaration (and its comment), for reading. */
export function declarationsText(file: SourceFile): string {
  file.formatText({ indentSize: 2, convertTabsToSpaces: true, ensureNewLineAtEndOfFile: true });
  return file
    .getFullText()
    .replace(/\n(\/\*\*)/g, '\n\n$1')
    .replace(/([^/\n])\n(export )/g, '$1\n\n$2')
    .replace(/\n{3,}/g, '\n\n');
}
