// The pure half of `npm run bench:guard`: reads the per-round lines bench/run.mjs logs, pairs Sluice with
// each floor round by round, and judges the median ratios against bench/guard-thresholds.json. No I/O.

/** The measures a round line carries, as bench/run.mjs's brief() prints them. */
export const MEASURES = ['rate', 'cpuPerTunnel', 'p50', 'p99', 'bulkDown', 'bulkUp'];

const ROUND = /^\[bench [0-9:]+\] round (\d+) ([a-z-]+): (.*)$/;

/**
 * One logged round (`[bench 22:58:01] round 2 sluice-real: p50 308 µs p99 2564 µs, 4456 tunnels/s (222 µs
 * CPU, 21.3 kB, 6.1 µs GC per tunnel), 762 MiB/s`) as numbers; null for any other line. A measure the line
 * lacks (a failed scenario) is absent; failures are kept as text.
 */
export function parseRoundLine(line) {
  const m = ROUND.exec(line.trim());
  if (!m) return null;
  const text = m[3];
  const out = { round: Number(m[1]), target: m[2], values: {}, failures: [] };
  const num = (re) => {
    const hit = re.exec(text);
    return hit ? Number(hit[1]) : undefined;
  };
  const set = (k, v) => {
    if (v !== undefined && Number.isFinite(v)) out.values[k] = v;
  };
  set('p50', num(/\bp50 ([0-9.]+) µs/));
  set('p99', num(/\bp99 ([0-9.]+) µs/));
  set('rate', num(/\b([0-9.]+) tunnels\/s/));
  set('cpuPerTunnel', num(/\(([0-9.]+) µs CPU/));
  set('bulkDown', num(/(?<!up )\b([0-9.]+) MiB\/s/));
  set('bulkUp', num(/\bup ([0-9.]+) MiB\/s/));
  for (const f of text.matchAll(/FAILED ([^,]*)/g)) out.failures.push(f[1]);
  return out;
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return null;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Per round, `subject ÷ floor` for each measure both logged in that round: a same-run, paired ratio. */
export function pairedRatios(rounds, subject, floor) {
  const by = new Map();
  for (const r of rounds) by.set(`${r.round}/${r.target}`, r);
  const ratios = Object.fromEntries(MEASURES.map((k) => [k, []]));
  for (const r of rounds) {
    if (r.target !== subject) continue;
    const f = by.get(`${r.round}/${floor}`);
    if (!f) continue;
    for (const k of MEASURES) {
      const a = r.values[k];
      const b = f.values[k];
      if (a !== undefined && b !== undefined && b > 0) ratios[k].push(a / b);
    }
  }
  return ratios;
}

/**
 * Judges each threshold `{ measure, floor, min | max }` against the median of its paired ratios. A
 * measure with fewer than `minRounds` pairs is `missing`, which fails the guard too: a guard that
 * measured nothing must not pass.
 */
export function judge(rounds, thresholds, { subject = 'sluice-real', minRounds = 2 } = {}) {
  const results = [];
  const cache = new Map();
  for (const t of thresholds) {
    if (!cache.has(t.floor)) cache.set(t.floor, pairedRatios(rounds, subject, t.floor));
    const ratios = cache.get(t.floor)[t.measure] ?? [];
    const med = ratios.length >= minRounds ? median(ratios) : null;
    let status = 'ok';
    if (med === null) status = 'missing';
    else if (t.min !== undefined && med < t.min) status = 'fail';
    else if (t.max !== undefined && med > t.max) status = 'fail';
    results.push({ ...t, ratios, median: med, status });
  }
  return { results, ok: results.every((r) => r.status === 'ok') };
}
