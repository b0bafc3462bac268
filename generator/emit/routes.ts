// Emits the lookup tables the runtime dispatches on: one allowlist Set per
// distinct method list, one route object per chain, one Map per listener from
// first path segment to route. Identifiers are a prefix and a counter, never
// user text; every entry is commented with its manifest path.
import { VariableDeclarationKind, type StatementStructures, StructureKind } from 'ts-morph';
import type { ChainModel, GatewayModel } from '../model.ts';
import { lit, objectLit, templateLit } from './literal.ts';

function constStatement(name: string, type: string, initializer: string, doc: string): StatementStructures {
  return {
    kind: StructureKind.VariableStatement,
    declarationKind: VariableDeclarationKind.Const,
    docs: [doc],
    declarations: [{ name, type, initializer }],
  };
}

export interface EmittedRoutes {
  readonly statements: StatementStructures[];
  /** Route identifier per `listener/path`. */
  readonly routeIds: ReadonlyMap<string, string>;
}

export function emitRoutes(model: GatewayModel): EmittedRoutes {
  const statements: StatementStructures[] = [];

  // Allowlists: chains that share a method set share one Set.
  const setIds = new Map<string, string>();
  for (const chain of model.chains) {
    if (chain.methods === undefined) continue;
    const key = chain.methodsSource ?? `${chain.source}.methods`;
    if (setIds.has(key)) continue;
    const id = `METHODS_${setIds.size}`;
    setIds.set(key, id);
    const items = chain.methods.map((m) => `  ${lit(m)},`).join('\n');
    statements.push(constStatement(id, 'ReadonlySet<string>', `new Set([\n${items}\n])`, `Allowlist from ${key} (${chain.methods.length} methods).`));
  }

  const routeIds = new Map<string, string>();
  model.chains.forEach((chain, i) => {
    const id = `ROUTE_${i}`;
    routeIds.set(`${chain.listener}/${chain.path}`, id);
    statements.push(constStatement(id, 'RouteSpec', routeLiteral(chain, setIds), `${chain.source}: ${chain.path} (${chain.interface})`));
  });
  return { statements, routeIds };
}

function routeLiteral(chain: ChainModel, setIds: ReadonlyMap<string, string>): string {
  const entries: [string, string][] = [
    ['path', lit(chain.path)],
    ['interface', lit(chain.interface)],
    ['listener', lit(chain.listener)],
    ['source', lit(chain.source)],
    ['limits', lit(chain.limits)],
    ['validate', lit(chain.validate)],
    ['maxLag', lit(chain.maxLag)],
    ['retries', lit(chain.retries)],
    // Pool settings: always written, defaults included, so the runtime reads them without a fallback.
    ['servedTip', lit(chain.servedTip)],
    ['hedge', lit(chain.hedge)],
  ];
  if (chain.chainId !== undefined) entries.push(['chainId', lit(chain.chainId)]);
  if (chain.methods !== undefined) entries.push(['methods', setIds.get(chain.methodsSource ?? `${chain.source}.methods`)!]);
  if (chain.network !== undefined) entries.push(['network', lit(chain.network)]);
  if (chain.sendtx !== undefined) entries.push(['sendtx', lit(chain.sendtx)]);
  if (chain.coin !== undefined) entries.push(['coin', lit(chain.coin)]);
  if (chain.cache !== undefined) entries.push(['cache', lit(chain.cache)]);
  if (chain.finality !== undefined) entries.push(['finality', lit(chain.finality)]);
  if (chain.rewriteTags !== undefined) entries.push(['rewriteTags', lit(chain.rewriteTags)]);
  if (chain.pruneDepth !== undefined) entries.push(['pruneDepth', lit(chain.pruneDepth)]);
  if (chain.broadcast !== undefined) entries.push(['broadcast', lit(chain.broadcast)]);
  if (chain.quorum !== undefined) entries.push(['quorum', lit(chain.quorum)]);
  if (chain.websocket === true) entries.push(['websocket', 'true']);
  if (chain.selection !== undefined) entries.push(['selection', lit(chain.selection)]);
  const ups = chain.upstreams.map((u) =>
    objectLit(
      [
        ['name', lit(u.name)],
        ['url', templateLit(u.url)],
        ['weight', lit(u.weight)],
        ['role', lit(u.role)],
        ['archive', lit(u.archive)],
        ...(u.maxLogRange === undefined ? [] : [['maxLogRange', lit(u.maxLogRange)] as const]),
        ...(u.rateLimit === undefined ? [] : [['rateLimit', lit(u.rateLimit)] as const]),
        ['connections', lit(u.connections)],
        ['idleTimeoutMs', lit(u.idleTimeoutMs)],
        ['headers', objectLit(Object.keys(u.headers).sort().map((h) => [h, templateLit(u.headers[h]!)] as const), '      ')],
      ],
      '    ',
    ),
  );
  entries.push(['upstreams', `[\n    ${ups.join(',\n    ')},\n  ]`]);
  return objectLit(entries);
}
