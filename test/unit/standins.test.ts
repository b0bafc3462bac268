// The test stand-ins themselves: each one started for real on 127.0.0.1 and a
// free port, its answers validated against the shared specs with validators
// built here (not the stand-ins' own), its errors checked against Blockbook's
// and Cardano Rosetta's, its request records checked, and anvil proven to start
// with the requested chain id, to stop, and not to outlive its parent.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import {
  anvilLauncher,
  PROJECT_ROOT,
  SHARED_SPECS,
  SPECS,
  specPath,
  startAnvil,
  startBlockbookStub,
  startRecordingProxy,
  startRosettaStub,
  type Anvil,
  type BlockbookStub,
  type RosettaStub,
} from '../support/index.ts';
import { pushCapped } from '../support/http.ts';

const CT_BLOCKBOOK = 'application/json; charset=utf-8';

// ---- validators from the specs, built here ----------------------------------------------------

const blockbookDoc = parseYaml(readFileSync(specPath('blockbook-openapi.yaml'), 'utf8')) as Record<string, unknown>;
const ajv2020 = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
ajv2020.addSchema(blockbookDoc, 'https://specs.test/blockbook-openapi.yaml');
/** Validator of a Blockbook component schema (OpenAPI 3.1 = JSON Schema 2020-12), `[]` suffix for an array of it. */
function bbSchema(name: string): ValidateFunction {
  const ref = { $ref: `https://specs.test/blockbook-openapi.yaml#/components/schemas/${name.replace('[]', '')}` };
  return ajv2020.compile(name.endsWith('[]') ? { type: 'array', items: ref } : ref);
}

const rosettaDoc = JSON.parse(readFileSync(specPath('rosetta-api.json'), 'utf8')) as {
  paths: Record<string, { post: { requestBody: { content: { 'application/json': { schema: { $ref: string } } } }; responses: Record<string, { content: { 'application/json': { schema: { $ref: string } } } }> } }>;
};
const ajv07 = new Ajv({ strict: false, validateFormats: false, allErrors: true });
ajv07.addSchema(rosettaDoc, 'https://specs.test/rosetta-api.json');
const rosettaSchema = (ref: string): ValidateFunction => ajv07.compile({ $ref: `https://specs.test/rosetta-api.json${ref.slice(ref.indexOf('#'))}` });
const rosettaError = rosettaSchema('#/components/schemas/Error');

const catalogue = JSON.parse(readFileSync(specPath('cardano-rosetta-errors.json'), 'utf8')) as { code: number; message: string; retriable: boolean; impl: string }[];
/** The entry the stand-in should use for a code: cardano-rosetta-java's where both have it. */
const entry = (code: number) => catalogue.find((e) => e.code === code && e.impl === 'cardano-rosetta-java') ?? catalogue.find((e) => e.code === code)!;

function expectValid(validate: ValidateFunction, value: unknown, what: string): void {
  const ok = validate(value);
  expect(ok, `${what}: ${ajv07.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 600)}`).toBe(true);
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON, loosely typed on purpose: the tests read deep into it. */
  json: any;
}
async function call(url: string, init: RequestInit = {}): Promise<Answer> {
  const r = await fetch(url, { redirect: 'manual', ...init });
  const text = await r.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, text, json };
}

// ---- paths ------------------------------------------------------------------------------------

describe('paths', () => {
  it('resolves the project root and the specs from the module, not the working directory', () => {
    expect(JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).name).toBe('chain-gateway');
    expect(SPECS).toBe(resolve(PROJECT_ROOT, 'test', 'specs') + sep);
    expect(SHARED_SPECS).toBe(resolve(PROJECT_ROOT, '..', 'shared', 'specs') + sep);
    expect(() => specPath('no-such-spec.json')).toThrow(/spec file missing/);
  });

  it('holds in test/specs every file the specs README lists', () => {
    const copies = readdirSync(SPECS).sort();
    // Every file the shared README lists is here (the README is copied too).
    const listed = [...readFileSync(specPath('README.md'), 'utf8').matchAll(/^- ([\w.-]+)(?: \+ ([\w.-]+))?/gm)].flatMap((m) => m.slice(1).filter(Boolean));
    expect(listed.length).toBeGreaterThanOrEqual(8);
    for (const f of listed) expect(copies, f).toContain(f);
  });

  // test/specs.sha256 records ../shared/specs as the copies were taken. The
  // copies are checked against it everywhere, and it against ../shared/specs
  // wherever that folder exists (a clone elsewhere has only the record).
  const recorded = () =>
    readFileSync(join(PROJECT_ROOT, 'test', 'specs.sha256'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(/\s+/))
      .map(([sum, name]) => [name!, sum!] as const);
  const sha = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

  it('keeps test/specs equal to the recorded checksums, and the record equal to ../shared/specs where that folder exists', () => {
    const record = recorded();
    expect(record.length).toBeGreaterThanOrEqual(8);
    const dirs = existsSync(SHARED_SPECS) ? [SPECS, SHARED_SPECS] : [SPECS];
    console.log(`specs compared with test/specs.sha256: ${dirs.join(', ')}`);
    for (const dir of dirs) {
      expect(readdirSync(dir).sort(), dir).toEqual(record.map(([name]) => name).sort());
      for (const [name, sum] of record) expect(sha(join(dir, name)), join(dir, name)).toBe(sum);
    }
  });
});

