// Every manifest check, with a failing fixture and the exact FILE:LINE:COL
// message it must print (issue 2). Positions point at the offending key or
// value itself; every problem of a file comes out of one run.
import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadManifest } from '../../../generator/load.ts';
import { validateManifest } from '../../../generator/validate.ts';
import { formatProblem } from '../../../generator/check.ts';
import { PROJECT_ROOT } from '../../support/paths.ts';
import { EXPECTED, F, V } from './expected-problems.ts';
import { KNOWN_METHODS, NOT_COMPARABLE } from '../../../generator/known-methods.ts';
import { WRITES } from '../../../runtime/kinds/evm/methods.ts';

/** Problems as `gateway check` prints them, with the path relative to the project. */
function check(file: string): string[] {
  return validateManifest(loadManifest(join(PROJECT_ROOT, file))).map((p) => formatProblem({ ...p, file }));
}

describe('gateway check: every problem, at its key or value', () => {
  for (const [name, lines] of Object.entries(EXPECTED)) {
    it(name, () => expect(check(`${F}/${name}.yaml`)).toEqual(lines));
  }

  it('has an expectation for every invalid fixture', () => {
    const fixtures = readdirSync(join(PROJECT_ROOT, F)).filter((f) => f.endsWith('.yaml')).map((f) => f.slice(0, -5));
    expect(fixtures.sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  it('accepts the shipped gateway.yaml and every valid fixture', () => {
    expect(check('gateway.yaml')).toEqual([]);
    const valid = readdirSync(join(PROJECT_ROOT, V)).filter((f) => f.endsWith('.yaml'));
    expect(valid.length).toBeGreaterThan(0);
    for (const f of valid) expect(check(`${V}/${f}`), f).toEqual([]);
  });

  it('needs no environment: ${VAR} without a default is fine, even when the environment lacks it', () => {
    const text = [
      'version: 1',
      'listeners:',
      '  rpc: { host: "${GW_TEST_UNSET_HOST}", port: "${GW_TEST_UNSET_PORT}" }',
      'admin: { port: "${GW_TEST_UNSET_ADMIN}" }',
      'chains:',
      '  - path: eth',
      '    interface: evm-jsonrpc',
      '    listener: rpc',
      '    methods: [eth_chainId]',
      '    upstreams: ["${GW_TEST_UNSET_URL}", { url: "${B}/x", headers: { Authorization: "Bearer ${T}" } }]',
      '',
    ].join('\n');
    expect(process.env.GW_TEST_UNSET_URL).toBeUndefined();
    expect(validateManifest(loadManifest('inline.yaml', text))).toEqual([]);
  });

  it("credits may name what some interface's module names (EVM's methods, Blockbook's and Rosetta's endpoints), and nothing else", () => {
    const text = (credits: string) =>
      ['version: 1', 'listeners:', '  rpc: { port: 8545 }', `credits: { ${credits} }`, 'chains:', '  - { path: eth, interface: evm-jsonrpc, listener: rpc, methods: [eth_chainId], upstreams: ["http://127.0.0.1:1"] }', ''].join('\n');
    const problems = (credits: string) => validateManifest(loadManifest('inline.yaml', text(credits))).map((p) => p.message);
    expect(problems('eth_getLogs: 10, debug_traceCall: 50, sendtx: 2, block: 3, "network/status": 1')).toEqual([]);
    expect(problems('eth_getLog: 10, toy_head: 1')).toEqual(['credits.eth_getLog: not a method or endpoint of any interface', 'credits.toy_head: not a method or endpoint of any interface']);
  });

  it('accepts method names far from every known one (a chain may allow its own), and flags near misses only', () => {
    const manifest = (methods: string) =>
      `version: 1\nlisteners: { rpc: { port: 1 } }\nchains:\n  - { path: a, interface: evm-jsonrpc, listener: rpc, methods: ${methods}, upstreams: ["http://a"] }\n`;
    expect(validateManifest(loadManifest('m.yaml', manifest('[zks_getL1BatchNumber, bor_getAuthor, eth_feeHistory, debug_traceTransaction]')))).toEqual([]);
    expect(validateManifest(loadManifest('m.yaml', manifest('[eth_feeHistroy, eth_getLog]'))).map((p) => `${p.message} (${p.hint})`)).toEqual([
      "chains[0] (a) methods[0]: unknown method 'eth_feeHistroy' (did you mean 'eth_feeHistory'?)",
      "chains[0] (a) methods[1]: unknown method 'eth_getLog' (did you mean 'eth_getLogs'?)",
    ]);
  });

  describe('pool settings (issue 33) at their limits', () => {
    const chain = (fields: string, upstreams = '["http://a", "http://b"]') =>
      `version: 1\nlisteners: { rpc: { port: 1 } }\nmethodSets: { evm: [eth_call, eth_getBalance] }\nchains:\n  - { path: a, interface: evm-jsonrpc, listener: rpc, upstreams: ${upstreams}, ${fields} }\n`;
    const problems = (text: string) => validateManifest(loadManifest('p.yaml', text)).map((p) => `${p.message}${p.hint ? ` (${p.hint})` : ''}`);

    it('accepts quorum.of equal to the number of upstreams, hedge and broadcast all with two, broadcast one and pruneDepth without an archive upstream', () => {
      expect(problems(chain('methods: evm, quorum: { methods: [eth_call, eth_getBalance], of: 2 }, hedge: { afterMs: 1 }, broadcast: all, pruneDepth: 1'))).toEqual([]);
      expect(problems(chain('methods: evm, broadcast: one, pruneDepth: 1000000, servedTip: majority, rewriteTags: false', '["http://a"]'))).toEqual([]);
    });

    it('refuses one more than the number of upstreams, and a quorum method outside an inline allowlist (the hint names where to add it)', () => {
      expect(problems(chain('methods: [eth_call], quorum: { methods: [eth_chainId], of: 3 }'))).toEqual([
        "chains[0] (a) quorum.methods[0]: 'eth_chainId' is not a method the chain allows (add it to methods or drop it from quorum.methods)",
        'chains[0] (a) quorum.of: asks 3 upstreams, and the chain has 2 (add upstreams or lower quorum.of)',
      ]);
    });

    it('checks quorum methods against no allowlist when the methodSet is unknown (that is the one problem)', () => {
      expect(problems(chain('methods: evn, quorum: { methods: [eth_chainId], of: 2 }'))).toEqual(["chains[0] (a): unknown methodSet 'evn' (did you mean 'evm'?)"]);
    });

    it('refuses every write the runtime knows in quorum, even when the chain allows it; every listed method is a known one', () => {
      for (const w of WRITES) {
        expect(NOT_COMPARABLE.get(w)).toBe('write');
        expect(problems(chain(`methods: [eth_call, ${w}], quorum: { methods: [${w}], of: 2 }`))).toEqual([
          `chains[0] (a) quorum.methods[0]: '${w}' is a write; quorum compares reads only (drop it from quorum.methods; broadcast decides where a transaction goes)`,
        ]);
      }
      for (const m of NOT_COMPARABLE.keys()) expect(KNOWN_METHODS.has(m), m).toBe(true);
    });
  });

  it('handles documents that are not a mapping, empty files and alias bombs without crashing', () => {
    expect(validateManifest(loadManifest('e.yaml', '')).map(formatProblem)).toEqual(['e.yaml:1:1 (top level): must be object, not null']);
    expect(validateManifest(loadManifest('s.yaml', '- a\n- b\n')).map(formatProblem)).toEqual(['s.yaml:1:1 (top level): must be object, not array']);
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]', 'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]', 'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]', 'd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]', ''].join('\n');
    const problems = validateManifest(loadManifest('bomb.yaml', bomb));
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toMatch(/alias/i);
  });
});
