// Summarizes a V8 .cpuprofile (node --cpu-prof): self time per function, and per area (Sluice's dist/,
// each node_modules package, Node internals, GC, idle). Used by `npm run bench -- --profile`.
import path from 'node:path';

/**
 * Self time per function within [fromUs, toUs] (CLOCK_MONOTONIC microseconds, the clock of both the
 * profile's timestamps and process.hrtime), or over the whole profile when no window is given.
 */
export function summarizeProfile(prof, root, window = {}) {
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const from = window.fromUs ?? -Infinity;
  const to = window.toUs ?? Infinity;
  let t = prof.startTime;
  for (let i = 0; i < prof.samples.length; i++) {
    const dt = prof.timeDeltas[i] ?? 0;
    t += dt;
    if (t < from || t > to) continue;
    self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + dt);
  }
  const fns = new Map();
  const areas = new Map();
  let total = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const n = byId.get(id);
    const cf = n.callFrame;
    const name = cf.functionName || '(anonymous)';
    const area = areaOf(cf.url, name, root, window.distDir ?? path.join(root, 'dist'));
    total += us;
    if (name === '(idle)') idle += us;
    const where = cf.url ? `${shortUrl(cf.url, root)}:${cf.lineNumber + 1}` : '';
    const key = `${name} ${where}`;
    const f = fns.get(key) ?? { name, where, area, us: 0 };
    f.us += us;
    fns.set(key, f);
    areas.set(area, (areas.get(area) ?? 0) + us);
  }
  return {
    totalUs: total,
    idleUs: idle,
    functions: [...fns.values()].sort((a, b) => b.us - a.us),
    areas: [...areas.entries()].map(([area, us]) => ({ area, us })).sort((a, b) => b.us - a.us),
  };
}

function shortUrl(url, root) {
  const p = url.replace(/^file:\/\//, '');
  const rel = p.startsWith(root) ? path.relative(root, p) : p;
  return rel.replace(/^bench\/\.build\/sluice\//, ''); // the copy of dist/ that the run used
}

function areaOf(url, name, root, distDir) {
  if (name === '(idle)' || name === '(program)' || name === '(garbage collector)') return name;
  if (!url) return '(native / V8)';
  const p = url.replace(/^file:\/\//, '');
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(p);
  if (nm) return `node_modules/${nm[1]}`;
  if (p.startsWith(distDir + '/')) return `sluice ${path.relative(distDir, p).split('/')[0]}/`;
  if (url.startsWith('node:')) return `node ${url.slice(5).split('/').slice(0, 2).join('/')}`;
  return shortUrl(url, root);
}

export function renderProfile(s, { title, scenario }, top = 30) {
  const busy = s.totalUs - s.idleUs;
  const pct = (us) => `${((100 * us) / busy).toFixed(1)}%`;
  const lines = [
    `## ${title}`,
    '',
    `${scenario}. Sampled ${(s.totalUs / 1e6).toFixed(2)} s, of which ${(s.idleUs / 1e6).toFixed(2)} s idle. Percentages are of the non-idle time.`,
    '',
    '### By area (self time)',
    '',
    '| area | self | share |',
    '|---|---|---|',
    ...s.areas.filter((a) => a.area !== '(idle)').slice(0, 20).map((a) => `| ${a.area} | ${(a.us / 1000).toFixed(0)} ms | ${pct(a.us)} |`),
    '',
    `### Top ${top} functions (self time)`,
    '',
    '| function | where | area | self | share |',
    '|---|---|---|---|---|',
    ...s.functions.filter((f) => f.name !== '(idle)').slice(0, top).map((f) => `| \`${f.name}\` | ${f.where} | ${f.area} | ${(f.us / 1000).toFixed(0)} ms | ${pct(f.us)} |`),
    '',
  ];
  return lines.join('\n');
}
