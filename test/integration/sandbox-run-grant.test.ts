// `sluice run --destination URL --admin unix:…`: the run issues its own grant through the admin API
// (with a dedicated Unix socket and a generation label), the command reaches URL through it, and the
// grant is revoked when the command ends however it ends: a normal exit, the command SIGKILLing
// itself, or SIGTERM/SIGINT sent to `sluice run` (issue 12; principle A5 in docs/principles.md:
// authority does not outlive the run). Checked black-box over the admin socket: GET /v1/grants lists no live grant of the run after.
// The command prints READY and then waits, bounded, for a file the test creates, so that the grant is
// observed while it runs without sleeping blindly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { startSluice, tableLookup, type TestSluice } from '../support/sluice.js';
import { callerEnv, killAll, sandboxSkipReason, startSluiceRun, type RunResult } from '../support/sandbox.js';
import { waitUntil } from '../support/wait.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-run-grant: ${skip}`);

interface GrantView {
  id: string;
  generation: string | null;
  destinations: string[];
  listen: string | null;
  revokedAt: string | null;
}

function listGrants(socketPath: string): Promise<GrantView[]> {
  return new Promise((resolve, reject) => {
    const req = http.get({ socketPath, path: '/v1/grants', timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => {
        try {
          resolve((JSON.parse(body) as { grants: GrantView[] }).grants);
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      });
    });
    req.once('error', reject);
    req.once('timeout', () => req.destroy(new Error('admin API timed out')));
  });
}

/** A shell command: fetch through the bridge, say READY, wait (at most 15 s) for `go`, then `then`. */
function waitingCommand(url: string, then: string): string[] {
  const script = `curl -sS -m 5 "$1"; echo; echo READY; i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done; ${then}`;
  return ['/bin/sh', '-c', script, 'run-grant', url];
}

/** Host processes whose command line contains `marker` (the sandboxed shell carries it as $0's neighbour). */
function processesWith(marker: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) found.push(pid);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

