import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { checkEvmBody, checkEvmBodyGeneral, type CallCheck, type EvmDecision } from '../../../../../runtime/kinds/evm/guard.ts';
import { mergeBatch } from '../../../../../runtime/jsonrpc/batch-merge.ts';
import { scanPlainRpc } from '../../../../../runtime/kinds/evm/guard-fast.ts';
import { evmParamsCheck } from '../../../../../runtime/kinds/evm/params.ts';
import { NO_VALIDATORS } from '../../../../../runtime/config/validators.ts';
import { hasDuplicateKeys, MAX_ANSWER_DEPTH } from '../../../../../runtime/jsonrpc/scan.ts';
import { answerSpans } from '../../../../../runtime/jsonrpc/answer.ts';
import { ROSETTA_ENDPOINTS, checkRosettaBody } from '../../../../../runtime/kinds/rosetta/guard.ts';
import { checkBlockbook } from '../../../../../runtime/kinds/blockbook/guard.ts';
import { splitQuery, isSafeSegment, RequestTarget } from '../../../../../runtime/url.ts';
import { specPath } from '../../../../support/paths.ts';
import { Call, callParses } from '../../../../../runtime/kinds/evm/call.ts';
import { DocCall, type DocBlock } from '../../../../../runtime/kinds/doc-call.ts';

const allowed = new Set(['eth_chainId', 'eth_sendRawTransaction']);
const body = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));

