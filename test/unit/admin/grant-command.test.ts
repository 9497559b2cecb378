// Specifies `sluice grant issue|list|show|revoke` end to end against a real admin server (Unix socket and
// TCP with a bearer token) backed by an in-memory ProxyControl, and the flag-to-spec translation.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminTokenSha256, startAdminServer, type AdminServer } from '../../../src/admin/index.js';
import { formatGrantTable, parseGrantIssueOptions, runGrantCommand, type GrantCommandArgs } from '../../../src/cli/grant.js';
import type { GrantView } from '../../../src/core/index.js';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { FakeControl, captureLog } from './fake-control.js';

const ADMIN_TOKEN = 'cli-admin-token-77';
let dir: string;
let admin: string;
let server: AdminServer;
let tcp: AdminServer;
const control = new FakeControl();

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-grant-cli-'));
  const socketPath = path.join(dir, 'admin.sock');
  server = await startAdminServer({ listen: `unix:${socketPath}`, control, adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive });
  tcp = await startAdminServer({ listen: '127.0.0.1:0', control, adminTokenSha256: adminTokenSha256(ADMIN_TOKEN), log: captureLog().log, isUnixSocketAlive });
  admin = `unix:${socketPath}`;
});

afterAll(async () => {
  await Promise.all([server.close(), tcp.close()]);
  await fs.rm(dir, { recursive: true, force: true });
});

async function sluiceGrant(args: Omit<GrantCommandArgs, 'admin'> & { admin?: string }): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runGrantCommand({ admin, ...args }, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) });
  return { code, stdout, stderr };
}

describe('sluice grant issue --ask-timeout-ms', () => {
  it('asks for the grant: ask.timeoutMs, a positive integer, else a usage error', () => {
    expect(parseGrantIssueOptions({ destination: ['https://a.test'], askTimeoutMs: '30000' })).toMatchObject({ ask: { timeoutMs: 30000 } });
    expect(parseGrantIssueOptions({ destination: ['https://a.test'] })).not.toHaveProperty('ask');
    expect(() => parseGrantIssueOptions({ askTimeoutMs: 'soon' })).toThrow(/--ask-timeout-ms/);
  });
});

describe('sluice grant issue --client-cert-sha256 / --client-cert-uri', () => {
  it('names the grant’s client certificate by one of the two, never both (the server validates the value)', () => {
    expect(parseGrantIssueOptions({ clientCertSha256: 'AB'.repeat(32) })).toMatchObject({ clientCertificate: { sha256: 'AB'.repeat(32) } });
    expect(parseGrantIssueOptions({ clientCertUri: 'spiffe://example.org/agent' })).toMatchObject({ clientCertificate: { uriSan: 'spiffe://example.org/agent' } });
    expect(parseGrantIssueOptions({ destination: ['https://a.test'] })).not.toHaveProperty('clientCertificate');
    expect(() => parseGrantIssueOptions({ clientCertSha256: 'ab'.repeat(32), clientCertUri: 'spiffe://x/y' })).toThrow(/not both/);
  });
});

