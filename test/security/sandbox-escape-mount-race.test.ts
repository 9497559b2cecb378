// Threat: a running sandbox swaps a directory for a symlink between `sluice run`'s plan and bwrap's
// mount, so that a later run mounts a host directory of the attacker's choice read-write (review
// 2026-12-04 finding 4, high: won 12 of 40). planSandbox resolved `--write P/sub` and checked it,
// then handed bwrap the path, which bwrap resolved again when it mounted. Sandbox A (P writable, as
// its working directory) swaps P/sub with a symlink to O (outside, holding secret.txt) with
// renameat2(RENAME_EXCHANGE) in a loop; meanwhile the host runs B, `sluice run --write P/sub -- sh -c
// 'cat P/sub/secret.txt; echo X > P/sub/race-write'` (and the same by O's path), again and again
// (bounded: 40 runs, 30 s). What must hold: no B ever sees O: each either works in the real P/sub
// (exit 0) or is refused, fail-closed, before its command runs (125: the path goes through a symlink,
// moved, changed, is not a directory, or bwrap cannot find its source); nothing is created in O.
// The deterministic variants: a --write or --read path that goes through a symlink is refused (125),
// whether it leads to the caller's HOME or to a directory that would be permitted by its real path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { callerEnv, giveTo, identities, killAll, sandboxSkipReason, startSluiceRun, type Identity, type RunResult } from '../support/sandbox.js';
import { killSluiceProcesses } from '../support/sluice-process.js';
import { describeRun, escapeRe, fileState, removeScratch, scratchDir, sluiceRun, snapshot, startGrantSluice, type GrantSluice } from '../support/sandbox-review2.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-escape-mount-race: ${skip}`);

const SECRET = 'HOST-SECRET-OUTSIDE-race';
const SWAP_LIMIT_S = 30;
const MAX_B_RUNS = 40;
const B_WINDOW_MS = 30_000;

// The review's swap script, bounded: in A's working directory P, until STOP exists or LIMIT seconds.
const SWAP = String.raw`
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
target, stop, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
if not os.path.lexists('sublink'):
    os.symlink(target, 'sublink')
end = time.monotonic() + limit
n = 0
print('SWAPPING', flush=True)
while time.monotonic() < end and not os.path.exists(stop):
    for _ in range(256):
        if libc.syscall(316, -100, b'sub', -100, b'sublink', 2) == 0:
            n += 1
if os.path.islink('sub'):
    libc.syscall(316, -100, b'sub', -100, b'sublink', 2)
print('SWAPS %d' % n, flush=True)
`;

// The review's B (through P/sub), then the same two steps by O's own path: when B's plan resolved P/sub
// while it was the symlink, O itself is mounted (at O), which is the review's escape too (a directory
// nobody passed to --write, writable), though the review's B would only fail to find P/sub. The last
// step decides the exit status; the markers split what was read which way.
const B_COMMAND = (sub: string, o: string): string =>
  `echo VIA-SUB; cat ${sub}/secret.txt; echo VIA-O; cat ${o}/secret.txt 2>/dev/null; (echo X > ${o}/race-write-direct) 2>/dev/null; echo X > ${sub}/race-write`;
const viaSub = (r: RunResult): string => r.stdout.split('VIA-O')[0] ?? '';
const viaO = (r: RunResult): string => r.stdout.split('VIA-O')[1] ?? '';
/**
 * A B refused fail-closed: exit 125, its command never ran (no output), and Sluice said so. Why (the
 * path went through a symlink, a tree moved, bubblewrap no longer found a source) varies with the
 * moment of the swap, and bubblewrap's own wording is not ours to pin.
 */
const isFailClosed = (r: RunResult): boolean => r.code === 125 && r.stdout === '' && r.stderr.includes('refusing to run the command unconfined');

