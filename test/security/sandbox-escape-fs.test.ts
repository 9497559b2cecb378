// Threat: a hostile command under `sluice run` reads or rewrites Sluice's files, or writes where it
// was not allowed to (review 2026-12, findings 2-4; issue 12). The review's sandbox shared the host's
// filesystem: it read state/ledger.json, rewrote the sluice.yaml that Sluice reloads on SIGHUP, and
// used every socket in state/. Two runs from the review's worst-case DIR (see sandbox-escape.test.ts):
// - `--grant-socket … --write DIR/work --read DIR/input`: only DIR/work is writable, DIR/input is
//   read-only, and nothing else of DIR (config, ledger, audit file, sockets) is there to read or use;
// - `--destination … --config DIR/sluice.yaml --read DIR` from DIR/work: the config file, the state
//   directory and the audit file are masked, so the command can neither read nor change them, nor
//   move the state directory away from Sluice. DIR itself writable is refused (review 2026-12-04
//   finding 5: a command that may rename a parent of Sluice's files can plant its own in their place).
// The attempts come from test/support/sandbox-attacks.sh; the host checks what changed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { giveTo, identities, killAll, sandboxSkipReason } from '../support/sandbox.js';
import {
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
if (skip !== null) console.log(`skipping sandbox-escape-fs: ${skip}`);

// config-write and write-outside-write-dirs are judged on the host: a write that works inside may land
// in the sandbox's own scratch space (the parents bubblewrap makes for DIR/work live in its /tmp).
const STATE_ATTACKS = ['ledger-read', 'config-read', 'audit-read'];
const SOCKET_ATTACKS = ['admin-socket', 'other-grant-socket', 'rename-state-dir'];

function expectIntact(w: WorstCase): void {
  expect(fs.readFileSync(w.configFile, 'utf8')).toBe(w.configText);
  for (const file of [w.adminSocket, w.aSocket, w.bSocket]) expect(fs.statSync(file).isSocket(), file).toBe(true);
  expect(fs.existsSync(w.ledgerFile)).toBe(true);
  expect(w.secret.requests).toEqual([]);
}

describe.skipIf(skip !== null).each(identities())('sluice run --write DIR/work --read DIR/input, as $label', (identity) => {
  let w: WorstCase;
  let victim: ChildProcess;
  let attack: AttackRun;

  beforeAll(async () => {
    w = await startWorstCase();
    giveTo(identity, w.dir, w.callerHome);
    victim = startVictim(identity);
    const args = ['--grant-socket', w.aSocket, '--write', path.join(w.dir, 'work'), '--read', path.join(w.dir, 'input')];
    attack = await runAttacks(w, identity, victim, { groups: ['state', 'sockets', 'workdirs'], args });
  }, 120_000);
  afterAll(async () => {
    killAll();
    await w?.close();
  });

  itRanTheWholeScript(() => attack);

  it('writes into the --write directory and reads the --read file', () => {
    expect(checkLine(attack.report, 'write-work')).toBe('CHECK write-work OK');
    expect(checkLine(attack.report, 'read-input')).toBe('CHECK read-input OK');
    expect(fs.readFileSync(path.join(w.dir, 'work/out.txt'), 'utf8')).toBe('from-sandbox\n');
  });

  it.each([...STATE_ATTACKS, ...SOCKET_ATTACKS, 'write-input'])('blocks %s', (name) => {
    expect(attackLine(attack.report, name)).toMatch(new RegExp(`^ATTACK ${name} BLOCKED`));
  });

  it('blocks config-write and write-outside-write-dirs: sluice.yaml and the working directory are unchanged on the host', () => {
    expect(attack.report.attacks.get('config-write')).toMatch(/^TRIED/);
    expect(attack.report.attacks.get('write-outside-write-dirs')).toMatch(/^TRIED/);
    expect(fs.readFileSync(w.configFile, 'utf8')).toBe(w.configText);
    expect(fs.existsSync(path.join(w.dir, 'cwd-write.txt'))).toBe(false);
  });

  it('leaves the --read file and Sluice’s files as they were', async () => {
    expect(fs.readFileSync(path.join(w.dir, 'input/in.txt'), 'utf8')).toBe('input');
    expectIntact(w);
    expect((await w.sluice.listGrants()).map((g) => g.id)).toEqual(w.grantIds);
  });
});

// --destination needs the caller to reach the admin socket and then its own run's grant socket, which
// Sluice creates as its own uid (0600): the caller is Sluice's uid, here the test runner. The
// unprivileged identity is covered for --grant-socket above and in the other escape files.
describe.skipIf(skip !== null)('sluice run --destination --config DIR/sluice.yaml --read DIR from DIR/work, as the test runner', () => {
  let w: WorstCase;
  let victim: ChildProcess;
  let attack: AttackRun;
  const runner = { label: 'runner', uid: null };

  beforeAll(async () => {
    w = await startWorstCase();
    victim = startVictim(runner);
    const args = ['--destination', `http://allowed.test:${w.allowed.port}`, '--allow-class', 'loopback', '--config', w.configFile, '--admin', `unix:${w.adminSocket}`, '--read', w.dir];
    attack = await runAttacks(w, runner, victim, { groups: ['state', 'sockets', 'net', 'env'], args, cwd: path.join(w.dir, 'work') });
  }, 120_000);
  afterAll(async () => {
    killAll();
    await w?.close();
  });

  itRanTheWholeScript(() => attack);

  it('refuses DIR itself as the writable tree, and leaves no run-owned grant behind', async () => {
    const args = ['--destination', `http://allowed.test:${w.allowed.port}`, '--allow-class', 'loopback', '--config', w.configFile];
    const refused = await runAttacks(w, runner, victim, { groups: [], args, cwd: w.dir });
    expect(refused.run.code).toBe(125);
    expect(refused.run.stderr).toContain(`refusing to make ${w.dir} writable: it holds ${w.dir}/`);
    const left = (await w.sluice.listGrants()).filter((g) => !w.grantIds.includes(g.id) && g.revokedAt === null);
    expect(left).toEqual([]);
  });

  it('reaches the run’s destination through the run-owned grant, and leaves that grant revoked afterwards', async () => {
    expect(checkLine(attack.report, 'granted-request')).toBe('CHECK granted-request OK');
    const decision = attack.decisions.find((d) => d.target.includes('allowed.test'));
    expect(decision).toMatchObject({ via: 'listener', reason: 'granted' });
    expect(w.grantIds).not.toContain(decision?.principal);
    const left = (await w.sluice.listGrants()).filter((g) => !w.grantIds.includes(g.id) && g.revokedAt === null);
    expect(left).toEqual([]);
  });

  it.each([...STATE_ATTACKS, ...SOCKET_ATTACKS, 'other-grant-tcp-listener', 'abstract-socket', 'direct-loopback', 'env-secrets'])('blocks %s', (name) => {
    expect(attackLine(attack.report, name)).toMatch(new RegExp(`^ATTACK ${name} BLOCKED`));
  });

  it('blocks config-write: sluice.yaml is unchanged on the host', () => {
    expect(attack.report.attacks.get('config-write')).toMatch(/^TRIED/);
    expect(fs.readFileSync(w.configFile, 'utf8')).toBe(w.configText);
  });

  it('leaves Sluice’s config, state and sockets as they were; the run’s token is nowhere inside', () => {
    expectIntact(w);
    expect(attack.run.stdout).not.toContain(SECRET_BODY);
    expect(leakedSecrets(attack.run.stdout)).toEqual([]);
    expect(attack.decisions.filter((d) => d.principal === 'b' || d.principal === 'c')).toEqual([]);
  });
});
