// Threat: a hostile command under `sluice run` acts on host processes or regains privilege (review
// 2026-12, findings 1 and 4; issue 12). Before bubblewrap, root's sandbox kept every capability and
// the host PID namespace: `nsenter -t <sluice pid> -n` left the network namespace, and any sandbox
// could SIGKILL or SIGHUP Sluice (and, as root, read its environ with the tokenEnv secrets). From
// inside, one script (test/support/sandbox-attacks.sh) tries, against Sluice (a real
// `sluice start --config sluice.yaml` child process running from DIR as root, with grant b's tokenEnv
// secret in its environment) and a victim host process of the caller's own uid that holds a secret in
// its environment:
// - kill -0 and kill -HUP; reading /proc/<pid>/environ; nsenter into its net, mount and user
//   namespaces; PTRACE_ATTACH; and whether its session leader is outside (no --new-session: TIOCSTI);
// - privileges: any capability, no_new_privs unset, no seccomp filter, a namespace shared with the
//   host, mount(2) of a tmpfs, unshare -U / -n / -Urn (user namespaces are off inside), and the
//   calls the filter must refuse (keyctl, bpf, ptrace itself; review 2026-12-04 finding 8: open_tree_attr,
//   pidfd_getfd on every visible process's descriptors, modify_ldt, memfd_secret, process_madvise, and
//   numbers above the filter's table, which must be ENOSYS).
// Every attempt must fail; on the host, Sluice logged no reload (each SIGHUP makes one: the host's own
// SIGHUP afterwards shows it), it is still running, and the victim is alive. Runs as
// root and as uid 21001 (the victim then runs as 21001 too, so ownership alone does not protect it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { waitUntil } from '../support/wait.js';
import { giveTo, identities, killAll, sandboxSkipReason } from '../support/sandbox.js';
import {
  itRanTheWholeScript,
  attackLine,
  isAlive,
  runAttacks,
  startVictim,
  startWorstCase,
  type AttackRun,
  type WorstCase,
} from '../support/sandbox-worst-case.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-escape-proc: ${skip}`);

const ATTACKS = [
  'signal-sluice',
  'hup-sluice',
  'signal-victim',
  'hup-victim',
  'environ-sluice',
  'environ-victim',
  'nsenter-sluice-net',
  'nsenter-victim-net-mnt',
  'nsenter-victim-user',
  'ptrace-sluice',
  'ptrace-victim',
  'session-leader-outside',
  'capabilities',
  'no-new-privs-unset',
  'seccomp-missing',
  ...['user', 'pid', 'mnt', 'ipc', 'uts', 'net'].map((ns) => `namespace-${ns}`),
  'mount-tmpfs',
  'unshare-user',
  'unshare-net',
  'unshare-user-net',
  'seccomp-keyctl',
  'seccomp-bpf',
  'seccomp-open-tree-attr',
  'seccomp-pidfd-getfd',
  'seccomp-modify-ldt',
  'seccomp-memfd-secret',
  'seccomp-process-madvise',
  'seccomp-unknown-syscall',
  'ptrace-traceme',
];

describe.skipIf(skip !== null).each(identities())('sluice run: processes and privileges, as $label', (identity) => {
  let w: WorstCase;
  let victim: ChildProcess;
  let attack: AttackRun;

  beforeAll(async () => {
    w = await startWorstCase();
    giveTo(identity, w.dir, w.callerHome);
    victim = startVictim(identity);
    // DIR itself holds Sluice's state, so it is shown read-only; the command works in DIR/work.
    const work = path.join(w.dir, 'work');
    attack = await runAttacks(w, identity, victim, { groups: ['proc', 'priv'], args: ['--grant-socket', w.aSocket, '--read', w.dir, '--write', work], cwd: work });
  }, 120_000);
  afterAll(async () => {
    killAll();
    await w?.close();
  });

  itRanTheWholeScript(() => attack);

  it.each(ATTACKS)('blocks %s', (name) => {
    expect(attackLine(attack.report, name)).toMatch(new RegExp(`^ATTACK ${name} BLOCKED`));
  });

  it('leaves Sluice unsignalled and running, and the victim running', async () => {
    expect(w.hupsReceived).toBe(0);
    expect(w.sluice.alive()).toBe(true);
    expect(isAlive(victim)).toBe(true);
    // The control: a SIGHUP that does reach Sluice shows as exactly one reload.
    process.kill(w.sluice.pid, 'SIGHUP');
    await waitUntil(() => w.hupsReceived >= 1, { timeoutMs: 5000, label: 'Sluice logs the reload of the host’s SIGHUP' });
    expect(w.hupsReceived).toBe(1);
    expect(w.sluice.alive()).toBe(true);
  });
});
