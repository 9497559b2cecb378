// docs/metrics.md must match the metric registry in both directions (the pattern of
// test/architecture/reason-codes.test.ts): every MetricSpecs name documented once with its type, labels
// and help, no documented metric the code does not register, and the process-metrics table equal to
// what prom-client's default metrics export on this platform.
import { describe, expect, it } from 'vitest';
import { MetricSpecs, type MetricName } from '../../../src/telemetry/index.js';
import { Metrics } from '../../../src/telemetry/metrics.js';
import { codeSpan, readDoc, readTables, type MarkdownTable } from '../../architecture/markdown.js';
import { parsePrometheusText } from './prometheus-text.js';

const DOC = 'docs/metrics.md';
const tables = readTables(readDoc(DOC));

function tableUnder(heading: string): MarkdownTable {
  const table = tables.find((t) => t.heading === heading);
  if (table === undefined) throw new Error(`${DOC} has no table under the heading "${heading}"`);
  return table;
}

function rowsByName(table: MarkdownTable): { rows: Map<string, readonly string[]>; duplicates: string[] } {
  const rows = new Map<string, readonly string[]>();
  const duplicates: string[] = [];
  for (const row of table.rows) {
    const name = codeSpan(row[0] ?? '');
    if (name === null) throw new Error(`${DOC} "${table.heading}": first cell is not a \`code\`: ${row.join(' | ')}`);
    if (rows.has(name)) duplicates.push(name);
    rows.set(name, row);
  }
  return { rows, duplicates };
}

/** "`reason`, `request`" → ["reason", "request"]; "—" → []. */
function labelsIn(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
}

const HEADER = ['metric', 'type', 'labels', 'meaning'];

describe('docs/metrics.md: Sluice metrics', () => {
  const table = tableUnder('Sluice metrics');
  const { rows, duplicates } = rowsByName(table);

  it('has the columns metric, type, labels, meaning', () => {
    expect(table.header).toEqual(HEADER);
  });

  it('documents each metric once', () => {
    expect(duplicates).toEqual([]);
  });

  it('documents every name in names.ts', () => {
    expect(Object.keys(MetricSpecs).filter((name) => !rows.has(name)), `metrics missing from ${DOC}`).toEqual([]);
  });

  it('documents no metric that names.ts does not declare', () => {
    expect([...rows.keys()].filter((name) => !Object.hasOwn(MetricSpecs, name)), `metrics in ${DOC} that names.ts does not declare`).toEqual([]);
  });

  it.each(Object.keys(MetricSpecs) as MetricName[])('documents %s with its type, labels and help', (name) => {
    const spec = MetricSpecs[name];
    const row = rows.get(name);
    expect(row, `${name} is not documented`).toBeDefined();
    expect(row?.[1]).toBe(spec.type);
    expect(labelsIn(row?.[2] ?? '')).toEqual([...spec.labelNames]);
    expect(row?.[3]).toContain(spec.help);
  });
});

describe('docs/metrics.md: process metrics', () => {
  const table = tableUnder('Process metrics');
  const { rows, duplicates } = rowsByName(table);
  const linuxOnly = new Set([...rows].filter(([, row]) => (row[3] ?? '').includes('Linux only')).map(([name]) => name));

  async function exported(): Promise<Map<string, string>> {
    const families = parsePrometheusText((await new Metrics().render()).body);
    return new Map([...families.values()].filter((f) => !f.name.startsWith('sluice_')).map((f) => [f.name, f.type]));
  }

  it('has the columns metric, type, labels, meaning, and each metric once', () => {
    expect(table.header).toEqual(HEADER);
    expect(duplicates).toEqual([]);
  });

  it('documents every default metric prom-client exports, with its type', async () => {
    const documented = new Map([...rows].map(([name, row]) => [name, row[1] ?? '']));
    const undocumented = [...(await exported())].filter(([name, type]) => documented.get(name) !== type);
    expect(undocumented, `exported but not documented (or with another type) in ${DOC}`).toEqual([]);
  });

  it('documents no metric that is not exported (Linux-only rows excepted off Linux)', async () => {
    const names = await exported();
    const platform = process.platform;
    const extra = [...rows.keys()].filter((name) => !names.has(name) && !(platform !== 'linux' && linuxOnly.has(name)));
    expect(extra, `documented in ${DOC} but not exported`).toEqual([]);
  });
});
