// Reads one series out of a Prometheus text exposition by its labels, in
// whatever order the exporter writes them (the harness's metricValue wants
// the label string exactly as written).

/** The value of `name` whose labels include every pair of `labels`; NaN when there is no such series. */
export function seriesValue(text: string, name: string, labels: Readonly<Record<string, string>>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !(want.length === 0 && line.startsWith(`${name} `))) continue;
    const close = line.lastIndexOf('}');
    const set = close === -1 ? [] : splitLabels(line.slice(name.length + 1, close));
    if (want.every((w) => set.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return Number.NaN;
}

/** `a="x",b="y,z"` -> ['a="x"', 'b="y,z"'] (commas inside quoted values kept). */
function splitLabels(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\\' && quoted) {
      cur += c + (s[++i] ?? '');
      continue;
    }
    if (c === '"') quoted = !quoted;
    if (c === ',' && !quoted) {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  if (cur !== '') out.push(cur);
  return out;
}

/** The series from a gateway's admin /metrics (`url`: that endpoint). */
export async function fetchSeries(url: string, name: string, labels: Readonly<Record<string, string>>): Promise<number> {
  return seriesValue(await (await fetch(url)).text(), name, labels);
}
