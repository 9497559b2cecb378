// Configs that would expose the admin API or a grant are refused the same way by `sluice check-config`
// and `sluice start` (compiled dist/, as `npx sluice` runs them): exit 2, naming the key path
// (review 2026-12, findings 10 and 12; issue 12 part 3). `start` must refuse before it listens on anything.
// Issue 17, item 3: both run one validation, so on every invalid config they print the same errors,
// line for line, every error of the file in one pass, unknown keys by their full path.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startApp, type SluiceApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { OWN_UID, silentLog } from '../support/sluice.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(ROOT, 'bin/sluice.js');

function sluice(args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 15_000, env: { ...process.env, SLUICE_ADMIN_TOKEN: '' } });
  return { status: r.status, stderr: r.stderr };
}

/** The `  key.path: reason` lines both commands print under `FILE: N error(s)`. */
function issueLines(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line.startsWith('  ')).map((line) => line.trim());
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

  const listeners = [{ name: 'shared', listen: '127.0.0.1:0' }];
  const grant = { id: 'a', destinations: ['https://a.test'] };
  // Each config, and the key path of every error it holds, in the order printed.
  const table: [string, () => Record<string, unknown>, string[]][] = [
    ['a port above 65535 (bind used to throw a RangeError, exit 1)', () => ({ listeners: [{ name: 'shared', listen: '127.0.0.1:99999' }] }), ['listeners[0].listen']],
    ['an admin port above 65535', () => ({ listeners, admin: { listen: '127.0.0.1:70000', tokenSha256: 'ab'.repeat(32) } }), ['admin.listen']],
    ['an empty unix: path (it resolved to the working directory)', () => ({ listeners: [{ name: 'shared', listen: 'unix:' }] }), ['listeners[0].listen']],
    ['a unix: path naming a directory', () => ({ listeners: [{ name: 'shared', listen: `unix:${dir}/` }] }), ['listeners[0].listen']],
    ['a config grant that has already expired', () => ({ listeners, grants: [{ ...grant, limits: { expiresAt: '2020-01-01T00:00:00Z' } }] }), ['grants[0].limits.expiresAt']],
    ['a TCP admin listener without a token', () => ({ listeners, admin: { listen: '127.0.0.1:0' } }), ['admin.listen']],
    ['an unknown top-level key', () => ({ listeners, timeuts: { dialMs: 1 } }), ['timeuts']],
    ['an unknown key in a section', () => ({ listeners, dns: { timeoutMz: 5 } }), ['dns.timeoutMz']],
    ['an unknown key in a list item', () => ({ listeners, grants: [grant, { id: 'b', destinatons: ['https://b.test'] }] }), ['grants[1].destinatons']],
    [
      'unknown keys three and four levels down',
      () => ({ listeners: [{ name: 'lb', listen: '127.0.0.1:0', proxyProtocol: { trustedSource: ['10.0.0.0/8'] } }], grants: [{ ...grant, limits: { maxBytez: 1 } }] }),
      ['listeners[0].proxyProtocol.trustedSources', 'listeners[0].proxyProtocol.trustedSource', 'grants[0].limits.maxBytez'],
    ],
    ['an audit file that is a directory', () => ({ listeners, audit: { file: dir } }), ['audit.file']],
    ['auth ntlm without a credentials file', () => ({ listeners, route: { mode: 'proxy', proxy: { url: 'http://proxy.corp.test:8080', auth: 'ntlm' } } }), ['route.proxy.credentialsFile']],
    ['auth negotiate with a credentials file (Kerberos uses the service’s own tickets)', () => ({ listeners, route: { mode: 'proxy', proxy: [{ url: 'http://a.corp.test:8080' }, { url: 'http://b.corp.test:8080', auth: 'negotiate', credentialsFile: path.join(dir, 'no-such-file') }] } }), ['route.proxy[1].credentialsFile']],
    ['an unknown auth mechanism and a malformed spn', () => ({ listeners, route: { mode: 'proxy', proxy: { url: 'http://proxy.corp.test:8080', auth: 'kerberos', spn: 'HTTP/proxy.corp.test' } } }), ['route.proxy.auth', 'route.proxy.spn']],
    // Issue 24 item 3: the shared store is one Redis or one Sentinel group; its variables are host checks.
    ['a Redis URL and sentinels both', () => ({ listeners, ledger: { store: 'redis', redis: { url: 'redis://127.0.0.1:1/0', sentinels: ['127.0.0.1:26379'], name: 'g' } } }), ['ledger.redis.sentinels']],
    // UX review 2026-12-04 finding 6 (issue 25): check-config used to pass an unset urlEnv that start refused.
    ['a Redis URL variable that is not set', () => ({ listeners, ledger: { store: 'redis', redis: { urlEnv: 'SLUICE_REFUSALS_UNSET_REDIS_URL' } } }), ['ledger.redis.urlEnv']],
    [
      'both Sentinel password variables not set',
      () => ({ listeners, ledger: { store: 'redis', redis: { sentinels: ['127.0.0.1:26379'], name: 'g', passwordEnv: 'SLUICE_REFUSALS_UNSET_P', sentinelPasswordEnv: 'SLUICE_REFUSALS_UNSET_SP' } } }),
      ['ledger.redis.passwordEnv', 'ledger.redis.sentinelPasswordEnv'],
    ],
    [
      'sentinels without the group name, and a password variable that is not set',
      () => ({ listeners, ledger: { store: 'redis', redis: { sentinels: ['127.0.0.1:26379'], passwordEnv: 'SLUICE_REFUSALS_UNSET_REDIS_PASSWORD' } } }),
      ['ledger.redis.name', 'ledger.redis.passwordEnv'],
    ],
    [
      'a schema error, a cross-check error and a host error in one file, all named in one pass',
      () => ({
        listeners,
        dns: { timeoutMz: 5 },
        grants: [
          { ...grant, limits: { expiresAt: '2020-01-01T00:00:00Z' } },
          { id: 'b', destinations: ['https://b.test'], tokenEnv: 'SLUICE_REFUSALS_UNSET_GRANT_TOKEN' },
        ],
      }),
      ['dns.timeoutMz', 'grants[0].limits.expiresAt', 'grants[1].tokenEnv'],
    ],
  ];

  it.each(table)('%s: check-config and start print the same errors, exit 2', (name, config, paths) => {
    const file = write(`table-${name.replace(/\W+/g, '-').slice(0, 60)}.yaml`, config());
    const checked = sluice(['check-config', file]);
    const started = sluice(['start', '--config', file]);
    expect(checked.status).toBe(2);
    expect(started.status).toBe(2);
    const lines = issueLines(checked.stderr);
    expect(lines.map((line) => line.slice(0, line.indexOf(': ')))).toEqual(paths);
    expect(checked.stderr).toContain(`${file}: ${paths.length} error(s)`);
    expect(issueLines(started.stderr)).toEqual(lines);
  });

  // The third of the one validation (docs/configuration.md, "Reload"): a running instance whose file
  // becomes any of these refuses the reload with the errors check-config prints, and keeps running.
  describe('and a reload refuses the same files with the same errors', () => {
    let app: SluiceApp;
    let running: string;
    beforeAll(async () => {
      running = write('running.yaml', { listeners: [{ name: 'shared', listen: '127.0.0.1:0' }] });
      const loaded = await loadConfig(running, dir);
      if (!loaded.ok) throw new Error(JSON.stringify(loaded.issues));
      app = await startApp(loaded.config, { env: {}, cwd: dir, uid: OWN_UID, log: silentLog });
    });
    afterAll(() => app.close());

    it.each(table)('%s', async (name, config) => {
      const file = write(`reload-${name.replace(/\W+/g, '-').slice(0, 60)}.yaml`, config());
      const checked = issueLines(sluice(['check-config', file]).stderr);
      fs.copyFileSync(file, running);
      const reloaded = await app.control.reload();
      expect(reloaded).toMatchObject({ ok: false, status: 400, reason: 'config_invalid' });
      expect(reloaded.ok ? [] : reloaded.issues.map((i) => `${i.path}: ${i.message}`)).toEqual(checked);
      expect(app.listeners.map((l) => l.name)).toEqual(['shared']);
    });
  });
});
