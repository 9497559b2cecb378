// Comments and docs cite documents in this repository, never files outside it (CONTRIBUTING.md,
// "Citations"). Scans src/**/*.ts and test/**/*.ts (comments for paths, all text for citations),
// bench/*.mjs, docs/**/*.md, README.md and CONTRIBUTING.md, and reports file:line when:
// - a path `docs/…`, `bench/…`, `test/…` or `src/…` (or a relative markdown link) names nothing that exists;
// - a text cites the product brief, the style guide, the design seed or a review folder, which are not
//   in the repository, or a path outside it;
// - "principle AN" names no `## AN:` heading of docs/principles.md;
// - "scenario N" names no row of docs/scenarios.md;
// - "review 2026-12 finding N" names no `## Finding N` section of docs/reviews/security-2026-12.md, or
//   "review 2026-12-04 finding N" none of docs/reviews/security-2026-12-04.md, or
//   "UX review 2026-12-04 finding N" none of docs/reviews/ux-2026-12-04.md.
// Regexes only, no dependency. Each kind of citation must be found a minimum number of times, so that a
// broken pattern cannot make the test pass by finding nothing.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, readDoc, readTables } from './markdown.js';

const SELF = 'test/architecture/citations.test.ts';

/** Folders never scanned: installed, built, generated or tool output. */
/** Outputs the build and the bench make (git-ignored): named in docs, absent from a clean clone such as CI's. */
const GENERATED = [/^dist(\/|$)/, /^bench\/\.build(\/|$)/, /^bench\/results\/.+/, /^state(\/|$)/, /^reports(\/|$)/];
const EXCLUDED = [/(^|\/)node_modules\//, /^dist\//, /^bench\/\.build\//, /^bench\/results\//, /^reports\//, /(^|\/)\.stryker-tmp\//];

function listFiles(dir: string, keep: (rel: string) => boolean, recursive = true): string[] {
  if (!existsSync(path.join(ROOT, dir))) return [];
  return readdirSync(path.join(ROOT, dir), { recursive, encoding: 'utf8' })
    .map((entry) => `${dir}/${entry.split(path.sep).join('/')}`)
    .filter((rel) => keep(rel) && !EXCLUDED.some((re) => re.test(rel)) && rel !== SELF && !rel.endsWith('.vitest-results.json'))
    .sort();
}

const scanned: string[] = [
  ...listFiles('src', (f) => f.endsWith('.ts')),
  ...listFiles('test', (f) => f.endsWith('.ts')),
  ...listFiles('bench', (f) => f.endsWith('.mjs'), false),
  ...listFiles('docs', (f) => f.endsWith('.md')),
  'README.md',
  'CONTRIBUTING.md',
];

interface Scanned {
  readonly rel: string;
  /** Every line; for code files, comment markers are removed from comment lines. Lines keep their numbers. */
  readonly text: string;
  /** Only what paths are checked in: comments of code files, the whole of a markdown file. */
  readonly prose: string;
}

/** Splits code into comment text and the rest, line by line (// and /* … *\/ comments; `://` is not one). */
function readCode(source: string): { text: string; prose: string } {
  let inBlock = false;
  const text: string[] = [];
  const prose: string[] = [];
  for (const line of source.split('\n')) {
    const trimmed = line.trim();
    if (inBlock || trimmed.startsWith('/*')) {
      inBlock = !trimmed.includes('*/');
      const inner = trimmed.replace(/^\/\*+/, '').replace(/\*+\/.*$/, '').replace(/^\*+/, '');
      text.push(inner);
      prose.push(inner);
    } else if (trimmed.startsWith('//')) {
      const inner = trimmed.replace(/^\/\/+/, '');
      text.push(inner);
      prose.push(inner);
    } else {
      const trailing = /(?<!:)\/\/(.*)$/.exec(line);
      text.push(line);
      prose.push(trailing?.[1] ?? '');
    }
  }
  return { text: text.join('\n'), prose: prose.join('\n') };
}

const files: Scanned[] = scanned.map((rel) => {
  const source = readFileSync(path.join(ROOT, rel), 'utf8');
  if (rel.endsWith('.md')) return { rel, text: source, prose: source };
  return { rel, ...readCode(source) };
});

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i += 1) if (text.charCodeAt(i) === 10) line += 1;
  return line;
}

interface Hit {
  readonly where: string;
  readonly match: string;
  readonly ids: readonly number[];
}

/** "1-5, 9 and 12" → [1, 2, 3, 4, 5, 9, 12]. */
function expandList(list: string): number[] {
  const ids: number[] = [];
  for (const part of list.split(/\s*(?:,|\band\b)\s*/)) {
    const range = /^(\d+)\s*[-–]\s*(\d+)$/.exec(part.trim());
    if (range !== null) for (let n = Number(range[1]); n <= Number(range[2]); n += 1) ids.push(n);
    else if (/^\d+$/.test(part.trim())) ids.push(Number(part.trim()));
  }
  return ids;
}

