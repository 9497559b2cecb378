// Proves the `sluice start` child runner (test/support/sluice-process.ts) reads the log as documented and
// fails fast, with the child's stderr, when the child exits before it is ready. Runs the built CLI.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killGroup, logLines, portOf, startSluiceProcess } from '../../support/sluice-process.js';

describe('sluice-process', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-process-test-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('reads JSON lines and ports, and killGroup never throws', () => {
    expect(logLines('{"msg":"listening","address":"127.0.0.1:3128"}\nnot json\n{broken\n{"a":1}')).toEqual([{ msg: 'listening', address: '127.0.0.1:3128' }, { a: 1 }]);
    expect(portOf('127.0.0.1:3128')).toBe(3128);
    expect(portOf('[::1]:8080')).toBe(8080);
    expect(() => killGroup(undefined)).not.toThrow();
  });

  it('rejects with the child’s stderr when it exits before it is ready', async () => {
    const started = startSluiceProcess({ config: { listeners: [] }, configFile: path.join(dir, 'bad.yaml'), timeoutMs: 15_000 });
    await expect(started).rejects.toThrow(/exited before it was ready.*at least one listener/s);
  });

  it('is ready once every listener is logged, and stop() resolves with the exit code', async () => {
    const sluice = await startSluiceProcess({
      config: { listeners: [{ name: 'a', listen: '127.0.0.1:0' }, { name: 'b', listen: '127.0.0.1:0' }], state: path.join(dir, 'state') },
      cwd: dir,
      timeoutMs: 15_000,
    });
    expect(sluice.port).toBe(sluice.portOf('a'));
    expect(sluice.portOf('b')).toBeGreaterThan(0);
    expect(sluice.portOf('b')).not.toBe(sluice.port);
    expect(sluice.alive()).toBe(true);
    expect(await sluice.stop()).toBe(0);
    expect(sluice.alive()).toBe(false);
  });
});