describe('sluice grant over the admin socket', () => {
  it('issue prints the id and the token once; list and show print neither the token', async () => {
    const spec = parseGrantIssueOptions({ destination: ['https://api.github.com', 'https://*.githubusercontent.com'], generation: 'run-7', maxConcurrent: '8' });
    const issued = await sluiceGrant({ action: 'issue', spec });
    expect(issued.code).toBe(0);
    const token = control.issuedTokens.at(-1) ?? '';
    expect(issued.stdout).toMatch(new RegExp(`^id +g-\\d+\ntoken +${token}\n$`));
    expect(issued.stderr).toMatch(/shown only this once/);
    const id = /^id +(\S+)/.exec(issued.stdout)?.[1] ?? '';

    const list = await sluiceGrant({ action: 'list' });
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID +SOURCE +GENERATION +DESTINATIONS +EXPIRES +REVOKED$/);
    expect(list.stdout).toMatch(new RegExp(`^${id} +runtime +run-7 +https://api\\.github\\.com,https://\\*\\.githubusercontent\\.com +- +-$`, 'm'));
    const show = await sluiceGrant({ action: 'show', id });
    expect(show.stdout).toMatch(/^destinations +\["https:\/\/api\.github\.com"/m);
    for (const out of [list, show]) expect(out.stdout + out.stderr).not.toContain(token);
  });

  it('--json prints the admin answer as JSON', async () => {
    const issued = await sluiceGrant({ action: 'issue', spec: { destinations: ['https://x.example'] }, json: true });
    const body = JSON.parse(issued.stdout) as { id: string; token: string; grant: { id: string } };
    expect(body.token).toBe(control.issuedTokens.at(-1));
    const list = JSON.parse((await sluiceGrant({ action: 'list', json: true })).stdout) as { grants: { id: string }[] };
    expect(list.grants.map((g) => g.id)).toContain(body.id);
  });

  it('revoke by id and by generation', async () => {
    const one = JSON.parse((await sluiceGrant({ action: 'issue', spec: { destinations: ['https://a.example'], generation: 'cli-gen' }, json: true })).stdout) as { id: string };
    const two = JSON.parse((await sluiceGrant({ action: 'issue', spec: { destinations: ['https://b.example'], generation: 'cli-gen' }, json: true })).stdout) as { id: string };
    expect(await sluiceGrant({ action: 'revoke', id: one.id })).toEqual({ code: 0, stdout: `revoked ${one.id} (2 connection(s) ended)\n`, stderr: '' });
    const gen = await sluiceGrant({ action: 'revoke', generation: 'cli-gen' });
    expect(gen).toEqual({ code: 0, stdout: `revoked 1 grant(s) of generation cli-gen: ${two.id} (1 connection(s) ended)\n`, stderr: '' });
  });

  it('prints the error code and each issue to stderr; exits 2 on a 400 answer (bad input), 1 on any other refusal', async () => {
    const refused = await sluiceGrant({ action: 'issue', spec: { destinations: [7], limits: { maxConcurrent: 0 } } });
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain('400 grant_invalid');
    expect(refused.stderr).toContain('  destinations[0]:');
    expect(refused.stderr).toContain('  limits.maxConcurrent:');
    expect(await sluiceGrant({ action: 'show', id: 'missing' })).toMatchObject({ code: 1, stderr: expect.stringContaining('404 grant_not_found') });
  });

  // UX review 2026-12-04 finding 10 (issue 25): `grant issue --expires-at` in the past is bad input, named by key.
  it('issue --expires-at in the past: exit 2 with 400 grant_invalid at limits.expiresAt, nothing issued', async () => {
    const before = control.specs.length;
    const past = await sluiceGrant({ action: 'issue', spec: parseGrantIssueOptions({ destination: ['https://a.example'], expiresAt: '2020-01-01T00:00:00Z' }) });
    expect(past).toEqual({
      code: 2,
      stdout: '',
      stderr: 'sluice grant issue: 400 grant_invalid\n  limits.expiresAt: 2020-01-01T00:00:00Z has passed: the grant would be expired when issued; set a later expiresAt\n',
    });
    expect(control.specs.length).toBe(before);
  });

  // UX review 2026-12-04 finding 11 (issue 25): the message says what was wrong, neither or both.
  it('exits 2 on a usage error without calling the admin API', async () => {
    expect(await sluiceGrant({ action: 'revoke' })).toEqual({ code: 2, stdout: '', stderr: 'sluice grant revoke: give the grant id to revoke, or --generation LABEL to revoke every grant of a generation\n' });
    expect(await sluiceGrant({ action: 'revoke', id: 'a', generation: 'b' })).toEqual({ code: 2, stdout: '', stderr: 'sluice grant revoke: give either a grant id or --generation, not both\n' });
    expect(await sluiceGrant({ action: 'show' })).toMatchObject({ code: 2 });
  });

  it('says clearly when nothing answers on the admin socket', async () => {
    const gone = path.join(dir, 'gone.sock');
    const result = await sluiceGrant({ action: 'list', admin: `unix:${gone}` });
    expect(result).toEqual({ code: 1, stdout: '', stderr: `sluice grant list: cannot reach the admin socket at ${gone}: is sluice running? (ENOENT)\n` });
    expect(await sluiceGrant({ action: 'list', admin: 'ftp://nope' })).toMatchObject({ code: 1, stderr: expect.stringContaining('expected unix:/path or http://host:port') });
  });
});

describe('sluice grant over TCP', () => {
  it('sends the admin token as a bearer token; without it the answer is admin_token_invalid', async () => {
    const url = `http://${tcp.address}`;
    expect(await sluiceGrant({ action: 'list', admin: url, adminToken: ADMIN_TOKEN })).toMatchObject({ code: 0 });
    expect(await sluiceGrant({ action: 'list', admin: url })).toMatchObject({ code: 1, stderr: expect.stringContaining('401 admin_token_invalid') });
  });
});

