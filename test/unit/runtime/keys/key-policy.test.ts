// A key's allow lists (issue 21): CIDR and origin matching as property tests
// against reference matchers written the obvious way (BigInt masks, string
// splitting). The per-call rules for methods and contracts are the EVM
// guard's (test/unit/runtime/kinds/evm/contracts.test.ts).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { clientAddress, compilePolicy, ipAllowed, ipList, OriginMatcher, parseOrigin } from '../../../../runtime/keys/key-policy.ts';

// ------------------------------------------------------------------ reference matchers

function v4ToBig(a: string): bigint {
  return a.split('.').reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n);
}

/** IPv6 text (with :: and an optional dotted IPv4 tail) as a 128-bit number. */
function v6ToBig(a: string): bigint {
  let text = a;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const v4 = v4ToBig(tail[1]!);
    text = text.slice(0, -tail[1]!.length) + ((v4 >> 16n) & 0xffffn).toString(16) + ':' + (v4 & 0xffffn).toString(16);
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head === '' ? [] : head!.split(':');
  const r = rest === undefined ? [] : rest === '' ? [] : rest.split(':');
  const groups = rest === undefined ? h : [...h, ...Array(8 - h.length - r.length).fill('0'), ...r];
  return groups.reduce((n, g) => (n << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
}

function inCidr(addr: bigint, net: bigint, prefix: number, bits: number): boolean {
  if (prefix === 0) return true;
  const mask = ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix);
  return (addr & mask) === (net & mask);
}

const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((p) => p.join('.'));
const v6 = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(':'));

describe('allow.ips: CIDR blocks against a reference (BigInt masks)', () => {
  it('IPv4 blocks, /0 to /32, and plain addresses', () => {
    fc.assert(
      fc.property(v4, fc.integer({ min: 0, max: 32 }), v4, fc.boolean(), (net, prefix, addr, near) => {
        // Half the time the address shares the block's first bits, so matches are common.
        const a = near ? net.split('.').slice(0, 3).join('.') + '.' + addr.split('.')[3] : addr;
        const want = inCidr(v4ToBig(a), v4ToBig(net), prefix, 32);
        expect(ipAllowed(ipList([`${net}/${prefix}`]), a)).toBe(want);
        // The same address written IPv4-mapped matches the same way.
        expect(ipAllowed(ipList([`${net}/${prefix}`]), `::ffff:${a}`)).toBe(want);
        expect(ipAllowed(ipList([net]), a)).toBe(a === net);
      }),
    );
  });

  it('IPv6 blocks, /0 to /128', () => {
    fc.assert(
      fc.property(v6, fc.integer({ min: 0, max: 128 }), v6, fc.nat(7), (net, prefix, addr, keep) => {
        const a = [...net.split(':').slice(0, keep), ...addr.split(':').slice(keep)].join(':');
        const want = inCidr(v6ToBig(a), v6ToBig(net), prefix, 128);
        expect(ipAllowed(ipList([`${net}/${prefix}`]), a)).toBe(want);
      }),
    );
  });

  it('edges: /0 matches all of its family, /32 and /128 one address, mapped entries match IPv4 clients', () => {
    expect(ipAllowed(ipList(['0.0.0.0/0']), '203.0.113.9')).toBe(true);
    expect(ipAllowed(ipList(['0.0.0.0/0']), '2001:db8::1')).toBe(false);
    expect(ipAllowed(ipList(['::/0']), '2001:db8::1')).toBe(true);
    expect(ipAllowed(ipList(['198.51.100.7/32']), '198.51.100.7')).toBe(true);
    expect(ipAllowed(ipList(['198.51.100.7/32']), '198.51.100.8')).toBe(false);
    expect(ipAllowed(ipList(['2001:db8::7/128']), '2001:db8::7')).toBe(true);
    expect(ipAllowed(ipList(['2001:db8::7/128']), '2001:db8::8')).toBe(false);
    expect(ipAllowed(ipList(['::ffff:192.0.2.1']), '192.0.2.1')).toBe(true);
    expect(ipAllowed(ipList(['192.0.2.0/24']), '::ffff:192.0.2.200')).toBe(true);
    expect(ipAllowed(ipList(['192.0.2.0/24']), 'not-an-address')).toBe(false);
    for (const bad of ['192.0.2.0/33', '2001:db8::/129', '192.0.2.0/-1', '192.0.2', 'example.com', '10.0.0.0/08']) expect(() => ipList([bad]), bad).toThrow();
  });

  it('the client behind trusted proxies is the rightmost X-Forwarded-For entry that is not one of them', () => {
    const trusted = ipList(['10.0.0.0/8']);
    expect(clientAddress('10.0.0.5', '203.0.113.9, 198.51.100.1, 10.0.0.7', trusted)).toBe('198.51.100.1');
    // Not from a trusted proxy: the header is the client's own words, ignored.
    expect(clientAddress('192.0.2.50', '203.0.113.9', trusted)).toBe('192.0.2.50');
    // Without trusted proxies, never believed.
    expect(clientAddress('10.0.0.5', '203.0.113.9', null)).toBe('10.0.0.5');
    expect(clientAddress('10.0.0.5', undefined, trusted)).toBe('10.0.0.5');
  });
});

