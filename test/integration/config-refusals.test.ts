// Configs that would expose the admin API or a grant are refused the same way by `sluice check-config`
// and `sluice start` (compiled dist/, as `npx sluice` runs them): exit 2, naming the key path
// (review 2026-12, findings 10 and 12; issue 12 part 3). `start` must refuse before it listens on anything.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(ROOT, 'bin/sluice.js');

function sluice(args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 15_000, env: { ...process.env, SLUICE_ADMIN_TOKEN: '' } });
  return { status: r.status, stderr: r.stderr };
}

describe('check-config and start agree', () => {
  let dir: string;
  const write = (name: string, config: Record<string, unknown>): string => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, stringify({ state: path.join(dir, 'state'), audit: { file: 'stderr' }, ...config }));
    return file;
  };

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-refusals-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const cases: [string, string, () => Record<string, unknown>][] = [
    [
      'an admin socket in a world-writable sticky directory, like /tmp',
      'admin.listen',
      () => {
        const shared = path.join(dir, 'tmp-like');
        fs.mkdirSync(shared, { recursive: true });
        fs.chmodSync(shared, 0o1777);
        return { listeners: [{ name: 'shared', listen: '127.0.0.1:0' }], admin: { listen: `unix:${path.join(shared, 'admin.sock')}` } };
      },
    ],
    [
      'a listener bound to a grant on 0.0.0.0, which needs no token',
      'listeners[0].listen',
      () => ({ listeners: [{ name: 'sandbox', listen: '0.0.0.0:0', grant: 'a' }], grants: [{ id: 'a', destinations: ['https://a.test'] }] }),
    ],
    [
      'a TCP admin listener without a token',
      'admin.listen',
      () => ({ listeners: [{ name: 'shared', listen: '127.0.0.1:0' }], admin: { listen: '127.0.0.1:0' } }),
    ],
    [
      'an admin token from a variable that is not set',
      'admin.tokenEnv',
      () => ({ listeners: [{ name: 'shared', listen: '127.0.0.1:0' }], admin: { listen: '127.0.0.1:0', tokenEnv: 'SLUICE_REFUSALS_UNSET_TOKEN' } }),
    ],
  ];

  it.each(cases)('%s: both exit 2 naming %s', (name, keyPath, config) => {
    const file = write(`${name.replace(/\W+/g, '-')}.yaml`, config());
    const checked = sluice(['check-config', file]);
    expect(checked.status).toBe(2);
    expect(checked.stderr).toContain(keyPath);
    const started = sluice(['start', '--config', file]);
    expect(started.status).toBe(2);
    expect(started.stderr).toContain(keyPath);
  });
});
