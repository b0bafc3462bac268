// A Cardano Rosetta stand-in, for the tests and the demo.
//
// Every POST endpoint of ../shared/specs/rosetta-api.json is served. Each body
// is validated with ajv against that endpoint's request schema; the network is
// checked the way Cardano Rosetta does (blockchain != "cardano" -> 4004,
// another network -> 4002); answers are in the spec's response shapes.
// Errors are Cardano Rosetta's: {code, message, retriable, details} from
// ../shared/specs/cardano-rosetta-errors.json (the cardano-rosetta-java entry
// where both implementations have the code). Like cardano-rosetta-java's
// GlobalExceptionHandler, a body that is not JSON or not schema-valid is 5000
// "An error occurred" (retriable) with the reasons in details.message. Every
// error goes out with HTTP 500; setNonRetriableStatus(400) switches to what
// newer servers do: retriable:false errors with HTTP 400. Requests are recorded.
//
// The chain: block i (0..blockIndex) has hash rosettaBlockHash(i) and one
// transaction, rosettaTxHash(i). Transactions sent to /construction/submit sit in
// the mempool (/mempool, /mempool/transaction).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { close, createSafeServer, file, listen, parseJson, record, type Recorded } from './http.ts';
import { specPath } from './paths.ts';

export type Network = 'mainnet' | 'preprod' | 'preview';

export interface RosettaRecorded extends Recorded {
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly json: unknown;
}

export interface RosettaStub {
  /** http://127.0.0.1:PORT (the Rosetta paths hang right off it). */
  readonly url: string;
  readonly port: number;
  readonly network: Network;
  /** Requests received, in order (method, path, headers, body, json); health checks apart. */
  readonly requests: RosettaRecorded[];
  /** The gateway's health checks (User-Agent chain-gateway-health/...). */
  readonly healthChecks: RosettaRecorded[];
  /** Empties `requests`. */
  clear(): void;
  /** 500 (default): every error is HTTP 500. 400: errors with retriable:false are HTTP 400, as newer cardano-rosetta-java sends them. */
  setNonRetriableStatus(status: 400 | 500): void;
  /** The tip's index (default 1000). */
  setBlockIndex(n: number): void;
  readonly blockIndex: number;
  close(): Promise<void>;
}

export interface RosettaStubOptions {
  network: Network;
  /** The tip's index; default 1000. */
  blockIndex?: number;
  /** A fixed port; default 0 (free port). */
  port?: number;
}

interface RosettaSpec {
  paths: Record<string, { post: { requestBody: { content: Record<string, { schema: { $ref: string } }> }; responses: Record<string, { content: Record<string, { schema: { $ref: string } }> }> } }>;
  components: { schemas: Record<string, unknown> };
}
export interface CardanoError {
  code: number;
  message: string;
  retriable: boolean;
  name: string;
  impl: 'cardano-rosetta' | 'cardano-rosetta-java';
}
export interface RosettaError {
  code: number;
  message: string;
  retriable: boolean;
  details?: Record<string, unknown>;
}

export const ROSETTA_SPEC = JSON.parse(readFileSync(specPath('rosetta-api.json'), 'utf8')) as RosettaSpec;
export const CARDANO_ERRORS = JSON.parse(readFileSync(specPath('cardano-rosetta-errors.json'), 'utf8')) as CardanoError[];
/** The POST paths of the spec: the endpoints this stand-in serves. */
export const ROSETTA_PATHS = Object.keys(ROSETTA_SPEC.paths);

const SPEC_ID = 'https://stand-in.local/rosetta-api.json';
const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
ajv.addSchema(ROSETTA_SPEC, SPEC_ID);
const validators = new Map<string, ValidateFunction>();
/** Validator for a component schema of rosetta-api.json, e.g. 'NetworkRequest', 'Error'. */
export function rosettaValidator(component: string): ValidateFunction {
  let v = validators.get(component);
  if (!v) {
    if (!(component in ROSETTA_SPEC.components.schemas)) throw new Error(`rosetta-api.json has no schema ${component}`);
    v = ajv.compile({ $ref: `${SPEC_ID}#/components/schemas/${component}` });
    validators.set(component, v);
  }
  return v;
}
const refName = (ref: string): string => ref.slice(ref.lastIndexOf('/') + 1);
/** The request and 200-response schema names of an endpoint, e.g. '/block' -> ['BlockRequest', 'BlockResponse']. */
export function rosettaSchemas(path: string): { request: string; response: string } {
  const op = ROSETTA_SPEC.paths[path]?.post;
  if (!op) throw new Error(`rosetta-api.json has no POST ${path}`);
  return { request: refName(op.requestBody.content['application/json']!.schema.$ref), response: refName(op.responses['200']!.content['application/json']!.schema.$ref) };
}

