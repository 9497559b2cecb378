// Aggregation and markdown rendering of a benchmark result. Shared by run.mjs (the table it prints and
// writes next to the JSON) and doc.mjs (docs/benchmarks.md). Pure functions over the result object.
import { renderSandboxStart } from './sandbox-start.mjs';
import { renderTlsSetup } from './tls-setup.mjs';

export const TARGET_LABELS = {
  direct: 'direct',
  floor: 'Node floor',
  netfloor: 'net floor',
  sluice: 'Sluice',
  'sluice-real': 'Sluice, IP literal',
  squid: 'Squid',
  tinyproxy: 'tinyproxy',
};

/** Proxy CPU seconds per GiB relayed: its share of a core during the stream over GiB/s. */
function cpuPerGiB(s) {
  return s.ok && s.mibps > 0 && s.cpu?.proxyPct !== undefined ? s.cpu.proxyPct / 100 / (s.mibps / 1024) : undefined;
}

/** The measures of the table, in order: where each comes from, its unit, and which way is better. */
export const MEASURES = [
  { key: 'latency_p50', label: 'tunnel setup p50 (connect, CONNECT 200, 32 B echo)', scenario: 'latency', pick: (s) => s.latency_us?.p50, unit: 'µs', better: 'lower' },
  { key: 'latency_p99', label: 'tunnel setup p99', scenario: 'latency', pick: (s) => s.latency_us?.p99, unit: 'µs', better: 'lower' },
  { key: 'rate', label: 'new tunnels/s, 32 concurrent', scenario: 'rate', pick: (s) => s.rate, unit: '/s', better: 'higher' },
  { key: 'bulk', label: 'bulk tunnel MiB/s, 1 stream down', scenario: 'bulk', pick: (s) => (s.ok ? s.mibps : undefined), unit: 'MiB/s', better: 'higher' },
  { key: 'bulk_up', label: 'bulk tunnel MiB/s, 1 stream up', scenario: 'bulkup', pick: (s) => (s.ok ? s.mibps : undefined), unit: 'MiB/s', better: 'higher' },
  { key: 'bulk_cpu_gib', label: 'proxy CPU per GiB, bulk down (s)', scenario: 'bulk', pick: cpuPerGiB, unit: 's', better: 'lower' },
  { key: 'bulk_up_cpu_gib', label: 'proxy CPU per GiB, bulk up (s)', scenario: 'bulkup', pick: cpuPerGiB, unit: 's', better: 'lower' },
  { key: 'http', label: 'plain HTTP keep-alive req/s, 32 conc, 64 B', scenario: 'http', pick: (s) => s.rate, unit: '/s', better: 'higher' },
  { key: 'idle_rss', label: 'RSS per idle tunnel', scenario: 'idle', pick: (s) => s.perTunnelKiB, unit: 'KiB', better: 'lower' },
  { key: 'cpu_per_tunnel', label: 'CPU per tunnel, 32 concurrent (proxy CPU time / tunnels)', scenario: 'rate', pick: (s) => s.cpu?.proxyUsPerDone ?? undefined, unit: 'µs', better: 'lower' },
  { key: 'alloc_per_tunnel', label: '≈ JS heap allocated per tunnel, 32 concurrent (used-heap growth between GCs / tunnels)', scenario: 'rate', pick: (s) => (s.gc?.ok ? s.gc.allocatedBytesPerDone / 1000 : undefined), unit: 'kB', better: 'lower' },
  { key: 'gc_per_tunnel', label: 'GC pause per tunnel, 32 concurrent (main-thread GC time / tunnels)', scenario: 'rate', pick: (s) => (s.gc?.ok ? s.gc.gcPauseUsPerDone : undefined), unit: 'µs', better: 'lower' },
];

export function median(values) {
  const v = [...values].sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

function stats(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x));
  if (v.length === 0) return null;
  return { median: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length };
}

