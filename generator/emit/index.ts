// Model -> TypeScript source of the server entry point. ts-morph builds the
// file from structures in an in-memory project and prints it once with fixed
// settings, so the text depends only on the model.
import { StructureKind } from 'ts-morph';
import type { GatewayModel } from '../model.ts';
import { emitHeader } from './header.ts';
import { generatedProject } from './source.ts';
import { emitRoutes } from './routes.ts';
import { emitGateway } from './gateway.ts';
import { VALIDATORS_SPECIFIER } from '../validators.ts';

export { emitHeader };

/** The module specifier generated code imports the runtime by (a tsconfig path and an esbuild alias). */
export const RUNTIME_SPECIFIER = '@gateway/runtime';

export function emitServerSource(model: GatewayModel): string {
  const project = generatedProject();
  const { statements, routeIds } = emitRoutes(model);
  const file = project.createSourceFile('/gateway.gen.ts', {
    statements: [
      emitHeader(model.source),
      {
        kind: StructureKind.ImportDeclaration,
        moduleSpecifier: RUNTIME_SPECIFIER,
        namedImports: ['main', { name: 'GatewaySpec', isTypeOnly: true }, { name: 'RouteSpec', isTypeOnly: true }],
      },
      {
        kind: StructureKind.ImportDeclaration,
        moduleSpecifier: VALIDATORS_SPECIFIER,
        defaultImport: 'VALIDATORS',
      },
      ...statements,
      ...emitGateway(model, routeIds),
      'main(GATEWAY);',
    ],
  });
  file.formatText({ indentSize: 2, convertTabsToSpaces: true, ensureNewLineAtEndOfFile: true });
  // A blank line before each top-level declaration, for reading.
  return file.getFullText().replace(/\n(\/\*\*|main\()/g, '\n\n$1');
}
