// A key's allow.methods and allow.contracts against one EVM call
// (runtime/kinds/evm/contracts.ts): where a call names its contract or account
// is its row of the method table (methods.ts `contract`).
import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../../../../../runtime/keys/key-policy.ts';
import { callRefusal } from '../../../../../runtime/kinds/evm/contracts.ts';
import { CONTRACT_METHODS } from '../../../../../runtime/kinds/evm/methods.ts';

describe('allow.methods and allow.contracts, per call', () => {
  const AA = '0x00000000000000000000000000000000000000aa';
  const p = compilePolicy({ allow: { methods: ['eth_call', 'eth_getBalance', 'eth_blockNumber', 'eth_estimateGas'], contracts: [AA.toUpperCase().replace('0X', '0x')] } })!;

  it('a method outside the list is refused as method; a listed one passes its contract check', () => {
    expect(callRefusal(p, 'eth_getCode', [AA, 'latest'])).toBe('method');
    expect(callRefusal(p, 'eth_blockNumber', [])).toBeNull();
  });

  it('contracts compare case-insensitively on to and on the address parameter; no to is refused', () => {
    expect(callRefusal(p, 'eth_call', [{ to: AA }, 'latest'])).toBeNull();
    expect(callRefusal(p, 'eth_call', [{ to: AA.toUpperCase().replace('0X', '0x') }, 'latest'])).toBeNull();
    expect(callRefusal(p, 'eth_call', [{ to: '0x' + 'bb'.repeat(20) }, 'latest'])).toBe('contract');
    expect(callRefusal(p, 'eth_estimateGas', [{ data: '0x00' }])).toBe('contract');
    expect(callRefusal(p, 'eth_call', [])).toBe('contract');
    expect(callRefusal(p, 'eth_call', 'nonsense')).toBe('contract');
    expect(callRefusal(p, 'eth_getBalance', [AA, 'latest'])).toBeNull();
    expect(callRefusal(p, 'eth_getBalance', ['0x' + 'cc'.repeat(20), 'latest'])).toBe('contract');
  });

  it('refuses a call whose transaction has another spelling of "to" (geth matches keys case-insensitively, the last one winning)', () => {
    for (const k of ['TO', 'To', 'tO']) expect(callRefusal(p, 'eth_call', [{ to: AA, [k]: '0x' + 'bb'.repeat(20) }, 'latest']), k).toBe('contract');
    expect(callRefusal(p, 'eth_call', [{ to: AA, toy: 1, data: '0x' }, 'latest'])).toBeNull();
  });

  it('every method whose params name an account is checked on params[0], and only those the table marks are checked', () => {
    const q = compilePolicy({ allow: { contracts: [AA] } })!;
    for (const m of ['eth_getBalance', 'eth_getCode', 'eth_getStorageAt', 'eth_getTransactionCount', 'eth_getProof']) {
      expect(callRefusal(q, m, [AA, 'latest']), m).toBeNull();
      expect(callRefusal(q, m, ['0x' + 'cc'.repeat(20), 'latest']), m).toBe('contract');
    }
    expect([...CONTRACT_METHODS].sort()).toEqual(['eth_call', 'eth_estimateGas', 'eth_getBalance', 'eth_getCode', 'eth_getProof', 'eth_getStorageAt', 'eth_getTransactionCount']);
    // A method that names no contract passes whatever its params.
    expect(callRefusal(q, 'eth_blockNumber', ['0x' + 'cc'.repeat(20)])).toBeNull();
  });
});