describe('recording', () => {
  it('keeps the newest entries once past its cap, trimming in batches', () => {
    const list: number[] = [];
    for (let i = 0; i < 1000; i++) pushCapped(list, i, 100);
    expect(list.length).toBeGreaterThanOrEqual(100);
    expect(list.length).toBeLessThanOrEqual(110);
    expect(list.at(-1)).toBe(999);
    expect(list).toEqual(Array.from({ length: list.length }, (_, k) => 1000 - list.length + k));
    // In batches: a tenth past the cap is kept, and the next push trims back to the cap at once.
    const batch: number[] = [];
    for (let i = 0; i < 110; i++) pushCapped(batch, i, 100);
    expect(batch).toHaveLength(110);
    pushCapped(batch, 110, 100);
    expect(batch).toEqual(Array.from({ length: 100 }, (_, k) => 11 + k));
  });
});

// ---- Blockbook --------------------------------------------------------------------------------

describe('Blockbook stand-in', () => {
  let bb: BlockbookStub;
  const BEST = 120;
  beforeAll(async () => {
    bb = await startBlockbookStub({ coin: 'Bitcoin', bestHeight: BEST });
  });
  afterAll(() => bb?.close());
  const get = (path: string, init?: RequestInit) => call(`${bb.url}${path}`, init);

  it('listens on 127.0.0.1 and a free port, its URL ending in /api', () => {
    expect(bb.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api$/);
    expect(bb.port).toBeGreaterThan(0);
    expect(bb.url).toBe(`http://127.0.0.1:${bb.port}/api`);
  });

  it('answers every v2 endpoint with a body valid against blockbook-openapi.yaml', async () => {
    const [tx0, tx1] = bb.txids(7);
    const cases: [string, string][] = [
      ['/status', 'SystemInfo'],
      ['/', 'SystemInfo'],
      ['/v2/block-index/7', 'BlockHashResponse'],
      ['/v2/block/7', 'Block'],
      [`/v2/block/${bb.blockHash(7)}?page=1`, 'Block'],
      ['/v2/rawblock/7', 'BlockRaw'],
      [`/v2/tx/${tx0}`, 'Tx'],
      [`/v2/tx/${tx1}?spending=true`, 'Tx'],
      ['/v2/address/bc1q0wd209cv5k9pd9mhk7nspacywcj038xxdhnt5u', 'Address'],
      ['/v2/address/bc1q0wd209cv5k9pd9mhk7nspacywcj038xxdhnt5u?details=basic', 'Address'],
      ['/v2/address/bc1q0wd209cv5k9pd9mhk7nspacywcj038xxdhnt5u?details=txs&page=1&pageSize=1', 'Address'],
      ['/v2/xpub/dgub8sbe5Mi8LA4dXB9zPfLZW8arm?tokens=used', 'Address'],
      ['/v2/utxo/bc1q0wd209cv5k9pd9mhk7nspacywcj038xxdhnt5u', 'Utxo[]'],
      ['/v2/utxo/bc1q0wd209cv5k9pd9mhk7nspacywcj038xxdhnt5u?confirmed=true', 'Utxo[]'],
      ['/v2/balancehistory/bc1q0wd209cv5k9pd9mhk7nspacywcj038xxdhnt5u?fiatcurrency=usd', 'BalanceHistory[]'],
      ['/v2/estimatefee/3', 'ResultStringResponse'],
      ['/v2/feestats/7', 'FeeStats'],
      ['/v2/tickers/', 'FiatTicker'],
      ['/v2/tickers/?currency=usd&timestamp=1574346615', 'FiatTicker'],
      ['/v2/multi-tickers/?timestamp=1574346615,1574433015&currency=eur', 'FiatTicker[]'],
      ['/v2/tickers-list/?timestamp=1574346615', 'AvailableVsCurrencies'],
      ['/v2/block-filters/?scriptType=taproot&lastN=3', 'BlockFilters'],
      ['/v2/contract/0x0000000000000000000000000000000000000001', 'ContractInfoResult'],
      ['/v2/sendtx/0100000001', 'SendTransactionResponse'],
    ];
    for (const [path, schema] of cases) {
      const r = await get(path);
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type'), path).toBe(CT_BLOCKBOOK);
      expectValid(bbSchema(schema), r.json, `${path} as ${schema}`);
    }
    const specific = await get(`/v2/tx-specific/${tx0}`);
    expect(specific.status).toBe(200);
    expect(specific.json).toMatchObject({ txid: tx0, blockhash: bb.blockHash(7), height: 7 });
    const rawtx = await get(`/rawtx/${tx0}`);
    expect(rawtx.status).toBe(200);
    expect(typeof rawtx.json).toBe('string');
  });

  it('adapts the example block to the requested height or hash, the tip having no next block', async () => {
    const byHeight = (await get('/v2/block/7?page=3')).json;
    const byHash = (await get(`/v2/block/${bb.blockHash(7)}`)).json;
    expect(byHash).toEqual(byHeight);
    expect(byHeight).toMatchObject({ page: 1, totalPages: 1, itemsOnPage: 1000, height: 7, hash: bb.blockHash(7), previousBlockHash: bb.blockHash(6), nextBlockHash: bb.blockHash(8), confirmations: BEST - 7 + 1, txCount: 2 });
    expect(byHeight.txs.map((t: { txid: string }) => t.txid)).toEqual(bb.txids(7));
    expect(byHeight.txs.every((t: { blockHeight: number; blockHash: string }) => t.blockHeight === 7 && t.blockHash === bb.blockHash(7))).toBe(true);
    const example = JSON.parse(readFileSync(specPath('blockbook-block-example.json'), 'utf8'));
    expect(byHeight.merkleRoot).toBe(example.merkleRoot);
    expect(byHeight.txs[1].vout).toEqual(example.txs[1].vout);
    const tip = (await get(`/v2/block/${BEST}`)).json;
    expect(tip.confirmations).toBe(1);
    expect(tip).not.toHaveProperty('nextBlockHash');
    expect((await get('/v2/block/0')).json).not.toHaveProperty('previousBlockHash');
    expect((await get('/v2/block-index/7')).json).toEqual({ blockHash: bb.blockHash(7) });
  });

  it('answers errors the way Blockbook does: 400 for not-found and bad parameters, 500 for internal ones', async () => {
    const errorSchema = bbSchema('ErrorResponse');
    const cases: [string, number, string][] = [
      [`/v2/block/${BEST + 1}`, 400, 'Block not found'],
      ['/v2/block/not-a-block', 400, 'Block not found'],
      [`/v2/block/${'ab'.repeat(32)}`, 400, 'Block not found'],
      [`/v2/rawblock/${BEST + 5}`, 400, 'Block not found'],
      [`/v2/feestats/${BEST + 5}`, 400, 'Block not found'],
      ['/v2/tx/missing-txid', 400, "Transaction 'missing-txid' not found"],
      [`/v2/tx-specific/${'0'.repeat(64)}`, 400, `Transaction '${'0'.repeat(64)}' not found`],
      [`/v2/tx/${bb.txids(1)[0]}?spending=maybe`, 400, "Parameter 'spending' cannot be converted to boolean"],
      ['/v2/estimatefee/abc', 400, "Parameter 'number of blocks' is not a number"],
      ['/v2/utxo/x?confirmed=yes', 400, "Parameter 'confirmed' cannot be converted to boolean"],
      ['/v2/multi-tickers/', 400, "Parameter 'timestamp' is missing."],
      ['/v2/block-filters/?scriptType=taproot', 400, 'Missing parameters'],
      ['/v2/sendtx/xyz', 400, 'TX decode failed'],
      ['/v2/sendtx/', 400, 'Missing tx blob'],
      ['/v2/balancehistory/x?from=yesterday', 500, 'Internal server error'],
    ];
    for (const [path, status, error] of cases) {
      const r = await get(path);
      expect(r.status, path).toBe(status);
      expect(r.headers.get('content-type'), path).toBe(CT_BLOCKBOOK);
      expect(r.json, path).toEqual({ error });
      expectValid(errorSchema, r.json, path);
    }
  });

  it('routes like Blockbook: unmatched /api/* is the status, a subtree root without its slash and unclean paths are redirected', async () => {
    for (const path of ['/v2/nothing-here', '/v2', '/whatever/else']) {
      const r = await get(path);
      expect(r.status, path).toBe(200);
      expect(r.json.blockbook.bestHeight, path).toBe(BEST);
    }
    const noSlash = await get('/v2/block?page=2');
    expect(noSlash.status).toBe(301);
    expect(noSlash.headers.get('location')).toBe('/api/v2/block/?page=2');
    const unclean = await get('/v2/../v2//block/1');
    expect(unclean.status).toBe(301);
    expect(unclean.headers.get('location')).toBe('/api/v2/block/1');
    const outside = await call(`${bb.url.replace(/\/api$/, '')}/not-api`);
    expect(outside.status).toBe(404);
    // unversioned aliases and v1 (Bitcoin-type coins) reach the same handlers
    expect((await get('/block/7')).json.hash).toBe(bb.blockHash(7));
    expect((await get('/v1/block-index/7')).json).toEqual({ blockHash: bb.blockHash(7) });
  });

  it('broadcasts with GET and POST /v2/sendtx/, then knows the transaction as unconfirmed', async () => {
    const hex = '0200000001aabbccdd';
    const byGet = await get(`/v2/sendtx/${hex}`);
    const byPost = await get('/v2/sendtx/', { method: 'POST', body: hex, headers: { 'content-type': 'text/plain' } });
    expect(byPost.status).toBe(200);
    expect(byPost.json).toEqual(byGet.json);
    expect(byPost.json.result).toMatch(/^[0-9a-f]{64}$/);
    const tx = await get(`/v2/tx/${byPost.json.result}`);
    expect(tx.status).toBe(200);
    expect(tx.json).toMatchObject({ txid: byPost.json.result, hex, confirmations: 0, blockHeight: -1 });
    expectValid(bbSchema('Tx'), tx.json, 'unconfirmed tx');
  });

  it('follows setBestHeight in the status and in what exists', async () => {
    bb.setBestHeight(BEST + 10);
    try {
      expect((await get('/status')).json.blockbook.bestHeight).toBe(BEST + 10);
      expect((await get('/status')).json.backend.blocks).toBe(BEST + 10);
      expect((await get(`/v2/block/${BEST + 10}`)).status).toBe(200);
      expect((await get(`/v2/block/${BEST + 11}`)).status).toBe(400);
    } finally {
      bb.setBestHeight(BEST);
    }
    expect((await get(`/v2/block/${BEST + 10}`)).json).toEqual({ error: 'Block not found' });
  });

  it('records method, path, raw query, parameters in order and headers; health checks apart', async () => {
    bb.clear();
    expect(bb.requests).toHaveLength(0);
    await get('/v2/address/bc1qx?page=2&details=txids&page=3&to=5', { headers: { 'x-trace': 'abc', 'X-Mixed-Case': 'v' } });
    await get('/v2/sendtx/', { method: 'POST', body: '00ff' });
    await get('/status', { headers: { 'user-agent': 'chain-gateway-health/1' } });
    expect(bb.requests).toHaveLength(2);
    const [a, s] = bb.requests;
    expect(a).toMatchObject({ method: 'GET', path: '/api/v2/address/bc1qx', url: '/api/v2/address/bc1qx?page=2&details=txids&page=3&to=5', query: 'page=2&details=txids&page=3&to=5' });
    expect(a!.params).toEqual([
      ['page', '2'],
      ['details', 'txids'],
      ['page', '3'],
      ['to', '5'],
    ]);
    expect(a!.headers['x-trace']).toBe('abc');
    expect(a!.headers['x-mixed-case']).toBe('v');
    expect(a!.rawHeaders).toContain('X-Mixed-Case');
    expect(s).toMatchObject({ method: 'POST', path: '/api/v2/sendtx/', query: '', params: [] });
    expect(s!.body.toString()).toBe('00ff');
    expect(bb.healthChecks.at(-1)!.path).toBe('/api/status');
  });
});

