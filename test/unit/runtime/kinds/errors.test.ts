// The error catalogues: stable, unique, documented (the tables of docs/errors.md), and the
// gateway's Rosetta codes clear of the Cardano Rosetta catalogue.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { RPC_ERRORS } from '../../../../runtime/kinds/evm/errors.ts';
import { BLOCKBOOK_ERRORS } from '../../../../runtime/kinds/blockbook/errors.ts';
import { ROSETTA_ERRORS, GATEWAY_ROSETTA_ALLOW_ERRORS } from '../../../../runtime/kinds/rosetta/errors.ts';
import { specPath } from '../../../support/paths.ts';

const DOC = readFileSync(new URL('../../../../docs/errors.md', import.meta.url), 'utf8');
const CARDANO = JSON.parse(readFileSync(specPath('cardano-rosetta-errors.json'), 'utf8')) as {
  code: number;
  message: string;
  retriable: boolean;
}[];

function tableRows(heading: string): string[][] {
  const start = DOC.indexOf(heading);
  expect(start, heading).toBeGreaterThan(-1);
  const rows: string[][] = [];
  for (const line of DOC.slice(start).split('\n').slice(1)) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('| `')) continue;
    rows.push(line.split('|').slice(1, -1).map((c) => c.trim()));
  }
  return rows;
}

describe('error catalogues', () => {
  it('names follow GW_*; every JSON-RPC code is a spec code, EIP-1474 -32005, or a gateway code in -32040..-32069', () => {
    // JSON-RPC 2.0's own codes, and EIP-1474's "limit exceeded": used with their meaning.
    const STANDARD = new Map([
      [-32700, 'Parse error'],
      [-32600, 'Invalid Request'],
      [-32601, 'Method not found'],
      [-32602, 'Invalid params'],
      [-32603, 'Internal error'],
      [-32005, 'Limit exceeded'],
    ]);
    const own = new Map<number, Set<string>>();
    for (const [name, e] of Object.entries(RPC_ERRORS)) {
      expect(name).toMatch(/^GW_[A-Z_]+$/);
      const meaning = STANDARD.get(e.code);
      if (meaning !== undefined) {
        expect(e.message.startsWith(meaning), name).toBe(true);
        continue;
      }
      expect(e.code, name).toBeGreaterThanOrEqual(-32069);
      expect(e.code, name).toBeLessThanOrEqual(-32040);
      own.set(e.code, (own.get(e.code) ?? new Set()).add(e.message));
    }
    // The gateway's own codes each mean one thing: one message per code (-32044 is answered with 401, 403 or, per call, 200).
    for (const [code, messages] of own) expect([...messages], String(code)).toHaveLength(1);
    expect(own.size).toBeGreaterThan(10);
  });

  it('every auth error, GW_AUTH_KEY_CONFLICT included, has a gateway code in -32040..-32069', () => {
    const auth = Object.entries(RPC_ERRORS).filter(([name]) => name.startsWith('GW_AUTH_'));
    expect(auth.map(([name]) => name)).toEqual(['GW_AUTH_KEY_MISSING', 'GW_AUTH_KEY_INVALID', 'GW_AUTH_KEY_FORBIDDEN', 'GW_AUTH_KEY_CONFLICT', 'GW_AUTH_KEY_STORE_UNAVAILABLE']);
    for (const [name, e] of auth) {
      expect(e.code, name).toBeGreaterThanOrEqual(-32069);
      expect(e.code, name).toBeLessThanOrEqual(-32040);
    }
  });

  it('Rosetta codes are unique, and the gateway’s never collide with the Cardano Rosetta catalogue', () => {
    const codes = Object.values(ROSETTA_ERRORS).map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    const messages = Object.values(ROSETTA_ERRORS).map((e) => e.message);
    expect(new Set(messages).size).toBe(messages.length);
    const cardano = new Map(CARDANO.map((e) => [e.code, e]));
    for (const e of GATEWAY_ROSETTA_ALLOW_ERRORS) expect(cardano.has(e.code), String(e.code)).toBe(false);
    // The reused Cardano codes mean exactly what Cardano's mean.
    for (const e of [ROSETTA_ERRORS.GW_ROSETTA_NETWORK_NOT_FOUND, ROSETTA_ERRORS.GW_ROSETTA_INVALID_BLOCKCHAIN]) {
      expect(cardano.get(e.code)).toMatchObject({ message: e.message, retriable: e.retriable });
    }
  });

  it('the tables of docs/errors.md list exactly the catalogues', () => {
    expect(tableRows('## JSON-RPC (`evm-jsonrpc`)')).toEqual(
      Object.entries(RPC_ERRORS).map(([k, v]) => [`\`${k}\``, String(v.status), String(v.code), v.message]),
    );
    expect(tableRows('## Explorer (`blockbook`)')).toEqual(
      Object.entries(BLOCKBOOK_ERRORS).map(([k, v]) => [`\`${k}\``, String(v.status), `\`{"error":"${v.message}"}\``]),
    );
    expect(tableRows('## Rosetta (`rosetta`)')).toEqual(
      Object.entries(ROSETTA_ERRORS).map(([k, v]) => [`\`${k}\``, String(v.code), v.message, String(v.retriable)]),
    );
  });
});