/** One entry per code: the cardano-rosetta-java one where both implementations have it. */
const BY_CODE = new Map<number, CardanoError>();
for (const e of CARDANO_ERRORS) {
  const seen = BY_CODE.get(e.code);
  if (!seen || (seen.impl !== 'cardano-rosetta-java' && e.impl === 'cardano-rosetta-java')) BY_CODE.set(e.code, e);
}
/** The catalogue as /network/options allow.errors: {code, message, retriable}, one per code, by code. */
export const CARDANO_ERROR_LIST: RosettaError[] = [...BY_CODE.values()].sort((a, b) => a.code - b.code).map(({ code, message, retriable }) => ({ code, message, retriable }));

export function cardanoError(code: number, details?: Record<string, unknown>): RosettaError {
  const e = BY_CODE.get(code);
  if (!e) throw new Error(`cardano-rosetta-errors.json has no code ${code}`);
  return { code: e.code, message: e.message, retriable: e.retriable, ...(details ? { details } : {}) };
}

class Fail extends Error {
  constructor(readonly error: RosettaError) {
    super(error.message);
  }
}
const fail = (code: number, details?: Record<string, unknown>): never => {
  throw new Fail(cardanoError(code, details));
};

// ---- the stand-in chain -------------------------------------------------------------------

const GENESIS_MS = 1_700_000_000_000;
const SLOT_MS = 20_000;
export const rosettaBlockHash = (i: number): string => `b10c${i.toString(16).padStart(60, '0')}`;
export const rosettaTxHash = (i: number): string => `ada0${i.toString(16).padStart(60, '0')}`;
const ADA = { symbol: 'ADA', decimals: 6 };
const ada = (value: string) => ({ value, currency: ADA });
const PEERS: Record<Network, string> = {
  mainnet: 'backbone.cardano.iog.io',
  preprod: 'preprod-node.play.dev.cardano.org',
  preview: 'preview-node.play.dev.cardano.org',
};
const OPERATION_TYPES = [
  'input',
  'output',
  'stakeKeyRegistration',
  'stakeDelegation',
  'withdrawal',
  'stakeKeyDeregistration',
  'poolRegistration',
  'poolRegistrationWithCert',
  'poolRetirement',
  'dRepVoteDelegation',
  'poolGovernanceVote',
];
export const CALL_METHODS = ['stand_in_echo'];
/** Submitted transactions kept (the oldest go first). */
const MEMPOOL_MAX = 10_000;
/** A Shelley (bech32-looking) or Byron (base58) address: anything else is 4015. */
const ADDRESS = /^((addr|addr_test|stake|stake_test)1[02-9ac-hj-np-z]{20,}|[1-9A-HJ-NP-Za-km-z]{50,})$/;