// UX review 2026-12-04 finding 11 (issue 25): DESTINATIONS shows the rules, not their count; a row stays one line.
describe('formatGrantTable: the DESTINATIONS column', () => {
  const view = (id: string, destinations: string[], unrestricted = false): GrantView => ({
    id,
    source: 'runtime',
    generation: null,
    destinations,
    unrestricted,
    allowAddressClasses: [],
    allowAddresses: [],
    requireAttestedAddress: false,
    ask: null,
    answers: [],
    clientCertificate: null,
    limits: {},
    issuedAt: '2026-12-04T00:00:00.000Z',
    expiresAt: null,
    revokedAt: null,
    listen: null,
    usage: { activeConnections: 0, connections: 0, bytes: 0 },
  });
  const rules = ['https://a.test', 'https://*.b.test', 'http://c.test:8080', 'tcp://d.test:22', 'wss://e.test'];

  it.each([
    ['one rule', rules.slice(0, 1), false, 'https://a.test'],
    ['three rules, all of them', rules.slice(0, 3), false, 'https://a.test,https://*.b.test,http://c.test:8080'],
    ['five rules: the first three and +2 more', rules, false, 'https://a.test,https://*.b.test,http://c.test:8080 +2 more'],
    ['four rules: the first three and +1 more', rules.slice(0, 4), false, 'https://a.test,https://*.b.test,http://c.test:8080 +1 more'],
    ['no rule', [], false, '-'],
    ['an unrestricted grant', rules.slice(0, 1), true, 'any'],
  ])('%s', (_name, destinations, unrestricted, cell) => {
    const [header, row, ...rest] = formatGrantTable([view('g-1', destinations, unrestricted)]).split('\n');
    expect(rest).toEqual(['']);
    const column = header?.indexOf('DESTINATIONS') ?? -1;
    expect(row?.slice(column).split('  ')[0]).toBe(cell);
  });
});

describe('parseGrantIssueOptions', () => {
  it('builds the POST /v1/grants body from flags', () => {
    expect(
      parseGrantIssueOptions({
        destination: ['https://api.github.com'],
        generation: 'run-7',
        expiresAt: '2026-12-01T00:00:00Z',
        maxConcurrent: '8',
        maxBytes: '10737418240',
        listen: 'unix:./state/a.sock',
        allowClass: ['private'],
        allowAddress: ['127.0.0.2/32'],
      }),
    ).toEqual({
      destinations: ['https://api.github.com'],
      generation: 'run-7',
      listen: 'unix:./state/a.sock',
      allowAddressClasses: ['private'],
      allowAddresses: ['127.0.0.2/32'],
      limits: { expiresAt: '2026-12-01T00:00:00Z', maxConcurrent: 8, maxBytes: 10737418240 },
    });
    expect(parseGrantIssueOptions({ unrestricted: true })).toEqual({ unrestricted: true });
  });

  it('lets flags override a --json spec and keeps its other fields', () => {
    const json = JSON.stringify({ destinations: ['https://old.example'], requireAttestedAddress: true, limits: { maxBytes: 5 } });
    expect(parseGrantIssueOptions({ json, destination: ['https://new.example'], maxConcurrent: '2' })).toEqual({
      destinations: ['https://new.example'],
      requireAttestedAddress: true,
      limits: { maxBytes: 5, maxConcurrent: 2 },
    });
  });

  // Issue 23, review 2026-12-04 finding 3: the user means a path in their own directory,
  // and the admin API gets it absolute.
  it.each([
    ['unix:agents/c.sock', '/home/u/proj', 'unix:/home/u/proj/agents/c.sock'],
    ['unix:./state/a.sock', '/home/u/proj/', 'unix:/home/u/proj/./state/a.sock'],
    ['unix:a.sock', '/', 'unix:/a.sock'],
    ['unix:/run/sluice/a.sock', '/home/u/proj', 'unix:/run/sluice/a.sock'],
    ['127.0.0.1:0', '/home/u/proj', '127.0.0.1:0'],
    // Left for the admin API to refuse by name, not turned into a path that names a directory.
    ['unix:', '/home/u/proj', 'unix:'],
    ['unix:.', '/home/u/proj', 'unix:/home/u/proj/.'],
  ])('--listen %s from %s is sent as %s', (listen, cwd, sent) => {
    expect(parseGrantIssueOptions({ listen, cwd })).toEqual({ listen: sent });
  });

  it('resolves a relative listen a --json spec gives, too', () => {
    expect(parseGrantIssueOptions({ json: JSON.stringify({ listen: 'unix:agents/c.sock' }), cwd: '/home/u/proj' })).toEqual({ listen: 'unix:/home/u/proj/agents/c.sock' });
  });

  it.each([
    [{ maxConcurrent: 'eight' }, /--max-concurrent: expected a positive integer/],
    [{ maxConcurrent: '0' }, /--max-concurrent/],
    [{ maxBytes: '1e3' }, /--max-bytes/],
    [{ json: '{nope' }, /--json: not valid JSON/],
    [{ json: '[1]' }, /--json: expected a JSON object/],
  ])('refuses %o', (flags, message) => {
    expect(() => parseGrantIssueOptions(flags)).toThrow(message);
  });
});
