// Tests mirror sources (issue 14): every src/proxy/*.ts and src/grant/*.ts file (index.ts, a re-export,
// excepted) has its unit test at test/unit/<the same path without src/>.test.ts, e.g. src/proxy/run-hop.ts
// → test/unit/proxy/run-hop.test.ts; and every test in test/unit/proxy/ and test/unit/grant/ mirrors a
// source file that exists, so a test cannot outlive the file it tests under a name that no longer says
// what it covers. The failure lists each missing or orphaned path.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './markdown.js';

/** The folders of src/ whose files must each have a mirrored unit test. */
const MIRRORED = ['proxy', 'grant'] as const;
const EXCEPTED = new Set(['index.ts']);

function tsFiles(dir: string, suffix: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(suffix) && !e.name.endsWith('.d.ts'))
    .map((e) => e.name)
    .sort();
}

describe('unit tests mirror src/proxy and src/grant one to one', () => {
  for (const folder of MIRRORED) {
    const srcDir = path.join(ROOT, 'src', folder);
    const testDir = path.join(ROOT, 'test', 'unit', folder);

    it(`src/${folder}/ is not empty (the mirror check has something to check)`, () => {
      expect(tsFiles(srcDir, '.ts').length).toBeGreaterThan(0);
    });

    it(`every src/${folder}/*.ts has test/unit/${folder}/<name>.test.ts`, () => {
      const missing = tsFiles(srcDir, '.ts')
        .filter((name) => !name.endsWith('.test.ts') && !EXCEPTED.has(name))
        .filter((name) => !existsSync(path.join(testDir, name.replace(/\.ts$/, '.test.ts'))))
        .map((name) => `src/${folder}/${name} → test/unit/${folder}/${name.replace(/\.ts$/, '.test.ts')} is missing`);
      expect(missing).toEqual([]);
    });

    it(`every test/unit/${folder}/*.test.ts mirrors a file in src/${folder}/`, () => {
      const orphans = tsFiles(testDir, '.test.ts')
        .filter((name) => {
          const source = name.replace(/\.test\.ts$/, '.ts');
          return EXCEPTED.has(source) || !existsSync(path.join(srcDir, source));
        })
        .map((name) => `test/unit/${folder}/${name} mirrors no src/${folder}/${name.replace(/\.test\.ts$/, '.ts')}`);
      expect(orphans).toEqual([]);
    });
  }

  it('the test folders hold only .test.ts files directly (no nested folders that escape the check)', () => {
    for (const folder of MIRRORED) {
      const testDir = path.join(ROOT, 'test', 'unit', folder);
      if (!existsSync(testDir)) continue;
      const stray = readdirSync(testDir, { withFileTypes: true }).filter((e) => e.isDirectory() || !e.name.endsWith('.test.ts')).map((e) => `test/unit/${folder}/${e.name}`);
      expect(stray).toEqual([]);
    }
  });
});
