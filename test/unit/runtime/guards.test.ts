import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { checkEvmBody, mergeBatch } from '../../../runtime/guards/evm.ts';
import { ROSETTA_ENDPOINTS, checkRosettaBody } from '../../../runtime/guards/rosetta.ts';
import { checkBlockbook } from '../../../runtime/guards/blockbook.ts';
import { splitQuery, isSafeSegment } from '../../../runtime/url.ts';
import { specPath } from '../../support/paths.ts';

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
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[{"method":"x"}]}',
    ]) {
      const d = checkEvmBody(body(text), allowed, 10);
      expect(d.kind, text).toBe('forward');
      if (d.kind !== 'forward') continue;
      expect(typeof d.body).toBe('string');
      const sent = JSON.parse(d.body as string);
      expect(Object.keys(sent).sort()).toEqual(Object.keys(sent).filter((k) => ['jsonrpc', 'id', 'method', 'params'].includes(k)).sort());
      expect(sent.method).toBe('eth_chainId');
      expect((d.body as string).match(/"method"/g)!.length).toBeLessThanOrEqual(2);
    }
  });

  it('forwards the original bytes only when "method" occurs once per call in the text', () => {
    // Strings in params and ids that put `"method"`, `method"` and near misses into the text.
    const piece = fc.constantFrom('method', 'mmethod', 'metho', 'ethod', 'x', 'm', '');
    const text = fc.array(piece, { maxLength: 6 }).map((p) => p.join(''));
    const call = fc.record({ id: fc.oneof(fc.integer(), text), params: fc.array(text, { maxLength: 3 }) });
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 5 }), fc.boolean(), (calls, asBatch) => {
        const items = calls.map((c) => ({ jsonrpc: '2.0', id: c.id, method: 'eth_chainId', params: c.params }));
        const raw = JSON.stringify(asBatch ? items : items[0]);
        const n = asBatch ? items.length : 1;
        const d = checkEvmBody(Buffer.from(raw), allowed, 10);
        expect(d.kind).toBe('forward');
        const once = raw.split('"method"').length - 1 === n;
        expect(d.kind === 'forward' && Buffer.isBuffer(d.body)).toBe(once);
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
      mergeBatch(d.merge, JSON.stringify([{ jsonrpc: '2.0', id: 'c', result: 2 }, { jsonrpc: '2.0', id: 'a', result: 1 }]))!,
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
          answer = d.merge === null ? JSON.parse(node).reverse() : JSON.parse(mergeBatch(d.merge, node)!);
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
  it('strips api_key in any spelling and keeps the rest in order', () => {
    expect(splitQuery('a=1&api_key=K1&b=2&api%5Fkey=K2&c')).toEqual({ keys: ['K1', 'K2'], rest: 'a=1&b=2&c' });
    expect(splitQuery('pageSize=5')).toEqual({ keys: [], rest: 'pageSize=5' });
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
    expect(checkBlockbook('GET', 'block/1', 'pageSize=5', false, 10)).toEqual({ kind: 'forward', endpoint: 'block', path: '/v2/block/1' });
    expect(checkBlockbook('GET', 'tickers/', '', false, 10)).toEqual({ kind: 'forward', endpoint: 'tickers', path: '/v2/tickers/' });
    expect(checkBlockbook('GET', 'admin/1', '', false, 10)).toMatchObject({ kind: 'error', name: 'GW_BB_NOT_FOUND' });
    expect(checkBlockbook('GET', 'block/1', 'pageSize=11', false, 10)).toMatchObject({ kind: 'error', name: 'GW_BB_BAD_PAGE_SIZE' });
    expect(checkBlockbook('POST', 'sendtx/', '', false, 10)).toMatchObject({ kind: 'error', name: 'GW_BB_NOT_FOUND' });
    expect(checkBlockbook('POST', 'sendtx/', '', true, 10)).toMatchObject({ kind: 'forward', path: '/v2/sendtx/' });
  });
});
