// Threat (review 2026-12-04 finding 1): a descriptor the caller's process held without
// close-on-exec (`exec 20</` in its shell, a control pipe, a listening socket) crosses exec(2) into the
// sandbox; through /proc/self/fd/N a directory reaches outside every namespace (/etc/shadow, the admin
// socket). Tested on the class, not an instance: a real process is started holding one descriptor of
// every kind at 20..25, 100 and 250 (python3 dup2s them, then execs node), and the module runs in it.
// (Not at 3..9: Node marks those close-on-exec itself at start, so they never cross exec.)
// Also standard input, output or error being a directory: the same escape through 0, 1 or 2.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { inheritableDescriptors } from '../../../src/cli/descriptors.js';

/** Holds the spec's descriptors at the given numbers (inheritable), closes every other one above 2, execs argv[2:]. */
const WRAPPER = `
import fcntl, json, os, socket, sys
spec = json.loads(sys.argv[1])
held = []
for target, kind, arg in spec:
    if kind == 'dir': fd = os.open(arg, os.O_RDONLY | os.O_DIRECTORY)
    elif kind == 'opath': fd = os.open(arg, os.O_PATH)
    elif kind == 'file': fd = os.open(arg, os.O_RDWR)
    elif kind == 'devnull': fd = os.open('/dev/null', os.O_RDWR)
    elif kind == 'pipe-r': fd = os.pipe()[0]
    elif kind == 'pipe-w': fd = os.pipe()[1]
    elif kind == 'unix': fd = socket.socketpair()[0].detach()
    elif kind == 'tcp-listen':
        s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); fd = s.detach()
    held.append((target, fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 500)))
    os.close(fd)
for target, fd in held:
    os.dup2(fd, target, inheritable=True)
targets = [t for t, _, _ in spec]
for name in os.listdir('/proc/self/fd'):
    if int(name) > 2 and int(name) not in targets:
        try: os.close(int(name))
        except OSError: pass
os.execv(sys.argv[2], sys.argv[2:])
`;

/** Runs the module inside the started process; writes what it saw to `out` (stdout may be the directory under test). */
const CHILD = `
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
const [mod, mode, out, scratch, keep] = process.argv.slice(2);
const d = await import(mod);
const listFds = () => fs.readdirSync('/proc/self/fd').map(Number).filter((fd) => { try { fs.fstatSync(fd); return true; } catch { return false; } });
const tryRead = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return e.code; } };
const grandchild = () => {
  const o = out + '.grandchild';
  spawnSync(process.execPath, [process.argv[1], mod, 'list', o], { stdio: 'ignore' });
  return JSON.parse(fs.readFileSync(o, 'utf8')).before;
};
const r = {};
if (mode === 'stdio') r.refusal = d.stdioRefusal();
else {
  r.before = d.inheritableDescriptors();
  r.all = listFds();
  if (mode === 'spread') {
    r.grandchild = grandchild();
    r.readBefore = tryRead('/proc/self/fd/20/secret.txt');
    r.left = d.closeInheritedDescriptors(keep === undefined ? [] : JSON.parse(keep));
    r.readAfter = tryRead('/proc/self/fd/20/secret.txt');
    r.after = d.inheritableDescriptors();
    r.allAfter = listFds();
    if (keep !== undefined) for (const fd of JSON.parse(keep)) fs.writeSync(fd, 'through the kept descriptor');
    // Node's own (close-on-exec) descriptors still work: the thread pool, timers, a new file, a child.
    await fs.promises.writeFile(scratch, 'still works');
    r.reread = await fs.promises.readFile(scratch, 'utf8');
    await new Promise((resolve) => setTimeout(resolve, 5));
    r.grandchildAfter = grandchild();
    process.stdout.write('stdout works\\n');
  }
}
fs.writeFileSync(out, JSON.stringify(r));
`;

let dir: string;
let outside: string;
let childScript: string;
let moduleUrl: string;
let counter = 0;

type Kind = 'dir' | 'opath' | 'file' | 'devnull' | 'pipe-r' | 'pipe-w' | 'unix' | 'tcp-listen';

/** Starts the child holding `spec`'s descriptors (relative paths under `dir`); returns what it reported and its stdout. */
function runChild(spec: ReadonlyArray<readonly [number, Kind, string?]>, mode: 'list' | 'spread' | 'stdio', keep?: readonly number[]): { result: Record<string, unknown>; stdout: string } {
  const out = path.join(dir, `out-${++counter}.json`);
  const scratch = path.join(dir, `scratch-${counter}`);
  const args = [childScript, moduleUrl, mode, out, scratch, ...(keep === undefined ? [] : [JSON.stringify(keep)])];
  const resolved = spec.map(([t, k, a]) => [t, k, a === undefined ? '' : path.resolve(dir, a)]);
  const r = spawnSync('python3', ['-c', WRAPPER, JSON.stringify(resolved), process.execPath, ...args], { encoding: 'utf8', timeout: 15_000 });
  expect(r.status, r.stderr).toBe(0);
  return { result: JSON.parse(fs.readFileSync(out, 'utf8')) as Record<string, unknown>, stdout: r.stdout };
}