function hits(pattern: RegExp, pick: (m: RegExpMatchArray) => number[], source: 'text' | 'prose' = 'text'): Hit[] {
  return files.flatMap((f) =>
    [...f[source].matchAll(pattern)].map((m) => ({
      where: `${f.rel}:${lineOf(f[source], m.index ?? 0)}`,
      match: m[0].replace(/\s+/g, ' '),
      ids: pick(m),
    })),
  );
}

// ---- what the repository documents ----

const principleIds = new Set(
  [...readDoc('docs/principles.md').matchAll(/^##\s+A(\d)\b/gm)].map((m) => Number(m[1])),
);
const scenarioIds = new Set(
  (readTables(readDoc('docs/scenarios.md')).find((t) => t.header[0] === '#')?.rows ?? []).map((row) => Number(row[0])),
);
const findingIds = new Set(
  [...readDoc('docs/reviews/security-2026-12.md').matchAll(/^##\s+Finding\s+(\d+)\b/gm)].map((m) => Number(m[1])),
);

const secondFindingIds = new Set(
  [...readDoc('docs/reviews/security-2026-12-04.md').matchAll(/^##\s+Finding\s+(\d+)\b/gm)].map((m) => Number(m[1])),
);

const uxFindingIds = new Set(
  [...readDoc('docs/reviews/ux-2026-12-04.md').matchAll(/^##\s+Finding\s+(\d+)\b/gm)].map((m) => Number(m[1])),
);

// ---- the citations ----

const LIST = String.raw`\d+(?:\s*(?:[-–]|,|\band\b)\s*\d+)*`;
const principleHits = hits(/\b(?:principles?|seed)\s+(A\d(?:\s*(?:,|\band\b|\/)\s*A\d)*)/gi, (m) =>
  [...(m[1] ?? '').matchAll(/A(\d)/g)].map((a) => Number(a[1])),
);
const scenarioHits = hits(new RegExp(String.raw`\bscenarios?\s+(${LIST})`, 'gi'), (m) => expandList(m[1] ?? ''));
const findingHits = hits(new RegExp(String.raw`\breview\s+2026-12,?\s+findings?\s+(${LIST})`, 'gi'), (m) => expandList(m[1] ?? ''));
const secondFindingHits = hits(new RegExp(String.raw`(?<!\bUX\s+)\breview\s+2026-12-04\s+findings?\s+(${LIST})`, 'gi'), (m) => expandList(m[1] ?? ''));
const uxFindingHits = hits(new RegExp(String.raw`\bUX\s+review\s+2026-12-04\s+findings?\s+(${LIST})`, 'gi'), (m) => expandList(m[1] ?? ''));
/** Other spellings of a UX citation, which neither pattern above would check. */
const looseUxHits = hits(/\bUX\s+review\s+(?:of\s+)?2026-12-04,\s*findings?\b|\bUX\s+review\s+of\s+2026-12-04\b/gi, () => []);

/** Documents that are not in this repository, and the forms that cite them. */
const OUTSIDE: readonly (readonly [RegExp, string])[] = [
  [/\bBRIEF\b/g, 'the product brief is not in this repository: cite docs/scenarios.md, docs/routes.md or the doc that states it'],
  [/\bthe brief\b|\bbrief's/gi, 'the product brief is not in this repository: cite the repository doc that states it'],
  [/\bSTYLE\s*§/g, 'the style guide is not in this repository: cite docs/architecture.md or CONTRIBUTING.md'],
  [/\bseed\s+A\d/gi, 'cite "principle AN (docs/principles.md)", not the seed'],
  [/(?<![\w-])shared\//g, 'shared/ is outside this repository'],
  [/\bseeds\/|execution-authority\.txt|network-and-tool-policy/g, 'the design seeds are not in this repository: cite docs/principles.md'],
  [/\/work\//g, 'an absolute path outside this repository'],
  [/\brt\d-[\w-]+\.(?:sh|yaml)\b/g, 'a script of the review, which is not in this repository: cite docs/reviews/security-2026-12.md'],
];

const outsideHits = OUTSIDE.flatMap(([pattern, why]) => hits(pattern, () => []).map((h) => `${h.where}: "${h.match}": ${why}`));

// ---- paths ----

interface PathRef {
  readonly where: string;
  readonly target: string;
  /** The path from the repository root, or null when it leaves the repository. */
  readonly resolved: string | null;
}

const ROOTED = /(?<![\w./@-])((?:docs|bench|test|src)\/[^\s`'"()[\]<>,;|]*)/g;
const LINK = /\]\(([^)\s]+)\)/g;

function cleanPath(raw: string): string | null {
  if (/[*{}$<>]/.test(raw)) return null; // a glob or a template, not a file
  return raw.replace(/[#?].*$/, '').replace(/:\d+(?:-\d+)?$/, '').replace(/[.:]+$/, '');
}

function inRepo(resolved: string): string | null {
  return resolved.startsWith('..') || path.isAbsolute(resolved) ? null : resolved;
}

const pathRefs: PathRef[] = files.flatMap((f) => {
  const refs: PathRef[] = [];
  for (const m of f.prose.matchAll(ROOTED)) {
    const target = cleanPath(m[1] ?? '');
    if (target !== null && target !== '') refs.push({ where: `${f.rel}:${lineOf(f.prose, m.index ?? 0)}`, target, resolved: target });
  }
  if (f.rel.endsWith('.md')) {
    // A link shown as code (`[a](b.md)`) is an example, not a link.
    const outsideCode = f.prose.replace(/`[^`\n]*`/g, (span) => ' '.repeat(span.length));
    for (const m of outsideCode.matchAll(LINK)) {
      const raw = m[1] ?? '';
      if (/^[a-z]+:/i.test(raw) || raw.startsWith('#')) continue;
      const target = cleanPath(raw);
      if (target === null || target === '') continue;
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(f.rel), target));
      refs.push({ where: `${f.rel}:${lineOf(f.prose, m.index ?? 0)}`, target, resolved: inRepo(resolved) });
    }
  }
  return refs;
});

// ---- the tests ----

describe('citations resolve inside the repository (CONTRIBUTING.md, "Citations")', () => {
  it('scans the sources, tests, benchmarks and docs, and finds citations of every kind', () => {
    expect(files.length).toBeGreaterThan(150);
    expect(files.some((f) => f.rel === 'docs/architecture.md')).toBe(true);
    expect(files.some((f) => f.rel.startsWith('bench/'))).toBe(true);
    expect(principleIds.size, 'docs/principles.md has a ## AN heading for A1-A9').toBe(9);
    expect(scenarioIds.size, 'docs/scenarios.md has a row for scenarios 1-7').toBe(7);
    expect(findingIds.size, 'docs/reviews/security-2026-12.md has a ## Finding N section for findings 1-15').toBe(15);
    expect(principleHits.length).toBeGreaterThanOrEqual(20);
    expect(scenarioHits.length).toBeGreaterThanOrEqual(8);
    expect(findingHits.length).toBeGreaterThanOrEqual(40);
    expect(pathRefs.length).toBeGreaterThanOrEqual(200);
    expect(pathRefs.filter((r) => r.where.endsWith('.md') === false && r.where.startsWith('src/')).length).toBeGreaterThan(0);
  });

  it('cites nothing outside the repository (the brief, the style guide, the seed, shared/, review scripts)', () => {
    expect(outsideHits).toEqual([]);
  });

  it('names only paths that exist, inside the repository', () => {
    const broken = pathRefs
      .filter((r) => r.resolved === null || (!existsSync(path.join(ROOT, r.resolved)) && !GENERATED.some((re) => re.test(r.resolved ?? ''))))
      .map((r) => `${r.where}: ${r.target}${r.resolved === null ? ' (outside the repository)' : ' does not exist'}`);
    expect(broken).toEqual([]);
  });

  it('cites only principles that docs/principles.md states (## AN: …)', () => {
    const unknown = principleHits.filter((h) => h.ids.length === 0 || h.ids.some((id) => !principleIds.has(id))).map((h) => `${h.where}: "${h.match}"`);
    expect(unknown).toEqual([]);
  });

  it('cites only scenarios that docs/scenarios.md lists', () => {
    const unknown = scenarioHits.filter((h) => h.ids.length === 0 || h.ids.some((id) => !scenarioIds.has(id))).map((h) => `${h.where}: "${h.match}"`);
    expect(unknown).toEqual([]);
  });

  it('cites only findings of review 2026-12-04 that docs/reviews/security-2026-12-04.md has', () => {
    expect(secondFindingIds.size, 'docs/reviews/security-2026-12-04.md has a ## Finding N section for findings 1-10').toBe(10);
    expect(secondFindingHits.length, 'the code cites the second review somewhere').toBeGreaterThan(5);
    const unknown = secondFindingHits.filter((h) => h.ids.length === 0 || h.ids.some((id) => !secondFindingIds.has(id))).map((h) => `${h.where}: "${h.match}"`);
    expect(unknown).toEqual([]);
  });

  it('cites only findings of UX review 2026-12-04 that docs/reviews/ux-2026-12-04.md has, in that one form', () => {
    expect(uxFindingIds.size, 'docs/reviews/ux-2026-12-04.md has a ## Finding N section for findings 1-15').toBe(15);
    expect(uxFindingHits.length, 'the code cites the UX review somewhere').toBeGreaterThan(5);
    const unknown = uxFindingHits.filter((h) => h.ids.length === 0 || h.ids.some((id) => !uxFindingIds.has(id))).map((h) => `${h.where}: "${h.match}"`);
    expect(unknown).toEqual([]);
    expect(looseUxHits.map((h) => `${h.where}: "${h.match}" (write "UX review 2026-12-04 finding N")`)).toEqual([]);
  });

  it('cites only findings of review 2026-12 that docs/reviews/security-2026-12.md has', () => {
    const unknown = findingHits.filter((h) => h.ids.length === 0 || h.ids.some((id) => !findingIds.has(id))).map((h) => `${h.where}: "${h.match}"`);
    expect(unknown).toEqual([]);
  });
});
