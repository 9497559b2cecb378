// The admin Unix socket file (ADR 0014): bound in a private directory and linked into place, so its path
// never shows the umask's mode, not even for a moment; removed on close only while it is still ours.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startAdminServer } from '../../../src/admin/index.js';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { canSwitchUid, connectAs, OTHER_UID } from '../../support/other-uid.js';
import { FakeControl, captureLog } from './fake-control.js';

let dir: string;
let savedUmask: number;

beforeEach(() => {
  savedUmask = process.umask(0);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-admin-listen-'));
});

afterEach(() => {
  process.umask(savedUmask);
  fs.rmSync(dir, { recursive: true, force: true });
});

const start = (file: string): ReturnType<typeof startAdminServer> =>
  startAdminServer({ listen: `unix:${file}`, control: new FakeControl(), adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive });

describe('admin Unix socket under umask 0', () => {
  it('is 0600 from the first moment its path exists, in a 0700 directory it created', async () => {
    const parent = path.join(dir, 'run');
    fs.mkdirSync(parent, { mode: 0o700 });
    const file = path.join(parent, 'admin.sock');
    const seen: number[] = [];
    const watcher = fs.watch(parent, (_event, name) => {
      if (name !== 'admin.sock') return;
      try {
        seen.push(fs.statSync(file).mode & 0o7777);
      } catch {
        // gone again
      }
    });
    const server = await start(file).finally(() => watcher.close());
    try {
      expect(fs.statSync(file).mode & 0o7777).toBe(0o600);
      for (const mode of seen) expect(mode).toBe(0o600);
      // Nothing is left of the private directory it was bound in.
      expect(fs.readdirSync(parent)).toEqual(['admin.sock']);
    } finally {
      await server.close();
    }
  });

  it.runIf(canSwitchUid())('refuses another uid even when every directory on the way is open', async () => {
    fs.chmodSync(dir, 0o755);
    const file = path.join(dir, 'admin.sock');
    const server = await start(file);
    try {
      expect(await connectAs(OTHER_UID, file)).toBe('EACCES');
    } finally {
      await server.close();
    }
  });
});

describe('admin socket file on close', () => {
  it('is removed when it is still the one Sluice bound', async () => {
    const file = path.join(dir, 'admin.sock');
    const server = await start(file);
    await server.close();
    expect(fs.existsSync(file)).toBe(false);
  });

  it('is left alone when another process has taken the path since', async () => {
    const file = path.join(dir, 'admin.sock');
    const server = await start(file);
    fs.unlinkSync(file);
    const other = net.createServer();
    await new Promise<void>((resolve) => other.listen(file, resolve));
    try {
      await server.close();
      expect(fs.statSync(file).isSocket()).toBe(true);
      expect(await isUnixSocketAlive(file)).toBe(true);
    } finally {
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });
});
