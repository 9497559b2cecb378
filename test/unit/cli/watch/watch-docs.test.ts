// Checks docs/supervising.md against `sluice watch --help` (node bin/sluice.js, built dist/) in both
// directions: every option the CLI lists is in the options table, and the table names no option the
// CLI lacks; and the prompt the doc shows is the prompt the CLI prints.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, readDoc, readTables } from '../../../architecture/markdown.js';

const doc = readDoc('docs/supervising.md');

describe('docs/supervising.md', () => {
  it('documents exactly the options of sluice watch', () => {
    const help = spawnSync(process.execPath, [path.join(ROOT, 'bin/sluice.js'), 'watch', '--help'], { encoding: 'utf8', timeout: 20_000 });
    expect(help.status, help.stderr).toBe(0);
    const options = [...help.stdout.matchAll(/^\s+(?:-\w, )?(--[a-z-]+)/gm)].map((m) => m[1] ?? '').filter((o) => o !== '--help');
    expect(options.length).toBeGreaterThan(5);
    const table = readTables(doc).find((t) => t.header[0] === 'option');
    expect(table, 'an options table').toBeDefined();
    const documented = new Set((table?.rows ?? []).flatMap((row) => [...(row[0] ?? '').matchAll(/`(--[a-z-]+)/g)].map((m) => m[1] ?? '')));
    expect([...documented].sort()).toEqual([...new Set(options)].sort());
  });

  it('shows the prompt sluice watch --ask prints, and every answer key', () => {
    const source = readFileSync(path.join(ROOT, 'src/cli/watch/ask-prompt.ts'), 'utf8');
    const prompt = /`allow \$\{ask\.destination\} for grant \$\{ask\.grant\}\? ([^`]+): `/.exec(source)?.[1];
    expect(prompt, 'the prompt in ask-prompt.ts').toBeDefined();
    expect(doc).toContain(`for grant g-7Qm2? ${prompt ?? ''}:`);
    const keys = readTables(doc).find((t) => t.header[0] === 'key');
    expect((keys?.rows ?? []).map((row) => row[0])).toEqual(['`o`', '`g`', '`d`', '`D`', '`s`']);
  });
});