// ---- Rosetta ----------------------------------------------------------------------------------

describe('Cardano Rosetta stand-in', () => {
  let ros: RosettaStub;
  const NI = { blockchain: 'cardano', network: 'preprod' };
  const ADDR = 'addr_test1vpfwv0ezc5g8a4mkku8hhy3y3vp92t7s3ul8g778g5yegsgalc6gc';
  const PK = { hex_bytes: '1b400d60aaf34eaf6dcbab9bba46001a23497886cf11066f7846933d30e5ad3f', curve_type: 'edwards25519' };
  const OP = { operation_identifier: { index: 0 }, type: 'input', account: { address: ADDR }, amount: { value: '-1000000', currency: { symbol: 'ADA', decimals: 6 } }, coin_change: { coin_identifier: { identifier: `${'ab'.repeat(32)}:0` }, coin_action: 'coin_spent' } };
  /** A valid request body for every POST endpoint of rosetta-api.json. */
  const bodies = (tip: { index: number; hash: string }, txHash: string): Record<string, unknown> => ({
    '/network/list': { metadata: {} },
    '/network/status': { network_identifier: NI },
    '/network/options': { network_identifier: NI },
    '/block': { network_identifier: NI, block_identifier: { index: tip.index } },
    '/block/transaction': { network_identifier: NI, block_identifier: tip, transaction_identifier: { hash: txHash } },
    '/mempool': { network_identifier: NI },
    '/mempool/transaction': { network_identifier: NI, transaction_identifier: { hash: 'to-be-replaced' } },
    '/account/balance': { network_identifier: NI, account_identifier: { address: ADDR } },
    '/account/coins': { network_identifier: NI, account_identifier: { address: ADDR }, include_mempool: false },
    '/construction/derive': { network_identifier: NI, public_key: PK, metadata: {} },
    '/construction/preprocess': { network_identifier: NI, operations: [OP], metadata: {} },
    '/construction/metadata': { network_identifier: NI, options: { relative_ttl: 1000 }, public_keys: [PK] },
    '/construction/payloads': { network_identifier: NI, operations: [OP], metadata: {}, public_keys: [PK] },
    '/construction/combine': {
      network_identifier: NI,
      unsigned_transaction: '84a400aa',
      signatures: [{ signing_payload: { hex_bytes: 'aa', signature_type: 'ed25519' }, public_key: PK, signature_type: 'ed25519', hex_bytes: 'bb'.repeat(64) }],
    },
    '/construction/parse': { network_identifier: NI, signed: true, transaction: '84a400aa' },
    '/construction/hash': { network_identifier: NI, signed_transaction: '84a400aabb' },
    '/construction/submit': { network_identifier: NI, signed_transaction: '84a400aabb' },
    '/call': { network_identifier: NI, method: 'stand_in_echo', parameters: { x: 1 } },
    '/events/blocks': { network_identifier: NI, offset: 0, limit: 5 },
    '/search/transactions': { network_identifier: NI, transaction_identifier: { hash: txHash } },
  });
  beforeAll(async () => {
    ros = await startRosettaStub({ network: 'preprod' });
  });
  afterAll(() => ros?.close());
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    call(`${ros.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const expectCardanoError = (r: Answer, code: number, status: number, what: string): void => {
    expect(r.status, what).toBe(status);
    expectValid(rosettaError, r.json, what);
    const e = entry(code);
    expect(r.json, what).toMatchObject({ code, message: e.message, retriable: e.retriable });
  };

  it('serves every POST endpoint of rosetta-api.json with a 200 body valid against the spec', async () => {
    const status = (await post('/network/status', { network_identifier: NI })).json;
    const block = (await post('/block', { network_identifier: NI, block_identifier: { index: status.current_block_identifier.index } })).json;
    const txHash = block.block.transactions[0].transaction_identifier.hash as string;
    const all = bodies(status.current_block_identifier, txHash);
    expect(Object.keys(all).sort()).toEqual(Object.keys(rosettaDoc.paths).sort());
    // a submitted transaction is what /mempool/transaction then finds
    const submitted = (await post('/construction/submit', all['/construction/submit'])).json.transaction_identifier.hash as string;
    (all['/mempool/transaction'] as { transaction_identifier: { hash: string } }).transaction_identifier.hash = submitted;
    for (const [path, body] of Object.entries(all)) {
      const op = rosettaDoc.paths[path]!.post;
      expectValid(rosettaSchema(op.requestBody.content['application/json'].schema.$ref), body, `request ${path}`);
      const r = await post(path, body);
      expect(r.status, `${path}: ${r.text}`).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expectValid(rosettaSchema(op.responses['200']!.content['application/json'].schema.$ref), r.json, `response ${path}`);
    }
  });

  it('answers /network/list, /network/status and /network/options like Cardano Rosetta', async () => {
    expect((await post('/network/list', { metadata: {} })).json).toEqual({ network_identifiers: [{ blockchain: 'cardano', network: 'preprod' }] });
    const st = (await post('/network/status', { network_identifier: NI })).json;
    expect(st.current_block_identifier.index).toBe(ros.blockIndex);
    expect(st.genesis_block_identifier.index).toBe(0);
    expect(typeof st.current_block_timestamp).toBe('number');
    expect(st.peers.length).toBeGreaterThan(0);
    const opts = (await post('/network/options', { network_identifier: NI })).json;
    expect(opts.version).toMatchObject({ rosetta_version: '1.4.13' });
    expect(typeof opts.version.node_version).toBe('string');
    expect(typeof opts.version.middleware_version).toBe('string');
    const errors = opts.allow.errors as { code: number; message: string; retriable: boolean }[];
    const codes = errors.map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    expect(new Set(codes)).toEqual(new Set(catalogue.map((e) => e.code)));
    for (const e of errors) expect(e, String(e.code)).toEqual({ code: e.code, message: entry(e.code).message, retriable: entry(e.code).retriable });
    expect(opts.allow).toMatchObject({ historical_balance_lookup: true, mempool_coins: false, balance_exemptions: [] });
    expect(opts.allow.operation_types).toContain('input');
  });

  it('answers 4002 for another network and 4004 for another blockchain: HTTP 500, or 400 in the newer mode', async () => {
    const wrongNet = { network_identifier: { blockchain: 'cardano', network: 'mainnet' } };
    const wrongChain = { network_identifier: { blockchain: 'bitcoin', network: 'preprod' } };
    expectCardanoError(await post('/network/status', wrongNet), 4002, 500, '4002 default');
    expectCardanoError(await post('/account/balance', { ...wrongChain, account_identifier: { address: ADDR } }), 4004, 500, '4004 default');
    ros.setNonRetriableStatus(400);
    try {
      expectCardanoError(await post('/network/status', wrongNet), 4002, 400, '4002 newer');
      expectCardanoError(await post('/block', { ...wrongChain, block_identifier: {} }), 4004, 400, '4004 newer');
      expectCardanoError(await post('/block', { network_identifier: NI, block_identifier: { index: ros.blockIndex + 1 } }), 4001, 400, '4001 newer');
      // retriable errors stay HTTP 500
      expectCardanoError(await post('/account/balance', { network_identifier: NI, account_identifier: { address: 'not an address' } }), 4015, 500, '4015 newer');
      expectCardanoError(await post('/network/status', { metadata: {} }), 5000, 500, '5000 newer');
    } finally {
      ros.setNonRetriableStatus(500);
    }
    expectCardanoError(await post('/block', { network_identifier: NI, block_identifier: { index: ros.blockIndex + 1 } }), 4001, 500, '4001 default');
    expect(() => ros.setNonRetriableStatus(404 as 400)).toThrow();
  });

  it('answers an invalid body with 5000 and the reasons in details, after validating against the request schema', async () => {
    const missing = await post('/network/status', { metadata: {} });
    expectCardanoError(missing, 5000, 500, 'missing network_identifier');
    expect(missing.json.details.message).toMatch(/network_identifier/);
    const wrongType = await post('/block', { network_identifier: NI, block_identifier: { index: 'ten' } });
    expectCardanoError(wrongType, 5000, 500, 'index as a string');
    expect(wrongType.json.details.message).toMatch(/block_identifier\.index must be integer/);
    expectCardanoError(await post('/construction/derive', { network_identifier: NI, public_key: { ...PK, curve_type: 'rsa' } }), 5000, 500, 'curve outside the enum');
    expectCardanoError(await post('/network/status', '{"network_identifier":'), 5000, 500, 'not JSON');
    expectCardanoError(await post('/network/status', ''), 5000, 500, 'empty body');
  });

  it('knows its chain: unknown blocks and transactions are 4001 and 4006, setBlockIndex moves the tip', async () => {
    ros.setBlockIndex(50);
    try {
      const st = (await post('/network/status', { network_identifier: NI })).json;
      expect(st.current_block_identifier.index).toBe(50);
      expect((await post('/block', { network_identifier: NI, block_identifier: { index: 50 } })).status).toBe(200);
      expectCardanoError(await post('/block', { network_identifier: NI, block_identifier: { index: 51 } }), 4001, 500, 'past the tip');
      expectCardanoError(await post('/block', { network_identifier: NI, block_identifier: { hash: 'f'.repeat(64) } }), 4001, 500, 'unknown hash');
      expectCardanoError(
        await post('/block/transaction', { network_identifier: NI, block_identifier: st.current_block_identifier, transaction_identifier: { hash: 'f'.repeat(64) } }),
        4006,
        500,
        'unknown transaction',
      );
      expectCardanoError(await post('/mempool/transaction', { network_identifier: NI, transaction_identifier: { hash: 'f'.repeat(64) } }), 4006, 500, 'not in the mempool');
      expectCardanoError(await post('/call', { network_identifier: NI, method: 'nope', parameters: {} }), 5050, 500, 'unknown call method');
    } finally {
      ros.setBlockIndex(1000);
    }
  });

  it('answers unknown paths with 404 and other methods with 405, both Rosetta-shaped', async () => {
    const unknown = await post('/network/nope', { network_identifier: NI });
    expect(unknown.status).toBe(404);
    expectValid(rosettaError, unknown.json, '404');
    const get = await call(`${ros.url}/network/status`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expectValid(rosettaError, get.json, '405');
  });

  it('records method, path, headers and the parsed body; health checks apart', async () => {
    ros.clear();
    await post('/network/status', { network_identifier: NI, metadata: {} }, { 'x-trace': 't-1' });
    await post('/network/status', { network_identifier: NI }, { 'user-agent': 'chain-gateway-health/1' });
    await post('/network/list', 'not json');
    expect(ros.requests).toHaveLength(2);
    expect(ros.requests[0]).toMatchObject({ method: 'POST', path: '/network/status', json: { network_identifier: NI, metadata: {} } });
    expect(ros.requests[0]!.headers['x-trace']).toBe('t-1');
    expect(ros.requests[1]!.json).toBeUndefined();
    expect(ros.requests[1]!.body.toString()).toBe('not json');
    expect(ros.healthChecks.at(-1)!.path).toBe('/network/status');
  });
});

// ---- anvil ------------------------------------------------------------------------------------

/** Whether a process is still running (a zombie counts as gone). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
/** Polls until the process is gone; false after `ms`. */
async function gone(pid: number, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20)); // poll interval, not a readiness guess
  }
  return true;
}

describe('anvil', () => {
  it('starts on a free port with the requested chain id, mines, and stops', async () => {
    const [a, b] = await Promise.all([startAnvil({ chainId: 4242 }), startAnvil()]);
    try {
      expect(a.port).toBeGreaterThan(0);
      expect(a.url).toBe(`http://127.0.0.1:${a.port}`);
      expect(b.port).not.toBe(a.port);
      expect(a.chainId).toBe(4242);
      expect((await a.rpc('eth_chainId')).result).toBe('0x1092');
      expect(b.chainId).toBe(31337);
      expect((await b.rpc('eth_chainId', [])).result).toBe('0x7a69');
      expect((await a.rpc('eth_blockNumber')).result).toBe('0x0');
      await a.mine(3);
      expect((await a.rpc('eth_blockNumber')).result).toBe('0x3');
      const err = await a.rpc('eth_getWork');
      expect(err.error?.code).toBeTypeOf('number');
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(a.proc.exitCode !== null || a.proc.signalCode !== null).toBe(true);
    await a.stop(); // twice is fine
    await expect(fetch(a.url, { method: 'POST', body: '{}' })).rejects.toThrow();
  }, 60_000);

  it('refuses arguments that would hide its Listening line or fight over host, port and chain id', async () => {
    await expect(startAnvil({ args: ['--silent'] })).rejects.toThrow(/Listening/);
    await expect(startAnvil({ args: ['-q'] })).rejects.toThrow(/Listening/);
    await expect(startAnvil({ args: ['--port', '1'] })).rejects.toThrow(/startAnvil itself/);
  });

  it('rejects with anvil’s own output when it exits before listening', async () => {
    await expect(startAnvil({ args: ['--no-such-flag'] })).rejects.toThrow(/exited[\s\S]*no-such-flag/);
  });

  it('leaves no anvil behind when its parent process exits, is terminated or (with setpriv) is killed', async () => {
    const dir = join(PROJECT_ROOT, '.tmp', 'standins');
    mkdirSync(dir, { recursive: true });
    const script = join(dir, `orphan-${process.pid}.ts`);
    writeFileSync(
      script,
      `import { anvilLauncher, startAnvil } from ${JSON.stringify(pathToFileURL(join(PROJECT_ROOT, 'test/support/anvil.ts')).href)};\n` +
        `const a = await startAnvil({ chainId: 7 });\n` +
        `console.log('PID ' + a.proc.pid + ' ' + anvilLauncher());\n` +
        `// 'exit': leave by process.exit() once the test has seen anvil alive\n` +
        `process.stdin.on('data', () => process.exit(0));\n`,
    );
    // with setpriv the kernel kills anvil with its parent, so even SIGKILL leaves
    // none; the fallback (forced here with STANDIN_ANVIL_LAUNCHER=direct) covers
    // exit and the catchable signals
    expect(anvilLauncher()).toBe(existsSync('/usr/bin/setpriv') || existsSync('/bin/setpriv') ? 'setpriv' : 'direct');
    const ways: [string, 'exit' | NodeJS.Signals][] = [
      ['direct', 'exit'],
      ['direct', 'SIGTERM'],
      ['direct', 'SIGINT'],
    ];
    if (anvilLauncher() === 'setpriv') ways.push(['setpriv', 'exit'], ['setpriv', 'SIGTERM'], ['setpriv', 'SIGKILL']);
    onTestFinished(() => rmSync(script, { force: true }));
    for (const [mode, how] of ways) {
      const env = { ...process.env, STANDIN_ANVIL_LAUNCHER: mode };
      const child = spawn(process.execPath, ['--import', 'tsx', script, how], { cwd: PROJECT_ROOT, env, stdio: ['pipe', 'pipe', 'inherit'] });
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      const pid = await new Promise<number>((ok, fail) => {
        let out = '';
        child.stdout!.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /PID (\d+) (\w+)/.exec(out);
          if (m) {
            if (m[2] === mode) ok(Number(m[1]));
            else fail(new Error(`the child launched anvil with ${m[2]}, not ${mode}`));
          }
        });
        child.once('exit', (code) => fail(new Error(`child exited (${code}) before printing the anvil pid: ${out}`)));
      });
      expect(alive(pid), `${mode} ${how}`).toBe(true);
      expect(readFileSync(`/proc/${pid}/comm`, 'utf8').trim(), 'the pid is anvil’s own').toBe('anvil');
      if (how === 'exit') child.stdin!.write('exit\n');
      else child.kill(how);
      await exited;
      expect(await gone(pid), `anvil ${pid} outlived its parent (${mode}, ${how})`).toBe(true);
    }
  }, 90_000);
});

