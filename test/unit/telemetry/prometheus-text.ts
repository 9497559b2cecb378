// A strict reader of the Prometheus text exposition format 0.0.4, so tests can check what a scrape
// would see without a dependency. It throws on any line a Prometheus server would reject.
// https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format

export type FamilyType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  type: FamilyType;
  help: string | null;
  readonly samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES: readonly string[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];
const SUFFIXES: Readonly<Record<FamilyType, readonly string[]>> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

/** Go's strconv.ParseFloat, as Prometheus uses it: NaN and [+-]Inf(inity) in any case (prom-client writes "Nan"). */
function parseValue(text: string, line: string): number {
  const special = /^([+-]?)(inf|infinity|nan)$/i.exec(text);
  if (special !== null) {
    if ((special[2] ?? '').toLowerCase() === 'nan') return NaN;
    return special[1] === '-' ? -Infinity : Infinity;
  }
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw new Error(`bad sample value "${text}" in: ${line}`);
  return Number(text);
}

/** Reads `{a="x",b="y\"z"}` starting at `text[0] === '{'`; returns the labels and the rest of the line. */
function parseLabels(text: string, line: string): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (text[i] === ' ') i += 1;
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) };
    const name = /^[^=\s]+/.exec(text.slice(i))?.[0] ?? '';
    if (!LABEL_NAME.test(name)) throw new Error(`bad label name "${name}" in: ${line}`);
    if (Object.hasOwn(labels, name)) throw new Error(`label "${name}" repeated in: ${line}`);
    i += name.length;
    if (text[i] !== '=' || text[i + 1] !== '"') throw new Error(`expected ="…" after label "${name}" in: ${line}`);
    i += 2;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined || c === '\n') throw new Error(`unterminated label value in: ${line}`);
      if (c === '"') break;
      if (c === '\\') {
        const next = text[i + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`bad escape \\${next ?? ''} in: ${line}`);
        i += 2;
      } else {
        value += c;
        i += 1;
      }
    }
    labels[name] = value;
    i += 1;
    if (text[i] === ',') i += 1;
    else if (text[i] !== '}') throw new Error(`expected , or } after label "${name}" in: ${line}`);
  }
}

function familyOf(families: Map<string, Family>, sampleName: string): Family {
  for (const family of families.values()) {
    for (const suffix of SUFFIXES[family.type]) if (family.name + suffix === sampleName) return family;
  }
  const untyped: Family = { name: sampleName, type: 'untyped', help: null, samples: [] };
  families.set(sampleName, untyped);
  return untyped;
}

export function parsePrometheusText(body: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const series = new Set<string>();
  const declare = (name: string, line: string): Family => {
    if (!METRIC_NAME.test(name)) throw new Error(`bad metric name "${name}" in: ${line}`);
    let family = families.get(name);
    if (family === undefined) {
      family = { name, type: 'untyped', help: null, samples: [] };
      families.set(name, family);
    }
    return family;
  };
  for (const line of body.split('\n')) {
    if (line.trim() === '') continue;
    const help = /^# HELP (\S+) (.*)$/.exec(line);
    if (help !== null) {
      const family = declare(help[1] ?? '', line);
      if (family.help !== null) throw new Error(`second HELP for ${family.name}`);
      family.help = (help[2] ?? '').replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
      continue;
    }
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type !== null) {
      const family = declare(type[1] ?? '', line);
      if (!TYPES.includes(type[2] ?? '')) throw new Error(`unknown type in: ${line}`);
      if (family.samples.length > 0) throw new Error(`TYPE after samples for ${family.name}`);
      family.type = type[2] as FamilyType;
      continue;
    }
    if (line.startsWith('#')) continue;
    const name = /^[^\s{]+/.exec(line)?.[0] ?? '';
    if (!METRIC_NAME.test(name)) throw new Error(`bad metric name "${name}" in: ${line}`);
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, line));
    const fields = rest.trim().split(/\s+/);
    if (fields.length < 1 || fields.length > 2 || !rest.startsWith(' ')) throw new Error(`expected " value [timestamp]" in: ${line}`);
    const value = parseValue(fields[0] ?? '', line);
    const family = familyOf(families, name);
    if (family.type === 'histogram' && name.endsWith('_bucket') && labels['le'] === undefined) throw new Error(`bucket without le: ${line}`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (series.has(key)) throw new Error(`duplicate series: ${line}`);
    series.add(key);
    family.samples.push({ name, labels, value });
  }
  return families;
}
