// Tests mirror sources (issue 14): every src/proxy/**/*.ts and src/grant/*.ts file (index.ts, a re-export,
// excepted) has its unit test at test/unit/<the same path without src/>.test.ts, e.g.
// src/proxy/hop/run-hop.ts → test/unit/proxy/hop/run-hop.test.ts; every test under test/unit/proxy/ and
// test/unit/grant/ mirrors a source file that exists, so a test cannot outlive the file it tests under a
// name that no longer says what it covers; and a test folder nests only as deep as its source's rooms
// (docs/architecture.md, rule 5). The failure lists each missing or orphaned path.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOMS } from './layers.js';
import { ROOT } from './markdown.js';

/** The folders of src/ whose files must each have a mirrored unit test. */
const MIRRORED = ['proxy', 'grant'] as const;
const EXCEPTED = new Set(['index.ts']);

/** Every file under dir ending in suffix, as a path relative to dir with forward slashes. */
function filesUnder(dir: string, suffix: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(suffix) && !e.name.endsWith('.d.ts'))
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .sort();
}

describe('unit tests mirror src/proxy and src/grant one to one', () => {
  for (const folder of MIRRORED) {
    const srcDir = path.join(ROOT, 'src', folder);
    const testDir = path.join(ROOT, 'test', 'unit', folder);

    it(`src/${folder}/ is not empty (the mirror check has something to check)`, () => {
      expect(filesUnder(srcDir, '.ts').length).toBeGreaterThan(0);
    });

    it(`every src/${folder}/**/*.ts has test/unit/${folder}/<the same path>.test.ts`, () => {
      const missing = filesUnder(srcDir, '.ts')
        .filter((rel) => !EXCEPTED.has(rel))
        .filter((rel) => !existsSync(path.join(testDir, rel.replace(/\.ts$/, '.test.ts'))))
        .map((rel) => `src/${folder}/${rel} → test/unit/${folder}/${rel.replace(/\.ts$/, '.test.ts')} is missing`);
      expect(missing).toEqual([]);
    });

    it(`every test/unit/${folder}/**/*.test.ts mirrors a file in src/${folder}/`, () => {
      const orphans = filesUnder(testDir, '.test.ts')
        .filter((rel) => {
          const source = rel.replace(/\.test\.ts$/, '.ts');
          return EXCEPTED.has(source) || !existsSync(path.join(srcDir, source));
        })
        .map((rel) => `test/unit/${folder}/${rel} mirrors no src/${folder}/${rel.replace(/\.test\.ts$/, '.ts')}`);
      expect(orphans).toEqual([]);
    });
  }

  it('the test folders hold only .test.ts files, in folders named after the rooms of their source', () => {
    for (const folder of MIRRORED) {
      const testDir = path.join(ROOT, 'test', 'unit', folder);
      if (!existsSync(testDir)) continue;
      const rooms = ROOMS[folder] ?? [];
      const stray = readdirSync(testDir, { recursive: true, withFileTypes: true })
        .map((e) => ({ e, rel: path.relative(testDir, path.join(e.parentPath, e.name)).split(path.sep).join('/') }))
        .filter(({ e, rel }) => (e.isDirectory() ? !rooms.includes(rel) : !e.name.endsWith('.test.ts') || rel.split('/').length > 2))
        .map(({ rel }) => `test/unit/${folder}/${rel}`);
      expect(stray).toEqual([]);
    }
  });

  it('src/proxy/ is in rooms, and its tests with it', () => {
    expect(filesUnder(path.join(ROOT, 'test', 'unit', 'proxy'), '.test.ts').every((rel) => rel.includes('/'))).toBe(true);
  });
});
