// route.proxy.auth and credentialsFile together (route/upstream.ts, docs/routes.md#proxy-authentication):
// which combinations load, what each UpstreamProxy carries, and which are refused with the key to fix.
// Threat: a configuration that quietly sends the corporate password in the clear (Basic) when the
// operator chose NTLM, a Negotiate setup that silently takes a password file instead of the service's
// Kerberos credentials, or an error message that prints the password an operator then pastes into a ticket.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { UpstreamProxy } from '../../../src/core/index.js';
import { parseUpstream, type UpstreamSettings } from '../../../src/route/upstream.js';

const URL = 'http://proxy.corp.test:3128';
const PASSWORD = 'Sup3r:Secret-pw';
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-upstream-auth-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function credentials(text: string): string {
  files += 1;
  const path = join(dir, `creds-${files}.txt`);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}
function loaded(settings: UpstreamSettings, url = URL): UpstreamProxy {
  const parsed = parseUpstream(url, settings);
  if (!parsed.ok) throw new Error(`expected the proxy to load: ${parsed.message}`);
  return parsed.value;
}
function refused(settings: UpstreamSettings, url = URL): { key: string | undefined; message: string } {
  const parsed = parseUpstream(url, settings);
  if (parsed.ok) throw new Error('expected a refusal');
  return { key: parsed.key, message: parsed.message };
}
const basicOf = (line: string): string => `Basic ${Buffer.from(line, 'utf8').toString('base64')}`;

