// Emits the lookup tables the runtime dispatches on: one allowlist Set per
// distinct method list, one route object per chain, one Map per listener from
// first path segment to route. Identifiers are a prefix and a counter, never
// user text; every entry is commented with its manifest path.
import { VariableDeclarationKind, type StatementStructures, StructureKind } from 'ts-morph';
import type { ChainModel, GatewayModel } from '../model.ts';
import type { Template } from '../../runtime/types.ts';
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

/** Fields of a chain's model written otherwise than as their value, or not at all. */
const OWN = new Set(['upstreams', 'methods', 'methodsSource']);

/**
 * A chain's route object: its fields in the model's order (its settings in
 * schema order, every one filled, so the runtime reads them without a
 * fallback), the allowlist as its Set, the upstreams last.
 */
function routeLiteral(chain: ChainModel, setIds: ReadonlyMap<string, string>): string {
  const entries: [string, string][] = [];
  for (const [k, v] of Object.entries(chain)) if (!OWN.has(k) && v !== undefined) entries.push([k, lit(v)]);
  if (chain.methods !== undefined) entries.push(['methods', setIds.get(chain.methodsSource ?? `${chain.source}.methods`)!]);
  const ups = chain.upstreams.map((u) =>
    objectLit(
      Object.entries(u).map(([k, v]) => [
        k,
        k === 'url' || k === 'ws' ? templateLit(v as Template) : k === 'headers' ? objectLit(Object.keys(u.headers).sort().map((h) => [h, templateLit(u.headers[h]!)] as const), '      ') : lit(v),
      ]),
      '    ',
    ),
  );
  entries.push(['upstreams', `[\n    ${ups.join(',\n    ')},\n  ]`]);
  return objectLit(entries);
}
