// Threat (review 2026-12-04 finding 4): a running sandbox swaps a directory of its tree for a
// symlink between the plan's check and the mount (won 12 of 40), and the next run mounts a host
// directory of its choosing read-write. openTree opens the tree once, reads back where the descriptor
// really is, and refuses anything but the checked path; the descriptor then pins that inode whatever
// the path names later. It must not block on a FIFO planted at the path, nor leak across exec.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { identityOf, openTree, type OpenTreeResult } from '../../../src/cli/open-tree.js';

let base: string;
const opened: number[] = [];

/** openTree, remembering the descriptor so it is closed whatever the test asserts. */
function open(p: string, flag = '--write'): OpenTreeResult {
  const result = openTree(p, flag);
  if (result.ok) opened.push(result.tree.fd);
  return result;
}

function ok(result: OpenTreeResult): Extract<OpenTreeResult, { ok: true }>['tree'] {
  if (!result.ok) throw new Error(result.message);
  return result.tree;
}

beforeAll(() => {
  base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-open-tree-')));
  fs.mkdirSync(path.join(base, 'dir/c'), { recursive: true });
  fs.mkdirSync(path.join(base, 'b/c'), { recursive: true });
  fs.writeFileSync(path.join(base, 'file'), 'x');
  fs.symlinkSync(path.join(base, 'b'), path.join(base, 'a')); // a -> b: an intermediate component swapped
  fs.symlinkSync(path.join(base, 'b/c'), path.join(base, 'last')); // the last component a symlink
  fs.symlinkSync(path.join(base, 'nowhere'), path.join(base, 'dangling'));
  execFileSync('mkfifo', [path.join(base, 'fifo')]);
});
afterEach(() => {
  for (const fd of opened.splice(0)) fs.closeSync(fd);
});
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

describe('openTree', () => {
  it('returns a descriptor whose /proc/self/fd path is the path and whose identity is its lstat dev:ino', () => {
    for (const [p, isDirectory] of [[path.join(base, 'dir'), true], [path.join(base, 'file'), false], ['/', true]] as const) {
      const tree = ok(open(p));
      expect(tree.real).toBe(p);
      expect(fs.readlinkSync(`/proc/self/fd/${tree.fd}`)).toBe(p);
      const st = fs.lstatSync(p, { bigint: true });
      expect(tree.identity).toBe(`${st.dev}:${st.ino}`);
      expect(tree.identity).toBe(identityOf(p));
      expect(tree.isDirectory).toBe(isDirectory);
    }
  });

  it('refuses a path whose last component is a symlink (to a directory, or dangling), naming the flag and the path', () => {
    for (const p of [path.join(base, 'last'), path.join(base, 'dangling')]) {
      const result = open(p, '--read');
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.message).toContain(`--read ${p}`);
        expect(result.message).toMatch(/symlink|moved|ELOOP/);
      }
    }
  });

  it('refuses a path with an intermediate component swapped for a symlink: the descriptor is elsewhere', () => {
    const p = path.join(base, 'a/c');
    const result = open(p);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toContain(`moved while it was being opened (it is now ${path.join(base, 'b/c')})`);
  });

  it('refuses a path that is not in normal form (what it reads back differs) and one that does not exist', () => {
    const trailing = open(`${path.join(base, 'dir')}/`);
    expect(trailing.ok).toBe(false);
    const missing = open(path.join(base, 'missing'));
    expect(missing).toEqual({ ok: false, message: `--write ${path.join(base, 'missing')}: ENOENT` });
  });

  it('closes the descriptor it refuses (no descriptor left behind per refusal)', () => {
    const count = (): number => fs.readdirSync('/proc/self/fd').length;
    const before = count();
    for (let i = 0; i < 20; i += 1) open(path.join(base, 'a/c'));
    expect(count()).toBe(before);
  });

  // In a child: a blocked open(2) could not time out in this process.
  it('does not block on a FIFO at the path (O_PATH opens no reader)', () => {
    const js = ts.transpileModule(fs.readFileSync(new URL('../../../src/cli/open-tree.ts', import.meta.url), 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    fs.writeFileSync(path.join(base, 'open-tree.mjs'), js);
    const code = `import { openTree } from ${JSON.stringify(`file://${path.join(base, 'open-tree.mjs')}`)};
      const r = openTree(${JSON.stringify(path.join(base, 'fifo'))}, '--read');
      console.log(JSON.stringify({ ok: r.ok, isDirectory: r.ok ? r.tree.isDirectory : null }));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 5000 });
    expect(child.signal, 'openTree blocked on the FIFO').toBeNull();
    expect(JSON.parse(child.stdout)).toEqual({ ok: true, isDirectory: false });
  });

  it('gives a handle only: not readable, and close-on-exec (it reaches bubblewrap only where mapped)', () => {
    const tree = ok(open(path.join(base, 'file')));
    expect(() => fs.readSync(tree.fd, Buffer.alloc(1))).toThrow(/EBADF/);
    const flags = /^flags:\s*([0-7]+)/m.exec(fs.readFileSync(`/proc/self/fdinfo/${tree.fd}`, 'latin1'))?.[1] ?? '0';
    expect(parseInt(flags, 8) & 0o2000000).not.toBe(0); // O_CLOEXEC
    expect(parseInt(flags, 8) & 0o10000000).not.toBe(0); // O_PATH
  });

  it('pins the checked inode: after the directory is swapped for a symlink, the descriptor still names it', () => {
    const dir = path.join(base, 'swapped');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'mine'), '');
    const tree = ok(open(dir));
    fs.renameSync(dir, `${dir}.moved`);
    fs.symlinkSync(path.join(base, 'b'), dir);
    expect(fs.readdirSync(`/proc/self/fd/${tree.fd}`)).toEqual(['mine']);
    expect(identityOf(`${dir}.moved`)).toBe(tree.identity);
    expect(identityOf(dir)).not.toBe(tree.identity); // what the init's re-check inside sees
  });
});

describe('identityOf', () => {
  it('is null for a missing path, and the link’s own identity (not its target’s) for a symlink', () => {
    expect(identityOf(path.join(base, 'missing'))).toBeNull();
    expect(identityOf(path.join(base, 'dangling'))).not.toBeNull();
    expect(identityOf(path.join(base, 'last'))).not.toBe(identityOf(path.join(base, 'b/c')));
  });
});
