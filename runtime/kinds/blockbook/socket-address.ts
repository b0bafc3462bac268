// Addresses as Blockbook tells them apart (its address descriptors), for the
// chain's address subscriptions (socket-hub.ts): a client's set and each
// notification are matched by one key, whatever the spelling.

const BECH32 = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

/** Whether a lower-case string is bech32 or bech32m with a valid checksum (BIP 173, BIP 350). */
function isBech32(s: string): boolean {
  const sep = s.lastIndexOf('1');
  if (sep < 1 || s.length - sep < 7 || s.length > 90) return false;
  let chk = 1;
  const step = (v: number): void => {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GEN[i]!;
  };
  for (let i = 0; i < sep; i++) step(s.charCodeAt(i) >> 5);
  step(0);
  for (let i = 0; i < sep; i++) step(s.charCodeAt(i) & 31);
  for (let i = sep + 1; i < s.length; i++) {
    const v = BECH32.indexOf(s[i]!);
    if (v < 0) return false;
    step(v);
  }
  return chk === 1 || chk === 0x2bc830a3;
}

/**
 * An address as Blockbook tells addresses apart (by its descriptor): a
 * bech32 address in upper case is its lower-case self, an EVM 0x address is
 * the same in any case. Anything else (base58, an xpub) is kept as written:
 * its case is part of it. Applied to a client's addresses as it subscribes
 * and to each notification's, so each is matched once, by this key.
 */
export function addressKey(a: string): string {
  if (/^0x[0-9a-fA-F]{40}$/.test(a)) return a.toLowerCase();
  const lower = a.toLowerCase();
  // Bech32 is all of one case (BIP 173): upper case is the lower-case address; mixed case is no bech32.
  return lower !== a && a === a.toUpperCase() && isBech32(lower) ? lower : a;
}

export interface BlockTx {
  readonly txid?: unknown;
  readonly vin?: readonly { readonly addresses?: unknown }[];
  readonly vout?: readonly { readonly addresses?: unknown }[];
}

/** The addresses a transaction of a block touches (its inputs' and outputs'): by key (addressKey), as the block writes each. */
export function addressesOf(tx: BlockTx): Map<string, string> {
  const out = new Map<string, string>();
  for (const io of [...(tx.vin ?? []), ...(tx.vout ?? [])]) if (Array.isArray(io.addresses)) for (const a of io.addresses) if (typeof a === 'string') out.set(addressKey(a), a);
  return out;
}

/** A socket's address subscription. */
export interface AddressClient {
  /** Its API key's id (never the key): what the key's share of the chain's addresses is counted by. */
  readonly key: string;
  /** Its subscribe message's id, which its notifications carry. */
  readonly idJson: string;
  readonly addresses: ReadonlySet<string>;
  readonly newBlockTxs: boolean;
  /** One notification's whole text. */
  notify(text: string): void;
}

/** A socket's fiat rates subscription: one currency (lower case), or all (null). */
export interface FiatClient {
  readonly idJson: string;
  readonly currency: string | null;
  notify(text: string): void;
}

/** A rates notification (every rate) to each fiat client: one of all of them as it is, one of a currency its own rate (none if the ticker lacks it), as websocket.go's broadcastTicker. */
export function fiatToClients(clients: Iterable<FiatClient>, data: string): void {
  const rates = (JSON.parse(data) as { rates?: Record<string, unknown> }).rates ?? {};
  const byCurrency = new Map<string, string | null>();
  for (const c of clients) {
    if (c.currency === null) {
      c.notify(`{"id":${c.idJson},"data":${data}}`);
      continue;
    }
    let one = byCurrency.get(c.currency);
    if (one === undefined) {
      const r = rates[c.currency];
      byCurrency.set(c.currency, (one = r === undefined ? null : JSON.stringify({ rates: { [c.currency]: r } })));
    }
    if (one !== null) c.notify(`{"id":${c.idJson},"data":${one}}`);
  }
}
