// Threat: another local user takes a grant's authority through its Unix socket (review 2026-12,
// finding 9; issue 12 part 3). A grant-bound socket needs no token: whoever can connect() to the file acts
// for the grant, and connect() needs write permission on it. Before the fix the mode came from the
// umask, so under `umask 000` any uid could use the socket. Sluice now sets the mode itself (0600, or
// 0660 with listeners[].socketGroup) before the file appears at its path. Runs with umask 0 on purpose.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildRuntime } from '../../src/app.js';
import { parseConfigText } from '../../src/config/index.js';
import { canSwitchUid, connectAs, OTHER_UID, THIRD_UID } from '../support/other-uid.js';
import { silentLog, startSluice, type TestSluice } from '../support/sluice.js';
import { stringify } from 'yaml';

const asRoot = canSwitchUid();
const GROUP_GID = 21010;
const grantA = { id: 'a', destinations: ['https://a.test'] };

function modeOf(file: string): number {
  return fs.statSync(file).mode & 0o7777;
}

describe('Unix listener sockets are 0600 whatever the umask', () => {
  let dir: string;
  let sluice: TestSluice | null = null;
  let savedUmask: number;

  beforeAll(async () => {
    savedUmask = process.umask(0);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-sockmode-'));
    // Only the socket's own mode may stand between another uid and the socket.
    fs.chmodSync(dir, 0o755);
    sluice = await startSluice({
      listeners: [
        { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
        { name: 'sandbox-a', listen: `unix:${path.join(dir, 'a.sock')}`, grant: 'a' },
        { name: 'token-unix', listen: `unix:${path.join(dir, 't.sock')}`, identify: 'token' },
      ],
      grants: [grantA],
    });
  });

  afterAll(async () => {
    await sluice?.close();
    process.umask(savedUmask);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('creates a config grant socket and a token socket with mode 0600, owned by Sluice', () => {
    expect(modeOf(path.join(dir, 'a.sock'))).toBe(0o600);
    expect(modeOf(path.join(dir, 't.sock'))).toBe(0o600);
  });

  it.runIf(asRoot)('refuses another uid on a config grant socket; the owner still connects', async () => {
    expect(await connectAs(OTHER_UID, path.join(dir, 'a.sock'))).toBe('EACCES');
    expect(await connectAs(0, path.join(dir, 'a.sock'))).toBe('connected');
  });

  it.runIf(asRoot)('refuses another uid on a token-identified Unix listener', async () => {
    expect(await connectAs(OTHER_UID, path.join(dir, 't.sock'))).toBe('EACCES');
  });

  it('gives a run-time dedicated socket (POST /v1/grants "listen") mode 0600 before its path exists', async () => {
    const file = path.join(dir, 'r.sock');
    const seen: number[] = [];
    // The first sight of the path must already be 0600: no window in which the umask's mode shows.
    const watcher = fs.watch(dir, (_event, name) => {
      if (name !== 'r.sock') return;
      try {
        seen.push(modeOf(file));
      } catch {
        // removed again; nothing to see
      }
    });
    try {
      const issued = await sluice?.app.control.issueGrant({ destinations: ['https://r.test'], listen: `unix:${file}` });
      expect(issued?.ok).toBe(true);
      expect(modeOf(file)).toBe(0o600);
    } finally {
      watcher.close();
    }
    for (const mode of seen) expect(mode).toBe(0o600);
    if (asRoot) expect(await connectAs(OTHER_UID, file)).toBe('EACCES');
  });
});

describe('listeners[].socketGroup', () => {
  let dir: string;
  let savedUmask: number;
  const running: TestSluice[] = [];

  beforeAll(() => {
    savedUmask = process.umask(0);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-sockgroup-'));
    fs.chmodSync(dir, 0o755);
  });

  afterAll(async () => {
    for (const s of running) await s.close();
    process.umask(savedUmask);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it.runIf(asRoot)('makes the socket 0660 for that gid: a member connects, another uid does not', async () => {
    const file = path.join(dir, 'g.sock');
    running.push(await startSluice({ listeners: [{ name: 'grouped', listen: `unix:${file}`, grant: 'a', socketGroup: GROUP_GID }], grants: [grantA] }));
    const stat = fs.statSync(file);
    expect(stat.mode & 0o7777).toBe(0o660);
    expect(stat.gid).toBe(GROUP_GID);
    expect(await connectAs(OTHER_UID, file, [GROUP_GID])).toBe('connected');
    expect(await connectAs(THIRD_UID, file)).toBe('EACCES');
  });

  it.runIf(asRoot)('takes a group name from /etc/group', async () => {
    const entry = fs
      .readFileSync('/etc/group', 'utf8')
      .split('\n')
      .map((line) => line.split(':'))
      .find((fields) => fields.length >= 3 && Number(fields[2]) > 0);
    if (entry === undefined) return;
    const [name, , gid] = entry;
    const file = path.join(dir, 'n.sock');
    running.push(await startSluice({ listeners: [{ name: 'named', listen: `unix:${file}`, grant: 'a', socketGroup: name }], grants: [grantA] }));
    expect(fs.statSync(file).gid).toBe(Number(gid));
    expect(modeOf(file)).toBe(0o660);
  });

  it('is a config issue at listeners[N].socketGroup when the group does not exist', async () => {
    const text = stringify({
      state: dir,
      listeners: [
        { name: 'shared', listen: '127.0.0.1:0' },
        { name: 'grouped', listen: `unix:${path.join(dir, 'x.sock')}`, grant: 'a', socketGroup: 'no-such-group-sluice' },
      ],
      grants: [grantA],
    });
    const parsed = parseConfigText(text, path.join(dir, 'c.yaml'), dir);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const built = await buildRuntime(parsed.config, { env: {}, log: silentLog, audit: { write: () => undefined, flush: () => Promise.resolve() } });
    expect(built.ok).toBe(false);
    if (built.ok) return;
    expect(built.issues).toEqual([expect.objectContaining({ path: 'listeners[1].socketGroup' })]);
  });
});