/** Medians with min and max per target and measure, plus CPU medians per target and scenario. */
export function summarize(result) {
  const summary = {};
  for (const target of result.targets) {
    const runs = result.runs.filter((r) => r.target === target);
    const t = (summary[target] = { measures: {}, cpu: {} });
    for (const m of MEASURES) {
      t.measures[m.key] = stats(runs.map((r) => r.scenarios?.[m.scenario]).filter(Boolean).map(m.pick));
    }
    for (const scenario of ['latency', 'rate', 'bulk', 'bulkup', 'http', 'idle']) {
      const ss = runs.map((r) => r.scenarios?.[scenario]).filter(Boolean);
      t.cpu[scenario] = {
        proxyPct: stats(ss.map((s) => s.cpu?.proxyPct)),
        clientPct: stats(ss.map((s) => s.cpu?.clientPct)),
        originPct: stats(ss.map((s) => s.cpu?.originPct)),
        othersPct: stats(ss.map((s) => s.cpu?.othersOnProxyCpuPct)),
        stealPct: stats(ss.map((s) => s.cpu?.stealProxyCpuPct)),
      };
    }
    const gcs = runs.map((r) => r.scenarios?.rate?.gc).filter((g) => g?.ok);
    if (gcs.length) {
      t.gcRate = {
        scavenges: stats(gcs.map((g) => g.gcByType?.Scavenge?.count ?? 0)),
        markCompacts: stats(gcs.map((g) => g.gcByType?.MarkSweepCompact?.count ?? 0)),
        scavengeSurvivorsKB: stats(gcs.map((g) => (g.scavengeSurvivorsMedianBytes ?? NaN) / 1000)),
        scavengeUs: stats(gcs.map((g) => (g.gcByType?.Scavenge ? g.gcByType.Scavenge.costUs / g.gcByType.Scavenge.count : NaN))),
      };
    }
  }
  return summary;
}

function fmtNum(x, unit) {
  if (x === undefined || x === null) return '-';
  if (unit === 'KiB' || unit === 'kB') return x.toFixed(1);
  if (unit === 'MiB/s') return Math.round(x).toLocaleString('en-US');
  if (unit === 's') return x.toFixed(2);
  if (x >= 100) return Math.round(x).toLocaleString('en-US');
  return x.toFixed(1);
}

function cell(st, unit) {
  if (!st) return '-';
  const u = unit === '/s' ? '' : ` ${unit}`;
  if (st.n === 1) return `${fmtNum(st.median, unit)}${u}`;
  return `${fmtNum(st.median, unit)}${u} (${fmtNum(st.min, unit)}–${fmtNum(st.max, unit)})`;
}

function ratio(a, b) {
  if (!a || !b || !Number.isFinite(a.median) || !Number.isFinite(b.median) || b.median === 0) return '-';
  return `${(a.median / b.median).toFixed(2)}×`;
}

/** The check of Sluice against the targets of issue 6. */
export function checkTargets(summary) {
  const s = summary.sluice?.measures;
  if (!s) return [];
  const f = summary.floor?.measures;
  const q = summary.squid?.measures;
  const rows = [];
  const add = (target, value, bound, ok, note) => rows.push({ target, value, bound, met: ok === null ? null : Boolean(ok), note });
  const v = (st) => st?.median;
  const pct = (a, b) => `${((a / b - 1) * 100).toFixed(0)}%`;
  if (s.latency_p50 && q?.latency_p50) add('tunnel setup p50 ≤ Squid', `${fmtNum(v(s.latency_p50))} µs`, `${fmtNum(v(q.latency_p50))} µs`, v(s.latency_p50) <= v(q.latency_p50), pct(v(s.latency_p50), v(q.latency_p50)));
  if (s.latency_p50 && f?.latency_p50) add('tunnel setup p50 ≤ 1.15× floor', `${fmtNum(v(s.latency_p50))} µs`, `${fmtNum(1.15 * v(f.latency_p50))} µs`, v(s.latency_p50) <= 1.15 * v(f.latency_p50), `${(v(s.latency_p50) / v(f.latency_p50)).toFixed(2)}× floor`);
  if (s.latency_p99 && q?.latency_p99) add('tunnel setup p99 ≤ Squid', `${fmtNum(v(s.latency_p99))} µs`, `${fmtNum(v(q.latency_p99))} µs`, v(s.latency_p99) <= v(q.latency_p99), pct(v(s.latency_p99), v(q.latency_p99)));
  if (s.rate && f?.rate) add('new tunnels/s ≥ 0.9× floor', fmtNum(v(s.rate)), fmtNum(0.9 * v(f.rate)), v(s.rate) >= 0.9 * v(f.rate), `${(v(s.rate) / v(f.rate)).toFixed(2)}× floor`);
  if (s.rate && q?.rate) add('new tunnels/s ≥ Squid', fmtNum(v(s.rate)), fmtNum(v(q.rate)), v(s.rate) >= v(q.rate), pct(v(s.rate), v(q.rate)));
  if (s.bulk && f?.bulk) add('bulk MiB/s ≥ 0.95× floor', fmtNum(v(s.bulk), 'MiB/s'), fmtNum(0.95 * v(f.bulk), 'MiB/s'), v(s.bulk) >= 0.95 * v(f.bulk), `${(v(s.bulk) / v(f.bulk)).toFixed(2)}× floor`);
  if (s.bulk_up && f?.bulk_up) add('bulk up MiB/s ≥ 0.95× floor', fmtNum(v(s.bulk_up), 'MiB/s'), fmtNum(0.95 * v(f.bulk_up), 'MiB/s'), v(s.bulk_up) >= 0.95 * v(f.bulk_up), `${(v(s.bulk_up) / v(f.bulk_up)).toFixed(2)}× floor`);
  if (s.http && q?.http) add('plain HTTP req/s ≥ Squid', fmtNum(v(s.http)), fmtNum(v(q.http)), v(s.http) >= v(q.http), pct(v(s.http), v(q.http)));
  if (s.idle_rss) add('RSS per idle tunnel ≤ 16 KiB', `${fmtNum(v(s.idle_rss), 'KiB')} KiB`, '16 KiB', v(s.idle_rss) <= 16, '');
  return rows;
}