describe.skipIf(skip !== null).each(identities())('sluice run --write: a tree swapped for a symlink between plan and mount, as $label', (identity: Identity) => {
  let sluice: GrantSluice;
  let p: string;
  let o: string;
  let home: string;
  let neutral: string;
  let subIno: number;
  let swapper: RunResult;
  let oBefore: string;
  const runs: RunResult[] = [];

  beforeAll(async () => {
    sluice = await startGrantSluice({ configDir: scratchDir('race-conf'), identity });
    p = scratchDir('race-p');
    o = scratchDir('race-o');
    home = scratchDir('race-home');
    neutral = scratchDir('race-cwd');
    fs.mkdirSync(path.join(p, 'sub'));
    fs.writeFileSync(path.join(o, 'secret.txt'), SECRET);
    giveTo(identity, p, o, home, neutral);
    subIno = fs.lstatSync(path.join(p, 'sub')).ino;
    oBefore = fileState(o);
    const stop = path.join(p, 'stop');
    const a = startSluiceRun(['--grant-socket', sluice.grantSocket, '--', 'python3', '-c', SWAP, o, stop, String(SWAP_LIMIT_S)], {
      cwd: p,
      env: callerEnv(home),
      identity,
      timeoutMs: (SWAP_LIMIT_S + 30) * 1000,
    });
    await a.waitForOutput('SWAPPING', 20_000);
    const sub = path.join(p, 'sub');
    const deadline = Date.now() + B_WINDOW_MS;
    while (runs.length < MAX_B_RUNS && Date.now() < deadline) {
      const b = await sluiceRun(['--write', sub, '--grant-socket', sluice.grantSocket, '--', 'sh', '-c', B_COMMAND(sub, o)], {
        cwd: neutral,
        identity,
        home,
        timeoutMs: 15_000,
      });
      runs.push(b);
    }
    fs.writeFileSync(stop, '');
    swapper = await a.result;
  }, 150_000);
  afterAll(async () => {
    killAll();
    await killSluiceProcesses();
    removeScratch();
  });

  it('really raced: A swapped more than 1000 times, B ran at least 10 times', () => {
    const swaps = Number(/^SWAPS (\d+)$/m.exec(swapper.stdout)?.[1] ?? -1);
    expect(swaps, describeRun(swapper)).toBeGreaterThan(1000);
    expect(runs.length).toBeGreaterThanOrEqual(10);
  });

  it('blocks every B from seeing O through P/sub: no run printed the secret, O/race-write never exists', () => {
    const leaked = runs.filter((r) => viaSub(r).includes(SECRET));
    expect(leaked.length, `${leaked.length} of ${runs.length} runs read O through P/sub; the first: ${leaked.slice(0, 2).map(describeRun).join('\n')}`).toBe(0);
    expect(fileState(path.join(o, 'race-write'))).toBe('absent');
  });

  it('never mounts O in B at all: nothing read or written by O’s own path', () => {
    expect(fileState(path.join(o, 'race-write-direct'))).toBe('absent');
    const mounted = runs.filter((r) => viaO(r).includes(SECRET));
    expect(mounted.length, `${mounted.length} of ${runs.length} runs had O mounted; the first: ${mounted.slice(0, 2).map(describeRun).join('\n')}`).toBe(0);
  });

  it('creates nothing inside O: it holds only secret.txt, as before', () => {
    expect(fs.readdirSync(o)).toEqual(['secret.txt']);
    expect(fileState(o)).toBe(oBefore);
  });

  it('ends every B with 0 (it worked in the real P/sub) or 125, refused before its command ran (fail-closed)', () => {
    const odd = runs.filter((r) => !((r.code === 0 && viaSub(r).includes('VIA-SUB')) || isFailClosed(r)));
    // Grouped by exit status and first stderr line, so that the failure shows every kind of outcome.
    const kinds = new Map<string, number>();
    for (const r of odd) {
      const key = `exit ${r.code ?? r.signal}: ${r.stderr.split('\n')[0]?.replaceAll(p, 'P').replaceAll(o, 'O').slice(0, 200) ?? ''}`;
      kinds.set(key, (kinds.get(key) ?? 0) + 1);
    }
    const tally = [...kinds].map(([k, n]) => `${n} x ${k}`).join('\n');
    expect(odd.length, `${odd.length} of ${runs.length} runs ended otherwise (exit codes ${runs.map((r) => r.code).join(' ')}):\n${tally}`).toBe(0);
    // A left P/sub as the directory it was; whatever B wrote with exit 0 is in it.
    expect(fs.lstatSync(path.join(p, 'sub')).ino).toBe(subIno);
    if (runs.some((r) => r.code === 0)) expect(fs.readFileSync(path.join(p, 'sub/race-write'), 'utf8')).toBe('X\n');
  });

  it('refuses, exit 125, --write LINK where LINK is a symlink to the caller’s HOME; the command never runs', async () => {
    const links = scratchDir('race-links');
    fs.symlinkSync(home, path.join(links, 'to-home'));
    giveTo(identity, links);
    const r = await sluiceRun(['--write', path.join(links, 'to-home'), '--grant-socket', sluice.grantSocket, '--', 'sh', '-c', `echo ran > ${home}/ran`], { cwd: neutral, identity, home });
    expect(r.code, describeRun(r)).toBe(125);
    expect(r.stderr, describeRun(r)).toMatch(/goes through a symlink|home directory/);
    expect(fileState(path.join(home, 'ran'))).toBe('absent');
  }, 60_000);

  it.each(['--write', '--read'])('refuses, exit 125, %s LINK where LINK is a symlink to a permitted directory: nothing is written anywhere', async (flag) => {
    const links = scratchDir('race-links2');
    const target = scratchDir('race-target');
    const marker = scratchDir('race-marker');
    const link = path.join(links, 'to-target');
    fs.symlinkSync(target, link);
    giveTo(identity, links, target, marker);
    const before = snapshot([links, target, o, p, marker]);
    const command = `echo ran > ${marker}/ran; echo x > ${target}/f; echo x > ${link}/g; echo x > ${links}/h`;
    const r = await sluiceRun([flag, link, '--grant-socket', sluice.grantSocket, '--', 'sh', '-c', command], { cwd: neutral, identity, home });
    expect(r.code, describeRun(r)).toBe(125);
    expect(r.stderr, describeRun(r)).toMatch(new RegExp(`goes through a symlink \\(it leads to ${escapeRe(target)}\\)`));
    expect(r.stdout).toBe('');
    expect(snapshot([links, target, o, p, marker])).toEqual(before);
  }, 60_000);
});