describe('EVM guard', () => {
  it('forwards a canonical single call as the original bytes', () => {
    const b = body({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
    const d = checkEvmBody(b, allowed, 10);
    expect(d.kind === 'forward' && d.body === b).toBe(true);
  });

  it('re-serializes anything that could be read two ways, keeping the checked method only', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","METHOD":"admin_peers"}',
      '{"jsonrpc":"2.0","id":1,"method":"admin_peers","method":"eth_chainId"}',
      '{"jsonrpc":"2.0","id":1,"me\\u0074hod":"admin_peers","method":"eth_chainId"}',
    ]) {
      const d = checkEvmBodyGeneral(body(text), allowed, 10);
      expect(d.kind, text).toBe('forward');
      if (d.kind !== 'forward') continue;
      expect(typeof d.body).toBe('string');
      const sent = JSON.parse(d.body as string);
      expect(Object.keys(sent).sort()).toEqual(Object.keys(sent).filter((k) => ['jsonrpc', 'id', 'method', 'params'].includes(k)).sort());
      expect(sent.method).toBe('eth_chainId');
      expect((d.body as string).match(/"method"/gi)!.length, text).toBe(1);
      expect(checkEvmBody(body(text), allowed, 10)).toEqual(d);
    }
    // A key inside params that happens to be called "method" is no second method: the bytes go as they are.
    const nested = body('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[{"method":"x"}]}');
    expect(checkEvmBodyGeneral(nested, allowed, 10)).toMatchObject({ kind: 'forward', body: nested });
  });

  it('general path: forwards the original bytes exactly when no object in the text names a key twice, else what JSON.parse read', () => {
    // Calls written member by member, some with a key repeated (at the top or inside params) and another value.
    const str = fc.constantFrom('method', 'params', 'id', 'a:b', 'x', '');
    const member = (k: string, v: unknown) => `${JSON.stringify(k)}:${JSON.stringify(v)}`;
    const call = fc.record({
      id: fc.oneof(fc.integer(), str),
      params: fc.array(fc.oneof(str, fc.dictionary(fc.constantFrom('to', 'data', 'method'), str, { maxKeys: 2 })), { maxLength: 3 }),
      again: fc.constantFrom(null, 'id', 'params', 'jsonrpc', 'method', 'nested'),
      other: str,
    });
    const write = (c: { id: unknown; params: unknown[]; again: string | null; other: string }): [string, boolean] => {
      const params = c.again === 'nested' ? `[{${member('to', c.other)},${member('to', 'x')}}]` : JSON.stringify(c.params);
      const parts = [member('jsonrpc', '2.0'), member('id', c.id), member('method', 'eth_chainId'), `"params":${params}`];
      if (c.again === 'id') parts.unshift(member('id', c.other));
      if (c.again === 'params') parts.unshift(member('params', [c.other]));
      if (c.again === 'jsonrpc') parts.unshift(member('jsonrpc', '2.0'));
      if (c.again === 'method') parts.unshift(member('method', 'eth_sendRawTransaction'));
      return [`{${parts.join(',')}}`, c.again !== null];
    };
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 4 }), fc.boolean(), (calls, asBatch) => {
        const written = calls.map(write);
        const raw = asBatch ? `[${written.map((w) => w[0]).join(',')}]` : written[0]![0];
        const twice = asBatch ? written.some((w) => w[1]) : written[0]![1];
        const d = checkEvmBodyGeneral(Buffer.from(raw), allowed, 10);
        expect(d.kind).toBe('forward');
        if (d.kind !== 'forward') return;
        expect(Buffer.isBuffer(d.body)).toBe(!twice);
        // What goes is what JSON.parse read (the last of two keys), and nothing in it can be read another way.
        const sent = typeof d.body === 'string' ? d.body : d.body.toString();
        expect(JSON.parse(sent)).toEqual(JSON.parse(raw));
        expect(hasDuplicateKeys(Buffer.from(sent), JSON.parse(sent))).toBe(false);
        // The fast path never takes a body with a key named twice at the top (the general path decides, as above); it does
        // not read params unless it checks them, so a key twice inside them goes as sent (the cache then keeps nothing of it).
        const fast = checkEvmBody(Buffer.from(raw), allowed, 10);
        const atTop = (asBatch ? calls : calls.slice(0, 1)).some((c) => c.again !== null && c.again !== 'nested');
        expect(fast.kind === 'forward' && Buffer.isBuffer(fast.body)).toBe(!atTop);
        // and finds a single call's id where the cache's answer scanner does.
        if (fast.kind === 'forward' && Buffer.isBuffer(fast.body) && !asBatch) {
          const spans = answerSpans(Buffer.from(raw), MAX_ANSWER_DEPTH)!;
          expect([fast.idStart, fast.idEnd]).toEqual([spans.idStart, spans.idEnd]);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('marks eth_sendRawTransaction as not idempotent', () => {
    const d = checkEvmBody(body({ jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: ['0x00'] }), allowed, 10);
    expect(d.kind === 'forward' && d.idempotent).toBe(false);
  });

  it('merges a partly refused batch back into request order', () => {
    const d = checkEvmBody(
      body([
        { jsonrpc: '2.0', id: 'a', method: 'eth_chainId' },
        { jsonrpc: '2.0', id: 'b', method: 'nope' },
        { jsonrpc: '2.0', id: 'c', method: 'eth_chainId' },
      ]),
      allowed,
      10,
    );
    expect(d.kind).toBe('forward');
    if (d.kind !== 'forward' || d.merge === null) throw new Error('expected a merge plan');
    const merged = JSON.parse(
      mergeBatch(d.merge, JSON.stringify([{ jsonrpc: '2.0', id: 'c', result: 2 }, { jsonrpc: '2.0', id: 'a', result: 1 }]))!.toString(),
    );
    expect(merged.map((x: { id: string }) => x.id)).toEqual(['a', 'b', 'c']);
    expect(merged[1].error.code).toBe(-32601);
  });

  it('answers any mix of allowed, refused, invalid calls and notifications in request order', () => {
    const kind = fc.constantFrom('allowed', 'refused', 'invalid', 'allowed-notification', 'refused-notification');
    fc.assert(
      fc.property(fc.array(kind, { minLength: 1, maxLength: 10 }), (kinds) => {
        const items = kinds.map((k, i) => {
          const id = `id-${i}`;
          if (k === 'invalid') return { jsonrpc: '1.0', id, method: 'eth_chainId' };
          const method = k.startsWith('allowed') ? 'eth_chainId' : 'admin_peers';
          return k.endsWith('notification') ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', id, method };
        });
        const d = checkEvmBody(body(items), allowed, 10);
        // What the client must get: one answer per call that has an id, in order (invalid ones included).
        const expectedIds = kinds.flatMap((k, i) => (k.endsWith('notification') ? [] : [`id-${i}`]));
        const allowedIds = kinds.flatMap((k, i) => (k === 'allowed' ? [`id-${i}`] : []));
        let answer: { id: string; result?: string; error?: { code: number } }[];
        if (d.kind === 'reply') {
          expect(kinds.some((k) => k.startsWith('allowed'))).toBe(false);
          answer = d.status === 204 ? [] : JSON.parse(d.body);
        } else {
          const sent = JSON.parse(typeof d.body === 'string' ? d.body : d.body.toString('utf8')) as { id?: string; method: string }[];
          expect(sent.every((x) => x.method === 'eth_chainId')).toBe(true);
          expect(sent.length).toBe(d.count);
          expect(sent.flatMap((x) => (x.id === undefined ? [] : [x.id]))).toEqual(allowedIds);
          // The node answers the calls that have ids, in reverse order.
          const node = JSON.stringify(allowedIds.map((id) => ({ jsonrpc: '2.0', id, result: `r-${id}` })).reverse());
          answer = d.merge === null ? JSON.parse(node).reverse() : JSON.parse(mergeBatch(d.merge, node)!.toString());
          expect(d.merge === null).toBe(kinds.every((k) => k.startsWith('allowed')));
        }
        expect(answer.map((a) => a.id)).toEqual(expectedIds);
        for (const a of answer) {
          const k = kinds[Number(a.id.slice(3))];
          if (k === 'allowed') expect(a.result).toBe(`r-${a.id}`);
          else expect(a.error?.code).toBe(k === 'invalid' ? -32600 : -32601);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('EVM guard: params nested past limits.maxParamsDepth (issue 32)', () => {
  const LIMITS = { maxParamsDepth: 32, maxArrayItems: 10_000, maxHexBytes: 262_144 };
  const check = evmParamsCheck(allowed, LIMITS, NO_VALIDATORS);
  const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
  /** Where a params value nested `n` > 32 deep crosses the limit: the 33rd level, index 0 at each step. */
  const PATH = '/0'.repeat(32);
  const valid = (id: number) => `{"jsonrpc":"2.0","id":${id},"method":"eth_chainId","params":[]}`;
  const deepCall = (idJson: string, n = 40) => `{"jsonrpc":"2.0","id":${idJson},"method":"eth_chainId","params":${nest(n)}}`;

  it('a batch with one call 40 levels deep: that call gets -32602 with its own id and data.path, the valid ones still go', () => {
    const b = body(`[${valid(1)},${deepCall('"deep"')},${valid(3)}]`);
    for (const d of [checkEvmBody(b, allowed, 10, check), checkEvmBodyGeneral(b, allowed, 10, null, check)]) {
      expect(d.kind).toBe('forward');
      if (d.kind !== 'forward' || d.merge === null) throw new Error('expected a merge plan');
      const sent = JSON.parse(String(d.body)) as { id: number }[];
      expect(sent.map((x) => x.id)).toEqual([1, 3]);
      expect(d.count).toBe(2);
      const merged = JSON.parse(mergeBatch(d.merge, JSON.stringify([{ jsonrpc: '2.0', id: 3, result: '0x1' }, { jsonrpc: '2.0', id: 1, result: '0x1' }]))!.toString());
      expect(merged.map((x: { id: unknown }) => x.id)).toEqual([1, 'deep', 3]);
      expect(merged[1].error).toEqual({ code: -32602, message: 'Invalid params', data: { path: PATH, message: 'nested deeper than 32 levels (limits.maxParamsDepth)' } });
    }
  });

  it('a lone call 40 levels deep: -32602 with its own id (a string) and data.path', () => {
    for (const d of [checkEvmBody(body(deepCall('"abc"')), allowed, 10, check), checkEvmBody(body(deepCall('7')), allowed, 10, check)]) {
      expect(d).toMatchObject({ kind: 'reply', status: 200 });
      if (d.kind !== 'reply') continue;
      const j = JSON.parse(d.body);
      expect(j.error).toMatchObject({ code: -32602, data: { path: PATH } });
    }
    const d = checkEvmBody(body(deepCall('"abc"')), allowed, 10, check);
    expect(d.kind === 'reply' && JSON.parse(d.body).id).toBe('abc');
    // At the limit: forwarded as sent (32 levels of params, 33 with the call).
    const at = body(deepCall('1', 32));
    expect(checkEvmBody(at, allowed, 10, check)).toMatchObject({ kind: 'forward', body: at });
  });

  it('past the 128-level hard limit the body is still refused whole (-32600), before it is parsed', () => {
    // 129 levels: the call's own, then its params (in a batch: the batch's too).
    for (const text of [deepCall('1', 128), `[${valid(1)},${deepCall('2', 127)}]`, nest(100_000)]) {
      const d = checkEvmBody(body(text), allowed, 10, check);
      expect(d).toMatchObject({ kind: 'reply', status: 400 });
      if (d.kind === 'reply') expect(JSON.parse(d.body)).toMatchObject({ id: null, error: { code: -32600 } });
    }
    // At 128: parsed, and the deep call gets its own error.
    const d = checkEvmBody(body(`[${valid(1)},${deepCall('2', 126)}]`), allowed, 10, check);
    expect(d.kind === 'forward' && d.merge?.slots[1]).toMatchObject({ ready: expect.stringContaining('"id":2,"error":{"code":-32602') });
  });

  it('with validate: off nothing but the hard limit applies', () => {
    const b = body(deepCall('1', 100));
    expect(checkEvmBody(b, allowed, 10)).toMatchObject({ kind: 'forward' });
  });
});

describe('EVM guard fast path', () => {
  const many = new Set(['eth_chainId', 'eth_blockNumber', 'eth_getBalance', 'eth_sendRawTransaction']);
  const scan = (text: string | Buffer, max = 10) => scanPlainRpc(Buffer.isBuffer(text) ? text : Buffer.from(text), many, max);

  it('takes the bodies real clients send', () => {
    for (const [text, method, count] of [
      ['{"jsonrpc":"2.0","id":0,"method":"eth_chainId"}', 'eth_chainId', 1], // viem
      ['{"method":"eth_chainId","params":[],"id":1,"jsonrpc":"2.0"}', 'eth_chainId', 1], // ethers
      ['{"jsonrpc":"2.0","id":"0b9a47a8-3cbb-4f4e-9a7c-1f1e8d1c3f5e","method":"eth_getBalance","params":["0x742d35cc6634c0532925a3b844bc454e4438f44e","latest"]}', 'eth_getBalance', 1], // web3.js
      ['{\n  "jsonrpc": "2.0",\n\t"id": -1.5,\r\n  "method": "eth_blockNumber",\n  "params": {"a": [true, false, null, {"b": -0.5e-3}]}\n}\n', 'eth_blockNumber', 1],
      ['[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","method":"eth_blockNumber","params":[]}]', null, 2],
    ] as const) {
      const b = Buffer.from(text);
      // A single call's id where the answer scanner (the cache's own way) finds it.
      const id = method === null ? { idStart: -1, idEnd: -1 } : answerSpans(b, MAX_ANSWER_DEPTH)!;
      expect(scanPlainRpc(b, many, 10), text).toEqual({ kind: 'forward', body: b, label: method ?? 'batch', count, idempotent: true, answered: true, merge: null, methods: method === null ? ['eth_chainId', 'eth_blockNumber'] : null, idStart: id.idStart, idEnd: id.idEnd, call: method === null ? null : expect.any(Call), calls: method === null ? [expect.any(Call), expect.any(Call)] : null });
      // A single call's Call: its method and id as the scan found them, its body the very bytes.
      const call = (scanPlainRpc(b, many, 10) as Extract<EvmDecision, { kind: 'forward' }>).call;
      if (method !== null) expect([call!.body, call!.method, call!.idJson]).toEqual([b, method, b.toString('utf8', id.idStart, id.idEnd)]);
    }
    // A batch's Calls: each its own bytes of the body, its method, its id (or none: a notification), its params.
    const batch = Buffer.from('[{"jsonrpc":"2.0","id":"a","method":"eth_getBalance","params":["0x742d35cc6634c0532925a3b844bc454e4438f44e","0x1"]}, {"method":"eth_chainId","jsonrpc":"2.0"}]');
    const calls = (scanPlainRpc(batch, many, 10) as Extract<EvmDecision, { kind: 'forward' }>).calls!;
    expect(calls.map((c) => [c.body.toString(), c.method, c.idJson, c.notification, c.params, c.block])).toEqual([
      ['{"jsonrpc":"2.0","id":"a","method":"eth_getBalance","params":["0x742d35cc6634c0532925a3b844bc454e4438f44e","0x1"]}', 'eth_getBalance', '"a"', false, ['0x742d35cc6634c0532925a3b844bc454e4438f44e', '0x1'], 1],
      ['{"method":"eth_chainId","jsonrpc":"2.0"}', 'eth_chainId', 'null', true, [], null],
    ]);
    // A view of the body, not a copy: the same memory at the call's place (a copy of a short Buffer may share the pool's slab too).
    expectView(calls[0]!.body as Buffer, batch);
    // Only notifications: the node answers with no body, and that is a good answer.
    expect(scan('{"jsonrpc":"2.0","method":"eth_blockNumber","params":[]}')).toMatchObject({ kind: 'forward', answered: false });
    expect(scan('[{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","method":"eth_blockNumber"}]')).toMatchObject({ kind: 'forward', answered: false });
    expect(scan('{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x00"]}')).toMatchObject({ idempotent: false });
    expect(scan('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_sendRawTransaction","params":["0x00"]}]')).toMatchObject({ idempotent: false });
  });

  it("general path: a batch's decision carries a Call per forwarded call, its own bytes of the body that goes upstream, made of what was parsed (issue 37)", () => {
    const many = new Set(['eth_chainId', 'eth_getBalance']);
    const forward = (d: EvmDecision) => d as Extract<EvmDecision, { kind: 'forward' }>;
    const described = (calls: readonly Call[]) => calls.map((c) => [Buffer.from(c.body).toString(), c.method, c.idJson, c.notification, c.params, c.block]);
    // Sent as it came (outside ASCII, so not the fast path's): each Call a view of the very bytes.
    const raw = Buffer.from('[{"jsonrpc":"2.0","id":"é","method":"eth_getBalance","params":["0x742d35cc6634c0532925a3b844bc454e4438f44e","0x1"]} , {"method":"eth_chainId","jsonrpc":"2.0"}]');
    const parses = callParses.count;
    const r = forward(checkEvmBody(raw, many, 10));
    expect(r.body).toBe(raw);
    expect(described(r.calls!)).toEqual([
      ['{"jsonrpc":"2.0","id":"é","method":"eth_getBalance","params":["0x742d35cc6634c0532925a3b844bc454e4438f44e","0x1"]}', 'eth_getBalance', '"é"', false, ['0x742d35cc6634c0532925a3b844bc454e4438f44e', '0x1'], 1],
      ['{"method":"eth_chainId","jsonrpc":"2.0"}', 'eth_chainId', 'null', true, [], null],
    ]);
    expectView(r.calls![0]!.body as Buffer, raw);
    // Sent as the canonical calls (an escape, a key dropped, a refused call answered in place): each Call's bytes are
    // the body's, in order, and read as what was checked.
    const text = '[{"jsonrpc":"2.0","id":"\\u00e9\\u0031","method":"eth_getBalance","params":["0x742d35cc6634c0532925a3b844bc454e4438f44e","latest"],"x":1},{"jsonrpc":"2.0","id":2,"method":"admin_peers"},{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","id":3,"method":"eth_chainId","params":[]}]';
    const c = forward(checkEvmBody(Buffer.from(text), many, 10));
    expect(typeof c.body).toBe('string');
    expect(c.merge).not.toBeNull();
    expect(`[${c.calls!.map((k) => Buffer.from(k.body).toString()).join(',')}]`).toBe(c.body);
    expect(described(c.calls!)).toEqual([
      ['{"jsonrpc":"2.0","id":"é1","method":"eth_getBalance","params":["0x742d35cc6634c0532925a3b844bc454e4438f44e","latest"]}', 'eth_getBalance', '"é1"', false, ['0x742d35cc6634c0532925a3b844bc454e4438f44e', 'latest'], 'latest'],
      ['{"jsonrpc":"2.0","method":"eth_chainId"}', 'eth_chainId', 'null', true, [], null],
      ['{"jsonrpc":"2.0","id":3,"method":"eth_chainId","params":[]}', 'eth_chainId', '3', false, [], null],
    ]);
    expect(c.calls![0]!.doc).toEqual(JSON.parse(Buffer.from(c.calls![0]!.body).toString()));
    expect(callParses.count, 'no Call parsed its body again').toBe(parses);
    // A key's lists: its check's refusal answered in place, the rest carried as Calls.
    const check: CallCheck = (method, _params, idJson) => (method === 'eth_getBalance' ? `{"jsonrpc":"2.0","id":${idJson},"error":{"code":-32601,"message":"no"}}` : null);
    const k = forward(checkEvmBodyGeneral(Buffer.from('[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":[]},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]'), many, 10, check));
    expect(described(k.calls!)).toEqual([['{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}', 'eth_chainId', '2', false, [], null]]);
    // A single call carries its own, as before.
    expect(forward(checkEvmBody(Buffer.from('{"jsonrpc":"2.0","id":"\\u0061","method":"eth_chainId"}'), many, 10)).call!.idJson).toBe('"a"');
  });

  it("general path: whatever the batch, its Calls are its forwarded calls as sent, each read as its own bytes read (property)", () => {
    const many = new Set(['eth_chainId', 'eth_getBalance']);
    const id = fc.oneof(fc.constant(undefined), fc.constant(null), fc.integer(), fc.string({ unit: 'binary', maxLength: 4 }));
    const item = fc.record({
      id,
      method: fc.constantFrom('eth_chainId', 'eth_getBalance', 'admin_peers'),
      params: fc.oneof(fc.constant(undefined), fc.array(fc.oneof(fc.string({ unit: 'binary', maxLength: 3 }), fc.integer()), { maxLength: 2 })),
      extra: fc.boolean(),
      escape: fc.boolean(),
      space: fc.constantFrom('', ' ', '\n '),
    });
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 5 }), fc.boolean(), (items, keyChecks) => {
        const texts = items.map((it) => {
          const o: Record<string, unknown> = { jsonrpc: '2.0', method: it.method };
          if (it.id !== undefined) o.id = it.id;
          if (it.params !== undefined) o.params = it.params;
          if (it.extra) o.x = 1;
          const t = JSON.stringify(o);
          // An escape the node reads as the same text.
          return it.escape ? t.replace('"jsonrpc"', '"jsonrp\\u0063"') : t;
        });
        const raw = Buffer.from(`[${texts.map((t, k) => items[k]!.space + t).join(',')}]`);
        const check: CallCheck | null = keyChecks ? () => null : null;
        const d = checkEvmBodyGeneral(raw, many, 10, check);
        if (d.kind !== 'forward') return;
        const calls = d.calls!;
        expect(calls.map((c) => c.method)).toEqual(d.methods);
        const sent = typeof d.body === 'string' ? d.body : d.body.toString();
        const parsed = JSON.parse(sent) as { id?: unknown }[];
        expect(calls).toHaveLength(parsed.length);
        // Each Call's bytes are the body's, in order.
        let at = 0;
        for (const c of calls) {
          const own = Buffer.from(c.body).toString();
          at = sent.indexOf(own, at);
          expect(at, own).toBeGreaterThan(0);
          at += own.length;
        }
        calls.forEach((c, k) => {
          const own = JSON.parse(Buffer.from(c.body).toString()) as { id?: unknown };
          expect(own).toEqual(parsed[k]);
          expect(c.doc).toEqual(own);
          expect(c.notification).toBe(own.id === undefined);
          if (own.id !== undefined) expect(JSON.parse(c.idJson)).toEqual(own.id);
        });
      }),
      { numRuns: 300 },
    );
  });

  it('keeps one method table per allowlist', () => {
    const b = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[]}');
    for (let i = 0; i < 2; i++) {
      expect(scanPlainRpc(b, new Set(['eth_call']), 10)).toMatchObject({ label: 'eth_call' });
      expect(scanPlainRpc(b, many, 10)).toBeNull();
    }
  });

  it('leaves everything outside the plain subset to the general path', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1,"method":"admin_peers"}', // refused
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainid"}', // case matters
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"eth_chainId"}', // duplicate key
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","Method":"admin_peers"}', // case-insensitive parsers
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","extra":1}',
      '{"jsonrpc":"2.0","id":1,"me\\u0074hod":"eth_chainId"}', // escapes
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["\\u0000"]}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["é"]}', // not ASCII
      '\ufeff{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}', // BOM
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["a\tb"]}', // control character in a string
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":""}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":null}',
      '{"jsonrpc":"2.0","id":1e400,"method":"eth_chainId"}',
      `{"jsonrpc":"2.0","id":1${'0'.repeat(400)},"method":"eth_chainId"}`, // Infinity to JSON.parse
      '{"jsonrpc":"2.0","id":01,"method":"eth_chainId"}',
      '{"jsonrpc":"2.0","id":true,"method":"eth_chainId"}',
      '{"jsonrpc":"2.0","id":{},"method":"eth_chainId"}',
      '{"jsonrpc":"2.00","id":1,"method":"eth_chainId"}',
      '{"jsonrpc":2.0,"id":1,"method":"eth_chainId"}',
      '{"id":1,"method":"eth_chainId"}',
      '{"jsonrpc":"2.0","id":1}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"} x',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId",}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[1,]}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[01]}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[.5]}',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[tru]}',
      `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":${'['.repeat(70)}${']'.repeat(70)}}`,
      '[]',
      '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},]',
      '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"admin_peers"}]',
      '"eth_chainId"',
      '',
    ]) {
      expect(scan(text), text).toBeNull();
    }
    const eleven = JSON.stringify(Array.from({ length: 11 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_chainId' })));
    expect(scan(eleven, 11)).not.toBeNull();
    expect(scan(eleven, 10)).toBeNull();
  });

  it('accepts only what the general path forwards whole, with the same meaning (differential)', () => {
    const methods = fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom('eth_chainId', 'eth_blockNumber', 'eth_sendRawTransaction') },
      { weight: 1, arbitrary: fc.constantFrom('admin_peers', 'eth_chainid', 'eth_chainId ', '') },
    );
    const key = fc.constantFrom('jsonrpc', 'id', 'method', 'params', 'Method', 'METHOD', 'extra', '__proto__', 'me\\u0074hod', 'method ');
    const json = (v: unknown) => JSON.stringify(v) ?? 'null';
    const rawValue = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }).map(json),
      fc.constantFrom('"2.0"', '"1.0"', '2.0', 'null', '""', '1e400', `1${'0'.repeat(400)}`, '-0', '01', '1.', '"\\u0065th_chainId"', '"a\\"b"', 'true'),
      methods.map(json),
      fc.double().map(json),
      fc.string().map(json),
    );
    // Mostly plain calls, some with keys, values, whitespace or bytes swapped for stranger ones.
    const asciiText = fc.string({ unit: 'grapheme-ascii', maxLength: 12 });
    const plainParam = fc.oneof(fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), maxLength: 40 }).map((h) => `0x${h}`), fc.integer(), fc.boolean(), fc.constant(null), asciiText);
    const call = fc
      .record({
        id: fc.option(fc.oneof(fc.integer().map(json), asciiText.map(json), fc.constant('null'), rawValue), { nil: undefined }),
        method: fc.oneof({ weight: 6, arbitrary: methods.map(json) }, { weight: 1, arbitrary: rawValue }),
        params: fc.option(
          fc.oneof(
            { weight: 4, arbitrary: fc.array(plainParam, { maxLength: 3 }).map(json) },
            { weight: 1, arbitrary: fc.dictionary(asciiText, plainParam, { maxKeys: 2 }).map(json) },
            { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map(json) },
            { weight: 1, arbitrary: rawValue },
          ),
          { nil: undefined },
        ),
        jsonrpc: fc.oneof({ weight: 8, arbitrary: fc.constant('"2.0"') }, { weight: 1, arbitrary: rawValue }),
        extra: fc.oneof({ weight: 6, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(fc.tuple(key, rawValue), { minLength: 1, maxLength: 2 }) }),
        order: fc.integer({ min: 0, max: 3 }),
      })
      .map((c) => {
        const members: [string, string][] = [['jsonrpc', c.jsonrpc], ['method', c.method]];
        if (c.id !== undefined) members.push(['id', c.id]);
        if (c.params !== undefined) members.push(['params', c.params]);
        members.push(...c.extra);
        for (let i = 0; i < c.order; i++) members.push(members.shift()!);
        return `{${members.map(([k, v]) => `"${k}":${v}`).join(',')}}`;
      });
    const ws = fc.oneof({ weight: 6, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom(' ', '\n', '\t', '\r\n', '\u00a0', '\f') });
    const body = fc.tuple(fc.array(call, { minLength: 1, maxLength: 4 }), fc.boolean(), ws, ws).map(([calls, batch, a, b]) =>
      batch ? `${a}[${calls.join(`,${b}`)}]${b}` : `${a}${calls[0]}${b}`,
    );
    const edit = fc.record({ at: fc.nat(), op: fc.constantFrom('insert', 'delete', 'replace'), byte: fc.constantFrom(0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x20, 0x0a, 0x00, 0x80, 0xff, 0x65, 0x2d, 0x30) });
    const edits = fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(edit, { minLength: 1, maxLength: 2 }) });
    const bodyText = (d: Extract<EvmDecision, { kind: 'forward' }>) => (typeof d.body === 'string' ? d.body : d.body.toString('utf8'));
    let accepted = 0;
    fc.assert(
      fc.property(body, edits, (text, edits) => {
        let buf = Buffer.from(text);
        for (const e of edits) {
          const at = e.at % (buf.length + 1);
          const b = Buffer.from([e.byte]);
          if (e.op === 'insert') buf = Buffer.concat([buf.subarray(0, at), b, buf.subarray(at)]);
          else if (e.op === 'delete') buf = Buffer.concat([buf.subarray(0, at), buf.subarray(at + 1)]);
          else buf = Buffer.concat([buf.subarray(0, at), b, buf.subarray(at + 1)]);
        }
        const fast = scanPlainRpc(buf, many, 3);
        if (fast === null) return;
        accepted++;
        // The very bytes that came in, not a copy.
        expect(fast.kind === 'forward' && fast.body === buf).toBe(true);
        const general = checkEvmBodyGeneral(buf, many, 3);
        if (general.kind !== 'forward') throw new Error(`general path refused a body the fast path took: ${buf.toString('latin1')}`);
        // The same decision, except that the general path may send a re-serialization of the same document.
        if (fast.kind !== 'forward') throw new Error('the fast path only forwards');
        expect({ ...general, body: buf, idStart: fast.idStart, idEnd: fast.idEnd, call: fast.call, calls: fast.calls }).toEqual(fast);
        // A batch's Calls: each call of the document, in order, with its id (none: a notification).
        if (fast.calls !== null) {
          const doc = JSON.parse(buf.toString('utf8')) as { id?: unknown; method: string; params?: unknown }[];
          expect(fast.calls.map((c) => [JSON.parse(c.body.toString()), c.method, c.notification, c.notification ? undefined : JSON.parse(c.idJson)])).toEqual(doc.map((d) => [d, d.method, d.id === undefined, d.id]));
        }
        // The same call: the general path's Call (parsed) and the fast path's (read when asked) name the same method and params.
        expect([general.call?.method, general.call?.params]).toEqual([fast.call?.method, fast.call?.params]);
        // A single call's id where the cache's answer scanner finds it (the cache trusts the fast path's span).
        {
          const spans = fast.label === 'batch' ? null : answerSpans(buf, MAX_ANSWER_DEPTH);
          expect([fast.idStart, fast.idEnd]).toEqual(spans === null ? [-1, -1] : [spans.idStart, spans.idEnd]);
        }
        expect(JSON.parse(bodyText(general))).toEqual(JSON.parse(buf.toString('utf8')));
      }),
      { numRuns: 10000 },
    );
    // The generator must reach the fast path often enough for this to mean something.
    expect(accepted).toBeGreaterThan(1000);
  });
});

