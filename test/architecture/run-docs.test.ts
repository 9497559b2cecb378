// Checks docs/sluice-run.md against the CLI in both directions: every option `sluice run --help` lists
// is in the options table, and the table names no option the CLI lacks (CONTRIBUTING.md,
// "Docs checked by tests").
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, readDoc, readTables } from './markdown.js';

function helpOptions(): string[] {
  const help = spawnSync(process.execPath, [path.join(ROOT, 'bin/sluice.js'), 'run', '--help'], { encoding: 'utf8', timeout: 20_000 });
  expect(help.status, help.stderr).toBe(0);
  return [...help.stdout.matchAll(/^\s+(?:-\w, )?(--[a-z-]+)/gm)].map((m) => m[1] ?? '').filter((o) => o !== '--help');
}

describe('docs/sluice-run.md', () => {
  it('documents exactly the options of sluice run', () => {
    const table = readTables(readDoc('docs/sluice-run.md')).find((t) => t.header[0] === 'option');
    expect(table, 'an options table').toBeDefined();
    const documented = new Set((table?.rows ?? []).flatMap((row) => [...(row[0] ?? '').matchAll(/`(--[a-z-]+)/g)].map((m) => m[1] ?? '')));
    const options = helpOptions();
    expect(options.length).toBeGreaterThan(10);
    expect([...documented].sort()).toEqual([...new Set(options)].sort());
  });
});
