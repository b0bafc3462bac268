// Rates and quotas as the manifest and the keys file write them (`100/s`,
// `3000000/day`), parsed: below both the keys and admission, which counts them
// (admission/ratelimit.ts).

export interface Rate {
  readonly limit: number;
  readonly windowMs: number;
}

const UNITS: Record<string, number> = { s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, hour: 3_600_000 };

/** Parses `100/s`, `6000/min`, `10/h`. */
export function parseRate(s: string): Rate | null {
  const slash = s.indexOf('/');
  if (slash <= 0) return null;
  const n = Number(s.slice(0, slash).trim());
  const unit = UNITS[s.slice(slash + 1).trim()];
  if (!Number.isSafeInteger(n) || n <= 0 || unit === undefined) return null;
  return { limit: n, windowMs: unit };
}

export interface Quota {
  readonly limit: number;
  readonly per: 'day' | 'month';
}

/** Parses `3000000/day` or `90000000/month`. */
export function parseQuota(s: string): Quota | null {
  const m = /^([1-9][0-9]{0,15})\/(day|month)$/.exec(s);
  if (!m) return null;
  const limit = Number(m[1]);
  return Number.isSafeInteger(limit) ? { limit, per: m[2] as 'day' | 'month' } : null;
}
