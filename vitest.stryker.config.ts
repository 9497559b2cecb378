// The vitest config Stryker runs (`npm run test:mutation`, stryker.config.json; CONTRIBUTING.md "Mutation
// testing"). Only the test files that exercise the ten mutated security modules.
//
// Runner defect workaround: @stryker-mutator/vitest-runner 9.6.1 with vitest 4 counts only test cases. A
// test file that fails outside its tests (a throw while importing, in a describe body or in a hook) gives
// it no failed test, so the mutant that broke it was reported "Survived" (98 false survivors in the
// December 2026 review). The reporter below gives every such file one failed test case carrying the
// file's error, so the mutant is Killed, and an initial (dry) run with a broken file stops Stryker with
// "There were failed tests in the initial test run". Every `include` entry must also match a file, so a
// renamed test file cannot drop out of the run unnoticed.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunnerTask, RunnerTestCase } from 'vitest';
import { defineConfig } from 'vitest/config';
import type { Reporter, Vitest } from 'vitest/node';

const INCLUDE = [
  'test/unit/authority/*.test.ts',
  'test/unit/identity/*.test.ts',
  'test/unit/resolve/*.test.ts',
  'test/unit/proxy/ingress/connect-head.test.ts',
  'test/unit/route/system-proxy.test.ts',
  'test/fuzz/properties.test.ts',
  'test/security/ssrf-address-spelling.test.ts',
  'test/security/idn-homograph.test.ts', // an integration test that imports src/authority directly
];

const ROOT = path.dirname(fileURLToPath(import.meta.url));
for (const pattern of INCLUDE) {
  const star = pattern.indexOf('/*.');
  const found = star < 0 ? existsSync(path.join(ROOT, pattern)) : readdirSync(path.join(ROOT, pattern.slice(0, star))).some((f) => f.endsWith(pattern.slice(star + 2)));
  if (!found) throw new Error(`vitest.stryker.config.ts: include entry ${pattern} matches no file`);
}

function hasFailedTest(task: RunnerTask): boolean {
  return task.type === 'test' ? task.result?.state === 'fail' : task.tasks.some(hasFailedTest);
}

function firstError(task: RunnerTask): unknown {
  const own = task.result?.state === 'fail' ? task.result.errors?.[0] : undefined;
  if (own !== undefined || task.type === 'test') return own;
  for (const child of task.tasks) {
    const error = firstError(child);
    if (error !== undefined) return error;
  }
  return undefined;
}

/** Turns "this file failed, but none of its tests did" into one failed test case Stryker can see. */
class FailuresOutsideTests implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(): void {
    for (const file of this.vitest?.state.getFiles() ?? []) {
      if (file.result?.state !== 'fail' || hasFailedTest(file)) continue;
      const error = firstError(file) ?? { message: `${file.name} failed outside its tests` };
      file.tasks.push({
        type: 'test',
        id: `${file.id}_outside_tests`,
        name: 'failed outside its tests (import, describe body or hook)',
        mode: 'run',
        file,
        suite: file,
        result: { state: 'fail', errors: [error] },
        meta: {},
        context: {},
      } as unknown as RunnerTestCase);
    }
  }
}

export default defineConfig({
  test: {
    include: INCLUDE,
    // test/fuzz/properties.test.ts reads its fast-check seed from here: the same inputs for every mutant.
    env: { SLUICE_FUZZ_SEED: process.env['SLUICE_FUZZ_SEED'] ?? '424242' },
    testTimeout: 20_000,
    hookTimeout: 20_000,
    reporters: ['default', new FailuresOutsideTests()],
  },
});