describe.skipIf(skip !== null)('sluice run --destination: a grant for this run only', () => {
  let origin: Origin;
  let sluice: TestSluice;
  let dir: string;
  let work: string;
  let admin: string;
  let url: string;
  let configIds: string[];

  beforeAll(async () => {
    origin = await startHttpOrigin();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-run-grant-'));
    work = path.join(dir, 'work');
    fs.mkdirSync(work);
    admin = path.join(dir, 'state/admin.sock');
    url = `http://allowed.test:${origin.port}`;
    sluice = await startSluice(
      { listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], admin: { listen: `unix:${admin}` }, state: path.join(dir, 'state') },
      { lookup: tableLookup({ 'allowed.test': ['127.0.0.1'] }) },
    );
    configIds = (await listGrants(admin)).map((g) => g.id);
  });
  afterAll(async () => {
    killAll();
    await sluice?.close();
    await origin?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Starts the run, waits for READY, returns the run's grant as listed while the command runs. */
  async function startAndObserve(command: string[]): Promise<{ run: ReturnType<typeof startSluiceRun>; grant: GrantView }> {
    fs.rmSync(path.join(work, 'go'), { force: true });
    const args = ['--destination', url, '--allow-class', 'loopback', '--admin', `unix:${admin}`, '--', ...command];
    const run = startSluiceRun(args, { cwd: work, env: callerEnv(dir), timeoutMs: 30_000 });
    await run.waitForOutput('READY');
    const owned = (await listGrants(admin)).filter((g) => !configIds.includes(g.id) && g.revokedAt === null);
    expect(owned).toHaveLength(1);
    const grant = owned[0] as GrantView;
    expect(grant).toMatchObject({ destinations: [url], revokedAt: null });
    expect(grant.generation).toEqual(expect.any(String));
    expect(grant.listen).toMatch(/^unix:\//);
    return { run, grant };
  }

  /** The run's grant is not merely revoked but forgotten: no listing shows it, and the ledger is bounded. */
  async function expectNoLiveGrant(id: string): Promise<void> {
    expect((await listGrants(admin)).map((g) => g.id)).not.toContain(id);
    expect(fs.readFileSync(path.join(dir, 'state/ledger.json'), 'utf8')).not.toContain(id);
  }

  it('does not run the command, and exits 125, when the admin API refuses the run’s grant', async () => {
    const marker = path.join(work, 'ran-without-grant');
    const before = (await listGrants(admin)).length;
    const run = startSluiceRun(['--destination', 'https://*.*.bad', '--admin', `unix:${admin}`, '--', 'touch', marker], { cwd: work, env: callerEnv(dir), timeoutMs: 30_000 });
    const r = await run.result;
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/admin API refused the run's grant: 400 grant_invalid/);
    expect(fs.existsSync(marker)).toBe(false);
    expect((await listGrants(admin)).length).toBe(before);
  });

  it('with no Sluice at --admin, says only that (no bubblewrap line before it), runs nothing and leaves no socket directory', async () => {
    const marker = path.join(work, 'ran-without-sluice');
    const tmp = fs.mkdtempSync(path.join(dir, 'tmp-'));
    // Several runs: the stray line came from a race between bubblewrap's binds and the failed issue.
    for (let i = 0; i < 3; i += 1) {
      const run = startSluiceRun(['--destination', url, '--admin', `unix:${path.join(dir, 'nobody/admin.sock')}`, '--', 'touch', marker], { cwd: work, env: callerEnv(dir, { TMPDIR: tmp }), timeoutMs: 30_000 });
      const r = await run.result;
      expect(r.code).toBe(125);
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^sluice run: cannot issue the run's grant: .*is sluice running\?/);
      expect(fs.existsSync(marker)).toBe(false);
      expect(fs.readdirSync(tmp)).toEqual([]);
    }
  });

  it('issues the grant while the command runs, serves the command through it, and revokes it on a normal exit (status passed on)', async () => {
    const { run, grant } = await startAndObserve(waitingCommand(`${url}/owned`, 'exit 7'));
    expect(run.stdout()).toContain('origin:GET:/owned');
    expect(sluice.decisions().find((d) => d.target.includes('allowed.test'))).toMatchObject({ principal: grant.id, via: 'listener', reason: 'granted' });
    fs.writeFileSync(path.join(work, 'go'), '');
    const r: RunResult = await run.result;
    expect(r.code).toBe(7);
    await expectNoLiveGrant(grant.id);
  });

  it('tells, when the command ends, what it was refused and the fix (the sandbox cannot read the audit file)', async () => {
    const denied = `http://other.test:${origin.port}`;
    const script = `curl -sS -m 5 -o /dev/null "$1/a"; curl -sS -m 5 -o /dev/null "$1/b"; curl -sS -m 5 -o /dev/null -w '%{http_code}' "$2/ok"; echo`;
    const args = ['--destination', url, '--allow-class', 'loopback', '--admin', `unix:${admin}`, '--', '/bin/sh', '-c', script, 'run-summary', denied, url];
    const r: RunResult = await startSluiceRun(args, { cwd: work, env: callerEnv(dir), timeoutMs: 30_000 }).result;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('200');
    expect(r.stderr).toContain(`sluice run: 2 requests were refused:\n  2x destination_not_granted http://other.test:${origin.port}\n      fix: add a destination rule for http://other.test:${origin.port} to the grant (sluice run --destination http://other.test:${origin.port})`);
    // The allowed request is not in it.
    expect(r.stderr).not.toContain(`allowed.test:${origin.port}`);
  });

  it('revokes the grant when the command SIGKILLs itself, and exits 128+9', async () => {
    const { run, grant } = await startAndObserve(waitingCommand(`${url}/killed`, 'kill -9 $$'));
    fs.writeFileSync(path.join(work, 'go'), '');
    const r = await run.result;
    expect(r.code).toBe(128 + 9);
    await expectNoLiveGrant(grant.id);
  });

  it.each([
    ['SIGTERM', 15],
    ['SIGINT', 2],
  ] as const)('revokes the grant and ends the command when sluice run gets %s', async (signal, number) => {
    const marker = `sluice-run-grant-${signal}-${process.pid}`;
    // No `go` ever comes: the command is still running when the signal arrives.
    const { run, grant } = await startAndObserve(['/bin/sh', '-c', `echo READY; sleep 20; : ${marker}`]);
    expect(processesWith(marker).length).toBeGreaterThan(0);
    run.child.kill(signal);
    const r = await run.result;
    // sluice run handles the signal (a plain death would skip the revocation) and reports it as 128+n.
    expect(r.signal).toBeNull();
    expect(r.code).toBe(128 + number);
    await expectNoLiveGrant(grant.id);
    await waitUntil(() => processesWith(marker).length === 0, { timeoutMs: 5000, label: `the sandboxed command ends after ${signal}` });
  });
});