describe('Rosetta guard', () => {
  it('knows exactly the endpoints of the Rosetta spec, and which require network_identifier', () => {
    const spec = JSON.parse(readFileSync(specPath('rosetta-api.json'), 'utf8'));
    const paths = Object.keys(spec.paths).map((p: string) => p.slice(1)).sort();
    expect([...ROSETTA_ENDPOINTS.keys()].sort()).toEqual(paths);
    for (const p of paths) {
      const ref: string = spec.paths[`/${p}`].post.requestBody.content['application/json'].schema.$ref;
      const required: string[] = spec.components.schemas[ref.split('/').pop()!].required ?? [];
      expect(ROSETTA_ENDPOINTS.get(p)!.needsNetwork, p).toBe(required.includes('network_identifier'));
    }
  });

  it('never echoes client text in details', () => {
    const d = checkRosettaBody(body({ network_identifier: { blockchain: 'cardano', network: 'SECRET-KEY-LIKE-TEXT' } }), 'block', 'preprod');
    expect(d.kind).toBe('reply');
    expect(d.body).not.toContain('SECRET');
  });
});

describe('Blockbook guard and URL helpers', () => {
  it('cuts a request target into its chain, the rest of the path and the query', () => {
    const cut = (url: string) => {
      const t = new RequestTarget(url);
      return [t.path, t.first, t.rest, t.query];
    };
    expect(cut('/eth/k1?api_key=2&x=/y')).toEqual(['/eth/k1', 'eth', '/k1', 'api_key=2&x=/y']);
    expect(cut('/eth')).toEqual(['/eth', 'eth', '', '']);
    expect(cut('/eth/')).toEqual(['/eth/', 'eth', '/', '']);
    expect(cut('/?')).toEqual(['/', '', '', '']);
    expect(cut('*')).toEqual(['*', null, '', '']);
  });


  it('strips api_key in any spelling and keeps the rest in order', () => {
    expect(splitQuery('a=1&api_key=K1&b=2&api%5Fkey=K2&c')).toEqual({ keys: ['K1', 'K2'], rest: 'a=1&b=2&c' });
    expect(splitQuery('pageSize=5')).toEqual({ keys: [], rest: 'pageSize=5' });
    // In any case: a key written as API_KEY never goes on to an upstream with the query Blockbook forwards.
    expect(splitQuery('API_KEY=K3&_=1&Api_Key=K4')).toEqual({ keys: ['K3', 'K4'], rest: '_=1' });
    expect(splitQuery('apikey=x&api_keys=y')).toEqual({ keys: [], rest: 'apikey=x&api_keys=y' });
  });

  it('refuses dot segments and encoded separators', () => {
    for (const s of ['..', '.', '%2e%2e', '%2E.', 'a%2Fb', 'a%5Cb', 'a\\b', '%zz', '']) expect(isSafeSegment(s), s).toBe(false);
    expect(isSafeSegment('0000abc')).toBe(true);
    // Output descriptors may hold '/', but never a dot segment.
    expect(isSafeSegment("pkh(%5Bd34db33f%2F44'%2F0'%5Dxpub%2F0%2F*)", true)).toBe(true);
    expect(isSafeSegment('xpub%2F..%2F..', true)).toBe(false);
    expect(isSafeSegment("pkh(%5Bd34db33f%2F44'%2F0'%5Dxpub%2F0%2F*)", false)).toBe(false);
  });

  it('forwards known endpoints only', () => {
    expect(checkBlockbook('GET', 'block/1', 'pageSize=5', false, 10)).toEqual({ kind: 'forward', endpoint: 'block', path: '/v2/block/1', call: new DocCall('block', 1, true) });
    expect(checkBlockbook('GET', 'tickers/', '', false, 10)).toEqual({ kind: 'forward', endpoint: 'tickers', path: '/v2/tickers/', call: new DocCall('tickers', null, true) });
    expect(checkBlockbook('GET', 'admin/1', '', false, 10)).toMatchObject({ kind: 'error', name: 'GW_BB_NOT_FOUND' });
    expect(checkBlockbook('GET', 'block/1', 'pageSize=11', false, 10)).toMatchObject({ kind: 'error', name: 'GW_BB_BAD_PAGE_SIZE' });
    expect(checkBlockbook('POST', 'sendtx/', '', false, 10)).toMatchObject({ kind: 'error', name: 'GW_BB_NOT_FOUND' });
    expect(checkBlockbook('POST', 'sendtx/', '', true, 10)).toMatchObject({ kind: 'forward', path: '/v2/sendtx/' });
  });

  it('says which block a read names (by height or by hash alone), and that sendtx, GET or POST, is a write (issue 37)', () => {
    const hash = 'ab'.repeat(32);
    const call = (method: string, rest: string) => {
      const d = checkBlockbook(method, rest, '', true, 10);
      return d.kind === 'forward' ? docOf(d.call) : d;
    };
    expect(call('GET', 'block/123')).toEqual({ endpoint: 'block', block: 123, read: true });
    expect(call('GET', 'block/123/')).toEqual({ endpoint: 'block', block: 123, read: true });
    expect(call('GET', 'block-index/7')).toEqual({ endpoint: 'block-index', block: 7, read: true });
    expect(call('GET', 'rawblock/7')).toEqual({ endpoint: 'rawblock', block: 7, read: true });
    for (const e of ['block', 'rawblock', 'feestats']) expect(call('GET', `${e}/${hash}`), e).toEqual({ endpoint: e, block: { hash }, read: true });
    // A transaction's hash, an address, a height where the endpoint takes none: no block.
    expect(call('GET', `tx/${hash}`)).toEqual({ endpoint: 'tx', block: null, read: true });
    expect(call('GET', 'feestats/123')).toEqual({ endpoint: 'feestats', block: null, read: true });
    expect(call('GET', 'address/1234')).toEqual({ endpoint: 'address', block: null, read: true });
    expect(call('GET', 'sendtx/0200')).toEqual({ endpoint: 'sendtx', block: null, read: false });
    expect(call('POST', 'sendtx/')).toEqual({ endpoint: 'sendtx', block: null, read: false });
  });
});