/**
 * The check of the realistic Sluice target (`sluice-real`: Basic token on every request, IP-literal
 * target, audit on) against the targets of issue 16, whose floor is the net-only floor.
 */
export function checkIssue16(summary) {
  const s = summary['sluice-real']?.measures;
  if (!s) return [];
  const f = summary.netfloor?.measures;
  const q = summary.squid?.measures;
  const rows = [];
  const v = (st) => st?.median;
  const add = (target, value, bound, ok, note) => rows.push({ target, value, bound, met: Boolean(ok), note });
  const x = (a, b) => `${(a / b).toFixed(2)}× net floor`;
  const pct = (a, b) => `${((a / b - 1) * 100).toFixed(0)}%`;
  if (v(s.cpu_per_tunnel) && v(f?.cpu_per_tunnel)) add('CPU per tunnel ≤ 1.10× net floor', `${fmtNum(v(s.cpu_per_tunnel))} µs`, `${fmtNum(1.1 * v(f.cpu_per_tunnel))} µs`, v(s.cpu_per_tunnel) <= 1.1 * v(f.cpu_per_tunnel), x(v(s.cpu_per_tunnel), v(f.cpu_per_tunnel)));
  if (v(s.rate) && v(f?.rate)) add('new tunnels/s ≥ 0.9× net floor', fmtNum(v(s.rate)), fmtNum(0.9 * v(f.rate)), v(s.rate) >= 0.9 * v(f.rate), x(v(s.rate), v(f.rate)));
  if (v(s.rate) && v(q?.rate)) add('new tunnels/s ≥ Squid', fmtNum(v(s.rate)), fmtNum(v(q.rate)), v(s.rate) >= v(q.rate), pct(v(s.rate), v(q.rate)));
  if (v(s.latency_p50) && v(q?.latency_p50)) add('tunnel setup p50 ≤ Squid', `${fmtNum(v(s.latency_p50))} µs`, `${fmtNum(v(q.latency_p50))} µs`, v(s.latency_p50) <= v(q.latency_p50), pct(v(s.latency_p50), v(q.latency_p50)));
  if (v(s.latency_p50) && v(f?.latency_p50)) add('tunnel setup p50 ≤ 1.15× net floor', `${fmtNum(v(s.latency_p50))} µs`, `${fmtNum(1.15 * v(f.latency_p50))} µs`, v(s.latency_p50) <= 1.15 * v(f.latency_p50), x(v(s.latency_p50), v(f.latency_p50)));
  if (v(s.latency_p99) && v(q?.latency_p99)) add('tunnel setup p99 ≤ Squid', `${fmtNum(v(s.latency_p99))} µs`, `${fmtNum(v(q.latency_p99))} µs`, v(s.latency_p99) <= v(q.latency_p99), pct(v(s.latency_p99), v(q.latency_p99)));
  if (v(s.alloc_per_tunnel)) add('allocated per tunnel ≤ 22 kB', `${fmtNum(v(s.alloc_per_tunnel), 'kB')} kB`, '22 kB', v(s.alloc_per_tunnel) <= 22, f?.alloc_per_tunnel ? `net floor ${fmtNum(v(f.alloc_per_tunnel), 'kB')} kB` : '');
  if (v(s.gc_per_tunnel) && v(f?.gc_per_tunnel)) add('GC pause per tunnel ≤ 1.3× net floor', `${v(s.gc_per_tunnel).toFixed(1)} µs`, `${(1.3 * v(f.gc_per_tunnel)).toFixed(1)} µs`, v(s.gc_per_tunnel) <= 1.3 * v(f.gc_per_tunnel), x(v(s.gc_per_tunnel), v(f.gc_per_tunnel)));
  if (v(s.http) && v(q?.http)) add('plain HTTP req/s ≥ Squid', fmtNum(v(s.http)), fmtNum(v(q.http)), v(s.http) >= v(q.http), pct(v(s.http), v(q.http)));
  if (v(s.bulk) && v(f?.bulk)) add('bulk MiB/s ≥ 0.95× net floor', fmtNum(v(s.bulk), 'MiB/s'), fmtNum(0.95 * v(f.bulk), 'MiB/s'), v(s.bulk) >= 0.95 * v(f.bulk), x(v(s.bulk), v(f.bulk)));
  if (v(s.bulk_up) && v(f?.bulk_up)) add('bulk up MiB/s ≥ 0.95× net floor', fmtNum(v(s.bulk_up), 'MiB/s'), fmtNum(0.95 * v(f.bulk_up), 'MiB/s'), v(s.bulk_up) >= 0.95 * v(f.bulk_up), x(v(s.bulk_up), v(f.bulk_up)));
  if (v(s.bulk_up) && v(q?.bulk_up)) add('bulk up MiB/s ≥ Squid (issue 26)', fmtNum(v(s.bulk_up), 'MiB/s'), fmtNum(v(q.bulk_up), 'MiB/s'), v(s.bulk_up) >= v(q.bulk_up), pct(v(s.bulk_up), v(q.bulk_up)));
  if (v(s.bulk) && v(q?.bulk)) add('bulk down MiB/s ≥ Squid (issue 26)', fmtNum(v(s.bulk), 'MiB/s'), fmtNum(v(q.bulk), 'MiB/s'), v(s.bulk) >= v(q.bulk), pct(v(s.bulk), v(q.bulk)));
  if (v(s.idle_rss)) add('RSS per idle tunnel ≤ 16 KiB', `${fmtNum(v(s.idle_rss), 'KiB')} KiB`, '16 KiB', v(s.idle_rss) <= 16, '');
  return rows;
}

