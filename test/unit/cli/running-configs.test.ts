// Finding the running Sluice processes' config files from a /proc-shaped tree, so `sluice run` hides
// them even when the caller gave no --config (review security-2026-12 finding 4: the config was writable).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findRunningConfigs } from '../../../src/cli/index.js';

let proc: string;

function fakeProcess(pid: string, argv: readonly string[], cwd: string | null): void {
  fs.mkdirSync(path.join(proc, pid));
  fs.writeFileSync(path.join(proc, pid, 'cmdline'), `${argv.join('\0')}\0`);
  if (cwd !== null) fs.symlinkSync(cwd, path.join(proc, pid, 'cwd'));
}

beforeAll(() => {
  proc = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-proc-'));
  fakeProcess('101', ['node', '/opt/sluice/bin/sluice.js', 'start', '--config', 'sluice.yaml'], '/srv/a');
  fakeProcess('102', ['/usr/bin/node', '/x/dist/main.js', 'start', '--config=/etc/sluice/b.yaml'], '/');
  fakeProcess('103', ['sluice', 'start', '--config', '../c.yaml'], '/srv/c/sub');
  fakeProcess('104', ['node', '/opt/sluice/bin/sluice.js', 'check-config', 'x.yaml'], '/srv/d');
  fakeProcess('105', ['python3', 'start', '--config', 'y.yaml'], '/srv/e');
  fakeProcess('106', ['node', 'sluice.js', 'start', '--config', 'z.yaml'], null);
  fakeProcess('107', ['node', 'sluice.js', 'start', '--config', '/etc/root-sluice.yaml'], null);
  fs.mkdirSync(path.join(proc, 'self'));
});
afterAll(() => fs.rmSync(proc, { recursive: true, force: true }));

describe('findRunningConfigs', () => {
  it('finds `sluice start --config FILE` in any spelling, resolved against the process’s working directory', () => {
    expect(findRunningConfigs(proc).sort((a, b) => a.file.localeCompare(b.file))).toEqual([
      { file: '/etc/sluice/b.yaml', cwd: '/' },
      { file: '/srv/a/sluice.yaml', cwd: '/srv/a' },
      { file: '/srv/c/c.yaml', cwd: '/srv/c/sub' },
    ]);
  });

  it('looks for a relative config in the given directories when the process’s cwd cannot be read (another user’s Sluice)', () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-guess-'));
    fs.writeFileSync(path.join(project, 'z.yaml'), '');
    try {
      const found = findRunningConfigs(proc, [project, path.join(project, 'nowhere')]);
      expect(found).toContainEqual({ file: path.join(project, 'z.yaml'), cwd: project });
      expect(found.filter((c) => c.file.endsWith('/z.yaml'))).toHaveLength(1);
    } finally {
      fs.rmSync(project, { recursive: true, force: true });
    }
  });

  // Review 2026-12-04 finding 5, as an unprivileged caller: root's `cd P && sluice start --config
  // /etc/x.yaml` keeps ./state in P, and P is where the caller runs `sluice run` from.
  it('takes every shown tree as the working directory an absolute config’s relative paths may resolve against, when the cwd cannot be read', () => {
    const found = findRunningConfigs(proc, ['/home/u/p', '/home/u/q']).filter((c) => c.file === '/etc/root-sluice.yaml');
    expect(found.map((c) => c.cwd).sort()).toEqual(['/home/u/p', '/home/u/q']);
  });

  it('answers nothing, without throwing, when /proc cannot be read', () => {
    expect(findRunningConfigs(path.join(proc, 'missing'))).toEqual([]);
  });
});