// ---- recording proxy --------------------------------------------------------------------------

describe('recording proxy', () => {
  let anvil: Anvil;
  let target: Server;
  let targetUrl: string;
  beforeAll(async () => {
    anvil = await startAnvil({ chainId: 10 });
    // a plain target that answers with its own status, headers and body
    target = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat([Buffer.from(`${req.method} ${req.url} `), ...chunks]);
        res.writeHead(418, { 'x-target': 'yes', 'set-cookie': ['a=1', 'b=2'], connection: 'x-private, keep-alive', 'x-private': 'hop', 'content-type': 'application/octet-stream' });
        res.end(body);
      });
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    targetUrl = `http://127.0.0.1:${(target.address() as { port: number }).port}`;
  }, 30_000);
  afterAll(async () => {
    await anvil?.stop();
    await new Promise((r) => target?.close(r));
  });

  it('forwards JSON-RPC to the node, returns its answer unchanged and lists the methods that reached it', async () => {
    const proxy = await startRecordingProxy(anvil.url);
    try {
      expect(proxy.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const batch = [
        { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
        { jsonrpc: '2.0', id: 2, method: 'eth_blockNumber', params: [] },
      ];
      const send = (url: string, body: unknown) => call(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const viaProxy = await send(proxy.url, batch);
      const direct = await send(anvil.url, batch);
      expect(viaProxy.status).toBe(200);
      expect(viaProxy.text).toBe(direct.text);
      await send(proxy.url, { jsonrpc: '2.0', id: 3, method: 'eth_gasPrice', params: [] });
      expect(proxy.methodsSeen()).toEqual(['eth_chainId', 'eth_blockNumber', 'eth_gasPrice']);
      expect(proxy.requests[0]!.json).toEqual(batch);
      expect(proxy.requests[0]!.headers['content-type']).toBe('application/json');
      proxy.clear();
      expect(proxy.methodsSeen()).toEqual([]);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it('records path with query, headers and raw body, and passes status, headers and body back, hop-by-hop ones dropped', async () => {
    const proxy = await startRecordingProxy(`${targetUrl}/`);
    try {
      const raw = Buffer.from([0x00, 0xff, 0x7b]);
      const r = await fetch(`${proxy.url}/some/path?b=2&a=1`, { method: 'PUT', headers: { 'x-key': 'k', 'content-type': 'application/octet-stream' }, body: raw });
      const body = Buffer.from(await r.arrayBuffer());
      expect(r.status).toBe(418);
      expect(r.headers.get('x-target')).toBe('yes');
      expect(r.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
      expect(r.headers.get('x-private')).toBeNull();
      expect(body).toEqual(Buffer.concat([Buffer.from('PUT /some/path?b=2&a=1 '), raw]));
      const rec = proxy.requests[0]!;
      expect(rec).toMatchObject({ method: 'PUT', path: '/some/path', url: '/some/path?b=2&a=1', query: 'b=2&a=1' });
      expect(rec.params).toEqual([
        ['b', '2'],
        ['a', '1'],
      ]);
      expect(rec.headers['x-key']).toBe('k');
      expect(rec.body).toEqual(raw);
      expect(rec.json).toBeUndefined();
      expect(proxy.methodsSeen()).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  it('answers 502 when the target is down', async () => {
    const down = await startRecordingProxy('http://127.0.0.1:1');
    try {
      const r = await call(down.url, { method: 'POST', body: '{}' });
      expect(r.status).toBe(502);
      expect(down.requests).toHaveLength(1);
    } finally {
      await down.close();
    }
  });
});
