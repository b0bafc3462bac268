// A logs subscription's filter, as geth reads it: `address` (one address or a
// list: any of them), `topics` (by position: null for any, one topic, or a
// list of which any matches; a log needs at least as many topics as the filter
// has positions). Everything is compared in lower case.

export interface LogFilter {
  /** null: any address. */
  readonly addresses: ReadonlySet<string> | null;
  /** Per position: null for any, else the topics that match there. */
  readonly topics: readonly (ReadonlySet<string> | null)[];
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;
/** geth's limit on topic positions (the EVM's LOG4). */
const MAX_TOPICS = 4;

/** The filter in `v` (eth_subscribe's second parameter), or why it is not one (the JSON pointer and a message). */
export function parseLogFilter(v: unknown): LogFilter | { readonly path: string; readonly message: string } {
  if (v === undefined || v === null) return { addresses: null, topics: [] };
  if (typeof v !== 'object' || Array.isArray(v)) return { path: '/1', message: 'must be an object with address and topics' };
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (k !== 'address' && k !== 'topics') return { path: `/1/${k}`, message: 'a logs subscription takes address and topics only' };
  let addresses: Set<string> | null = null;
  if (o.address !== undefined && o.address !== null) {
    const list = Array.isArray(o.address) ? o.address : [o.address];
    for (let i = 0; i < list.length; i++) {
      const a = list[i];
      if (typeof a !== 'string' || !ADDRESS.test(a)) return { path: Array.isArray(o.address) ? `/1/address/${i}` : '/1/address', message: 'must be hex encoded address (^0x[0-9a-fA-F]{40}$)' };
    }
    if (list.length > 0) addresses = new Set((list as string[]).map((a) => a.toLowerCase()));
  }
  const topics: (Set<string> | null)[] = [];
  if (o.topics !== undefined && o.topics !== null) {
    if (!Array.isArray(o.topics)) return { path: '/1/topics', message: 'must be a list' };
    if (o.topics.length > MAX_TOPICS) return { path: '/1/topics', message: `at most ${MAX_TOPICS} topic positions` };
    for (let i = 0; i < o.topics.length; i++) {
      const t: unknown = o.topics[i];
      if (t === null) {
        topics.push(null);
        continue;
      }
      const list = Array.isArray(t) ? t : [t];
      for (let j = 0; j < list.length; j++) {
        const one: unknown = list[j];
        if (typeof one !== 'string' || !TOPIC.test(one)) return { path: Array.isArray(t) ? `/1/topics/${i}/${j}` : `/1/topics/${i}`, message: 'must be a 32-byte hex topic (^0x[0-9a-fA-F]{64}$)' };
      }
      // An empty list matches anything, as null does.
      topics.push(list.length === 0 ? null : new Set((list as string[]).map((x) => x.toLowerCase())));
    }
  }
  return { addresses, topics };
}

export function isFilter(f: ReturnType<typeof parseLogFilter>): f is LogFilter {
  return 'topics' in f && typeof (f as LogFilter).topics === 'object' && !('message' in f);
}

/** Whether a log (address and topics in lower case) matches. */
export function matches(f: LogFilter, address: string, topics: readonly string[]): boolean {
  if (f.addresses !== null && !f.addresses.has(address)) return false;
  if (f.topics.length > topics.length) return false;
  for (let i = 0; i < f.topics.length; i++) {
    const want = f.topics[i];
    if (want !== null && want !== undefined && !want.has(topics[i]!)) return false;
  }
  return true;
}
