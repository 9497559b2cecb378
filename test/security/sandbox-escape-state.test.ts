// Threat: the command reads or rewrites Sluice's ledger and audit file because they lie in a tree it
// sees, while Sluice's config lies elsewhere (review 2026-12-04 finding 5, medium). The review
// started `cd P && sluice start --config C/sluice.yaml` (C outside P, `state: ./state`, `audit.file:
// ./audit.jsonl`): `sluice run` hid a running Sluice's files only when its config was under a visible
// tree, so from P the command un-revoked a grant, injected an unrestricted one that loaded at the
// next restart and replaced the audit file with a forged line. What must hold: a writable
// tree holding a running Sluice's state or audit file is refused; a read-only one shows neither (the
// command can neither read nor replace them); and a ledger that is not Sluice's own with mode 0600
// does not load at all, so a file someone else could write never becomes grants.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { giveTo, identities, killAll, sandboxSkipReason, type Identity, type RunResult } from '../support/sandbox.js';
import { killSluiceProcesses } from '../support/sluice-process.js';
import { waitUntil } from '../support/wait.js';
import {
  BIN, HOST_PATH, PY_PRELUDE, attemptLine, describeRun, escapeRe, expectWritableRefused, fileState, grantConfig, removeScratch, scratchDir, sluiceRun, startCommand, startGrantSluice, verdicts,
  type GrantSluice, type Verdicts,
} from '../support/sandbox-review2.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-escape-state: ${skip}`);

// Inside, from P/work. argv: P. The review's tamper script, by absolute paths, and its parts one by one.
const TAMPER = PY_PRELUDE + String.raw`
import hashlib
P = sys.argv[1]
LEDGER, USAGE, AUDIT = P + '/state/ledger.json', P + '/state/usage.json', P + '/audit.jsonl'
FORGED = '{"v":1,"kind":"decision","principal":"someone-else","decision":"allow","note":"forged by sandbox"}\n'
EVIL = {"id": "evil", "source": "runtime", "spec": {"destinations": [], "unrestricted": True, "allowAddressClasses": ["loopback", "private", "link_local"], "allowAddresses": [], "requireAttestedAddress": False, "tls": {"requireSniMatch": False}, "limits": {}},
        "tokenSha256": hashlib.sha256(b"evil-token").hexdigest(), "issuedAt": "2026-12-04T00:00:00.000Z", "revokedAt": None}
def tamper():
    L = json.load(open(LEDGER))
    for g in L['runtime']:
        g['revokedAt'] = None
    L['revoked'] = []
    L['runtime'].append(EVIL)
    json.dump(L, open(LEDGER, 'w'), indent=1)
    return write(AUDIT, FORGED, 'w')
def replace_ledger():
    try:
        write(LEDGER + '.new', json.dumps({"runtime": [EVIL], "revoked": []}), 'w')
        os.replace(LEDGER + '.new', LEDGER)
        return 'replaced'
    finally:
        if os.path.lexists(LEDGER + '.new'):
            os.unlink(LEDGER + '.new')
attempt('ledger-read', lambda: read(LEDGER))
attempt('usage-read', lambda: read(USAGE))
attempt('audit-read', lambda: read(AUDIT))
attempt('tamper-script', tamper)
attempt('ledger-write', lambda: write(LEDGER, json.dumps({"runtime": [EVIL], "revoked": []}), 'w'))
attempt('ledger-replace', replace_ledger)
attempt('audit-truncate', lambda: write(AUDIT, FORGED, 'w'))
attempt('audit-append', lambda: write(AUDIT, FORGED))
attempt('audit-unlink', lambda: os.unlink(AUDIT) or 'removed')
attempt('state-rename', lambda: os.rename(P + '/state', P + '/state-moved') or 'moved')
print('END', flush=True)
`;
const ATTEMPTS = ['ledger-read', 'usage-read', 'audit-read', 'tamper-script', 'ledger-write', 'ledger-replace', 'audit-truncate', 'audit-append', 'audit-unlink', 'state-rename'];

/** A request grant a may not make: Sluice answers 403 and writes a decision to its audit file. */
function deniedRequest(socketPath: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath);
    let answer = '';
    s.setTimeout(5000, () => s.destroy(new Error('no answer within 5000 ms')));
    s.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    s.once('error', reject);
    s.once('close', () => resolve(answer.split('\r\n')[0] ?? ''));
    s.end('GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n');
  });
}