describe('parseUpstream: auth and credentialsFile', () => {
  it('ntlm without a credentialsFile is refused, naming credentialsFile', () => {
    expect(refused({ auth: 'ntlm' })).toEqual({ key: 'credentialsFile', message: expect.stringContaining('credentialsFile') });
  });

  it('basic without a credentialsFile (or URL credentials) is refused, naming credentialsFile', () => {
    expect(refused({ auth: 'basic' })).toEqual({ key: 'credentialsFile', message: expect.stringContaining('credentialsFile') });
  });

  it('negotiate with a credentialsFile is refused: Negotiate uses the service\'s own Kerberos credentials, and the file is never read', () => {
    const r = refused({ auth: 'negotiate', credentialsFile: credentials(`CORP\\alice:${PASSWORD}\n`) });
    expect(r.key).toBe('credentialsFile');
    expect(r.message).toMatch(/Kerberos/);
    expect(r.message).not.toContain(PASSWORD);
    // Refused before reading: even a missing file gives the same answer, not ENOENT.
    expect(refused({ auth: 'negotiate', credentialsFile: join(dir, 'missing.txt') }).message).toMatch(/Kerberos/);
  });

  it.each([
    ['CORP\\alice:pw:with:colons', { user: 'alice', domain: 'CORP', password: 'pw:with:colons' }],
    ['alice@corp.example:pw', { user: 'alice', domain: 'corp.example', password: 'pw' }],
    ['alice:pw', { user: 'alice', domain: '', password: 'pw' }],
    ['\r\n\r\n  CORP\\alice:pw  \r\nsecond\\line:ignored\r\n', { user: 'alice', domain: 'CORP', password: 'pw' }],
  ])('ntlm reads %j, and never sets a Basic authorization (no clear-text fallback)', (text, ntlm) => {
    const proxy = loaded({ auth: 'ntlm', credentialsFile: credentials(text) });
    expect(proxy.ntlm).toEqual(ntlm);
    expect(proxy.authorization).toBeNull();
    expect(proxy.auth).toBe('ntlm');
  });

  it('auto with a credentialsFile carries both NTLM credentials and the Basic header of the same line', () => {
    const line = `CORP\\alice:${PASSWORD}`;
    const proxy = loaded({ auth: 'auto', credentialsFile: credentials(`${line}\n`) });
    expect(proxy).toMatchObject({ auth: 'auto', authorization: basicOf(line), ntlm: { user: 'alice', domain: 'CORP', password: PASSWORD }, spn: null });
  });

  it('auto without a file can only do Negotiate: no Basic, no NTLM', () => {
    expect(loaded({ auth: 'auto' })).toMatchObject({ auth: 'auto', authorization: null, ntlm: null });
  });

  it('negotiate carries no credentials; spn passes through as given, and is null (HTTP@<host>) when absent', () => {
    expect(loaded({ auth: 'negotiate' })).toMatchObject({ auth: 'negotiate', authorization: null, ntlm: null, spn: null, host: 'proxy.corp.test' });
    expect(loaded({ auth: 'negotiate', spn: 'HTTP@squid-vip.corp.test' }).spn).toBe('HTTP@squid-vip.corp.test');
  });

  it('no auth key keeps today\'s behaviour: basic with a file, none without', () => {
    const line = `alice:${PASSWORD}`;
    expect(loaded({ credentialsFile: credentials(line) })).toMatchObject({ auth: 'basic', authorization: basicOf(line), ntlm: null });
    expect(loaded({})).toMatchObject({ auth: 'none', authorization: null, ntlm: null });
  });

  it('basic with a file sets only the Basic header (never NTLM credentials)', () => {
    const line = `CORP\\alice:${PASSWORD}`;
    expect(loaded({ auth: 'basic', credentialsFile: credentials(line) })).toMatchObject({ auth: 'basic', authorization: basicOf(line), ntlm: null });
  });

  it('a UTF-8 byte order mark (a file saved by a Windows editor) is not part of the user name', () => {
    const line = `CORP\\alice:${PASSWORD}`;
    const file = credentials(`\uFEFF${line}\r\n`);
    expect(loaded({ auth: 'basic', credentialsFile: file }).authorization).toBe(basicOf(line));
    expect(loaded({ auth: 'ntlm', credentialsFile: file }).ntlm).toEqual({ user: 'alice', domain: 'CORP', password: PASSWORD });
  });

  it.each([
    ['no colon', 'CORP\\alice-Secret-pw'],
    ['an empty password', 'CORP\\alice:'],
    ['an empty user after the domain', `CORP\\:${PASSWORD}`],
    ['an empty user', `:${PASSWORD}`],
    ['an empty file', ''],
    ['only blank lines', '\n \r\n\t\n'],
  ])('ntlm and auto refuse a file with %s, naming credentialsFile and never the password', (_name, text) => {
    for (const auth of ['ntlm', 'auto'] as const) {
      const r = refused({ auth, credentialsFile: credentials(text) });
      expect(r.key).toBe('credentialsFile');
      expect(r.message).not.toContain(PASSWORD);
      expect(r.message).not.toContain('Secret');
    }
  });

  it('an unreadable file is refused with its errno only', () => {
    const r = refused({ auth: 'ntlm', credentialsFile: join(dir, 'missing.txt') });
    expect(r).toEqual({ key: 'credentialsFile', message: expect.stringContaining('ENOENT') });
  });

  it('credentials in the proxy URL are refused outside system mode, and the message never echoes them', () => {
    const r = refused({ auth: 'ntlm' }, `http://alice:${encodeURIComponent(PASSWORD)}@proxy.corp.test:3128`);
    expect(r.key).toBe('url');
    expect(r.message).not.toContain('Secret');
    expect(refused({}, `http://alice:${PASSWORD}@[::1`).message).not.toContain('Secret');
  });

  it('no UpstreamProxy field a log or decision prints (label, host, spn) carries a credential', () => {
    const proxy = loaded({ auth: 'auto', credentialsFile: credentials(`CORP\\alice:${PASSWORD}`), spn: 'HTTP@proxy.corp.test' });
    for (const value of [proxy.label, proxy.host, proxy.spn, JSON.stringify({ label: proxy.label, auth: proxy.auth })]) {
      expect(value).not.toContain('Secret');
      expect(value).not.toContain('alice');
    }
  });
});
