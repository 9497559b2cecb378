// Checks the module table of docs/architecture.md against src/ and against the layer table (layers.ts):
// every module under src/ (a folder, or a single file at src/'s root) has a row and no row names a module
// that does not exist; each row's layer is the one layers.test.ts enforces; and a row whose files cell
// lists .ts files lists exactly the module's .ts files (index.ts excepted; `dir/*.ts` stands for every
// .ts file in dir/). Regexes over the markdown only, no dependency.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LAYERS } from './layers.js';
import { ROOT, codeSpan, readDoc, readTables } from './markdown.js';

const SRC = path.join(ROOT, 'src');

interface ModuleRow {
  /** The module as layers.ts names it: `core`, `app`, `sandbox-init`. */
  readonly module: string;
  /** The first cell as written, e.g. `core/` or `app.ts`. */
  readonly cell: string;
  readonly layer: string;
  readonly files: readonly string[];
}

/** The code spans of a cell, in order: "`a.ts`, `b.ts`" → ["a.ts", "b.ts"]. */
function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
}

function moduleName(cell: string): string {
  return cell.replace(/\/$/, '').replace(/\.ts$/, '');
}

const table = readTables(readDoc('docs/architecture.md')).find((t) => t.header[0] === 'module' && t.header[1] === 'layer');
const rows: ModuleRow[] = (table?.rows ?? []).map((row) => {
  const cell = codeSpan(row[0] ?? '') ?? (row[0] ?? '');
  return { module: moduleName(cell), cell, layer: (row[1] ?? '').trim(), files: codeSpans(row[3] ?? '') };
});

/** What src/ holds: each folder is a module, each .ts file at the root a single-file module. */
const entries = readdirSync(SRC, { withFileTypes: true });
const folders = entries.filter((e) => e.isDirectory()).map((e) => `${e.name}/`).sort();
const singleFiles = entries.filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')).map((e) => e.name).sort();

/** The .ts files of a folder module, relative to it, index.ts excepted. */
function moduleFiles(folder: string): string[] {
  return readdirSync(path.join(SRC, folder), { recursive: true, encoding: 'utf8' })
    .map((entry) => entry.split(path.sep).join('/'))
    .filter((rel) => rel.endsWith('.ts') && !rel.endsWith('.d.ts') && rel !== 'index.ts')
    .sort();
}

/** The files a listed entry stands for: itself, or every .ts file directly in `dir/` for `dir/*.ts`. */
function expand(entry: string, actual: readonly string[]): string[] {
  const glob = /^(.*\/)\*\.ts$/.exec(entry);
  if (glob === null) return [entry];
  const dir = glob[1] ?? '';
  return actual.filter((f) => f.startsWith(dir) && !f.slice(dir.length).includes('/'));
}

describe('docs/architecture.md: the module table', () => {
  it('is found, and src/ has modules', () => {
    expect(table, 'docs/architecture.md has a table whose columns start with module | layer').toBeDefined();
    expect(rows.length).toBeGreaterThan(10);
    expect(folders.length).toBeGreaterThan(10);
    expect(singleFiles).toContain('main.ts');
  });

  it('has a row for every folder under src/, and none for a folder that does not exist', () => {
    const documented = rows.map((r) => r.cell).filter((c) => c.endsWith('/')).sort();
    expect({ missing: folders.filter((f) => !documented.includes(f)), extra: documented.filter((d) => !folders.includes(d)) }).toEqual({ missing: [], extra: [] });
  });

  it('has a row for every single-file module at src/ (app.ts, main.ts, sandbox-init.ts), and no other', () => {
    const documented = rows.map((r) => r.cell).filter((c) => !c.endsWith('/')).sort();
    expect({ missing: singleFiles.filter((f) => !documented.includes(f)), extra: documented.filter((d) => !singleFiles.includes(d)) }).toEqual({ missing: [], extra: [] });
  });

  it('gives each module the layer of the LAYERS table that layers.test.ts enforces', () => {
    const documented = Object.fromEntries(rows.map((r) => [r.module, Number(r.layer)]));
    expect(documented).toEqual(LAYERS);
  });

  it('lists exactly the .ts files of each module whose files cell lists .ts files (index.ts excepted)', () => {
    const checked = rows.filter((r) => r.cell.endsWith('/') && r.files.some((f) => f.endsWith('.ts')));
    expect(checked.length).toBeGreaterThan(10);
    const mismatches = checked.flatMap((r) => {
      const actual = moduleFiles(r.cell);
      const listed = r.files.filter((f) => f.endsWith('.ts'));
      const covered = new Set(listed.flatMap((f) => expand(f, actual)));
      const missing = actual.filter((f) => !covered.has(f));
      const extra = listed.filter((f) => expand(f, actual).length === 0 || expand(f, actual).some((x) => !actual.includes(x)));
      return missing.length === 0 && extra.length === 0 ? [] : [`${r.cell} missing [${missing.join(', ')}] extra [${extra.join(', ')}]`];
    });
    expect(mismatches).toEqual([]);
  });
});
