// The CLI as users script it: `sluice check-config`, `sluice explain`, `sluice start` (compiled dist/,
// exactly as `npx sluice` runs it), with real processes, real curl and real signals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { runCurl } from '../support/curl.js';
import { tokenHash } from '../support/sluice.js';
import { BIN, killSluiceProcesses, logLines, REPO_ROOT as ROOT, startSluiceProcess } from '../support/sluice-process.js';
import { waitUntil } from '../support/wait.js';

const TOKEN = 'tok-cli';

function sluice(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 15_000, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('sluice CLI', () => {
  let dir: string;
  let origin: Origin;
  const write = (name: string, config: unknown): string => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, typeof config === 'string' ? config : stringify(config));
    return file;
  };

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-cli-'));
    origin = await startHttpOrigin();
  });
  afterAll(async () => {
    await origin?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const goodConfig = (): Record<string, unknown> => ({
    state: path.join(dir, 'state'),
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    dns: { hosts: { 'api.test': ['127.0.0.1'], 'private.test': ['10.1.2.3'] } },
    audit: { file: 'stdout' },
    grants: [{ id: 'sandbox-a', tokenSha256: tokenHash(TOKEN), destinations: ['https://api.test', `http://api.test:${origin.port}`, 'https://private.test'], allowAddressClasses: ['loopback'] }],
  });

  it('check-config accepts the shipped default config', () => {
    const r = sluice(['check-config', path.join(ROOT, 'config/default.yaml')]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('check-config exits 2 and names the key path of every error', () => {
    const file = write('bad.yaml', {
      listeners: [{ name: 'a', listen: 'nowhere', grant: 'missing' }],
      dns: { timeoutMs: -5 },
      bogus: 1,
      grants: [{ id: 'g', destinations: ['https://*.*.example.com', 'tcp://db.test'], tokenEnv: 'SLUICE_CLI_UNSET_TOKEN' }],
    });
    const r = sluice(['check-config', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('listeners[0].listen');
    expect(r.stderr).toContain('dns.timeoutMs');
    expect(r.stderr).toContain('bogus');
  });

  it('check-config reports rule and token problems by key path', () => {
    const file = write('rules.yaml', {
      listeners: [{ name: 'a', listen: '127.0.0.1:0', grant: 'missing' }],
      grants: [{ id: 'g', destinations: ['https://*.*.example.com', 'tcp://db.test'], tokenEnv: 'SLUICE_CLI_UNSET_TOKEN' }],
    });
    const first = sluice(['check-config', file]);
    expect(first.status).toBe(2);
    expect(first.stderr).toContain('listeners[0].grant');
    const fixed = write('rules2.yaml', {
      listeners: [{ name: 'a', listen: '127.0.0.1:0', grant: 'g' }],
      grants: [{ id: 'g', destinations: ['https://*.*.example.com', 'tcp://db.test'], tokenEnv: 'SLUICE_CLI_UNSET_TOKEN' }],
    });
    const second = sluice(['check-config', fixed]);
    expect(second.status).toBe(2);
    expect(second.stderr).toContain('grants[0].destinations[0]');
    expect(second.stderr).toContain('grants[0].destinations[1]');
    expect(second.stderr).toContain('grants[0].tokenEnv');
  });

  it('check-config names a YAML syntax error and a missing file', () => {
    expect(sluice(['check-config', write('syntax.yaml', 'listeners: [\n')]).status).toBe(2);
    const missing = sluice(['check-config', path.join(dir, 'nope.yaml')]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('cannot read');
  });

  it('explain prints canonical destination, rule, addresses and classes, route, attested and reason', () => {
    const file = write('explain.yaml', goodConfig());
    const allowed = sluice(['explain', '--config', file, '--grant', 'sandbox-a', 'https://API.test.']);
    expect(allowed.status).toBe(0);
    expect(allowed.stdout).toMatch(/canonical:\s+api\.test:443/);
    expect(allowed.stdout).toMatch(/rule:\s+https:\/\/api\.test:443/);
    expect(allowed.stdout).toMatch(/addresses:\s+127\.0\.0\.1 loopback allowed/);
    expect(allowed.stdout).toMatch(/route:\s+direct/);
    expect(allowed.stdout).toMatch(/attested:\s+true/);
    expect(allowed.stdout).toMatch(/decision:\s+allow 200 granted/);
    const denied = sluice(['explain', '--config', file, '--grant', 'sandbox-a', 'private.test:443']);
    expect(denied.stdout).toMatch(/addresses:\s+10\.1\.2\.3 private denied/);
    expect(denied.stdout).toMatch(/decision:\s+deny 403 address_class_denied/);
    expect(denied.stdout).toMatch(/\nfix:\s+allow it with allowAddressClasses: \[private\] on the grant \(sluice run --allow-class private\)/);
    expect(allowed.stdout).not.toMatch(/\nfix:/);
    expect(denied.status).toBe(1);
    const evil = sluice(['explain', '--json', '--config', file, '--grant', 'sandbox-a', 'http://evil.test/']);
    expect((JSON.parse(evil.stdout) as { reason: string }).reason).toBe('destination_not_granted');
    expect(evil.status).toBe(1);
  });

  it('explain shows the PAC answer, each route alternative and whether it is attested', () => {
    const pac = path.join(dir, 'explain.pac');
    fs.writeFileSync(pac, 'function FindProxyForURL(url, host) { return host == "api.test" ? "PROXY 127.0.0.1:3128; DIRECT" : "DIRECT"; }');
    const file = write('explain-pac.yaml', { ...goodConfig(), route: { mode: 'pac', pac: { file: pac, inspectsTls: true } } });
    const r = sluice(['explain', '--config', file, '--grant', 'sandbox-a', 'https://api.test']);
    expect(r.stdout).toMatch(/route:\s+pac PROXY 127\.0\.0\.1:3128; DIRECT/);
    expect(r.stdout).toMatch(/1\. proxy http:\/\/127\.0\.0\.1:3128: unattested .*credential-observing/);
    expect(r.stdout).toMatch(/2\. direct: attested/);
    expect(r.stdout).toMatch(/attested:\s+false/);
    const unknown = sluice(['explain', '--config', file, '--grant', 'nobody', 'https://api.test']);
    expect(unknown.stdout).toMatch(/decision:\s+deny 403 grant_unknown/);
    // An unknown grant is bad input (exit 2), not a denial (exit 1); this config has no admin API to ask.
    expect(unknown.stderr).toContain('grant "nobody" is not known to the config file');
    expect(unknown.status).toBe(2);
  });

  // The review's repro: an environment configured through ALL_PROXY, or through HTTP_PROXY alone.
  it('review 2026-12 finding 11: explain in system mode honours ALL_PROXY and names the route of each family', () => {
    const file = write('explain-system.yaml', { ...goodConfig(), route: { mode: 'system' } });
    // Empty means unset (as in curl), so the runner's own proxy variables cannot leak in.
    const unset = { http_proxy: '', HTTP_PROXY: '', https_proxy: '', HTTPS_PROXY: '', all_proxy: '', ALL_PROXY: '', no_proxy: '', NO_PROXY: '' };
    const all = sluice(['explain', '--config', file, '--grant', 'sandbox-a', 'https://api.test'], { ...unset, ALL_PROXY: 'http://127.0.0.1:21999' });
    expect(all.stdout).toMatch(/route:\s+system proxy http:\/\/127\.0\.0\.1:21999\n/);
    expect(all.stdout).toContain('https, wss, tcp (CONNECT): system proxy http://127.0.0.1:21999 (from ALL_PROXY)');
    const httpOnly = sluice(['explain', '--config', file, '--grant', 'sandbox-a', 'https://api.test'], { ...unset, HTTP_PROXY: 'http://127.0.0.1:21999' });
    expect(httpOnly.stdout).toMatch(/route:\s+system direct\n\s+https, wss, tcp \(CONNECT\): system direct \(no https_proxy, HTTPS_PROXY, all_proxy or ALL_PROXY set\)\n/);
    expect(httpOnly.stdout).toContain('http, ws (absolute-form): system proxy http://127.0.0.1:21999 (from HTTP_PROXY)');
    const socks = sluice(['check-config', file], { ...unset, ALL_PROXY: 'socks5://127.0.0.1:1080' });
    expect(socks.status).toBe(2);
    expect(socks.stderr).toContain('route.system (ALL_PROXY)');
  });

  it('check-config exits 2 when the PAC cannot be loaded', () => {
    const file = write('bad-pac.yaml', { ...goodConfig(), route: { mode: 'pac', pac: { file: path.join(dir, 'missing.pac') } } });
    const r = sluice(['check-config', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('route.pac');
  });

  it('--version and -V print the version of package.json and exit 0 (UX review 2026-12-04 finding 8)', () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    for (const flag of ['--version', '-V']) {
      // From another directory: the version is found beside the code, not in the working directory.
      const r = spawnSync(process.execPath, [BIN, flag], { encoding: 'utf8', timeout: 15_000, cwd: os.tmpdir() });
      expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 0, stdout: `${version}\n`, stderr: '' });
    }
  });

  it('start logs one start-up line (version, config, listeners, grants, ledger), and names every level', async () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const config = write('startup.yaml', goodConfig());
    const child = await startSluiceProcess({ config, timeoutMs: 10_000 });
    try {
      const ledgerFile = path.join(dir, 'state', 'ledger.json');
      const startedMsg = `sluice ${version} started: config ${config}, 1 listener(s), 1 grant(s), ledger file ${ledgerFile}`;
      await waitUntil(() => logLines(child.stderr()).some((l) => l['msg'] === startedMsg), { timeoutMs: 5000, label: `the start-up line: ${startedMsg}` });
      const lines = logLines(child.stderr());
      expect(lines.find((l) => l['msg'] === startedMsg)).toMatchObject({ level: 'info', version, config, listeners: 1, grants: 1, ledger: `file ${ledgerFile}` });
      // pino's numbers (30, 40, 50) are not what an operator greps for.
      expect(lines.map((l) => l['level']).filter((level) => !['info', 'warn', 'error'].includes(String(level)))).toEqual([]);
    } finally {
      await killSluiceProcesses();
    }
  });

  it('start serves traffic, writes audit JSON lines, and exits 0 on SIGTERM', async () => {
    const child = await startSluiceProcess({ config: write('start.yaml', goodConfig()), stdout: 'pipe', timeoutMs: 10_000 });
    try {
      const result = await runCurl(['--proxy', `http://sandbox-a:${TOKEN}@127.0.0.1:${child.port}`, `http://api.test:${origin.port}/via-cli`]);
      expect(result.stdout).toBe('origin:GET:/via-cli');
      expect(await child.stop('SIGTERM', 10_000)).toBe(0);
      const records = child.stdout().trim().split('\n').map((line) => JSON.parse(line) as { kind: string; reason?: string });
      expect(records.map((r) => r.kind)).toEqual(['decision', 'close']);
      expect(records[0]?.reason).toBe('granted');
      expect(child.stdout() + child.stderr()).not.toContain(TOKEN);
    } finally {
      await killSluiceProcesses();
    }
  });
});
