import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    benchmark: { include: ['bench/micro/**/*.bench.ts'] },
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-results.json' },
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/soak/**'] } },
      {
        extends: true,
        test: {
          name: 'soak',
          include: ['test/soak/**/*.test.ts'],
          // The soak bounds this process's RSS after its load, and this process also runs the soak's
          // clients and echo server, whose 64 KiB read buffers glibc serves from its main heap and keeps
          // at the high-water mark (Node 24, one run: 192 MiB of [heap] after the soak with 4.5 MiB of
          // buffers live). Blocks of 32 KiB and up mapped on their own leave RSS when freed (88 MiB).
          env: { GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=32768' },
        },
      },
    ],
  },
});
