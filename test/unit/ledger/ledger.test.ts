// A run-time grant's `unix:` listen is absolute once the ledger holds it (issue 23; review 2026-12-04
// finding 3): a ledger written before, with `"listen": "unix:agents/c.sock"`, is resolved
// against Sluice's working directory when loaded and written back so, and so is a record another
// instance of a fleet stored relative.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { grantSpecSchema } from '../../../src/config/index.js';
import { LEDGER_FILE, Ledger, LedgerStore, type GrantRecord } from '../../../src/ledger/index.js';
import { OWN_UID } from '../../support/sluice.js';

let dir: string;
let cwd: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ledger-'));
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ledger-cwd-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(cwd, { recursive: true, force: true });
});

function record(id: string, listen: string | undefined): GrantRecord {
  const spec = grantSpecSchema.parse({ destinations: ['https://a.test'], ...(listen === undefined ? {} : { listen }) });
  return { id, source: 'runtime', spec, tokenSha256: 'a'.repeat(64), issuedAt: '2026-12-01T00:00:00.000Z', revokedAt: null };
}

/** A ledger.json as a version before issue 23 wrote it: 0600, a relative socket path. */
function writeOldLedger(records: readonly GrantRecord[]): void {
  fs.writeFileSync(path.join(dir, LEDGER_FILE), JSON.stringify({ v: 1, runtime: records, revoked: [] }), { mode: 0o600 });
}

const storedListens = (): unknown => (JSON.parse(fs.readFileSync(path.join(dir, LEDGER_FILE), 'utf8')) as { runtime: GrantRecord[] }).runtime.map((r) => r.spec.listen);

describe('Ledger.open with a relative unix: listen stored by an earlier version', () => {
  it('resolves it against the working directory and writes the file back absolute; other listens are kept', async () => {
    writeOldLedger([record('g-rel', 'unix:agents/c.sock'), record('g-abs', 'unix:/run/sluice/a.sock'), record('g-tcp', '127.0.0.1:9000'), record('g-none', undefined)]);
    const ledger = await Ledger.open(new LedgerStore(dir, OWN_UID), undefined, null, cwd);
    expect(ledger.list().map((r) => r.spec.listen)).toEqual([`unix:${cwd}/agents/c.sock`, 'unix:/run/sluice/a.sock', '127.0.0.1:9000', undefined]);
    expect(storedListens()).toEqual([`unix:${cwd}/agents/c.sock`, 'unix:/run/sluice/a.sock', '127.0.0.1:9000', undefined]);
    expect(fs.statSync(path.join(dir, LEDGER_FILE)).mode & 0o777).toBe(0o600);
  });

  it('leaves a file that holds nothing relative as it is (no write on every start)', async () => {
    writeOldLedger([record('g-abs', 'unix:/run/sluice/a.sock')]);
    const before = fs.statSync(path.join(dir, LEDGER_FILE)).ino;
    await Ledger.open(new LedgerStore(dir, OWN_UID), undefined, null, cwd);
    expect(fs.statSync(path.join(dir, LEDGER_FILE)).ino).toBe(before);
  });

  it('resolves a record another fleet instance stored relative, as the change log brings it', async () => {
    const ledger = await Ledger.open(new LedgerStore(dir, OWN_UID), undefined, null, cwd);
    await ledger.applyChanges([{ revision: 1, kind: 'issued', record: record('g-remote', 'unix:./agents/r.sock') }]);
    expect(ledger.get('g-remote')?.spec.listen).toBe(`unix:${cwd}/agents/r.sock`);
  });
});