beforeAll(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-descriptors-')));
  outside = path.join(dir, 'outside');
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'HOST-SECRET');
  for (const file of ['file', 'stdout-file']) fs.writeFileSync(path.join(dir, file), '');
  // The module as it is in src (not a possibly stale dist), run by a plain node.
  const source = fs.readFileSync(new URL('../../../src/cli/descriptors.ts', import.meta.url), 'utf8');
  const js = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  fs.writeFileSync(path.join(dir, 'descriptors.mjs'), js);
  moduleUrl = `file://${path.join(dir, 'descriptors.mjs')}`;
  childScript = path.join(dir, 'child.mjs');
  fs.writeFileSync(childScript, CHILD);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('inheritableDescriptors / closeInheritedDescriptors in a process started holding the caller’s descriptors', () => {
  const SPREAD: ReadonlyArray<readonly [number, Kind, string?]> = [
    [20, 'dir', 'outside'], [21, 'file', 'file'], [22, 'pipe-r'], [23, 'pipe-w'], [24, 'unix'], [25, 'tcp-listen'], [100, 'opath', '/'], [250, 'dir', '/'],
  ];
  const TARGETS = SPREAD.map(([t]) => t);
  let spread: Record<string, unknown>;
  let stdout: string;
  beforeAll(() => ({ result: spread, stdout } = runChild(SPREAD, 'spread')));

  it('lists every one of them, of every kind and at high numbers, and nothing of Node’s own', () => {
    expect(spread['before']).toEqual(TARGETS);
  });

  it('(control) the escape is real: the directory reads outside, and a child Node spawns receives them all', () => {
    expect(spread['readBefore']).toBe('HOST-SECRET');
    expect(spread['grandchild']).toEqual(TARGETS);
  });

  it('closes them all: none is left, none reaches a child spawned afterwards, the directory reads nothing', () => {
    expect(spread['left']).toEqual([]);
    expect(spread['after']).toEqual([]);
    expect(spread['grandchildAfter']).toEqual([]);
    expect(spread['readAfter']).toBe('ENOENT');
    for (const fd of TARGETS) expect(spread['allAfter']).not.toContain(fd);
  });

  it('leaves Node’s own close-on-exec descriptors open and working (stdout, a new file, timers, spawn)', () => {
    const own = (spread['all'] as number[]).filter((fd) => !TARGETS.includes(fd));
    for (const fd of own) expect(spread['allAfter']).toContain(fd);
    expect(spread['reread']).toBe('still works');
    expect(stdout).toBe('stdout works\n');
  });

  it('keeps exactly what `keep` names, and it still works; reports it as not left over', () => {
    const { result } = runChild(SPREAD, 'spread', [21]);
    expect(result['left']).toEqual([]);
    expect(result['after']).toEqual([21]);
    expect(result['grandchildAfter']).toEqual([21]);
    expect(fs.readFileSync(path.join(dir, 'file'), 'utf8')).toBe('through the kept descriptor');
  });
});

describe('inheritableDescriptors reads fdinfo flags (a fake /proc)', () => {
  it('lists only numbers at or above 3 without O_CLOEXEC, in numeric order, skipping unreadable fdinfo', () => {
    const proc = path.join(dir, 'fake-proc');
    fs.mkdirSync(path.join(proc, 'fd'), { recursive: true });
    fs.mkdirSync(path.join(proc, 'fdinfo'));
    const flags: Record<string, string | null> = { 0: '0100002', 1: '01', 2: '02', 3: '02100000', 9: '0100000', 10: '00', 12: null, 200: '04000', notanumber: '0' };
    for (const [fd, f] of Object.entries(flags)) {
      fs.writeFileSync(path.join(proc, 'fd', fd), '');
      if (f !== null) fs.writeFileSync(path.join(proc, 'fdinfo', fd), `pos:\t0\nflags:\t${f}\nmnt_id:\t1\n`);
    }
    expect(inheritableDescriptors(proc)).toEqual([9, 10, 200]);
    expect(inheritableDescriptors(path.join(dir, 'no-such-proc'))).toEqual([]);
  });
});

describe('stdioRefusal: a directory at 0, 1 or 2 is refused, naming the descriptor', () => {
  it.each([
    [0, 'standard input'],
    [1, 'standard output'],
    [2, 'standard error'],
  ])('a directory at %i (%s)', (fd, name) => {
    const { result } = runChild([[fd, 'dir', '/']], 'stdio');
    expect(result['refusal']).toContain(`descriptor ${fd} (${name}) is a directory`);
  });

  it('an O_PATH handle on a directory at 0 (openat through it reaches just as far)', () => {
    const { result } = runChild([[0, 'opath', '/']], 'stdio');
    expect(result['refusal']).toContain('descriptor 0');
  });

  it.each<[string, ReadonlyArray<readonly [number, Kind, string?]>]>([
    ['pipes (as spawned)', []],
    ['/dev/null at 0', [[0, 'devnull']]],
    ['a regular file at 1', [[1, 'file', 'stdout-file']]],
    ['a socket at 0', [[0, 'unix']]],
  ])('what the caller means to share passes: %s', (_label, stdio) => {
    const { result } = runChild(stdio, 'stdio');
    expect(result['refusal']).toBeNull();
  });
});
