// Threat: a local user or a sandbox not started by `sluice run` finds the admin socket, or replaces it
// with its own, through the directory it lives in (review 2026-12, findings 2 and 12 part 3). A
// world-writable directory (such as /tmp) shows the socket to every user and to every sandbox that binds
// it, and lets them swap it: Sluice refuses it as a config error at admin.listen. A directory that group
// or others may enter is used, with a warning naming it; Sluice never chmods a directory it did not make.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startAdminServer, type AdminServer } from '../../src/admin/index.js';
import { buildRuntime } from '../../src/app.js';
import { parseConfigText } from '../../src/config/index.js';
import { isUnixSocketAlive } from '../../src/egress/index.js';
import { silentLog } from '../support/sluice.js';
import { FakeControl, captureLog } from '../unit/admin/fake-control.js';

let dir: string;
const servers: AdminServer[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-admin-dir-'));
});

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function startAdmin(socketDir: string, log = captureLog().log): Promise<AdminServer> {
  const server = await startAdminServer({ listen: `unix:${path.join(socketDir, 'admin.sock')}`, control: new FakeControl(), adminTokenSha256: null, log, isUnixSocketAlive });
  servers.push(server);
  return server;
}

async function runtimeIssues(config: Record<string, unknown>): Promise<readonly { path: string; message: string }[]> {
  const parsed = parseConfigText(stringify({ state: dir, listeners: [{ name: 'shared', listen: '127.0.0.1:0' }], ...config }), path.join(dir, 'c.yaml'), dir);
  if (!parsed.ok) return parsed.issues;
  const built = await buildRuntime(parsed.config, { env: {}, log: silentLog, audit: { write: () => undefined, flush: () => Promise.resolve() } });
  if (!built.ok) return built.issues;
  built.value.runtime.routes.close();
  await built.value.runtime.forwardAgent.close();
  await built.value.runtime.upstreamAgent.close();
  return [];
}

function makeDir(name: string, mode: number): string {
  const d = path.join(dir, name);
  fs.mkdirSync(d);
  fs.chmodSync(d, mode);
  return d;
}

describe('the admin socket directory', () => {
  it.each([
    ['world-writable and sticky, like /tmp', 0o1777],
    ['world-writable', 0o777],
  ])('is refused when %s: a config issue at admin.listen', async (_what, mode) => {
    const shared = makeDir('shared', mode);
    const issues = await runtimeIssues({ admin: { listen: `unix:${path.join(shared, 'admin.sock')}` } });
    expect(issues).toEqual([expect.objectContaining({ path: 'admin.listen', message: expect.stringContaining(shared) })]);
    await expect(startAdmin(shared)).rejects.toThrow(/world-writable/);
    expect(fs.existsSync(path.join(shared, 'admin.sock'))).toBe(false);
  });

  it.each([
    ['0755', 0o755],
    ['0750', 0o750],
    ['0711', 0o711],
  ])('is used but warned about when group or others may enter it (%s), and is not chmodded', async (_octal, mode) => {
    const shared = makeDir('shared', mode);
    const capture = captureLog();
    await startAdmin(shared, capture.log);
    const warnings = capture.lines.filter((l) => l.level === 'warn');
    expect(warnings).toEqual([expect.objectContaining({ obj: expect.objectContaining({ directory: shared }), msg: expect.stringContaining(shared) })]);
    expect(fs.statSync(shared).mode & 0o7777).toBe(mode);
    expect(fs.statSync(path.join(shared, 'admin.sock')).mode & 0o777).toBe(0o600);
  });

  it('passes silently when it is 0700, or when Sluice creates it', async () => {
    const capture = captureLog();
    await startAdmin(makeDir('private', 0o700), capture.log);
    await startAdmin(path.join(dir, 'fresh', 'run'), capture.log);
    expect(capture.lines.filter((l) => l.level === 'warn')).toEqual([]);
    expect(fs.statSync(path.join(dir, 'fresh', 'run')).mode & 0o777).toBe(0o700);
  });
});
