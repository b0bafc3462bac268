// Block hashes a pool learns from the answers it holds whole (flow.ts), so
// that a later call naming a block by hash goes to an upstream that has it:
// a block's hash and number, and the blockHash and blockNumber that
// transactions, receipts and logs carry. A scan of the answer's text for those
// fields, only for the methods whose answers have them (the method table's
// `located`: a block carries hash and number, transactions, receipts and logs
// blockHash and blockNumber, one of each an object); nothing is parsed.
import { traitsOf } from './methods.ts';

const HASH_RE = /"blockHash"\s*:\s*(?:"(0x[0-9a-fA-F]{64})"|null)/g;
const NUMBER_RE = /"blockNumber"\s*:\s*(?:"(0x[0-9a-fA-F]{1,13})"|null)/g;
const OWN_HASH_RE = /"hash"\s*:\s*"(0x[0-9a-fA-F]{64})"/g;
const OWN_NUMBER_RE = /"number"\s*:\s*"(0x[0-9a-fA-F]{1,13})"/g;

/** Calls `learn` with each block hash and number that `body` (an answer to `method`) pairs. */
export function learnHashes(method: string, body: Buffer, learn: (hash: string, n: number) => void): void {
  const kind = traitsOf(method).located;
  if (kind === null) return;
  const text = body.toString('latin1');
  // Transactions, receipts and logs: each object has one blockHash and one blockNumber, so the nth of one pairs with the nth of the other.
  const hashes = [...text.matchAll(HASH_RE)];
  const numbers = [...text.matchAll(NUMBER_RE)];
  if (hashes.length === numbers.length) {
    let last = '';
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i]![1];
      const n = numbers[i]![1];
      if (h === undefined || n === undefined || h === last) continue;
      last = h;
      learn(h, Number.parseInt(n, 16));
    }
  }
  if (kind !== 'block') return;
  // A block: its own number, and its own hash where it is the only one (transaction hashes besides it pair through their blockHash above).
  const own = [...text.matchAll(OWN_HASH_RE)];
  const num = [...text.matchAll(OWN_NUMBER_RE)];
  if (own.length === 1 && num.length === 1) learn(own[0]![1]!, Number.parseInt(num[0]![1]!, 16));
}
