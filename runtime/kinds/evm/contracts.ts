// A key's `allow.methods` and `allow.contracts` lists against one EVM call:
// the contract or account a call names is where its row of the method table
// says (methods.ts `contract`). The keys (keys/key-policy.ts) hold the lists
// and know no method; this is the EVM guard's per-call check of them.
import type { KeyPolicy } from '../../keys/key-policy.ts';
import { traitsOf } from './methods.ts';

/** A JSON-RPC call's refusal by the key's methods and contracts lists, or null. */
export function callRefusal(p: KeyPolicy, method: string, params: unknown): 'method' | 'contract' | null {
  if (p.methods !== null && !p.methods.has(method)) return 'method';
  if (p.contracts === null) return null;
  const at = traitsOf(method).contract;
  if (at === null) return null;
  let address: unknown;
  if (at === 'to') {
    const tx = Array.isArray(params) ? params[0] : undefined;
    if (tx === null || typeof tx !== 'object' || Array.isArray(tx)) return 'contract';
    // Go's encoding/json (geth) matches keys case-insensitively, the last one winning: a "TO" next to "to"
    // could be the address the node calls. Such a call is refused, whatever "to" says.
    for (const k in tx) if (k !== 'to' && k.length === 2 && k.toLowerCase() === 'to') return 'contract';
    address = (tx as { to?: unknown }).to;
  } else address = Array.isArray(params) ? params[0] : undefined;
  // No `to` (a contract creation) or a malformed one: refused while the list is set.
  return typeof address === 'string' && p.contracts.has(address.toLowerCase()) ? null : 'contract';
}