export function renderMarkdown(result) {
  const summary = result.summary ?? summarize(result);
  const targets = result.targets.filter((t) => summary[t]);
  const labels = targets.map((t) => TARGET_LABELS[t] ?? t);
  const lines = [];
  const m = result.machine;
  lines.push(`Machine: ${m.nproc} × ${m.model}, ${Math.round(m.memTotalKiB / 1024)} MiB, Linux ${m.kernel}; Node ${result.node}; commit \`${result.commit}\`${result.dirty ? ' (working tree modified)' : ''}; ${result.mode} mode, ${result.rounds} round(s), ${result.finishedAt}.`);
  lines.push(`Pinning: ${result.pinning}${result.nice ? `; nice ${result.nice}` : ''}. Load average before/after: ${result.loadavg.before.join(' ')} / ${result.loadavg.after.join(' ')}.`);
  if (result.versions) lines.push(`Peers: ${Object.entries(result.versions).map(([k, v]) => `${k} ${v}`).join('; ')}.`);
  lines.push('');
  // `--scenarios tls`: no target ran its rounds, only the TLS part
  if (result.runs.length === 0) return renderParts(result, lines);
  lines.push('Medians over rounds, (min–max) across rounds.');
  lines.push('');
  // a measure no target has (a result from before it existed) is left out
  const measures = MEASURES.filter((meas) => targets.some((t) => summary[t].measures[meas.key]));
  lines.push(`| measure | ${labels.join(' | ')} |`);
  lines.push(`|---|${targets.map(() => '---').join('|')}|`);
  for (const meas of measures) {
    lines.push(`| ${meas.label} | ${targets.map((t) => cell(summary[t].measures[meas.key], meas.unit)).join(' | ')} |`);
  }
  lines.push('');
  const perTunnel = measures.some((meas) => meas.key === 'cpu_per_tunnel');
  if (perTunnel || targets.includes('netfloor') || targets.includes('sluice-real')) {
    const notes = [];
    if (targets.includes('netfloor')) notes.push(`The net floor is \`bench/floor-net.mjs\` (\`net.createServer\`, the CONNECT head read up to the blank line, \`net.connect\`, pipes; no \`node:http\`). Its HTTP row is a minimal forward, not a full proxy: ${result.settings?.netfloorHttp ?? 'absolute-form rewritten to origin-form, one upstream connection per client connection, responses piped unparsed'}.`);
    if (targets.includes('sluice-real')) notes.push('"Sluice, IP literal" is Sluice as users run it: `Proxy-Authorization: Basic` on every CONNECT and request, the target `127.0.0.1:<port>` granted by `tcp://127.0.0.1:<port>` (`http://` for HTTP) and `allowAddressClasses: [loopback]`, audit to a file. "Sluice" dials the name `origin.bench` from `dns.hosts`.');
    const probed = measures.some((meas) => meas.key === 'gc_per_tunnel' || meas.key === 'alloc_per_tunnel');
    if (perTunnel) {
      notes.push(
        'Per-tunnel costs come from the new-tunnels scenario (32 concurrent), one value per round: CPU is the proxy\'s process-group user + system time over the tunnels completed (every target)' +
          (probed
            ? '; allocation and GC pause come from `bench/gc-probe.mjs` (a `v8.GCProfiler` preloaded with `node --import` into the Node targets only): JS-heap bytes allocated (the growth of the used heap between GCs; Buffers\' backing stores are not counted) and main-thread GC time, over the tunnels completed.'
            : '. No target carried the GC probe (`--gc-probe`), so there are no allocation or GC rows.'),
      );
    }
    for (const n of notes) lines.push(`- ${n}`);
    lines.push('');
  }
  const gcTargets = targets.filter((t) => summary[t].gcRate);
  if (gcTargets.length) {
    lines.push('GC in the new-tunnels scenario, medians over rounds: scavenges / mark-compacts per round, mean µs per scavenge, and what a scavenge keeps (left in the young generation + promoted; median per round, kB).');
    lines.push('');
    lines.push(`| | ${gcTargets.map((t) => TARGET_LABELS[t] ?? t).join(' | ')} |`);
    lines.push(`|---|${gcTargets.map(() => '---').join('|')}|`);
    const g = (t, k, d = 0) => {
      const st = summary[t].gcRate[k];
      return st ? st.median.toFixed(d) : '-';
    };
    lines.push(`| scavenges / mark-compacts | ${gcTargets.map((t) => `${g(t, 'scavenges')} / ${g(t, 'markCompacts')}`).join(' | ')} |`);
    lines.push(`| µs per scavenge | ${gcTargets.map((t) => g(t, 'scavengeUs')).join(' | ')} |`);
    lines.push(`| kept per scavenge, kB | ${gcTargets.map((t) => g(t, 'scavengeSurvivorsKB')).join(' | ')} |`);
    lines.push('');
  }
  const hasNet = Boolean(summary.netfloor);
  lines.push(`Ratios of the medians: to direct / to the Node floor${hasNet ? ' / to the net floor' : ''}. Below 1× is faster (or cheaper) for latency, RSS and the per-tunnel costs, slower for rates.`);
  lines.push('');
  lines.push(`| measure | ${labels.join(' | ')} |`);
  lines.push(`|---|${targets.map(() => '---').join('|')}|`);
  for (const meas of measures) {
    lines.push(`| ${meas.label} | ${targets.map((t) => {
      const st = summary[t].measures[meas.key];
      return `${ratio(st, summary.direct?.measures[meas.key])} / ${ratio(st, summary.floor?.measures[meas.key])}${hasNet ? ` / ${ratio(st, summary.netfloor?.measures[meas.key])}` : ''}`;
    }).join(' | ')} |`);
  }
  lines.push('');
  lines.push('CPU during each scenario, median % of one core: proxy / client (load generator) / origin. A client near 100% means the client, not the proxy, was the limit.');
  lines.push('');
  lines.push(`| scenario | ${labels.join(' | ')} |`);
  lines.push(`|---|${targets.map(() => '---').join('|')}|`);
  for (const sc of ['latency', 'rate', 'bulk', 'bulkup', 'http', 'idle']) {
    const f = (st) => (st ? Math.round(st.median).toString() : '-');
    lines.push(`| ${sc} | ${targets.map((t) => {
      const c = summary[t].cpu[sc];
      if (!c?.clientPct) return '-';
      return `${f(c.proxyPct)} / ${f(c.clientPct)} / ${f(c.originPct)}`;
    }).join(' | ')} |`);
  }
  if (targets.some((t) => summary[t].cpu.latency?.othersPct)) {
    lines.push('');
    lines.push('Interference: CPU 0 (the proxy\'s core) busy with anything but the proxy (other processes, kernel work), median (max) % over rounds; hypervisor steal in brackets when above 1%. High values mean a noisy sample.');
    lines.push('');
    lines.push(`| scenario | ${labels.join(' | ')} |`);
    lines.push(`|---|${targets.map(() => '---').join('|')}|`);
    for (const sc of ['latency', 'rate', 'bulk', 'bulkup', 'http']) {
      lines.push(`| ${sc} | ${targets.map((t) => {
        const c = summary[t].cpu[sc];
        if (!c?.othersPct) return '-';
        const steal = c.stealPct && c.stealPct.median > 1 ? ` [steal ${Math.round(c.stealPct.median)}]` : '';
        return `${Math.round(c.othersPct.median)} (${Math.round(c.othersPct.max)})${steal}`;
      }).join(' | ')} |`);
    }
  }
  const errorRows = [];
  for (const t of targets) {
    for (const run of result.runs.filter((r) => r.target === t)) {
      for (const [sc, s] of Object.entries(run.scenarios ?? {})) {
        const errs = Object.entries(s.errors ?? {}).filter(([, n]) => n > 0);
        const sts = Object.entries(s.statuses ?? {});
        if (errs.length || sts.length || s.failed) {
          errorRows.push(`| ${TARGET_LABELS[t] ?? t} | ${run.round} | ${sc} | ${errs.map(([k, n]) => `${k} ${n}`).join(', ') || '-'} | ${sts.map(([k, n]) => `${k}×${n}`).join(', ') || '-'} |`);
        }
      }
      for (const e of run.failures ?? []) errorRows.push(`| ${TARGET_LABELS[t] ?? t} | ${run.round} | ${e.scenario ?? '-'} | ${e.message.replace(/\|/g, '\\|').replace(/\n/g, ' ')} | - |`);
    }
  }
  lines.push('');
  if (errorRows.length) {
    lines.push('Client-side errors and non-200 answers (a measured run with errors is still counted):');
    lines.push('');
    lines.push('| target | round | scenario | errors | statuses |');
    lines.push('|---|---|---|---|---|');
    lines.push(...errorRows);
  } else {
    lines.push('No client-side errors and no non-200 answers in any round.');
  }
  const checks = checkTargets(summary);
  if (checks.length) {
    lines.push('');
    lines.push('Sluice against the targets of issue 6 (medians):');
    lines.push('');
    lines.push('| target | Sluice | bound | met | |');
    lines.push('|---|---|---|---|---|');
    for (const c of checks) lines.push(`| ${c.target} | ${c.value} | ${c.bound} | ${c.met ? 'yes' : '**no**'} | ${c.note} |`);
  }
  const checks16 = checkIssue16(summary);
  if (checks16.length) {
    lines.push('');
    lines.push('Sluice as users run it (Basic token on every request, IP-literal target, audit on) against the targets of issue 16, whose floor is the net floor (medians):');
    lines.push('');
    lines.push('| target | Sluice, IP literal | bound | met | |');
    lines.push('|---|---|---|---|---|');
    for (const c of checks16) lines.push(`| ${c.target} | ${c.value} | ${c.bound} | ${c.met ? 'yes' : '**no**'} | ${c.note} |`);
  }
  const conns = targets
    .map((t) => [t, stats(result.runs.filter((r) => r.target === t && r.scenarios?.http).map((r) => r.scenarios.http.connections))])
    .filter(([, st]) => st);
  if (conns.length) {
    lines.push('');
    lines.push(`Keep-alive: client connections opened during the HTTP scenario (median; 32 means every connection was kept alive): ${conns.map(([t, st]) => `${TARGET_LABELS[t] ?? t} ${Math.round(st.median).toLocaleString('en-US')}`).join(', ')}.`);
  }
  const idle = result.runs.filter((r) => r.scenarios?.idle).map((r) => ({ t: r.target, s: r.scenarios.idle }));
  if (idle.length) {
    lines.push('');
    lines.push(`Idle tunnels: ${result.settings.idleCount.toLocaleString('en-US')} requested per round (${result.settings.idleNote}). Held (established and still open at the end), per target: ${targets.filter((t) => t !== 'direct').map((t) => {
      const mine = idle.filter((x) => x.t === t);
      return `${TARGET_LABELS[t] ?? t} ${mine.map((x) => x.s.aliveAtEnd).join('/')}`;
    }).join('; ')}.`);
  }
  // one audit summary per Sluice target (results before issue 16 have only `sluiceAudit`, for `sluice`)
  const audits = result.sluiceAudits ?? (result.sluiceAudit ? { sluice: result.sluiceAudit } : {});
  for (const [t, a] of Object.entries(audits)) {
    const name = TARGET_LABELS[t] ?? t;
    lines.push('');
    lines.push(`${name} audit (all rounds): ${a.lines.toLocaleString('en-US')} records; decisions ${JSON.stringify(a.decisions)}; closes ${JSON.stringify(a.closes)}; operational log lines at warn or above: ${a.warnLines}.`);
    const tm = a.timingsMedianUs ?? {};
    const scs = ['latency', 'rate', 'bulk', 'bulkup', 'http'].filter((sc) => tm[sc]);
    if (scs.length) {
      const fields = ['identifyUs', 'authorizeUs', 'routeUs', 'resolveUs', 'dialUs', 'firstByteUs'].filter((f) => scs.some((sc) => tm[sc][f] !== undefined));
      lines.push('');
      lines.push(`Where ${name}'s time went, from its own audit records: median µs from the request head to the end of each stage (decision \`timings\`; \`firstByteUs\` from the close record), per scenario, over the records written while that scenario ran.`);
      lines.push('');
      lines.push(`| scenario | ${fields.map((f) => f.replace(/Us$/, '')).join(' | ')} |`);
      lines.push(`|---|${fields.map(() => '---').join('|')}|`);
      for (const sc of scs) lines.push(`| ${sc} | ${fields.map((f) => (tm[sc][f] === null || tm[sc][f] === undefined ? '-' : Math.round(tm[sc][f]).toLocaleString('en-US'))).join(' | ')} |`);
    }
  }
  return renderParts(result, lines);
}

/** The parts measured once per run, after the rounds (TLS tunnel setup, `sluice run` start-up), and the notes. */
function renderParts(result, lines) {
  if (result.tlsSetup) {
    lines.push('');
    lines.push(renderTlsSetup(result.tlsSetup));
  }
  if (result.askRelease?.markdown) {
    // bench/ask-release.mjs's own report, one heading level down.
    lines.push('');
    lines.push(result.askRelease.markdown.replace(/^(#+) /gm, '#$1 '));
  }
  if (result.sandboxStart) {
    lines.push('');
    lines.push('Start-up of a short confined command (`sluice run -- true`, issue 12), interleaved with its floors: wall time per command, and CPU of its whole process tree.');
    lines.push('');
    lines.push(renderSandboxStart(result.sandboxStart));
  }
  if (result.notes?.length) {
    lines.push('');
    for (const n of result.notes) lines.push(`- ${n}`);
  }
  return lines.join('\n') + '\n';
}