// ------------------------------------------------------------------ origins

const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?$/);
/** A top-level label is letters: a host ending in digits reads as an IPv4 address. */
const tld = fc.stringMatching(/^[a-z]{2,6}$/);
const scheme = fc.constantFrom('http', 'https');
const port = fc.oneof(fc.constant(''), fc.integer({ min: 1, max: 65535 }).map(String));

/** Reference: an origin as scheme, lower-case host and explicit port. */
function refOrigin(s: string): { scheme: string; host: string; port: string } | null {
  const m = /^(https?):\/\/([a-z0-9.-]+)(?::(\d+))?$/i.exec(s);
  if (!m) return null;
  const def = m[1]!.toLowerCase() === 'https' ? '443' : '80';
  return { scheme: m[1]!.toLowerCase(), host: m[2]!.toLowerCase(), port: m[3] === undefined ? def : String(Number(m[3])) };
}
function refMatches(entry: string, header: string): boolean {
  const h = refOrigin(header);
  if (h === null) return false;
  const star = entry.includes('://*.');
  const e = refOrigin(entry.replace('://*.', '://'));
  if (e === null) return false;
  if (e.scheme !== h.scheme || e.port !== h.port) return false;
  return star ? h.host.endsWith(`.${e.host}`) && h.host.length > e.host.length + 1 : h.host === e.host;
}

describe('allow.origins: exact and wildcard origins against a reference', () => {
  it('scheme, host and port must agree; *.domain matches subdomains only; default ports are the same as none', () => {
    fc.assert(
      fc.property(scheme, fc.array(label, { minLength: 0, maxLength: 2 }), tld, port, fc.boolean(), scheme, fc.array(label, { minLength: 0, maxLength: 2 }), port, fc.boolean(), (s1, host, top, p1, wild, s2, sub, p2, upper) => {
        const base = [...host, top].join('.');
        const entry = `${s1}://${wild ? '*.' : ''}${base}${p1 === '' ? '' : `:${p1}`}`;
        const hHost = [...sub, base].join('.');
        const header = `${s2}://${upper ? hHost.toUpperCase() : hHost}${p2 === '' ? '' : `:${p2}`}`;
        expect(new OriginMatcher([entry]).matches(header), `${entry} vs ${header}`).toBe(refMatches(entry, header));
      }),
    );
  });

  it('edges', () => {
    const m = new OriginMatcher(['https://app.acme.io', 'https://*.acme.io', 'http://localhost:3000']);
    expect(m.matches('https://app.acme.io')).toBe(true);
    expect(m.matches('https://app.acme.io:443')).toBe(true);
    expect(m.matches('https://x.y.acme.io')).toBe(true);
    expect(m.matches('https://acme.io')).toBe(false);
    expect(m.matches('https://evilacme.io')).toBe(false);
    expect(m.matches('https://acme.io.evil.com')).toBe(false);
    expect(m.matches('http://app.acme.io')).toBe(false);
    expect(m.matches('https://app.acme.io:8443')).toBe(false);
    expect(m.matches('http://localhost:3000')).toBe(true);
    expect(m.matches('http://localhost')).toBe(false);
    expect(m.matches('null')).toBe(false);
    expect(m.matches('https://app.acme.io/path')).toBe(false);
    for (const bad of ['app.acme.io', 'https://app.acme.io/x', 'https://user@app.acme.io', 'https://*acme.io', '*']) expect(parseOrigin(bad, true), bad).toBeNull();
  });
});

// ------------------------------------------------------------------ the whole policy

describe('a policy', () => {
  it('a key with no lists has no policy at all', () => {
    expect(compilePolicy({})).toBeNull();
    expect(compilePolicy({ allow: { origins: [], ips: [] } })).toBeNull();
  });
});
