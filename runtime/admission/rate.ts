const UNITS: Record<string, number> = { s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, hour: 3_600_000 };

/** Parses `100/s`, `6000/min`, `10/h`. */
export function parseRate(s: string): { limit: number; windowMs: number } | null {
  const slash = s.indexOf('/');
  if (slash <= 0) return null;
  const n = Number(s.slice(0, slash).trim());
  const unit = UNITS[s.slice(slash + 1).trim()];
  if (!Number.isSafeInteger(n) || n <= 0 || unit === undefined) return null;
  return { limit: n, windowMs: unit };
}
