// Threat: a hostile command under `sluice run --grant-socket` reaches past its one grant (review
// 2026-12, findings 1-5, 9, 12; issue 12). The setup is the review's worst case, started the review's
// way: `cd DIR && node bin/sluice.js start --config sluice.yaml` (a real child process, every path in
// its config relative to DIR), then `sluice run --grant-socket DIR/state/a.sock --read DIR --write DIR/work` from DIR/work (DIR itself writable
// is refused: it holds the state; review 2026-12-04 finding 5). DIR holds
// Sluice's sluice.yaml, its state/ (admin socket, ledger), its audit.jsonl and the dedicated sockets
// of grant a (the command's: only allowed.test) and grant b (a loopback origin serving
// SECRET-LOOPBACK-ORIGIN). `sluice run` is not told where Sluice's config is: it must find the running
// Sluice in /proc. From inside, one script (test/support/sandbox-attacks.sh) tries:
// - the admin socket: POST /v1/grants for an unrestricted grant with loopback (finding 2);
// - grant b's socket, and grant c's token-less dedicated TCP listener on loopback (findings 3, 12);
// - an abstract Unix socket bound on the host; a direct connection that ignores the proxy;
//   DNS straight to the host's resolvers, 127.0.0.53 and a test resolver on 127.0.0.1;
//   raw, packet and vsock sockets (a way past a network namespace that has only loopback);
// - deleting Sluice's sockets or moving its state directory (denial of service for every principal);
// - reading the ledger, sluice.yaml and the audit file, and rewriting sluice.yaml, which Sluice
//   reloads (finding 4);
// - the caller's secrets in its environment or any sandbox process's (finding 5);
// - host files: a world-readable marker outside DIR, /proc/1/root/…, /etc/shadow, the caller's HOME.
// Every attempt must fail, and the granted request through the bridge must still work. Runs as root
// and as uid 21001 (DIR chowned to it, so that only the sandbox stands in the way; finding 9 is why a
// socket's file mode alone is not enough). Process and privilege attacks: sandbox-escape-proc.test.ts;
// --write/--read and --config masking: sandbox-escape-fs.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { giveTo, identities, killAll, sandboxSkipReason } from '../support/sandbox.js';
import {
  HOST_NAMESERVERS,
  itRanTheWholeScript,
  SECRET_BODY,
  attackLine,
  checkLine,
  leakedSecrets,
  runAttacks,
  startVictim,
  startWorstCase,
  type AttackRun,
  type WorstCase,
} from '../support/sandbox-worst-case.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-escape: ${skip}`);

const ATTACKS = [
  'admin-socket',
  'other-grant-socket',
  'other-grant-tcp-listener',
  'abstract-socket',
  'rename-state-dir',
  'ledger-read',
  'config-read',
  'audit-read',
  'direct-loopback',
  'network-interfaces',
  ...HOST_NAMESERVERS.map((ns) => `dns-host-resolver-${ns}`),
  'dns-127.0.0.53',
  'dns-test-server',
  'raw-socket',
  'packet-socket',
  'vsock-socket',
  'env-secrets',
  'caller-home-file',
  'host-marker',
  'proc1-root-marker',
  'proc-sluice-root-marker',
  'etc-shadow',
  'proc1-root-etc-shadow',
  'host-directories',
];

function adminHealth(socketPath: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: '/healthz', timeout: 3000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', () => resolve(0));
    req.once('timeout', () => req.destroy());
  });
}

