// Weighted selection (runtime/upstreams/upstream.ts): smooth weighted round-robin, as
// nginx does it, over the usable primaries; fallbacks only when no primary is
// usable; a request never goes twice to one node. Exact sequences, not shares.
import { afterEach, describe, expect, it } from 'vitest';
import type { RouteSpec, UpstreamRole } from '../../../../runtime/types.ts';
import { Upstream, UpstreamGroup, type UpstreamState } from '../../../../runtime/upstreams/upstream.ts';

const ROUTE = { path: 'c', limits: { timeoutMs: 1000 } } as RouteSpec;
const groups: UpstreamGroup[] = [];
afterEach(async () => {
  await Promise.all(groups.splice(0).map((g) => g.close()));
});

/** Upstreams from 'a:5 b c f:3': name and weight (default 1); names starting with f are fallbacks. */
function group(layout: string): { g: UpstreamGroup; u: Record<string, Upstream> } {
  const u: Record<string, Upstream> = {};
  const all = layout.split(' ').map((part, i) => {
    const [name, weight] = part.split(':') as [string, string | undefined];
    const role: UpstreamRole = name.startsWith('f') ? 'fallback' : 'primary';
    // Never dialled: selection only reads role, weight and state.
    const up = new Upstream({ name, url: { parts: [`http://127.0.0.1:${1 + i}`] }, weight: Number(weight ?? 1), role, archive: false, connections: 1, idleTimeoutMs: 1000, headers: {} }, ROUTE);
    u[name] = up;
    return up;
  });
  const g = new UpstreamGroup(all);
  groups.push(g);
  return { g, u };
}

const picks = (g: UpstreamGroup, n: number) => Array.from({ length: n }, () => g.pick(null)?.name ?? null).join(' ');
const set = (state: UpstreamState, ...ups: Upstream[]) => ups.forEach((x) => (x.state = state));

describe('UpstreamGroup.pick: smooth weighted round-robin', () => {
  it('weights 5, 1, 1 give nginx’s sequence a a b a c a a, period after period', () => {
    const { g } = group('a:5 b:1 c:1');
    expect(picks(g, 14)).toBe('a a b a c a a a a b a c a a');
  });

  it('weights 2 and 1 interleave: a b a', () => {
    const { g } = group('a:2 b:1');
    expect(picks(g, 9)).toBe('a b a a b a a b a');
  });

  it('equal weights take turns in listed order', () => {
    const { g } = group('a b c');
    expect(picks(g, 6)).toBe('a b c a b c');
  });

  it('leaves out a down upstream and spreads over the rest by their weights; unknown counts as usable', () => {
    const { g, u } = group('a:3 b:2 c:1');
    set('up', u.a!, u.c!); // b is still unknown
    set('down', u.b!);
    expect(picks(g, 8)).toBe('a a c a a a c a');
    set('unknown', u.b!);
    expect(picks(g, 6).split(' ').sort().join(' ')).toBe('a a a b b c');
  });

  it('never picks an upstream on the wrong chain, as a primary, a fallback, a retry or the only one', () => {
    const { g, u } = group('a:5 b f1');
    set('wrong_chain', u.a!, u.f1!);
    expect(picks(g, 4)).toBe('b b b b');
    set('down', u.b!);
    expect([g.pick(null), g.pick(null)]).toEqual([null, null]); // nothing usable, not even the fallback
    expect(g.pickRetry(new Set())).toBeNull();
    expect(g.hasOther(u.b!, null)).toBe(false);
    expect(g.healthy).toBe(false);
    const only = group('x');
    set('wrong_chain', only.u.x!);
    expect(only.g.pick(null)).toBeNull();
  });

  it('sends nothing to fallbacks while a primary is usable, then spreads over the fallbacks by weight', () => {
    const { g, u } = group('a b f1:1 f2:3');
    expect(picks(g, 4)).toBe('a b a b');
    set('down', u.a!);
    expect(picks(g, 3)).toBe('b b b');
    set('down', u.b!);
    expect(picks(g, 8)).toBe('f2 f1 f2 f2 f2 f1 f2 f2');
    set('down', u.f1!, u.f2!);
    expect(g.pick(null)).toBeNull();
  });

  it('a single primary without fallbacks is picked while usable and not yet tried', () => {
    const { g, u } = group('a:7');
    expect(picks(g, 3)).toBe('a a a');
    expect(g.pick(new Set([u.a!]))).toBeNull();
    set('down', u.a!);
    expect(g.pick(null)).toBeNull();
  });
});

describe('UpstreamGroup.pickRetry and hasOther', () => {
  it('never picks an upstream the request already tried, and turns to a fallback though primaries are up', () => {
    const { g, u } = group('a:2 b f');
    expect(g.pickRetry(new Set([u.a!]))?.name).toBe('b');
    expect(g.pickRetry(new Set([u.a!, u.b!]))?.name).toBe('f');
    expect(g.pickRetry(new Set([u.a!, u.b!, u.f!]))).toBeNull();
    expect(g.pick(new Set([u.a!]))?.name).toBe('b');
  });

  it('hasOther: a usable upstream other than this one that the request has not tried', () => {
    const { g, u } = group('a b f');
    expect(g.hasOther(u.a!, null)).toBe(true);
    expect(g.hasOther(u.a!, new Set([u.b!]))).toBe(true); // f
    expect(g.hasOther(u.a!, new Set([u.b!, u.f!]))).toBe(false);
    set('down', u.b!, u.f!);
    expect(g.hasOther(u.a!, null)).toBe(false);
  });
});
