// A Cardano Rosetta stand-in. It validates each request body against its
// schema in shared/specs/rosetta-api.json (ajv), checks the network the way
// Cardano Rosetta does, answers in the spec's shapes, and answers errors as
// Cardano Rosetta does: {code, message, retriable, details} from
// shared/specs/cardano-rosetta-errors.json, with HTTP 500 (or, switched on, 400
// for non-retriable errors, as newer servers send them). Requests are recorded.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { Ajv, type ValidateFunction } from 'ajv';
import { close, createServer, listen, record, sendJson, type Recorded } from './http.ts';
import { SHARED_SPECS } from './paths.ts';

export type Network = 'mainnet' | 'preprod' | 'preview';

export interface RosettaRecorded extends Recorded {
  readonly json: unknown;
}

export interface RosettaStub {
  readonly url: string;
  readonly requests: RosettaRecorded[];
  clear(): void;
  setNonRetriableStatus(status: 400 | 500): void;
  setBlockIndex(n: number): void;
  close(): Promise<void>;
}

export const ROSETTA_SPEC = JSON.parse(readFileSync(join(SHARED_SPECS, 'rosetta-api.json'), 'utf8')) as {
  paths: Record<string, { post: { requestBody: { content: Record<string, { schema: { $ref: string } }> }; responses: Record<string, { content: Record<string, { schema: { $ref: string } }> }> } }>;
  components: { schemas: Record<string, unknown> };
};
export const CARDANO_ERRORS = JSON.parse(readFileSync(join(SHARED_SPECS, 'cardano-rosetta-errors.json'), 'utf8')) as {
  code: number;
  message: string;
  retriable: boolean;
  impl: string;
}[];

const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: false });
ajv.addSchema(ROSETTA_SPEC, 'rosetta');
const validators = new Map<string, ValidateFunction>();
/** Validator for a component schema of the Rosetta spec, e.g. 'NetworkRequest'. */
export function rosettaValidator(component: string): ValidateFunction {
  let v = validators.get(component);
  if (!v) {
    v = ajv.compile({ $ref: `rosetta#/components/schemas/${component}` });
    validators.set(component, v);
  }
  return v;
}
const refName = (ref: string) => ref.split('/').pop()!;

function cardanoError(code: number, details?: Record<string, unknown>) {
  const e = CARDANO_ERRORS.find((x) => x.code === code && x.impl === 'cardano-rosetta-java') ?? CARDANO_ERRORS.find((x) => x.code === code)!;
  return { code: e.code, message: e.message, retriable: e.retriable, ...(details ? { details } : {}) };
}

const HASH = (n: number) => n.toString(16).padStart(64, '0');

export async function startRosettaStub(opts: { network: Network }): Promise<RosettaStub> {
  let index = 1000;
  let nonRetriableStatus: 400 | 500 = 500;
  const requests: RosettaRecorded[] = [];
  const block = (i: number) => ({ index: i, hash: HASH(i) });
  const amount = (v: string) => ({ value: v, currency: { symbol: 'ADA', decimals: 6 } });
  const tx = { transaction_identifier: { hash: HASH(7) }, operations: [{ operation_identifier: { index: 0 }, type: 'input', status: 'success', account: { address: 'addr_test1stand-in' }, amount: amount('-1000000') }] };

  const server: Server = createServer(async (req, res) => {
    const r = await record(req);
    let json: unknown;
    try {
      json = JSON.parse(r.body.toString('utf8'));
    } catch {
      json = undefined;
    }
    if (!String(r.headers['user-agent'] ?? '').startsWith('chain-gateway-health')) requests.push({ ...r, json });
    const fail = (code: number, details?: Record<string, unknown>) => {
      const e = cardanoError(code, details);
      sendJson(res, e.retriable ? 500 : nonRetriableStatus, e);
    };
    const op = ROSETTA_SPEC.paths[r.path]?.post;
    if (!op || r.method !== 'POST') return sendJson(res, 404, { code: 404, message: 'Not found', retriable: false });
    if (json === undefined) return fail(5000, { message: 'invalid JSON' });
    const validate = rosettaValidator(refName(op.requestBody.content['application/json']!.schema.$ref));
    if (!validate(json)) return fail(5000, { message: ajv.errorsText(validate.errors) });
    const body = json as { network_identifier?: { blockchain: string; network: string }; block_identifier?: { index?: number; hash?: string } };
    if (body.network_identifier) {
      if (body.network_identifier.blockchain !== 'cardano') return fail(4004);
      if (body.network_identifier.network !== opts.network) return fail(4002);
    }
    const ok = (v: unknown) => sendJson(res, 200, v);
    switch (r.path) {
      case '/network/list':
        return ok({ network_identifiers: [{ blockchain: 'cardano', network: opts.network }] });
      case '/network/status':
        return ok({ current_block_identifier: block(index), current_block_timestamp: 1700000000000, genesis_block_identifier: block(0), peers: [{ peer_id: 'relay-1' }] });
      case '/network/options': {
        const seen = new Set<number>();
        const errors = CARDANO_ERRORS.filter((e) => !seen.has(e.code) && seen.add(e.code)).map((e) => ({ code: e.code, message: e.message, retriable: e.retriable }));
        return ok({
          version: { rosetta_version: '1.4.13', node_version: '10.1.4', middleware_version: '1.0.0' },
          allow: { operation_statuses: [{ status: 'success', successful: true }], operation_types: ['input', 'output'], errors, historical_balance_lookup: true, call_methods: [], balance_exemptions: [], mempool_coins: false },
        });
      }
      case '/block': {
        const i = body.block_identifier?.index ?? index;
        if (i > index) return fail(4001);
        return ok({ block: { block_identifier: block(i), parent_block_identifier: block(Math.max(0, i - 1)), timestamp: 1700000000000, transactions: [tx] } });
      }
      case '/block/transaction':
        return ok({ transaction: tx });
      case '/mempool':
        return ok({ transaction_identifiers: [] });
      case '/mempool/transaction':
        return fail(4006);
      case '/account/balance':
        return ok({ block_identifier: block(index), balances: [amount('1000000')] });
      case '/account/coins':
        return ok({ block_identifier: block(index), coins: [{ coin_identifier: { identifier: `${HASH(7)}:0` }, amount: amount('1000000') }] });
      case '/construction/derive':
        return ok({ account_identifier: { address: 'addr_test1stand-in' } });
      case '/construction/preprocess':
        return ok({ options: {} });
      case '/construction/metadata':
        return ok({ metadata: { ttl: '1000' }, suggested_fee: [amount('170000')] });
      case '/construction/payloads':
        return ok({ unsigned_transaction: '00', payloads: [{ hex_bytes: '00', signature_type: 'ed25519', account_identifier: { address: 'addr_test1stand-in' } }] });
      case '/construction/combine':
        return ok({ signed_transaction: '00' });
      case '/construction/parse':
        return ok({ operations: tx.operations });
      case '/construction/hash':
      case '/construction/submit':
        return ok({ transaction_identifier: { hash: HASH(8) } });
      case '/call':
        return ok({ result: {}, idempotent: true });
      case '/events/blocks':
        return ok({ max_sequence: 0, events: [] });
      case '/search/transactions':
        return ok({ transactions: [], total_count: 0 });
      default:
        return fail(5000);
    }
  });
  const url = await listen(server);
  return {
    url,
    requests,
    clear: () => void requests.splice(0),
    setNonRetriableStatus: (s) => void (nonRetriableStatus = s),
    setBlockIndex: (n) => void (index = n),
    close: () => close(server),
  };
}