describe.skipIf(skip !== null).each(identities())('sluice run --grant-socket --read DIR --write DIR/work, DIR being Sluice’s own directory, as $label', (identity) => {
  let w: WorstCase;
  let victim: ChildProcess;
  let attack: AttackRun;

  beforeAll(async () => {
    w = await startWorstCase();
    giveTo(identity, w.dir, w.callerHome);
    victim = startVictim(identity);
    // DIR itself writable is refused (refusesDirWritable below); shown read-only, everything of Sluice's in it is masked.
    const work = path.join(w.dir, 'work');
    attack = await runAttacks(w, identity, victim, { groups: ['sockets', 'state', 'net', 'env', 'files'], args: ['--grant-socket', w.aSocket, '--read', w.dir, '--write', work], cwd: work });
  }, 120_000);
  afterAll(async () => {
    killAll();
    await w?.close();
  });

  itRanTheWholeScript(() => attack);

  // review 2026-12-04 finding 5: a writable tree that holds a running Sluice's state is
  // refused (the command could move a parent and plant its own), wherever Sluice's config lies.
  it('refuses DIR itself as the writable tree (the default from DIR): it holds Sluice’s state', async () => {
    const refused = await runAttacks(w, identity, victim, { groups: [], args: ['--grant-socket', w.aSocket], cwd: w.dir });
    expect(refused.run.code).toBe(125);
    expect(refused.run.stderr).toContain(`refusing to make ${w.dir} writable: it holds ${w.dir}/`);
    expect(refused.run.stdout).not.toContain('END');
  });

  it('still reaches the granted origin through the bridge, as grant a', () => {
    expect(checkLine(attack.report, 'granted-request')).toBe('CHECK granted-request OK');
    expect(w.allowed.requests.map((r) => r.url)).toContain('/through-bridge');
    expect(attack.decisions.find((d) => d.target.includes('allowed.test'))).toMatchObject({ principal: 'a', via: 'listener', reason: 'granted' });
  });

  it.each(ATTACKS)('blocks %s', (name) => {
    expect(attackLine(attack.report, name)).toMatch(new RegExp(`^ATTACK ${name.replace(/[.]/g, '\\.')} BLOCKED`));
  });

  it('issues no grant through the admin socket, and no principal but a acts', async () => {
    expect((await w.sluice.listGrants()).map((g) => g.id)).toEqual(w.grantIds);
    expect(attack.decisions.filter((d) => d.principal !== 'a')).toEqual([]);
    expect(w.secret.requests).toEqual([]);
    expect(attack.run.stdout).not.toContain(SECRET_BODY);
  });

  it('leaves Sluice’s sockets and state where they were, and Sluice answering on them', async () => {
    expect(attack.report.attacks.get('unlink-sockets')).toMatch(/^TRIED/);
    for (const file of [w.adminSocket, w.aSocket, w.bSocket]) expect(fs.statSync(file).isSocket(), file).toBe(true);
    expect(fs.existsSync(w.ledgerFile)).toBe(true);
    expect(await adminHealth(w.adminSocket)).toBe(200);
    expect(w.sluice.alive()).toBe(true);
  });

  // Otherwise config-read, audit-read and ledger-read would be BLOCKED for want of anything to read.
  it('has a config, an audit file with records and a ledger on the host for the command to try', () => {
    expect(w.configText).not.toBe('');
    expect(w.sluice.records().length).toBeGreaterThan(0);
    expect(fs.statSync(w.ledgerFile).size).toBeGreaterThan(0);
  });

  // With --grant-socket alone, sluice run is not told which file is Sluice's config (it finds the
  // running `sluice start --config sluice.yaml` in /proc), and the working directory is writable by
  // default; the review's worst case still needs this to fail (finding 4: an edited sluice.yaml grants
  // anything at the next reload or restart).
  it('blocks config-write: sluice.yaml is unchanged on the host', () => {
    expect(attack.report.attacks.get('config-write')).toMatch(/^TRIED/);
    expect(fs.readFileSync(w.configFile, 'utf8')).toBe(w.configText);
  });

  it('lets nothing reach the host’s abstract socket or resolver', () => {
    expect(w.abstract.connections).toBe(0);
    expect(w.dns.packets).toBe(0);
  });

  it('shows no secret of the caller, the victim or the caller’s HOME in any environment or command line inside', () => {
    expect(attack.report.checks.get('home-empty')).toBe('OK');
    expect(attack.run.stdout).toMatch(/^DUMP env PATH=/m);
    expect(leakedSecrets(attack.run.stdout)).toEqual([]);
    expect(attack.run.stdout).not.toMatch(/^DUMP env SLUICE_/m);
    expect(victim.exitCode).toBeNull();
  });
});
