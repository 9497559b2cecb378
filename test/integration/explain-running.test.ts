// `sluice explain` as an operator runs it (compiled dist/, a real process) beside a running instance:
// it asks that instance through the config's admin socket, so a grant issued at run time is explained
// and a revocation the config file cannot know is honoured; with no instance it says it used the file.
// Exit status: 0 allow, 1 deny, 2 bad input (issue 17 item 8). The threat: an operator (or a script
// gating a deployment on the exit status) told "allowed" for what the running proxy refuses, or the
// other way round, or shown a grant's token.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';
import { BIN, killGroup } from '../support/sluice-process.js';

const CONFIG_TOKEN = 'tok-explain-config';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

// Asynchronous: the instance answering the admin socket runs in this process, so a spawnSync would block it.
function sluice(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env }, detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => killGroup(child), 15_000);
    child.once('error', reject);
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

describe('sluice explain beside a running instance', () => {
  let dir: string;
  let file: string;
  let instance: TestSluice | null = null;
  let runtimeId: string;
  let runtimeToken: string;

  const config = (): Record<string, unknown> => ({
    state: path.join(dir, 'state'),
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    admin: { listen: `unix:${path.join(dir, 'admin', 'admin.sock')}` },
    dns: { hosts: { 'api.test': ['127.0.0.1'], 'private.test': ['10.1.2.3'], 'other.test': ['127.0.0.1'] } },
    grants: [{ id: 'cfg', tokenSha256: tokenHash(CONFIG_TOKEN), destinations: ['https://api.test'], allowAddressClasses: ['loopback'] }],
  });
  const explainArgs = (grant: string, target: string, ...more: string[]): string[] => ['explain', '--config', file, '--grant', grant, ...more, target];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-explain-'));
    file = path.join(dir, 'sluice.yaml');
    fs.writeFileSync(file, stringify(config()));
    instance = await startSluice(config());
    // Issued through the admin socket as a supervisor would, with the real CLI.
    const issued = await sluice(['grant', 'issue', '--config', file, '--destination', 'https://api.test', '--destination', 'https://private.test', '--allow-class', 'loopback', '--json']);
    expect(issued.status, issued.stderr).toBe(0);
    ({ id: runtimeId, token: runtimeToken } = JSON.parse(issued.stdout) as { id: string; token: string });
  });
  afterAll(async () => {
    await instance?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const noSecrets = (r: Run): void => {
    for (const secret of [runtimeToken, CONFIG_TOKEN, tokenHash(runtimeToken), tokenHash(CONFIG_TOKEN)]) expect(r.stdout + r.stderr).not.toContain(secret);
  };

  it('explains a run-time grant it learns from the instance: allow exits 0 and prints the decision', async () => {
    const r = await sluice(explainArgs(runtimeId, 'https://API.test.'));
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/source:\s+the running instance at unix:.*admin\.sock \(a run-time grant\)/);
    expect(r.stdout).toMatch(/canonical:\s+api\.test:443/);
    expect(r.stdout).toMatch(/rule:\s+https:\/\/api\.test:443/);
    expect(r.stdout).toMatch(/addresses:\s+127\.0\.0\.1 loopback allowed/);
    expect(r.stdout).toMatch(/decision:\s+allow 200 granted/);
    expect(r.status).toBe(0);
    noSecrets(r);
  });

  it('exits 1 on a denial of a run-time grant: a destination outside it, an address class it lacks', async () => {
    const outside = await sluice(explainArgs(runtimeId, 'https://other.test'));
    expect(outside.stdout).toMatch(/decision:\s+deny 403 destination_not_granted/);
    expect(outside.status).toBe(1);
    const json = await sluice(explainArgs(runtimeId, 'private.test:443', '--json'));
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ decision: 'deny', reason: 'address_class_denied', badInput: null, source: expect.stringContaining('running instance') });
    noSecrets(json);
  });

  it('exits 2 for a grant the instance does not know, naming where it looked', async () => {
    const r = await sluice(explainArgs('g-nobody', 'https://api.test'));
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/grant "g-nobody" is not known to the running instance at unix:/);
    // A run's grant is forgotten with its run: the message says where its refusals went.
    expect(r.stderr).toContain('forgotten when its run ends: the run printed what its command was refused');
  });

  it.each([
    ['a port out of range', 'api.test:99999'],
    ['no port', 'api.test'],
    ['a space in the host', 'https://api .test'],
    ['a scheme it does not proxy', 'ftp://api.test/'],
    ['an empty host', 'http:///x'],
  ])('exits 2 for a malformed target (%s), not 1', async (_what, target) => {
    const r = await sluice(explainArgs(runtimeId, target));
    expect(r.stderr).toContain(`sluice explain: target ${JSON.stringify(target)}`);
    expect(r.status).toBe(2);
  });

  it('exits 2 on usage errors and an unreadable config', async () => {
    expect((await sluice(['explain', '--config', file, 'https://api.test'])).status).toBe(2);
    expect((await sluice(['explain', '--config', file, '--grant', runtimeId])).status).toBe(2);
    const missing = await sluice(['explain', '--config', path.join(dir, 'nope.yaml'), '--grant', 'cfg', 'https://api.test']);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('cannot read');
  });

  it('honours a revocation made at run time: the config file alone would allow, the instance denies (exit 1)', async () => {
    const before = await sluice(explainArgs('cfg', 'https://api.test'));
    expect(before.stdout).toMatch(/source:\s+the running instance at .* \(a config file grant\)/);
    expect(before.status).toBe(0);
    const revoked = await sluice(['grant', 'revoke', '--config', file, 'cfg']);
    expect(revoked.status, revoked.stderr).toBe(0);
    const after = await sluice(explainArgs('cfg', 'https://api.test'));
    expect(after.stdout).toMatch(/decision:\s+deny 403 grant_revoked/);
    expect(after.status).toBe(1);
  });

  it('with no instance running, uses the config file and says so when the grant is unknown there', async () => {
    await instance?.close();
    instance = null;
    const r = await sluice(explainArgs(runtimeId, 'https://api.test'));
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/is not known to the config file .*sluice\.yaml \(no running instance answered at unix:/);
    const fromFile = await sluice(explainArgs('cfg', 'https://api.test'));
    expect(fromFile.stdout).toMatch(/source:\s+the config file .*\(no running instance answered/);
    expect(fromFile.status).toBe(0);
    expect((await sluice(explainArgs('cfg', 'https://other.test'))).status).toBe(1);
  });
});
