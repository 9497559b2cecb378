// check-config names an audit file or state directory that start could not create or write, without
// creating anything itself (issue 17, item 3).
import fs from 'node:fs';
import fsPromises from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { unwritableReason } from '../../../src/config/index.js';

describe('unwritableReason', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-writable-'));
  });
  afterEach(() => {
    fs.chmodSync(dir, 0o700);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('accepts a missing path under a writable directory, and creates nothing', async () => {
    const target = path.join(dir, 'a', 'b', 'audit.log');
    expect(await unwritableReason(target, 'file')).toBeNull();
    expect(await unwritableReason(path.join(dir, 'state'), 'directory')).toBeNull();
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('accepts an existing writable file or directory', async () => {
    fs.writeFileSync(path.join(dir, 'audit.log'), '');
    expect(await unwritableReason(path.join(dir, 'audit.log'), 'file')).toBeNull();
    expect(await unwritableReason(dir, 'directory')).toBeNull();
  });

  it('refuses a directory where a file goes, and a file where a directory goes', async () => {
    fs.writeFileSync(path.join(dir, 'f'), '');
    expect(await unwritableReason(dir, 'file')).toMatch(/is a directory/);
    expect(await unwritableReason(path.join(dir, 'f'), 'directory')).toMatch(/not a directory/);
    expect(await unwritableReason(path.join(dir, 'f', 'below.log'), 'file')).toMatch(/is not a directory/);
  });

  it('refuses a missing path under a directory this user cannot write', async () => {
    fs.chmodSync(dir, 0o500);
    // root passes every permission check (CAP_DAC_OVERRIDE), so the kernel's answer to a non-root user is
    // given here as access(2) would give it; as any other user the real call answers the same.
    const access = process.getuid?.() === 0 ? vi.spyOn(fsPromises, 'access').mockRejectedValue(Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' })) : null;
    expect(await unwritableReason(path.join(dir, 'x', 'audit.log'), 'file')).toMatch(/not writable/);
    access?.mockRestore();
  });
});
