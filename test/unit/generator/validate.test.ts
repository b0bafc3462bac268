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

  it('accepts method names far from every known one (a chain may allow its own), and flags near misses only', () => {
    const manifest = (methods: string) =>
      `version: 1\nlisteners: { rpc: { port: 1 } }\nchains:\n  - { path: a, interface: evm-jsonrpc, listener: rpc, methods: ${methods}, upstreams: ["http://a"] }\n`;
    expect(validateManifest(loadManifest('m.yaml', manifest('[zks_getL1BatchNumber, bor_getAuthor, eth_feeHistory, debug_traceTransaction]')))).toEqual([]);
    expect(validateManifest(loadManifest('m.yaml', manifest('[eth_feeHistroy, eth_getLog]'))).map((p) => `${p.message} (${p.hint})`)).toEqual([
      "chains[0] (a) methods[0]: unknown method 'eth_feeHistroy' (did you mean 'eth_feeHistory'?)",
      "chains[0] (a) methods[1]: unknown method 'eth_getLog' (did you mean 'eth_getLogs'?)",
    ]);
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