export async function startRosettaStub(opts: RosettaStubOptions): Promise<RosettaStub> {
  const network = opts.network;
  let index = opts.blockIndex ?? 1000;
  let nonRetriableStatus: 400 | 500 = 500;
  let requestId = 0;
  const requests: RosettaRecorded[] = [];
  const healthChecks: RosettaRecorded[] = [];
  /** hash -> signed transaction hex, sent through /construction/submit */
  const mempool = new Map<string, string>();
  const prefix = network === 'mainnet' ? 'addr1' : 'addr_test1';
  const ADDR_A = `${prefix}vpfwv0ezc5g8a4mkku8hhy3y3vp92t7s3ul8g778g5yegsgalc6gc`;
  const ADDR_B = `${prefix}qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3jcu5d8ps7zex2k2xt3uqxgjqnnj83ws8lhrn648jjxtwq2ytjqp`;

  const blockId = (i: number) => ({ index: i, hash: rosettaBlockHash(i) });
  const timestamp = (i: number): number => GENESIS_MS + i * SLOT_MS;
  const operations = (i: number) => {
    const coin = `${rosettaTxHash(Math.max(0, i - 1))}:1`;
    return [
      { operation_identifier: { index: 0 }, type: 'input', status: 'success', account: { address: ADDR_A }, amount: ada('-10000000'), coin_change: { coin_identifier: { identifier: coin }, coin_action: 'coin_spent' }, metadata: {} },
      { operation_identifier: { index: 1 }, related_operations: [{ index: 0 }], type: 'output', status: 'success', account: { address: ADDR_B }, amount: ada('9831991'), coin_change: { coin_identifier: { identifier: `${rosettaTxHash(i)}:0` }, coin_action: 'coin_created' }, metadata: {} },
    ];
  };
  const transaction = (i: number) => ({ transaction_identifier: { hash: rosettaTxHash(i) }, operations: operations(i), metadata: { size: 294, scriptSize: 0 } });
  const pendingTransaction = (hash: string) => ({
    transaction_identifier: { hash },
    operations: operations(index + 1).map(({ status: _s, ...op }) => op), // not applied yet: no status
  });
  /** Resolves a PartialBlockIdentifier (none: the tip); unknown -> 4001. */
  const resolveBlock = (b: { index?: number; hash?: string } | undefined): number => {
    let i = index;
    if (b?.index !== undefined) i = b.index;
    if (b?.hash !== undefined) {
      const m = /^b10c([0-9a-f]{60})$/.exec(b.hash);
      const h = m ? Number.parseInt(m[1]!, 16) : -1;
      if (b.index !== undefined && h !== b.index) fail(4001);
      i = h;
    }
    if (!Number.isSafeInteger(i) || i < 0 || i > index) fail(4001);
    return i;
  };
  const txIndexOf = (hash: string): number | null => {
    const m = /^ada0([0-9a-f]{60})$/.exec(hash);
    if (!m) return null;
    const i = Number.parseInt(m[1]!, 16);
    return Number.isSafeInteger(i) && i <= index ? i : null;
  };
  const checkAddress = (address: string): void => {
    if (!ADDRESS.test(address)) fail(4015, { message: `Provided address is invalid: ${address}` });
  };
  const hexOrFail = (hex: string, code: number): Buffer => {
    if (!/^([0-9a-fA-F]{2})+$/.test(hex)) fail(code);
    return Buffer.from(hex, 'hex');
  };
  const hashOfSigned = (hex: string): string => createHash('sha256').update(hexOrFail(hex, 4011)).digest('hex');

  // loosely typed on purpose: each body has been validated against its request schema first
  type Body = Record<string, any>;
  const handlers: Record<string, (b: Body) => unknown> = {
    '/network/list': () => ({ network_identifiers: [{ blockchain: 'cardano', network }] }),
    '/network/status': () => ({
      current_block_identifier: blockId(index),
      current_block_timestamp: timestamp(index),
      genesis_block_identifier: blockId(0),
      oldest_block_identifier: blockId(0),
      sync_status: { current_index: index, target_index: index, stage: 'SYNCED', synced: true },
      peers: [{ peer_id: PEERS[network] }],
    }),
    '/network/options': () => ({
      version: { rosetta_version: '1.4.13', node_version: '10.1.4', middleware_version: '1.0.0-stand-in', metadata: {} },
      allow: {
        operation_statuses: [
          { status: 'success', successful: true },
          { status: 'invalid', successful: false },
        ],
        operation_types: OPERATION_TYPES,
        errors: CARDANO_ERROR_LIST,
        historical_balance_lookup: true,
        call_methods: CALL_METHODS,
        balance_exemptions: [],
        mempool_coins: false,
      },
    }),
    '/block': (b) => {
      const i = resolveBlock(b.block_identifier);
      return {
        block: {
          block_identifier: blockId(i),
          parent_block_identifier: blockId(Math.max(0, i - 1)),
          timestamp: timestamp(i),
          transactions: [transaction(i)],
          metadata: { transactionsCount: 1, createdBy: `pool1stand-in`, size: 1024, epochNo: Math.floor(i / 21600), slotNo: i * (SLOT_MS / 1000) },
        },
      };
    },
    '/block/transaction': (b) => {
      const i = resolveBlock(b.block_identifier);
      if (txIndexOf(b.transaction_identifier.hash) !== i) fail(4006);
      return { transaction: transaction(i) };
    },
    '/mempool': () => ({ transaction_identifiers: [...mempool.keys()].map((hash) => ({ hash })) }),
    '/mempool/transaction': (b) => {
      const hash = b.transaction_identifier.hash as string;
      if (!mempool.has(hash)) fail(4006);
      return { transaction: pendingTransaction(hash) };
    },
    '/account/balance': (b) => {
      checkAddress(b.account_identifier.address);
      const i = resolveBlock(b.block_identifier);
      return { block_identifier: blockId(i), balances: [ada(String(1_000_000_000 + i))] };
    },
    '/account/coins': (b) => {
      checkAddress(b.account_identifier.address);
      return {
        block_identifier: blockId(index),
        coins: [
          { coin_identifier: { identifier: `${rosettaTxHash(index)}:0` }, amount: ada('9831991') },
          { coin_identifier: { identifier: `${rosettaTxHash(Math.max(0, index - 1))}:1` }, amount: ada('990168009') },
        ],
      };
    },
    '/construction/derive': (b) => {
      const key = b.public_key as { hex_bytes: string; curve_type: string };
      if (key.curve_type !== 'edwards25519' || !/^[0-9a-fA-F]{64}$/.test(key.hex_bytes)) fail(4007);
      const tail = createHash('sha256').update(key.hex_bytes.toLowerCase()).digest('hex').replace(/[1bio]/g, 'q').slice(0, 53);
      const address = `${prefix}v${tail}`;
      return { address, account_identifier: { address } };
    },
    '/construction/preprocess': (b) => ({
      options: { relative_ttl: b.metadata?.relative_ttl ?? 1000, transaction_size: 200 + 80 * (b.operations as unknown[]).length },
      required_public_keys: [{ address: ADDR_A }],
    }),
    '/construction/metadata': () => ({
      metadata: { ttl: String(index * (SLOT_MS / 1000) + 1000), protocol_parameters: { coinsPerUtxoSize: '4310', maxTxSize: 16384, maxValSize: 5000, keyDeposit: '2000000', maxCollateralInputs: 3, minFeeCoefficient: 44, minFeeConstant: 155381, minPoolCost: '170000000', poolDeposit: '500000000', protocol: 10 } },
      suggested_fee: [ada('168009')],
    }),
    '/construction/payloads': (b) => {
      const ops = b.operations as { account?: { address: string } }[];
      const unsigned = createHash('sha256').update(JSON.stringify(ops)).digest('hex');
      const signers = [...new Set(ops.map((o) => o.account?.address).filter((a): a is string => typeof a === 'string'))];
      return {
        unsigned_transaction: `84a400${unsigned}`,
        payloads: (signers.length ? signers : [ADDR_A]).map((address) => ({ address, account_identifier: { address }, hex_bytes: unsigned, signature_type: 'ed25519' })),
      };
    },
    '/construction/combine': (b) => {
      hexOrFail(b.unsigned_transaction, 4012);
      const sigs = (b.signatures as { hex_bytes: string }[]).map((s) => s.hex_bytes).join('');
      return { signed_transaction: `${b.unsigned_transaction}${Buffer.from(sigs).toString('hex')}` };
    },
    '/construction/parse': (b) => {
      hexOrFail(b.transaction, b.signed ? 4011 : 4012);
      const ops = operations(index + 1).map(({ status: _s, ...op }) => op);
      return b.signed ? { operations: ops, signers: [ADDR_A], account_identifier_signers: [{ address: ADDR_A }] } : { operations: ops, account_identifier_signers: [] };
    },
    '/construction/hash': (b) => ({ transaction_identifier: { hash: hashOfSigned(b.signed_transaction) } }),
    '/construction/submit': (b) => {
      const hash = hashOfSigned(b.signed_transaction);
      mempool.set(hash, b.signed_transaction);
      if (mempool.size > MEMPOOL_MAX) mempool.delete(mempool.keys().next().value!);
      return { transaction_identifier: { hash } };
    },
    '/call': (b) => {
      if (!CALL_METHODS.includes(b.method)) fail(5050, { message: `Call method not supported: ${b.method}` });
      return { result: { method: b.method, parameters: b.parameters }, idempotent: true };
    },
    '/events/blocks': (b) => {
      const offset = b.offset ?? 0;
      const limit = Math.min(b.limit ?? 100, 100);
      const events = [];
      for (let s = offset; s <= index && events.length < limit; s++) events.push({ sequence: s, block_identifier: blockId(s), type: 'block_added' });
      return { max_sequence: index, events };
    },
    '/search/transactions': (b) => {
      if (b.success !== undefined && b.status !== undefined) fail(5054);
      const max = Math.min(b.max_block ?? index, index);
      let heights: number[];
      if (b.transaction_identifier) {
        const i = txIndexOf(b.transaction_identifier.hash);
        heights = i !== null && i <= max ? [i] : [];
      } else {
        heights = [];
        for (let i = max; i >= 0 && heights.length < 10_000; i--) heights.push(i);
      }
      if (b.success === false || b.status === 'invalid') heights = [];
      const offset = b.offset ?? 0;
      const limit = Math.min(b.limit ?? 10, 100);
      const page = heights.slice(offset, offset + limit);
      return {
        transactions: page.map((i) => ({ block_identifier: blockId(i), transaction: transaction(i) })),
        total_count: heights.length,
        ...(offset + limit < heights.length ? { next_offset: offset + limit } : {}),
      };
    },
  };
  for (const p of ROSETTA_PATHS) if (!handlers[p]) throw new Error(`rosetta stand-in: no handler for ${p}`);

  const send = (res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void => {
    if (res.headersSent || res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
    res.end(text);
  };
  const sendError = (res: ServerResponse, e: RosettaError): void => send(res, e.retriable ? 500 : nonRetriableStatus, e);
  const reasons = (errors: ErrorObject[] | null | undefined): string =>
    `[${(errors ?? []).map((e) => `${e.instancePath.replace(/^\//, '').replaceAll('/', '.') || 'body'} ${e.message ?? 'is invalid'}`).join(', ')}]`;

  const server = createSafeServer(
    async (req, res) => {
      const r = await record(req);
      const entry: RosettaRecorded = { ...r, json: parseJson(r.body) };
      file(entry, requests, healthChecks);
      const id = ++requestId;
      const handler = handlers[r.path];
      if (!handler) return send(res, 404, { code: 404, message: 'Not Found', retriable: false, details: { message: `No endpoint ${r.path}` } });
      if (r.method !== 'POST') return send(res, 405, { code: 405, message: 'Method Not Allowed', retriable: false, details: { message: `${r.method} is not supported: POST ${r.path}` } }, { allow: 'POST' });
      const unspecified = (why: string): void => sendError(res, cardanoError(5000, { message: `An error occurred for request ${id}: ${why}` }));
      if (entry.json === undefined) return unspecified('JSON parse error: the body is not a JSON document');
      const validate = rosettaValidator(rosettaSchemas(r.path).request);
      if (!validate(entry.json)) return unspecified(reasons(validate.errors));
      const body = entry.json as Body;
      try {
        const ni = body.network_identifier as { blockchain: string; network: string } | undefined;
        if (ni) {
          if (ni.blockchain !== 'cardano') fail(4004, { message: `Invalid blockchain: ${ni.blockchain}` });
          if (ni.network !== network) fail(4002, { message: `Network not found: ${ni.network}` });
        }
        send(res, 200, handler(body));
      } catch (err) {
        if (err instanceof Fail) sendError(res, err.error);
        else throw err;
      }
    },
    (res, err) => sendError(res, cardanoError(5000, { message: `An error occurred: ${(err as Error)?.message ?? String(err)}` })),
  );
  const url = await listen(server, opts.port ?? 0);
  const { port } = server.address() as { port: number };
  return {
    url,
    port,
    network,
    requests,
    healthChecks,
    clear: () => void requests.splice(0),
    setNonRetriableStatus: (s) => {
      if (s !== 400 && s !== 500) throw new Error(`setNonRetriableStatus: ${String(s)} is neither 400 nor 500`);
      nonRetriableStatus = s;
    },
    setBlockIndex: (n) => {
      if (!Number.isSafeInteger(n) || n < 0) throw new Error(`setBlockIndex: ${n} is not a block index`);
      index = n;
    },
    get blockIndex() {
      return index;
    },
    close: () => close(server),
  };
}
