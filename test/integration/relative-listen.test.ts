// A run-time grant's relative `unix:` listen is resolved where it is accepted and bound absolute (issue
// 23, review 2026-12-04 finding 3). Before, `POST /v1/grants {"listen":"unix:agents/c.sock"}`
// bound the staging path `agents/.sluice-XXXX/s`, so /proc/net/unix listed it relative, `sluice run`'s
// socket mask (which keeps only absolute entries) never saw it, and a sandbox used that grant's
// authority. Driven through the real admin socket (curl) of a started Sluice, a ledger written by an
// earlier version, and the real `sluice grant issue` run from another directory.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BIN } from '../support/sluice-process.js';
import { startSluice, type TestSluice } from '../support/sluice.js';

const run = promisify(execFile);

function readLink(file: string): string {
  try {
    return fs.readlinkSync(file);
  } catch {
    return ''; // the descriptor closed meanwhile
  }
}

/** The paths /proc/net/unix lists for this process's own Unix sockets (matched by inode). */
function ownUnixSocketPaths(): string[] {
  const inodes = new Set(fs.readdirSync('/proc/self/fd').map((fd) => /^socket:\[(\d+)\]$/.exec(readLink(`/proc/self/fd/${fd}`))?.[1]));
  return fs
    .readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((cols) => cols.length >= 8 && inodes.has(cols[6]))
    .map((cols) => cols.slice(7).join(' '));
}

async function admin(socket: string, method: 'GET' | 'POST', url: string, body?: unknown): Promise<unknown> {
  const data = body === undefined ? [] : ['-H', 'content-type: application/json', '--data', JSON.stringify(body)];
  const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--unix-socket', socket, '-X', method, ...data, `http://sluice${url}`]);
  return JSON.parse(stdout) as unknown;
}

interface Issued {
  readonly id: string;
  readonly grant: { readonly listen: string };
}

describe('a relative unix: listen of a run-time grant', () => {
  let dir: string;
  let agents: string;
  let sluice: TestSluice | undefined;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-relative-listen-'));
    // A name of its own, so that /proc/net/unix entries for this test's sockets can be told apart.
    agents = `agents-${randomBytes(4).toString('hex')}`;
  });
  afterEach(async () => {
    await sluice?.close();
    sluice = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Every entry of this process's sockets that names the agents directory is absolute; there is one. */
  function expectOnlyAbsoluteEntries(): void {
    const entries = ownUnixSocketPaths().filter((p) => p.includes(agents));
    expect(entries.length, `a /proc/net/unix entry naming ${agents}`).toBeGreaterThan(0);
    for (const entry of entries) expect(entry.startsWith(`${dir}/${agents}/`), entry).toBe(true);
  }

  it('POST /v1/grants resolves it against Sluice\'s working directory: answer, GET, ledger and the bound socket are absolute', async () => {
    const adminSocket = path.join(dir, 'admin', 'admin.sock');
    sluice = await startSluice({ admin: { listen: `unix:${adminSocket}` } }, { cwd: dir });
    const absolute = path.join(dir, agents, 'c.sock');
    const issued = (await admin(adminSocket, 'POST', '/v1/grants', { destinations: ['https://a.test'], listen: `unix:${agents}/c.sock` })) as Issued;
    expect(issued.grant.listen).toBe(`unix:${absolute}`);
    expect(fs.statSync(absolute).isSocket()).toBe(true);
    expect(((await admin(adminSocket, 'GET', `/v1/grants/${issued.id}`)) as Issued['grant']).listen).toBe(`unix:${absolute}`);
    expect(fs.readFileSync(path.join(sluice.stateDir, 'ledger.json'), 'utf8')).toContain(`"listen": "unix:${absolute}"`);
    expectOnlyAbsoluteEntries();
  });

  it('a ledger written by an earlier version with a relative listen is bound at the absolute path on start, and stored so', async () => {
    const state = path.join(dir, 'state');
    fs.mkdirSync(state, { mode: 0o700 });
    const record = {
      id: 'g-old',
      source: 'runtime',
      spec: { destinations: ['https://a.test'], unrestricted: false, allowAddressClasses: [], allowAddresses: [], requireAttestedAddress: false, tls: { requireSniMatch: false }, limits: {}, listen: `unix:${agents}/old.sock` },
      tokenSha256: 'a'.repeat(64),
      issuedAt: '2026-12-01T00:00:00.000Z',
      revokedAt: null,
    };
    fs.writeFileSync(path.join(state, 'ledger.json'), JSON.stringify({ v: 1, runtime: [record], revoked: [] }), { mode: 0o600 });
    const adminSocket = path.join(dir, 'admin', 'admin.sock');
    sluice = await startSluice({ state, admin: { listen: `unix:${adminSocket}` } }, { cwd: dir });
    const absolute = path.join(dir, agents, 'old.sock');
    expect(fs.statSync(absolute).isSocket()).toBe(true);
    expect(((await admin(adminSocket, 'GET', '/v1/grants/g-old')) as Issued['grant']).listen).toBe(`unix:${absolute}`);
    expect(fs.readFileSync(path.join(state, 'ledger.json'), 'utf8')).toContain(`"listen": "unix:${absolute}"`);
    expectOnlyAbsoluteEntries();
  });

  it('`sluice grant issue --listen unix:REL` means REL in the caller\'s directory, not in Sluice\'s', async () => {
    const adminSocket = path.join(dir, 'admin', 'admin.sock');
    sluice = await startSluice({ admin: { listen: `unix:${adminSocket}` } }, { cwd: path.join(dir, 'elsewhere') });
    const caller = path.join(dir, 'caller');
    fs.mkdirSync(caller);
    // Asynchronously: this process serves the admin socket the CLI calls.
    const r = await run(process.execPath, [BIN, 'grant', 'issue', '--admin', `unix:${adminSocket}`, '--destination', 'https://a.test', '--listen', `unix:${agents}/c.sock`, '--json'], { cwd: caller, timeout: 15_000 });
    expect(r.stderr).toBe('');
    const absolute = path.join(caller, agents, 'c.sock');
    expect((JSON.parse(r.stdout) as Issued).grant.listen).toBe(`unix:${absolute}`);
    expect(fs.statSync(absolute).isSocket()).toBe(true);
    expect(fs.existsSync(path.join(dir, 'elsewhere', agents))).toBe(false);
  });
});