describe.skipIf(skip !== null).each(identities())('sluice run: Sluice’s state and audit file under the tree, its config elsewhere, as $label', (identity: Identity) => {
  let c: string;
  let p: string;
  let home: string;
  let config: Record<string, unknown>;
  let sluice: GrantSluice;
  let revokedId: string;
  let ledger: string;
  let audit: string;
  let ledgerBefore: Buffer;
  let auditBefore: Buffer;
  let run: RunResult;
  let v: Verdicts;

  /** `cd P && sluice start --config C/sluice.yaml`, as root (Sluice's user). */
  const start = (): Promise<GrantSluice> => startGrantSluice({ configDir: c, cwd: p, config, identity });

  beforeAll(async () => {
    c = scratchDir('state-conf');
    p = scratchDir('state-p');
    home = scratchDir('state-home');
    fs.mkdirSync(path.join(p, 'work'));
    config = grantConfig(c, { state: './state', audit: { file: './audit.jsonl' } });
    sluice = await start();
    ledger = path.join(p, 'state/ledger.json');
    audit = path.join(p, 'audit.jsonl');
    // Something worth tampering with: a revoked run-time grant (the tamper script resurrects it) and a decision.
    const issued = await sluice.admin('POST', '/v1/grants', { destinations: ['http://127.0.0.1:9'] });
    revokedId = String((issued.body as { id?: string }).id);
    const revoked = await sluice.admin('DELETE', `/v1/grants/${revokedId}`);
    if (issued.status !== 201 || revoked.status !== 200) throw new Error(`setup: issue ${issued.status}, revoke ${revoked.status} ${JSON.stringify(revoked.body)}`);
    const status = await deniedRequest(sluice.grantSocket);
    if (!status.includes('403')) throw new Error(`setup: expected 403 for denied.test, got ${status}`);
    await waitUntil(() => fs.existsSync(audit) && fs.readFileSync(audit, 'utf8').includes('denied.test'), { timeoutMs: 5000, label: `a decision in ${audit}` });
    await waitUntil(() => fs.existsSync(ledger) && fs.readFileSync(ledger, 'utf8').includes(revokedId), { timeoutMs: 5000, label: `${ledger} written` });
    // P is the caller's: only the sandbox stands between the command and Sluice's files there.
    giveTo(identity, p, home);
    ledgerBefore = fs.readFileSync(ledger);
    auditBefore = fs.readFileSync(audit);
    const args = ['--read', p, '--write', path.join(p, 'work'), '--grant-socket', sluice.grantSocket];
    run = await sluiceRun([...args, '--', 'python3', '-c', TAMPER, p], { cwd: path.join(p, 'work'), identity, home });
    v = verdicts(run);
  }, 120_000);
  afterAll(async () => {
    killAll();
    await killSluiceProcesses();
    removeScratch();
  });

  it('refuses, exit 125, P as the writable tree: it holds the running Sluice’s state and audit file', async () => {
    const marker = path.join(p, 'ran');
    const r = await sluiceRun(['--grant-socket', sluice.grantSocket, '--', 'sh', '-c', `echo ran > ${marker}`], { cwd: p, identity, home });
    expectWritableRefused(r, p, marker);
  }, 60_000);

  it('runs every attempt from P/work with P shown read-only', () => {
    expect(v.ended, v.summary).toBe(true);
    expect(run.code, v.summary).toBe(0);
  });

  it.each(ATTEMPTS)('blocks %s', (name) => {
    expect(attemptLine(v, name)).toMatch(new RegExp(`^ATTEMPT ${name} BLOCKED`));
  });

  it('leaves the ledger as it was and the audit file with every record written before (Sluice may only append)', () => {
    expect(fs.readFileSync(ledger).equals(ledgerBefore)).toBe(true);
    const after = fs.readFileSync(audit);
    expect(after.subarray(0, auditBefore.length).equals(auditBefore), after.toString('utf8').slice(0, 500)).toBe(true);
    expect(after.toString('utf8')).not.toContain('forged by sandbox');
  });

  it('restarts with its own 0600 ledger: no injected grant, the revoked one still revoked', async () => {
    await sluice.proc.stop();
    // Sluice's own files go back to Sluice's user (root), as they were before the caller was given P.
    for (const f of [path.join(p, 'state'), ...fs.readdirSync(path.join(p, 'state')).map((n) => path.join(p, 'state', n))]) fs.lchownSync(f, 0, 0);
    fs.chmodSync(ledger, 0o600);
    sluice = await start();
    const listed = await sluice.admin('GET', '/v1/grants');
    const grants = (listed.body as { grants: { id: string; revokedAt: string | null }[] }).grants;
    expect(grants.map((g) => g.id)).not.toContain('evil');
    // Revoked grants are kept (until forgotten): if it is listed, it must still be revoked.
    const resurrected = grants.filter((g) => g.id === revokedId && g.revokedAt === null);
    expect(resurrected).toEqual([]);
  }, 60_000);

  it('refuses to start, exit non-zero naming ledger.json, when the ledger is mode 0644', async () => {
    await sluice.proc.stop();
    fs.chmodSync(ledger, 0o644);
    const again = startCommand([process.execPath, BIN, 'start', '--config', path.join(c, 'sluice.yaml')], {
      cwd: p,
      env: { PATH: HOST_PATH, LANG: 'C.UTF-8' },
      identity: { label: 'root', uid: null },
      timeoutMs: 20_000,
    });
    // Bounded: it either exits, or logs that the admin API listens (it loaded the ledger: the failure).
    const seen: { code: number | null | 'started' | undefined } = { code: undefined };
    void again.result.then((r) => (seen.code ??= r.code));
    await waitUntil(
      () => {
        if (again.stderr().includes('admin API listening')) seen.code ??= 'started';
        return seen.code !== undefined;
      },
      { timeoutMs: 20_000, label: 'sluice start exits or listens' },
    );
    const started = seen.code === 'started';
    if (started) process.kill(-again.pid, 'SIGKILL');
    const result = await again.result;
    expect(started, `sluice start loaded the 0644 ledger and listens; stderr: ${again.stderr().slice(0, 2000)}`).toBe(false);
    expect(result.code, describeRun(result)).not.toBe(0);
    expect(result.stderr, describeRun(result)).toContain('ledger.json');
  }, 60_000);
});
