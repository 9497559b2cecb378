// `sluice start` refuses a state file someone else could have written (issue 23, finding 5 of the second
// security review): a sandbox that could write state/ rewrote ledger.json and usage.json, and the next
// start resurrected a revoked grant and obeyed an injected unrestricted one. The real CLI (dist/), as
// an operator runs it: exit 1, and stderr names the file, what is wrong and the fix.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BIN } from '../support/sluice-process.js';

const EMPTY_LEDGER = JSON.stringify({ v: 1, runtime: [], revoked: [] });

describe('sluice start with an unsafe state file', () => {
  let dir: string;
  let state: string;
  let config: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-unsafe-state-'));
    state = path.join(dir, 'state');
    fs.mkdirSync(state, { mode: 0o700 });
    config = path.join(dir, 'sluice.yaml');
    fs.writeFileSync(config, stringify({ listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], state, audit: { file: 'stderr' } }));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** `sluice start`, which must exit by itself: a timeout means it started, and is killed. */
  function start(): { status: number | null; stderr: string } {
    const r = spawnSync(process.execPath, [BIN, 'start', '--config', config], { cwd: dir, encoding: 'utf8', timeout: 15_000, killSignal: 'SIGKILL' });
    return { status: r.status, stderr: r.stderr };
  }

  it.each([
    ['ledger.json', '0644'],
    ['ledger.json', '0640'],
    ['usage.json', '0644'],
  ])('%s mode %s: exits 1 naming the file, its mode and chmod 600', (name, mode) => {
    const file = path.join(state, name);
    fs.writeFileSync(file, name === 'usage.json' ? JSON.stringify({ v: 1, grants: {} }) : EMPTY_LEDGER);
    fs.chmodSync(file, Number.parseInt(mode, 8));
    const r = start();
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`sluice start: refusing to load ${file}: its mode ${mode} gives group or others access`);
    expect(r.stderr).toContain(`chmod 600 ${file}`);
  });

  it('a ledger.json that is a symlink: exits 1 naming it', () => {
    const target = path.join(dir, 'elsewhere.json');
    fs.writeFileSync(target, EMPTY_LEDGER, { mode: 0o600 });
    fs.symlinkSync(target, path.join(state, 'ledger.json'));
    const r = start();
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`refusing to load ${path.join(state, 'ledger.json')}: it is a symbolic link`);
  });
});