describe('Rosetta guard: the call it forwards (issue 37)', () => {
  const net = { blockchain: 'cardano', network: 'preprod' };
  const call = (endpoint: string, body: unknown) => {
    const d = checkRosettaBody(Buffer.from(JSON.stringify(body)), endpoint, 'preprod');
    if (d.kind !== 'forward') throw new Error(d.body);
    return docOf(d.call);
  };
  it('says which block a request names (block_identifier: its index, else its hash alone), and which endpoints are writes', () => {
    const hash = 'cd'.repeat(32);
    expect(call('block', { network_identifier: net, block_identifier: { index: 42 } })).toEqual({ endpoint: 'block', block: 42, read: true });
    expect(call('block', { network_identifier: net, block_identifier: { index: 42, hash } })).toEqual({ endpoint: 'block', block: 42, read: true });
    expect(call('block', { network_identifier: net, block_identifier: { hash } })).toEqual({ endpoint: 'block', block: { hash }, read: true });
    expect(call('account/balance', { network_identifier: net, account_identifier: { address: 'addr' }, block_identifier: { index: 3 } })).toEqual({ endpoint: 'account/balance', block: 3, read: true });
    expect(call('block', { network_identifier: net, block_identifier: { index: -1, hash } })).toEqual({ endpoint: 'block', block: null, read: true });
    expect(call('network/status', { network_identifier: net })).toEqual({ endpoint: 'network/status', block: null, read: true });
    expect(call('construction/submit', { network_identifier: net, signed_transaction: 'ab' })).toEqual({ endpoint: 'construction/submit', block: null, read: false });
    expect(call('call', { network_identifier: net, method: 'x', parameters: {} })).toEqual({ endpoint: 'call', block: null, read: false });
  });
});

/** What a document call says of itself (kinds/doc-call.ts). */
function docOf(c: DocCall): { endpoint: string; block: DocBlock; read: boolean } {
  return { endpoint: c.endpoint, block: c.block, read: c.read };
}

/** `part` is a view of `whole`'s memory at the place its bytes stand, not a copy of them. */
function expectView(part: Buffer, whole: Buffer): void {
  expect(part.buffer, 'a view of the body, not a copy').toBe(whole.buffer);
  expect(part.byteOffset, 'at its place in the body').toBe(whole.byteOffset + whole.indexOf(part));
}
