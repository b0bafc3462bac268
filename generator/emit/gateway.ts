// Emits the listeners (with their route Maps) and the GatewaySpec itself.
import { VariableDeclarationKind, type StatementStructures, StructureKind } from 'ts-morph';
import type { GatewayModel } from '../model.ts';
import { lit, objectLit, templateLit } from './literal.ts';

export function emitGateway(model: GatewayModel, routeIds: ReadonlyMap<string, string>): StatementStructures[] {
  const listeners = model.listeners.map((l) => {
    const routes = [...l.chains].sort().map((p) => `    [${lit(p)}, ${routeIds.get(`${l.name}/${p}`)!}],`);
    return objectLit(
      [
        ['name', lit(l.name)],
        ['host', templateLit(l.host)],
        ['port', templateLit(l.port)],
        ['routes', `new Map<string, RouteSpec>([\n${routes.join('\n')}\n  ])`],
      ],
      '  ',
    );
  });
  const spec = objectLit([
    ['source', lit(model.source)],
    ['manifestSha256', lit(model.manifestSha256)],
    ['keysFile', templateLit(model.keysFile)],
    ['listeners', `[\n  ${listeners.join(',\n  ')},\n]`],
    ['corsOrigins', lit(model.corsOrigins)],
    ['admin', model.admin === null ? 'null' : `{ host: ${templateLit(model.admin.host)}, port: ${templateLit(model.admin.port)} }`],
    ['health', lit(model.health)],
    ['rateLimit', lit(model.rateLimit)],
    ['drainTimeoutMs', lit(model.drainTimeoutMs)],
    ['cache', lit(model.cache)],
    ['validators', 'VALIDATORS'],
    ...(model.credits === undefined ? [] : [['credits', lit(model.credits)] as [string, string]]),
    ...(model.keyCache === undefined ? [] : [['keyCache', lit(model.keyCache)] as [string, string]]),
    ...(model.trustedProxies === undefined ? [] : [['trustedProxies', lit(model.trustedProxies)] as [string, string]]),
    ...(model.jwtAudience === undefined ? [] : [['jwtAudience', lit(model.jwtAudience)] as [string, string]]),
    ...(model.websocket === undefined ? [] : [['websocket', lit(model.websocket)] as [string, string]]),
  ]);
  return [
    {
      kind: StructureKind.VariableStatement,
      declarationKind: VariableDeclarationKind.Const,
      isExported: true,
      docs: ['The whole gateway: listeners, their routes, and process-wide settings.'],
      declarations: [{ name: 'GATEWAY', type: 'GatewaySpec', initializer: spec }],
    },
  ];
}
