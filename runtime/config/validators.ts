// Request validation at the edge: what the generated validators module is
// (ajv standalone functions compiled from schema/specs, see
// generator/validators.ts), the limits no schema bounds, and how a failure
// is named to a client: a JSON pointer into the parameters and a message.

/** One error as ajv reports it. */
export interface SchemaError {
  readonly instancePath: string;
  readonly schemaPath: string;
  readonly keyword: string;
  readonly params: Readonly<Record<string, unknown>>;
  readonly message?: string;
  /** The schema holding the failed keyword (ajv's verbose errors). */
  readonly parentSchema?: { readonly title?: string; readonly anyOf?: readonly { readonly title?: string }[]; readonly oneOf?: readonly { readonly title?: string }[] };
}

/** An ajv standalone validator: true, or false with `errors` set. */
export interface ValidateFn {
  (data: unknown): boolean;
  errors?: readonly SchemaError[] | null;
}

/** How a Blockbook query or path string becomes the value its schema checks. */
export type ParamKind = 'string' | 'integer' | 'boolean' | 'list' | 'integer-or-string';

export interface BlockbookValidator {
  readonly validate: ValidateFn;
  /** The path parameter's name, null when the endpoint has none. */
  readonly path: string | null;
  /** Every parameter, the path's included, to how its text is read. */
  readonly params: Readonly<Record<string, ParamKind>>;
}

/** The generated module's default export. */
export interface ValidatorTables {
  /** EVM method -> its params' validator (methods the OpenRPC document describes). */
  readonly evm: Readonly<Record<string, ValidateFn>>;
  /** Rosetta endpoint (`block/transaction`) -> its request body's validator. */
  readonly rosetta: Readonly<Record<string, ValidateFn>>;
  /** Blockbook v2 endpoint -> its parameters' validator. */
  readonly blockbook: Readonly<Record<string, BlockbookValidator>>;
}

export const NO_VALIDATORS: ValidatorTables = { evm: {}, rosetta: {}, blockbook: {} };

/** What was wrong, and where: a JSON pointer into the checked value. */
export interface Invalid {
  readonly path: string;
  readonly message: string;
}

export interface ParamLimits {
  readonly maxParamsDepth: number;
  readonly maxArrayItems: number;
  readonly maxHexBytes: number;
}

/** A pointer segment for a key or an index. */
function seg(k: string | number): string {
  return typeof k === 'number' ? `/${k}` : `/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

/** Client text in a message: shortened, so that an answer cannot be made to carry much of it back. */
export function quoteClient(s: string): string {
  return JSON.stringify(s.length > 64 ? `${s.slice(0, 61)}...` : s);
}

/**
 * The first place where `v` breaks a limit no schema bounds: nesting deeper
 * than maxParamsDepth (the value itself is depth 1), an array longer than
 * maxArrayItems, a string longer than 0x plus two hex digits per maxHexBytes.
 * Null when within them. Nothing is allocated unless a limit is broken: the
 * walk that finds the place runs only then.
 */
export function limitsError(v: unknown, lim: ParamLimits): Invalid | null {
  if (within(v, 1, lim.maxParamsDepth, lim.maxArrayItems, 2 * lim.maxHexBytes + 2)) return null;
  const path: (string | number)[] = [];
  const message = where(v, 1, lim, path);
  return { path: path.map(seg).join(''), message };
}

function within(x: unknown, depth: number, maxDepth: number, maxItems: number, maxChars: number): boolean {
  if (typeof x === 'string') return x.length <= maxChars;
  if (x === null || typeof x !== 'object') return true;
  if (depth > maxDepth) return false;
  if (Array.isArray(x)) {
    if (x.length > maxItems) return false;
    for (let i = 0; i < x.length; i++) if (!within(x[i], depth + 1, maxDepth, maxItems, maxChars)) return false;
    return true;
  }
  for (const k in x) {
    if (k.length > maxChars || !within((x as Record<string, unknown>)[k], depth + 1, maxDepth, maxItems, maxChars)) return false;
  }
  return true;
}

/** The broken limit's message, with its place pushed onto `path` (only called once `within` said no). */
function where(x: unknown, depth: number, lim: ParamLimits, path: (string | number)[]): string {
  const maxChars = 2 * lim.maxHexBytes + 2;
  if (typeof x === 'string') return `longer than ${lim.maxHexBytes} bytes of hex data (limits.maxHexBytes)`;
  if (depth > lim.maxParamsDepth) return `nested deeper than ${lim.maxParamsDepth} levels (limits.maxParamsDepth)`;
  if (Array.isArray(x)) {
    if (x.length > lim.maxArrayItems) return `more than ${lim.maxArrayItems} items (limits.maxArrayItems)`;
    for (let i = 0; i < x.length; i++) {
      if (!within(x[i], depth + 1, lim.maxParamsDepth, lim.maxArrayItems, maxChars)) {
        path.push(i);
        return where(x[i], depth + 1, lim, path);
      }
    }
  } else {
    for (const k in x as Record<string, unknown>) {
      if (k.length > maxChars) return `has a key longer than ${lim.maxHexBytes} bytes of hex data (limits.maxHexBytes)`;
      const y = (x as Record<string, unknown>)[k];
      if (!within(y, depth + 1, lim.maxParamsDepth, lim.maxArrayItems, maxChars)) {
        path.push(k);
        return where(y, depth + 1, lim, path);
      }
    }
  }
  return 'exceeds a limit';
}

/**
 * The error a client is shown: the deepest one (an object's bad field rather
 * than the object), and of those the last (a union's own failure rather than
 * one of its branches). Its message uses the spec's title of the failing
 * schema where there is one ("must be hex encoded address").
 */
export function describe(errors: readonly SchemaError[] | null | undefined): Invalid {
  if (!errors || errors.length === 0) return { path: '', message: 'invalid' };
  let e = errors[0]!;
  for (const x of errors) if (x.instancePath.length >= e.instancePath.length) e = x;
  const title = e.parentSchema?.title;
  const path = e.instancePath;
  switch (e.keyword) {
    case 'pattern':
      return { path, message: `must be ${title === undefined ? 'text matching' : lower(title)} (${String(e.params.pattern)})` };
    case 'anyOf':
    case 'oneOf': {
      // "must be block number, block tag, block hash or block selector object"
      const names = (e.parentSchema?.[e.keyword] ?? []).map((b) => b.title);
      if (names.length > 1 && names.every((n) => n !== undefined)) return { path, message: `must be ${names.slice(0, -1).map(lower).join(', ')} or ${lower(names.at(-1)!)}` };
      if (title !== undefined) return { path, message: `must be ${lower(title)}` };
      break;
    }
    case 'type':
      return { path, message: `must be ${String(e.params.type)}${title === undefined ? '' : ` (${lower(title)})`}` };
    case 'enum':
      return { path, message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}` };
    case 'additionalProperties':
      return { path, message: `has an unknown field ${quoteClient(String(e.params.additionalProperty))}` };
    case 'required':
      return { path, message: `is missing the field ${JSON.stringify(String(e.params.missingProperty))}` };
    case 'minItems':
      return { path, message: `must have at least ${String(e.params.limit)} item${e.params.limit === 1 ? '' : 's'}` };
    case 'maxItems':
      return { path, message: `must have at most ${String(e.params.limit)} item${e.params.limit === 1 ? '' : 's'}` };
    case 'propertyNames':
      return { path, message: `has a field name that is not ${title === undefined ? 'valid' : lower(title)}` };
  }
  return { path, message: e.message ?? 'invalid' };
}

function lower(title: string): string {
  return title.charAt(0).toLowerCase() + title.slice(1);
}
