// `sluice start` as the process users run (issue 26, item 2; ADR 0021): it runs with the GC flags Sluice
// sets for itself (a 16 MB young generation where Node can re-exec in place; incremental marking left
// on: ADR 0021's amendment of 2026-12-05), keeps the pid its starter knows, honours the operator's own
// flags and SLUICE_GC_FLAGS=off, and a default start never loads ioredis or pac-resolver. What it loads
// is recorded by a resolve hook the child gets through --import; the flags are read back from the started
// line and /proc/<pid>/cmdline.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tokenHash } from '../support/sluice.js';
import { killSluiceProcesses, logLines, startSluiceProcess, type SluiceProcess } from '../support/sluice-process.js';
import { waitUntil } from '../support/wait.js';

/** Node >= 22.15 has process.execve: the young generation flag is then applied by re-exec in place. */
const canExecve = typeof (process as unknown as { execve?: unknown }).execve === 'function';
const YOUNG = '--min-semi-space-size=16';
const NO_INCREMENTAL = '--no-incremental-marking';
const NO_REDUCER = '--no-memory-reducer';

// Appends every URL the child resolves to the file named by its data; runs in Node's hooks thread.
const HOOK = `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`import { appendFileSync } from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function resolve(specifier, context, next) { const r = await next(specifier, context); appendFileSync(out, r.url + '\\\\n'); return r; }\`),
  { parentURL: import.meta.url, data: { out: process.env.SLUICE_TEST_RESOLVED } });
`;

describe('sluice start: GC flags of its own, and nothing loaded it does not use', () => {
  let dir: string;
  let hook: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-gc-'));
    hook = path.join(dir, 'record-resolved.mjs');
    fs.writeFileSync(hook, HOOK);
  });
  afterEach(killSluiceProcesses);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** config/default.yaml, on a free port and with its state in `cwd`. */
  const defaultConfig = (): Record<string, unknown> => ({
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    admin: { listen: 'unix:./state/admin.sock' },
    state: './state',
    dns: { servers: 'system', timeoutMs: 2000 },
    route: { mode: 'direct' },
    grants: [{ id: 'demo', tokenSha256: tokenHash('sluice-demo-token'), destinations: ['https://example.com'] }],
  });

  async function start(name: string, nodeFlags: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: SluiceProcess; gcFlags: unknown; resolved: () => string }> {
    const cwd = fs.mkdtempSync(path.join(dir, `${name}-`));
    const resolvedFile = path.join(cwd, 'resolved.txt');
    const child = await startSluiceProcess({
      config: defaultConfig(),
      cwd,
      env: { ...process.env, SLUICE_GC_FLAGS: undefined, ...env, SLUICE_TEST_RESOLVED: resolvedFile },
      wrap: ([node, ...rest]) => [node!, [...nodeFlags, '--import', hook, ...rest]],
      timeoutMs: 15_000,
    });
    const startedLine = () => logLines(child.stderr()).find((l) => String(l['msg']).includes(' started: config '));
    await waitUntil(() => startedLine() !== undefined, { timeoutMs: 5000, label: 'the start-up line' });
    return { child, gcFlags: startedLine()?.['gcFlags'], resolved: () => fs.readFileSync(resolvedFile, 'utf8') };
  }

  const cmdline = (pid: number): string[] => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');

  it('runs a default start with its GC flags in effect, in the pid it was started as, and stops on SIGTERM', async () => {
    const { child, gcFlags } = await start('default', []);
    expect(gcFlags).toEqual(canExecve ? [YOUNG] : []);
    // The pid the starter holds is the process that runs with the flag: no wrapper parent.
    const args = cmdline(child.pid);
    expect(args.includes(YOUNG)).toBe(canExecve);
    // No flag that turns V8's full collections atomic: each one deoptimized the hot path (ADR 0021).
    expect(args.filter((a) => a.replace(/_/g, '-').includes('incremental-marking'))).toEqual([]);
    // Nor one that keeps the heap at its high-water mark: the memory reducer is the operator's choice (ADR 0021).
    expect(args.filter((a) => a.replace(/_/g, '-').includes('memory-reducer'))).toEqual([]);
    expect(await child.stop('SIGTERM', 10_000)).toBe(0);
  });

  it("keeps an operator's --no-incremental-marking and --no-memory-reducer, reports them, and still sizes the young generation", async () => {
    const { child, gcFlags } = await start('atomic', [NO_INCREMENTAL, NO_REDUCER]);
    expect(gcFlags).toEqual(canExecve ? [YOUNG, NO_INCREMENTAL, NO_REDUCER] : [NO_INCREMENTAL, NO_REDUCER]);
    expect(cmdline(child.pid)).toEqual(expect.arrayContaining([NO_INCREMENTAL, NO_REDUCER]));
    await child.stop('SIGTERM', 10_000);
  });

  it('loads neither ioredis nor pac-resolver for a file ledger and route.mode direct', async () => {
    const { child, resolved } = await start('loads', []);
    const urls = resolved();
    // The hook saw the packages a start does load, so an empty record cannot pass.
    expect(urls).toMatch(/\/node_modules\/pino\//);
    expect(urls).toMatch(/\/dist\/app\.js/);
    expect(urls).not.toMatch(/\/node_modules\/ioredis\//);
    expect(urls).not.toMatch(/\/node_modules\/pac-resolver\//);
    expect(urls).not.toMatch(/\/dist\/ledger\/redis-store\.js/);
    await child.stop('SIGTERM', 10_000);
  });

  it("keeps the operator's own young generation and marking flags, without re-exec", async () => {
    const { child, gcFlags } = await start('own', ['--max-semi-space-size=8', '--incremental-marking']);
    expect(gcFlags).toEqual(['--max-semi-space-size=8', '--incremental-marking']);
    expect(cmdline(child.pid)).not.toContain(YOUNG);
    await child.stop('SIGTERM', 10_000);
  });

  it('starts with V8 defaults under SLUICE_GC_FLAGS=off', async () => {
    const { child, gcFlags } = await start('off', [], { SLUICE_GC_FLAGS: 'off' });
    expect(gcFlags).toEqual([]);
    expect(cmdline(child.pid)).not.toContain(YOUNG);
    await child.stop('SIGTERM', 10_000);
  });
});
