// The ledger is refused when someone other than Sluice's user could have written it (issue 23; review 2026-12-04
// finding 5): a sandbox that rewrote state/ledger.json un-revoked a grant and
// injected an unrestricted one, which the next start obeyed. A state file must be a regular file (never
// a symlink), owned by Sluice's uid, with no group or other permission bits.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProxyError } from '../../../src/core/index.js';
import { LEDGER_FILE, Ledger, LedgerStore, UsageFile, readStateFile } from '../../../src/ledger/index.js';
import { OWN_UID } from '../../support/sluice.js';

const LEDGER = `${JSON.stringify({ v: 1, runtime: [], revoked: [{ id: 'g-old', at: '2026-12-01T00:00:00.000Z' }] })}\n`;
const OTHER_UID = 21001;

let dir: string;
let file: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-state-file-'));
  file = path.join(dir, LEDGER_FILE);
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function writeLedger(mode: number): void {
  fs.writeFileSync(file, LEDGER, { mode });
  fs.chmodSync(file, mode);
}

async function refusal(read: Promise<unknown>): Promise<ProxyError> {
  const error = await read.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProxyError);
  expect((error as ProxyError).code).toBe('ERR_LEDGER_FILE_UNSAFE');
  return error as ProxyError;
}

describe('readStateFile', () => {
  it('reads a 0600 file owned by Sluice, and answers null when there is none', async () => {
    writeLedger(0o600);
    expect(await readStateFile(file, OWN_UID)).toBe(LEDGER);
    expect(await readStateFile(path.join(dir, 'absent.json'), OWN_UID)).toBeNull();
  });

  it.each([
    [0o644, '0644'],
    [0o640, '0640'],
    [0o604, '0604'],
    [0o660, '0660'],
  ])('refuses mode %o, naming the file, its mode and chmod 600', async (mode, octal) => {
    writeLedger(mode);
    const error = await refusal(readStateFile(file, OWN_UID));
    expect(error.message).toContain(file);
    expect(error.message).toContain(`mode ${octal}`);
    expect(error.message).toContain(`chmod 600 ${file}`);
  });

  it('refuses a symbolic link, even to a 0600 file of Sluice\'s own (opened O_NOFOLLOW)', async () => {
    const target = path.join(dir, 'elsewhere.json');
    fs.writeFileSync(target, LEDGER, { mode: 0o600 });
    fs.symlinkSync(target, file);
    const error = await refusal(readStateFile(file, OWN_UID));
    expect(error.message).toContain(`${file}: it is a symbolic link`);
  });

  it('refuses what is not a regular file (a directory, a FIFO) without hanging on it', async () => {
    fs.mkdirSync(file, { mode: 0o700 });
    expect((await refusal(readStateFile(file, OWN_UID))).message).toContain('not a regular file');
    fs.rmdirSync(file);
    const fifo = path.join(dir, 'fifo.json');
    expect(spawnSync('mkfifo', ['-m', '600', fifo]).status).toBe(0);
    expect((await refusal(readStateFile(fifo, OWN_UID))).message).toContain('not a regular file');
  });

  it('refuses a file owned by another uid, naming the owner and chown', async () => {
    writeLedger(0o600);
    const error = await refusal(readStateFile(file, OWN_UID + 1));
    expect(error.message).toContain(`owned by uid ${OWN_UID}, not by Sluice's uid ${OWN_UID + 1}`);
    expect(error.message).toContain(`chown ${OWN_UID + 1} ${file}`);
  });

  it.runIf(OWN_UID === 0)('refuses a file chowned to another user (as root), with both fixes when the mode is wrong too', async () => {
    writeLedger(0o644);
    fs.chownSync(file, OTHER_UID, OTHER_UID);
    const error = await refusal(readStateFile(file, OWN_UID));
    expect(error.message).toContain(`owned by uid ${OTHER_UID}`);
    expect(error.message).toContain(`chown ${OWN_UID} ${file} && chmod 600 ${file}`);
  });
});

describe('the ledger and the usage file refuse to load an unsafe file', () => {
  it('Ledger.open refuses a 0644 ledger.json with ERR_LEDGER_FILE_UNSAFE, and loads it once it is 0600', async () => {
    writeLedger(0o644);
    await refusal(Ledger.open(new LedgerStore(dir, OWN_UID)));
    fs.chmodSync(file, 0o600);
    expect((await Ledger.open(new LedgerStore(dir, OWN_UID))).list()).toEqual([]);
  });

  it('UsageFile.read refuses a group-readable usage.json', async () => {
    const usage = new UsageFile(dir, OWN_UID);
    fs.writeFileSync(usage.file, JSON.stringify({ v: 1, grants: {} }), { mode: 0o640 });
    fs.chmodSync(usage.file, 0o640);
    expect((await refusal(usage.read())).message).toContain(usage.file);
  });

  it('reads back what Sluice writes itself (0600, its own)', async () => {
    const store = new LedgerStore(dir, OWN_UID);
    await store.write({ v: 1, runtime: [], revoked: [] });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(await store.read()).toEqual({ v: 1, runtime: [], revoked: [] });
  });
});
